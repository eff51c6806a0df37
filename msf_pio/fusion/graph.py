"""The msf-CNN fusion graph: tensors are nodes, single layers and fusion blocks are edges.

A networkx MultiDiGraph (parallel alternatives between two tensors are allowed), plus the edge
arrays the solvers sweep. Node order is topological by construction (tensor indices).
A graph may leave out the fusion blocks above a RAM cap (bounds.py: the blocks an objective
can use); the last few graphs built are kept, so the objectives and commands of one process
(verify's plan and unfused plan, a build's plan and its hints) cost a model's blocks once.
"""
from __future__ import annotations

import math
import weakref

import numpy as np

from ..model.ir import Model
from .edge import Edge

KEEP = 4          # graphs kept for reuse


class FusionGraph:
    def __init__(self, model: Model, cost_model: str, edges: list[Edge], unfused_macs: int,
                 schemes: tuple[str, ...] | None = None, ram_cap: float = math.inf):
        self.model = model
        self.cost_model = cost_model
        self.schemes = schemes
        self.ram_cap = ram_cap            # every fusion block of RAM <= ram_cap is an edge
        self.unfused_macs = unfused_macs
        self.n_nodes = model.n_layers + 1
        self.edges = sorted(edges, key=lambda e: (e.dst, e.src, e.ram, e.macs))
        # arrays for the vectorized sweeps, edges grouped by destination node
        self.src = np.array([e.src for e in self.edges], dtype=np.int64)
        self.dst = np.array([e.dst for e in self.edges], dtype=np.int64)
        self.ram = np.array([e.ram for e in self.edges], dtype=np.int64)
        self.macs = np.array([e.macs for e in self.edges], dtype=np.int64)
        self.bounds = np.searchsorted(self.dst, np.arange(self.n_nodes + 1))
        self.incoming = [range(self.bounds[v], self.bounds[v + 1]) for v in range(self.n_nodes)]
        self._g = None

    @property
    def g(self):
        """The graph as networkx sees it, a MultiDiGraph (made when first asked: the solvers use
        the arrays, and a command that plans does not import networkx)."""
        if self._g is None:
            import networkx as nx
            self._g = nx.MultiDiGraph()
            self._g.add_nodes_from(range(self.n_nodes))
            for idx, e in enumerate(self.edges):
                self._g.add_edge(e.src, e.dst, key=idx, ram=e.ram, macs=e.macs)
        return self._g

    @property
    def output_node(self) -> int:
        return self.n_nodes - 1

    @property
    def vanilla_peak(self) -> int:
        """Peak RAM of the unfused plan (every single layer is an edge)."""
        return max((e.ram for e in self.edges if e.scheme == "single"), default=0)

    def covering(self, ram_cap: float) -> "FusionGraph":
        """This graph if it holds every fusion block of RAM <= ram_cap, else one that does."""
        if ram_cap <= self.ram_cap:
            return self
        return build_graph(self.model, self.cost_model, self.schemes, ram_cap)

    def single_edge(self, layer: int) -> Edge:
        for k in self.incoming[layer + 1]:
            if self.edges[k].src == layer:
                return self.edges[k]
        raise KeyError(layer)


_kept: list[tuple[weakref.ref, str, tuple | None, FusionGraph]] = []   # oldest first


def forget() -> None:
    """Drops the graphs kept for reuse (benchmarks time a build from scratch)."""
    _kept.clear()


def build_graph(model: Model, cost_model: str = "exact",
                schemes: tuple[str, ...] | None = None,
                ram_cap: float = math.inf) -> FusionGraph:
    """Weigh every edge of `model` with `cost_model` ('paper' or 'exact'); `schemes` limits the
    exact model's fusion blocks to some cache schemes (default: all; the paper has the H-cache);
    fusion blocks of more RAM than `ram_cap` may be left out. A graph built before for the same
    model object and options, with a cap at least as high, is returned again."""
    from . import cost_models
    schemes = None if schemes is None else tuple(schemes)
    for i, (ref, cost, sch, graph) in enumerate(_kept):
        if ref() is model and cost == cost_model and sch == schemes and graph.ram_cap >= ram_cap:
            _kept.append(_kept.pop(i))
            return graph
    module = cost_models.get(cost_model)
    if cost_model != "exact":
        edges = module.edges(model)
        if ram_cap < math.inf:
            edges = [e for e in edges if e.scheme == "single" or e.ram <= ram_cap]
    else:       # the blocks above the cap are never costed whole (blocks.families)
        edges = module.edges(model, schemes, ram_cap)
    graph = FusionGraph(model, cost_model, edges, module.unfused_macs(model), schemes, ram_cap)
    _kept[:] = [k for k in _kept if k[0]() is not None and not (
        k[0]() is model and k[1] == cost_model and k[2] == schemes)][-(KEEP - 1):]
    _kept.append((weakref.ref(model), cost_model, schemes, graph))
    return graph

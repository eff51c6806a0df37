"""The msf-CNN fusion graph: tensors are nodes, single layers and fusion blocks are edges.

A networkx MultiDiGraph (parallel alternatives between two tensors are allowed), plus the edge
arrays the solvers sweep. Node order is topological by construction (tensor indices).
"""
from __future__ import annotations

import networkx as nx
import numpy as np

from ..model.ir import Model
from .edge import Edge


class FusionGraph:
    def __init__(self, model: Model, cost_model: str, edges: list[Edge], unfused_macs: int):
        self.model = model
        self.cost_model = cost_model
        self.unfused_macs = unfused_macs
        self.n_nodes = model.n_layers + 1
        self.edges = sorted(edges, key=lambda e: (e.dst, e.src, e.ram, e.macs))
        self.g = nx.MultiDiGraph()
        self.g.add_nodes_from(range(self.n_nodes))
        for idx, e in enumerate(self.edges):
            self.g.add_edge(e.src, e.dst, key=idx, ram=e.ram, macs=e.macs)
        # arrays for the vectorized sweeps, edges grouped by destination node
        self.src = np.array([e.src for e in self.edges], dtype=np.int64)
        self.dst = np.array([e.dst for e in self.edges], dtype=np.int64)
        self.ram = np.array([e.ram for e in self.edges], dtype=np.int64)
        self.macs = np.array([e.macs for e in self.edges], dtype=np.int64)
        bounds = np.searchsorted(self.dst, np.arange(self.n_nodes + 1))
        self.incoming = [range(bounds[v], bounds[v + 1]) for v in range(self.n_nodes)]

    @property
    def output_node(self) -> int:
        return self.n_nodes - 1

    def single_edge(self, layer: int) -> Edge:
        for k in self.incoming[layer + 1]:
            if self.edges[k].src == layer:
                return self.edges[k]
        raise KeyError(layer)


def build_graph(model: Model, cost_model: str = "exact",
                schemes: tuple[str, ...] | None = None) -> FusionGraph:
    """Weigh every edge of `model` with `cost_model` ('paper' or 'exact'); `schemes` limits the
    exact model's fusion blocks to some cache schemes (default: all; the paper has the H-cache)."""
    from . import cost_models
    module = cost_models.get(cost_model)
    edges = module.edges(model) if schemes is None or cost_model != "exact" else \
        module.edges(model, tuple(schemes))
    return FusionGraph(model, cost_model, edges, module.unfused_macs(model))

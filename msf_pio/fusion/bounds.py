"""The fusion blocks an objective can use: a RAM cap per objective that leaves its plan as it is.

The exact cost model, on a model whose every tensor is read whole by one of its readers (no
window steps over or stops short of its input's rows or columns): every layer of a fusion block
computes each of its output pixels at least once, by induction from the block's last layer,
which computes all of its own (a tensor inside a block has all its readers inside it), with
the same real taps. So a block executes at least the MACs of its layers unfused (the
recomputed rows come on top), no path to a tensor has fewer MACs than the single layers'
(the vanilla prefix), and the vanilla plan, of peak RAM V, has the fewest MACs. Hence, with
single layers always in the graph:
- min_ram (P1, F max >= 1): the vanilla plan (F = 1) meets every F max, so the least RAM
  threshold whose min-MAC path has F <= F max is at most V: blocks above V are never used.
- min_macs (P2, limit L): the cheapest path to every tensor has the vanilla prefix's MACs, so
  the one kept there (least peak among the cheapest) has peak <= V; the solver's state at
  every tensor only uses edges of RAM <= min(L, V).
- pareto: the frontier's plan of fewest MACs has peak <= V, every other one less: <= V.
- heuristic: the vanilla plan is one of its candidates, at (V, its MACs): a block above V
  cannot beat it.
- vanilla: single layers only.
- min_latency (limit L): predicted time is not bounded by MACs (a block may save kernel
  calls): every block within L.
Where some window leaves input pixels unread (mlperf-tiny-kws's 24x5 pooling of a 25x5 map) a
block may compute fewer MACs than its layers unfused, and only the RAM limit bounds the blocks.
The paper's cost model is left whole (its blocks may count fewer MACs than the layers).
"""
from __future__ import annotations

import math

import numpy as np

from ..model import ir
from ..model.ir import Layer, Model
from .geometry import input_span


def _reads_whole(layer: Layer) -> bool:
    """Whether the layer reads every pixel of its (first) input."""
    if layer.op in ir.UPSAMPLE_OPS:        # the inputs its output positions read, counted
        for axis in (0, 1):
            i = np.arange(layer.out_shape[axis])
            first, last = input_span(layer, i, i, axis)
            edges = np.zeros(layer.in_shape[axis] + 1, np.int64)
            np.add.at(edges, first[first <= last], 1)
            np.add.at(edges, last[first <= last] + 1, -1)
            if (np.cumsum(edges)[:-1] == 0).any():
                return False
        return True
    if not layer.has_window:
        return True
    for axis in (0, 1):
        kernel, stride, pad = layer.window(axis)
        n, out = layer.in_shape[axis], layer.out_shape[axis]
        if stride > kernel or (out - 1) * stride - pad + kernel < n:
            return False
    return True


def fully_read(model: Model) -> bool:
    """Every tensor but the output is read whole by one of its readers (a binary op's second
    input is read pixel for pixel)."""
    readers = model.readers()
    for t in range(model.n_layers):
        if not any(model.input_of(l) != t or _reads_whole(model.layers[l])
                   for l in readers.get(t, [])):
            return False
    return True


def ram_cap(graph, objective: str, ram_limit: float | None = None) -> float:
    """The RAM above which no fusion block of `graph`'s model can be on the plan of
    `objective` (within `ram_limit`): the graph must hold every block up to it."""
    limit = math.inf if ram_limit is None else ram_limit
    if objective == "vanilla":
        return 0
    if objective == "min_latency" or graph.cost_model != "exact" or \
            not fully_read(graph.model):
        return math.inf if objective in ("min_ram", "pareto", "heuristic") else limit
    if objective == "min_macs":
        return min(limit, graph.vanilla_peak)
    return graph.vanilla_peak           # min_ram, pareto, heuristic


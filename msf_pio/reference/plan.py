"""A plan run by the reference: every fusion block through the schedule of its cache scheme."""
from __future__ import annotations

import numpy as np

from ..model.ir import Model
from . import h_cache, line_buffer
from .executor import run_layer


def ring_sizes(edge) -> dict[int, tuple[int, int]]:
    """Tensor -> (rows, columns) of every ring of a fusion block edge."""
    return {b["tensor"]: (b["rows"], b["cols"]) for b in edge.detail.get("scratch", [])
            if b["kind"] == "ring"}


def run_plan(model: Model, blocks, x: np.ndarray) -> np.ndarray:
    """The network output of a plan: line-buffer blocks row by row, H-cache blocks (tiles of
    one or more rows) column by column, through rings of the edge's sizes; single layers whole."""
    tensors = {0: np.asarray(x)}
    for e in blocks:
        rings = ring_sizes(e)
        if e.scheme == "line-buffer":
            rows = {t: r for t, (r, _) in rings.items()}
            tensors[e.last + 1], _ = line_buffer.run_block(model, e.first, e.last, rows, tensors)
        elif e.fused:
            tensors[e.last + 1], _ = h_cache.run_block(model, e.first, e.last, e.tile_rows,
                                                       rings, tensors)
        else:
            tensors[e.first + 1] = run_layer(model, e.first, tensors)
    return tensors[model.n_layers]

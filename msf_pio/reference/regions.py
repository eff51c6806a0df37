"""A layer run on a region of its output: what the fused schedules of the reference compute.

A fused schedule computes a layer a piece at a time (a row over the full width for the line
buffer, a column of a tile's rows for the H-cache) from the input pixels it holds in its rings.
The layer cut to that piece reads the input rows and columns the piece's windows reach; the
padding the cut leaves around them is the layer's own, so the values are the unfused ones.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from ..model import ir
from ..fusion.geometry import input_span, nearest_map
from ..model.ir import Model
from .executor import run_layer


class RingError(AssertionError):
    """A pixel was read outside its ring: the ring is too small for the schedule."""


def ring_sizes(edge) -> dict[int, tuple[int, int]]:
    """Tensor -> (rows, columns) of every ring of a fusion block edge (the cost model's)."""
    return {b["tensor"]: (b["rows"], b["cols"]) for b in edge.detail.get("scratch", [])
            if b["kind"] == "ring"}


Reader = Callable[[int, int, int, int, int], np.ndarray]   # (tensor, r0, r1, c0, c1) -> pixels


def run_region(model: Model, l: int, rows: tuple[int, int], cols: tuple[int, int],
               read: Reader) -> np.ndarray:
    """Output rows rows[0]..rows[1] x columns cols[0]..cols[1] of layer l, from the input pixels
    `read` returns (of both inputs for add and concat)."""
    layer = model.layers[l]
    (r0, r1), (c0, c1) = input_span(layer, *rows, 0), input_span(layer, *cols, 1)
    if layer.op in ir.UPSAMPLE_OPS:
        return _upsampled(model, l, rows, cols, (r0, r1), (c0, c1), read)
    pad = layer.pad
    if layer.has_window:         # what of the windows lies outside the input stays padding
        (kh, kw), (sh, sw) = layer.kernel, layer.stride
        top, left = r0 - (rows[0] * sh - layer.pad_top), c0 - (cols[0] * sw - layer.pad_left)
        bottom = rows[1] * sh - layer.pad_top + kh - 1 - r1
        right = cols[1] * sw - layer.pad_left + kw - 1 - c1
        pad = (top, left, bottom, right)
    cut = replace(layer, in_shape=(r1 - r0 + 1, c1 - c0 + 1, layer.in_shape[2]),
                  out_shape=(rows[1] - rows[0] + 1, cols[1] - cols[0] + 1, layer.out_shape[2]),
                  pad=pad)
    sub = model.with_layers([cut if i == l else x for i, x in enumerate(model.layers)])
    vector = layer.skip if model.broadcasts(l) else None    # a 1 x 1 x C vector: whole
    inputs = {t: read(t, 0, 0, 0, 0) if t == vector else read(t, r0, r1, c0, c1)
              for t in model.inputs(l)}
    return run_layer(sub, l, inputs)


def _upsampled(model: Model, l: int, rows: tuple[int, int], cols: tuple[int, int],
               in_rows: tuple[int, int], in_cols: tuple[int, int], read: Reader) -> np.ndarray:
    """run_region of an upsampling layer, whose output positions map to input positions by a
    rule no cut of the layer keeps: a resize copies the pixels its maps give, a transposed
    conv scatters the input pixels read with the padding moved to the region's first output
    (negative where the region starts past the taps of its first input row)."""
    layer = model.layers[l]
    (r0, r1), (c0, c1) = in_rows, in_cols
    if r1 < r0 or c1 < c0:           # no tap lands on the region: its pixels are the bias's
        x = np.zeros((max(r1 - r0 + 1, 0), max(c1 - c0 + 1, 0), layer.cin), np.int8)
    else:
        x = read(model.input_of(l), r0, r1, c0, c1)
    if layer.op == ir.RESIZE_NEAREST:
        y = nearest_map(layer, 0)[rows[0]:rows[1] + 1] - r0
        z = nearest_map(layer, 1)[cols[0]:cols[1] + 1] - c0
        return x[y][:, z]
    (sh, sw), (top, left) = layer.stride, layer.pad[:2]
    cut = replace(layer, in_shape=x.shape, pad=(top + rows[0] - r0 * sh,
                                                  left + cols[0] - c0 * sw, 0, 0),
                  out_shape=(rows[1] - rows[0] + 1, cols[1] - cols[0] + 1, layer.cout))
    sub = model.with_layers([cut if i == l else m for i, m in enumerate(model.layers)])
    return run_layer(sub, l, {model.input_of(l): x})

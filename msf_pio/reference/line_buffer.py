"""The line-buffer schedule in numpy: a fusion block run row by row through rings of whole rows.

Written from the scheme's definition (msf_pio/fusion/line_buffer.py), not from its code: every
layer computes its next output row on demand, after its inputs have produced the rows it reads;
a row enters its tensor's ring and pushes the oldest row out once the ring is full. Reading a row
that is no longer (or not yet) in its ring raises, so a run checks the ring sizes of the cost
model as well as the bytes of the C runtime.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..model import ir
from ..model.ir import Model
from .executor import run_layer


class RingError(AssertionError):
    """A row was read outside its ring: the ring is too small for the schedule."""


class _Ring:
    def __init__(self, tensor: int, rows: int):
        self.tensor, self.capacity, self.rows = tensor, rows, {}

    def put(self, y: int, row: np.ndarray) -> None:
        self.rows[y] = row
        for old in [r for r in self.rows if r <= y - self.capacity]:
            del self.rows[old]

    def get(self, lo: int, hi: int) -> np.ndarray:
        missing = [r for r in range(lo, hi + 1) if r not in self.rows]
        if missing:
            raise RingError(f"tensor {self.tensor}: rows {missing} not in its ring of "
                            f"{self.capacity} rows")
        return np.stack([self.rows[r] for r in range(lo, hi + 1)])


def _window_rows(layer: ir.Layer, y: int) -> tuple[int, int]:
    """Input rows [lo, hi] output row y reads (an add reads row y)."""
    if layer.op == ir.ADD:
        return y, y
    start = y * layer.stride - layer.pad_top
    return max(start, 0), min(start + layer.kernel - 1, layer.in_shape[0] - 1)


def run_block(model: Model, first: int, last: int, ring_rows: dict[int, int],
              tensors: dict[int, np.ndarray]) -> tuple[np.ndarray, dict[int, int]]:
    """Tensor last + 1 of the block first..last run as a line buffer with `ring_rows` rows per
    internal tensor; `tensors` holds the block input and skip tensors made before it. Also
    returns the output rows every spatial layer computed."""
    layers = model.layers
    end = last
    while layers[end].op in ir.HEAD_OPS:
        end -= 1
    rings = {t: _Ring(t, ring_rows[t]) for t in range(first + 1, end + 1)}
    produced = {t: -1 for t in range(first + 1, end + 2)}
    out = np.zeros(layers[end].out_shape, dtype=np.int8)

    def rows_of(t: int, lo: int, hi: int) -> np.ndarray:
        return tensors[t][lo:hi + 1] if t <= first else rings[t].get(lo, hi)

    def compute(l: int, y: int) -> None:
        layer = layers[l]
        lo, hi = _window_rows(layer, y)
        for t in [l, layer.skip] if layer.op == ir.ADD else [l]:
            while t > first and produced[t] < hi:
                compute(t - 1, produced[t] + 1)
        row = _one_row(model, l, y, lo, hi, rows_of)
        if l == end:
            out[y] = row
        else:
            rings[l + 1].put(y, row)
        produced[l + 1] = y

    for y in range(layers[end].out_shape[0]):
        compute(end, y)
    result = {end + 1: out, **{t: a for t, a in tensors.items()}}
    for l in range(end + 1, last + 1):            # the head: pooled and classified whole
        result[l + 1] = run_layer(model, l, result)
    return result[last + 1], {l: produced[l + 1] + 1 for l in range(first, end + 1)}


def _one_row(model: Model, l: int, y: int, lo: int, hi: int, rows_of) -> np.ndarray:
    """Output row y of layer l from its input rows lo..hi: the layer cut to one output row
    (padding rows that the cut leaves at its top or bottom stay padding)."""
    layer = model.layers[l]
    (_, w, c), (_, ow, oc) = layer.in_shape, layer.out_shape
    top, left, bottom, right = layer.pad
    if layer.op != ir.ADD:
        start = y * layer.stride - layer.pad_top
        top, bottom = lo - start, start + layer.kernel - 1 - hi
    cut = replace(layer, in_shape=(hi - lo + 1, w, c), out_shape=(1, ow, oc),
                  pad=(top, left, bottom, right))
    sub = model.with_layers([cut if i == l else x for i, x in enumerate(model.layers)])
    inputs = {l: rows_of(l, lo, hi)}
    if layer.op == ir.ADD:
        inputs[layer.skip] = rows_of(layer.skip, lo, hi)
    return run_layer(sub, l, inputs)[0]


def run_plan(model: Model, blocks, x: np.ndarray) -> np.ndarray:
    """The network output of a plan: line-buffer blocks through run_block, every other edge
    layer by layer (an H-cache block computes the same values as its layers run whole)."""
    tensors = {0: np.asarray(x)}
    for e in blocks:
        if e.scheme == "line-buffer":
            rings = {b["tensor"]: b["rows"] for b in e.detail["scratch"] if b["kind"] == "ring"}
            tensors[e.last + 1], _ = run_block(model, e.first, e.last, rings, tensors)
        else:
            for l in range(e.first, e.last + 1):
                tensors[l + 1] = run_layer(model, l, tensors)
    return tensors[model.n_layers]

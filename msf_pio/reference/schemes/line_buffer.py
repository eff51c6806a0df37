"""The line-buffer schedule in numpy: a fusion block run row by row through rings of whole rows.

Written from the scheme's definition (msf_pio/fusion/schemes/line_buffer.py), not from its code: every
layer computes its next output row on demand, after its inputs have produced the rows it reads;
a row enters its tensor's ring and pushes the oldest row out once the ring is full. Reading a row
that is no longer (or not yet) in its ring raises, so a run checks the ring sizes of the cost
model as well as the bytes of the C runtime.
"""
from __future__ import annotations

import numpy as np

from ...model import ir
from ...model.ir import Model
from ..executor import run_layer
from ..overlap import SharedRegion
from ..regions import RingError, input_span, ring_sizes, run_region

__all__ = ["RingError", "run_block", "run_edge"]


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


def run_edge(model: Model, e, tensors: dict[int, np.ndarray],
             shared: SharedRegion | None = None) -> np.ndarray:
    """Tensor e.last + 1 of the line-buffer edge e, through rings of its rows."""
    rows = {t: r for t, (r, _) in ring_sizes(e).items()}
    return run_block(model, e.first, e.last, rows, tensors, shared)[0]


def run_block(model: Model, first: int, last: int, ring_rows: dict[int, int],
              tensors: dict[int, np.ndarray], shared: SharedRegion | None = None
              ) -> tuple[np.ndarray, dict[int, int]]:
    """Tensor last + 1 of the block first..last run as a line buffer with `ring_rows` rows per
    internal tensor; `tensors` holds the block input and the tensors made before it that the
    block reads; `shared`: the output written over the input (checked). Also returns the output
    rows every spatial layer computed."""
    layers = model.layers
    end = last
    while layers[end].op in ir.HEAD_OPS:
        end -= 1
    rings = {t: _Ring(t, ring_rows[t]) for t in range(first + 1, end + 1)}
    produced = {t: -1 for t in range(first + 1, end + 2)}
    out = np.zeros(layers[end].out_shape, dtype=np.int8)

    def read(t: int, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        if t == first and shared:
            shared.read(r0, r1, c0, c1)
        rows = tensors[t][r0:r1 + 1] if t <= first else rings[t].get(r0, r1)
        return rows[:, c0:c1 + 1]

    def compute(l: int, y: int) -> None:
        layer = layers[l]
        hi = input_span(layer, y, y, 0)[1]
        for t in model.inputs(l):
            while t > first and produced[t] < hi:
                compute(t - 1, produced[t] + 1)
        row = run_region(model, l, (y, y), (0, layer.out_shape[1] - 1), read)[0]
        if l == end:
            out[y] = row
            if shared and end == last:
                shared.wrote(y, y, 0, layer.out_shape[1] - 1)
        else:
            rings[l + 1].put(y, row)
        produced[l + 1] = y

    for y in range(layers[end].out_shape[0]):
        compute(end, y)
    result = {end + 1: out, **{t: a for t, a in tensors.items()}}
    for l in range(end + 1, last + 1):            # the head: pooled and classified whole
        result[l + 1] = run_layer(model, l, result)
    return result[last + 1], {l: produced[l + 1] + 1 for l in range(first, end + 1)}

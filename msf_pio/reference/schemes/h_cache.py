"""The H-cache schedule in numpy: a fusion block run tile by tile, column by column, through
column rings (tiles of one output row: msf-CNN's H-cache; of several: the `tiles` scheme).

Written from the scheme's definition (msf_pio/fusion/schemes/h_cache.py), not from its code: a tile
is t consecutive output rows of the block's last spatial layer; for it, every tensor of the block
provides the hull of the rows its consumers read. Within the tile each layer computes its next
output column (those rows) on demand, after its inputs have produced the columns it reads; a
column enters its tensor's ring in slot (column % columns), over the column `columns` before it;
a depthwise output may live in its input's ring (msf_pio/fusion/reuse.py). Putting a row outside
the ring, or reading a pixel the ring does not hold (never put, or since overwritten), raises
RingError, so a run checks the ring sizes of the cost model as well as the bytes of the C runtime.
"""
from __future__ import annotations

import numpy as np

from ...model import ir
from ...model.ir import Model
from ..executor import run_layer
from ..overlap import SharedRegion
from ..regions import RingError, input_span, ring_sizes, run_region


class ColumnRing:
    """A column ring laid out as the C runtime lays it out: column c in slot c % cols, row r at
    position r - row0 (row0 set per tile), every pixel recording which tensor pixel it holds.
    A depthwise output written over it (`over`: rings of rows 0) puts its pixel (r, x) where
    input pixel (r s - p, x s - p) lives; a read finds only what was last put there."""

    def __init__(self, tensor: int, rows: int, cols: int, channels: int):
        self.tensor, self.rows, self.cols = tensor, rows, cols
        self.data = np.zeros((cols, rows, channels), dtype=np.int8)
        self.owner = np.full((cols, rows, 3), -1, dtype=np.int64)   # (tensor, row, column)
        self.row0 = 0
        self.over: dict[int, ir.Layer] = {}     # in-place depthwise output -> its layer

    def start_tile(self, row0: int) -> None:
        self.row0 = row0
        self.owner[...] = -1                    # a tile recomputes what it reads

    def _where(self, t: int, r: np.ndarray, c: int) -> tuple[int, np.ndarray]:
        if t in self.over:
            layer = self.over[t]
            r, c = r * layer.stride_h - layer.pad_top, c * layer.stride_w - layer.pad_left
        pos = r - self.row0
        if pos.min() < 0 or pos.max() >= self.rows or self.cols < 1:
            raise RingError(f"tensor {t}: rows {r.min()}..{r.max()} outside its ring of "
                            f"{self.rows} rows x {self.cols} columns")
        return c % self.cols, pos

    def put(self, t: int, x: int, row0: int, column: np.ndarray) -> None:
        rows = np.arange(row0, row0 + len(column))
        slot, pos = self._where(t, rows, x)
        self.data[slot, pos] = column
        self.owner[slot, pos] = np.stack([np.full_like(rows, t), rows, np.full_like(rows, x)], 1)

    def get(self, t: int, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        rows, out = np.arange(r0, r1 + 1), []
        for c in range(c0, c1 + 1):
            slot, pos = self._where(t, rows, c)
            held = self.owner[slot, pos]
            if not (held == np.stack([np.full_like(rows, t), rows,
                                      np.full_like(rows, c)], 1)).all():
                raise RingError(f"tensor {t}: rows {r0}..{r1} of column {c} not in its ring "
                                f"of {self.rows} rows x {self.cols} columns")
            out.append(self.data[slot, pos])
        return np.stack(out, axis=1)


def tile_rows_needed(model: Model, first: int, end: int, y0: int, y1: int
                     ) -> dict[int, tuple[int, int]]:
    """Rows [lo, hi] every tensor first+1..end+1 provides for output rows y0..y1 of `end`:
    the hull of what its consumers read."""
    need = {end + 1: (y0, y1)}
    for l in range(end, first - 1, -1):
        layer = model.layers[l]
        lo, hi = input_span(layer, *need[l + 1], 0)
        for t in model.inputs(l):
            if t > first:
                a, b = need.get(t, (lo, hi))
                need[t] = (min(a, lo), max(b, hi))
    return need


def run_edge(model: Model, e, tensors: dict[int, np.ndarray],
             shared: SharedRegion | None = None) -> np.ndarray:
    """Tensor e.last + 1 of the fusion block edge e (H-cache tiles of e.tile_rows rows)."""
    return run_block(model, e.first, e.last, e.tile_rows, ring_sizes(e), tensors, shared)[0]


def run_block(model: Model, first: int, last: int, tile_rows: int,
              rings: dict[int, tuple[int, int]], tensors: dict[int, np.ndarray],
              shared: SharedRegion | None = None) -> tuple[np.ndarray, dict[int, int]]:
    """Tensor last + 1 of the block first..last under the H-cache with tiles of `tile_rows`
    rows and `rings` (tensor -> (rows, columns)) for its internal tensors; `tensors` holds the
    block input and the tensors made before it that the block reads; `shared`: the output
    written over the input (checked). Also returns the output pixels every spatial layer
    computed, as a count per (layer, row, column)."""
    layers = model.layers
    end = last
    while layers[end].op in ir.HEAD_OPS:
        end -= 1
    out = np.zeros(layers[end].out_shape, dtype=np.int8)
    computed: dict[tuple[int, int, int], int] = {}
    height, width = layers[end].out_shape[:2]
    for y0 in range(0, height, tile_rows):
        need = tile_rows_needed(model, first, end, y0, min(y0 + tile_rows, height) - 1)
        ring = {}
        for t in range(first + 1, end + 1):
            rows, cols = rings[t]
            if rows or layers[t - 1].op != ir.DEPTHWISE or t - 1 not in ring:
                ring[t] = ColumnRing(t, rows, cols, model.tensor_shape(t)[2])
            else:                                   # a depthwise output over its input
                ring[t] = ring[t - 1]
                ring[t].over[t] = layers[t - 1]
        for t in range(first + 1, end + 1):
            if t not in ring[t].over:
                row0 = need[t][0]
                if t + 1 in ring[t].over:           # from the first row of the output's delay
                    layer = layers[t]
                    row0 = min(row0, need[t + 1][0] * layer.stride_h - layer.pad_top)
                ring[t].start_tile(row0)
        produced = {t: -1 for t in range(first + 1, end + 2)}

        def read(t: int, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
            if t == first and shared:
                shared.read(r0, r1, c0, c1)
            return tensors[t][r0:r1 + 1, c0:c1 + 1] if t <= first else \
                ring[t].get(t, r0, r1, c0, c1)

        def compute(l: int, x: int) -> None:
            layer = layers[l]
            hi = input_span(layer, x, x, 1)[1]
            for t in model.inputs(l):
                while t > first and produced[t] < hi:
                    compute(t - 1, produced[t] + 1)
            rows = need[l + 1]
            column = run_region(model, l, rows, (x, x), read)[:, 0]
            for r in range(rows[0], rows[1] + 1):
                computed[(l, r, x)] = computed.get((l, r, x), 0) + 1
            if l == end:
                out[rows[0]:rows[1] + 1, x] = column
                if shared and end == last:
                    shared.wrote(rows[0], rows[1], x, x)
            else:
                ring[l + 1].put(l + 1, x, rows[0], column)
            produced[l + 1] = x

        for x in range(width):
            compute(end, x)
    result = {end + 1: out, **tensors}
    for l in range(end + 1, last + 1):            # the head: pooled and classified whole
        result[l + 1] = run_layer(model, l, result)
    return result[last + 1], computed

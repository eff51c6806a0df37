"""Buffer reuse the data flow allows (issue 8, deliverable 3): a fusion block's output written
over the input rows it no longer reads, and a depthwise output over its input's column ring.

1. A fusion block reads its input A (a whole tensor in the arena) and writes its output B (a
whole tensor) in row order: tile after tile under the H-cache, row after row under the line
buffer, at the end for an iterative head. Both are row-major, so the rows of A the block has
moved past are a prefix of A, and the rows of B written so far are a prefix of B. Put B `shift`
bytes after the start of A (negative: before); no byte of B lands on a byte of A still to be
read iff at every write step

    shift + (bytes of B written by the end of the step) <= (first byte of A still read),

so the largest safe shift is the least of those differences over the steps, and A and B then
take max(|A| - min(shift, 0), |B|) bytes together instead of |A| + |B|. The steps are counted in
whole rows (a tile's rows of B against the first row of A any consumer still reads), which holds
whatever order the columns of a step are computed in. The C executors need nothing for it: they
read A and write B at the offsets the arena gives them (codegen/arena.py places B at most
`shift` bytes after A); the numpy reference checks every byte it reads of A was not written
over (reference/overlap.py).

2. A depthwise layer over its input's column ring (H-cache and tiles). Output pixel (r, x) of a
depthwise layer (stride s, padding p) is written where its window's top-left tap, input pixel
(r s - p, x s - p), lives in the input's ring: only outputs at or before (r, x) in both
directions read that pixel, so it is dead once (r, x) is computed (the column kernel computes
a column's rows in order and each channel's sum before writing it). The output then needs no
ring of its own when its consumer reads each column once, before the next (a one-column ring),
and nothing else reads the input. The input's ring holds, per tile, rows from
min(its first row, r0 s - p) (r0: the output's first row): the output's delay, which at the
image's top adds the rows the window's padding clips. A column x s - p < 0 lands in the slot of
a column not yet computed (the ring has at least k columns), which its consumer has read by
the time that column arrives. Only where the tiles write every byte of that ring (a stride-2
output leaves rows of the delay unwritten when no other tile covers them): every arena byte
counted is used.
"""
from __future__ import annotations

import numpy as np

from ..model import ir
from ..model.ir import Layer, Model
from .geometry import arena_tensor_bytes, writes_in_place

DETAIL = "overlap_shift"      # the edge detail: the largest safe shift of B after A, in bytes


def max_shift(model: Model, first: int, last: int, live_rows: np.ndarray,
              written_rows: np.ndarray) -> int:
    """The largest safe shift of the output after the input: step i writes B up to row
    written_rows[i] (exclusive) while A is still read from row live_rows[i] on."""
    _, wa, ca = model.tensor_shape(first)
    _, wb, cb = model.tensor_shape(last + 1)
    return int((np.asarray(live_rows) * wa * ca - np.asarray(written_rows) * wb * cb).min())


def possible(model: Model, first: int, last: int, top: bool | None = None) -> bool:
    """A and B can share bytes: both whole arena tensors, A read by no layer after the edge (a
    later add), the edge not an add written over its skip, and A on top of its end of the arena
    (on_top; `top`: its value for `first` if known)."""
    out = last + 1
    if arena_tensor_bytes(model, first) == 0 or model.is_output(out) or \
            arena_tensor_bytes(model, out) == 0 or writes_in_place(model, first, last):
        return False
    if any(first <= l <= last and model.broadcasts(l) and model.layers[l].skip == first
           for l in model.readers().get(first, ())):
        return False        # a per-channel product's vector is read for every output pixel
    if model.last_reader().get(first, -1) > last:
        return False
    return on_top(model, first) if top is None else top


def on_top(model: Model, first: int) -> bool:
    """Tensor `first` is on top of its end of the arena: no skip tensor made after the add
    that wrote it is still alive above it."""
    prev = model.layers[first - 1]
    return prev.op != ir.ADD or not any(prev.skip < s < first <= r
                                        for s, r in model.last_reader().items())


def region_bytes(a: int, b: int, shift: int) -> int:
    """Bytes of A and B together with B at most `shift` bytes after A."""
    return max(a - min(shift, 0), b)


def depthwise_in_place(model: Model, t: int, first: int, ring_cols: dict[int, int]) -> bool:
    """Tensor t, internal to an H-cache block starting at `first` with column rings of
    `ring_cols` columns, is a depthwise output written over its input's ring."""
    layer = model.layers[t - 1]
    readers = model.readers()       # the depthwise alone reads its input, layer t its output
    return layer.op == ir.DEPTHWISE and min(layer.kernel) > 1 and first < t - 1 and \
        not model.is_output(t) and ring_cols.get(t) == 1 and ring_cols[t - 1] >= layer.kernel_w \
        and model.layers[t].op not in ir.BINARY_OPS and readers.get(t) == [t] and \
        readers.get(t - 1) == [t - 1]


def _delay_start(layer: Layer, lo: np.ndarray, out_lo: np.ndarray) -> np.ndarray:
    return np.minimum(lo, out_lo * layer.stride_h - layer.pad_top)


def delayed_rows(layer: Layer, lo: np.ndarray, hi: np.ndarray, out_lo: np.ndarray) -> int:
    """Rows of the ring of an in-place depthwise layer's input: per tile from the first row of
    the output's delay (out_lo s - p, or the first row the tile reads) to the last it reads."""
    return int((hi - _delay_start(layer, lo, out_lo)).max())


def delay_filled(layer: Layer, cols: int, lo: np.ndarray, hi: np.ndarray, out_lo: np.ndarray,
                 out_hi: np.ndarray) -> bool:
    """Whether the tiles write every row of every column slot of that ring (`cols` slots):
    a stride-2 output at the image's top lands on every other row of the delay and in some
    slots only, and a byte no tile writes would be counted but never used (the plan would
    promise more RAM than it touches)."""
    start = _delay_start(layer, lo, out_lo)
    rows = delayed_rows(layer, lo, hi, out_lo)
    # every slot holds the rows a tile reads (per tile: a - s0 .. b - s0): a difference array
    cover = np.zeros(rows + 1, dtype=np.int64)
    np.add.at(cover, lo - start, 1)
    np.add.at(cover, hi - start, -1)
    written = np.cumsum(cover[:-1]) > 0
    if written.all():
        return True
    slots = (np.arange(layer.out_shape[1]) * layer.stride_w - layer.pad_left) % cols
    if len(np.unique(slots)) < cols:      # a slot the output never lands in: those rows unwritten
        return False
    n = out_hi - out_lo                   # the output rows of every tile, where they land
    r = np.repeat(out_lo, n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    written[r * layer.stride_h - layer.pad_top - np.repeat(start, n)] = True
    return bool(written.all())

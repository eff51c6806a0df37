"""Buffer reuse the data flow allows: a fusion block's output written over the rows of its input
that the block no longer reads (issue 8, deliverable 3).

A fusion block reads its input A (a whole tensor in the arena) and writes its output B (a whole
tensor) in row order: tile after tile under the H-cache, row after row under the line buffer, at
the end for an iterative head. Both are row-major, so the rows of A the block has moved past are
a prefix of A, and the rows of B written so far are a prefix of B. Put B `shift` bytes after the
start of A (negative: before); no byte of B lands on a byte of A still to be read iff at every
write step

    shift + (bytes of B written by the end of the step) <= (first byte of A still read),

so the largest safe shift is the least of those differences over the steps, and A and B then
take max(|A| - min(shift, 0), |B|) bytes together instead of |A| + |B|. The steps are counted in
whole rows (a tile's rows of B against the first row of A any consumer still reads), which holds
whatever order the columns of a step are computed in. The C executors need nothing for it: they
read A and write B at the offsets the arena gives them (codegen/arena.py places B at most
`shift` bytes after A); the numpy reference checks every byte it reads of A was not written
over (reference/overlap.py).
"""
from __future__ import annotations

import numpy as np

from ..model.ir import Model
from .exact_cost import arena_tensor_bytes, writes_in_place

DETAIL = "overlap_shift"      # the edge detail: the largest safe shift of B after A, in bytes


def max_shift(model: Model, first: int, last: int, live_rows: np.ndarray,
              written_rows: np.ndarray) -> int:
    """The largest safe shift of the output after the input: step i writes B up to row
    written_rows[i] (exclusive) while A is still read from row live_rows[i] on."""
    _, wa, ca = model.tensor_shape(first)
    _, wb, cb = model.tensor_shape(last + 1)
    return int((np.asarray(live_rows) * wa * ca - np.asarray(written_rows) * wb * cb).min())


def possible(model: Model, first: int, last: int) -> bool:
    """A and B can share bytes: both whole arena tensors, A read by no layer after the edge (a
    later add), the edge not an add written over its skip, and A on top of its end of the arena
    (no skip tensor made after the add that wrote A is still alive above it)."""
    out = last + 1
    if arena_tensor_bytes(model, first) == 0 or out == model.n_layers or \
            arena_tensor_bytes(model, out) == 0 or writes_in_place(model, first, last):
        return False
    if model.skip_consumer().get(first, -1) > last:
        return False
    prev = model.layers[first - 1]
    return prev.skip is None or not any(prev.skip < s < first <= a
                                        for a, s in model.residuals().items())


def region_bytes(a: int, b: int, shift: int) -> int:
    """Bytes of A and B together with B at most `shift` bytes after A."""
    return max(a - min(shift, 0), b)

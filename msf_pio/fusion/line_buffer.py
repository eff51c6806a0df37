"""The line-buffer scheme of a fusion block: rows streamed, nothing recomputed (F = 1).

Every layer of the block produces its output rows in order, each row over the full width, on
demand: to compute a row, a layer first has its inputs produce the rows it lacks (the same
descent as the H-cache's columns, turned by 90 degrees). Every internal tensor lives in a ring of
whole rows holding from the oldest row any consumer still needs to the newest row produced: k
rows in front of a k x k window, one in front of a 1x1 layer, and for a residual skip tensor also
the rows by which the add's main path lags. The block input is read in place, whole.

The C runtime (library/src/line_buffer.c) and the numpy reference (msf_pio/reference/
line_buffer.py) follow this order; the ring rows computed here size their rings.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model.ir import Model
from .exact_cost import _col_taps, _inputs, _row_range, _row_taps, _tap_macs

NAME = "line-buffer"


@dataclass
class RowSweep:
    """Rows of blocks whose spatial part ends at layer `end`, valid for every block start >=
    `lowest_first` (a tensor's ring depends only on the layers after it)."""
    end: int
    lowest_first: int
    ring_rows: dict[int, int]      # internal tensor -> rows its ring holds
    rows: dict[int, int]           # layer -> output rows it computes (rows 0 .. rows - 1)
    layer_macs: dict[int, int]     # layer -> MACs of those rows, full width

    def rings(self, model: Model, first: int) -> list[dict]:
        """Scratch entries of the block first..end: one ring of whole rows per internal tensor."""
        out = []
        for t in range(first + 1, self.end + 1):
            _, w, c = model.tensor_shape(t)
            rows = self.ring_rows[t]
            out.append({"kind": "ring", "tensor": t, "rows": rows, "cols": w,
                        "bytes": rows * w * c})
        return out


def row_sweep(model: Model, end: int, lowest_first: int) -> RowSweep:
    """Simulate the demand-driven row order of the block and measure every ring's span."""
    layers = model.layers
    consumers: dict[int, list[int]] = {}
    for l in range(lowest_first, end + 1):
        for t in _inputs(layers[l], l):
            consumers.setdefault(t, []).append(l)
    produced = {t: -1 for t in range(lowest_first, end + 2)}
    next_row = {l: 0 for l in range(lowest_first, end + 1)}
    span = {t: 1 for t in range(lowest_first + 1, end + 1)}

    def height(t: int) -> int:
        return model.tensor_shape(t)[0]

    def oldest_needed(t: int) -> int:
        """Oldest row of tensor t that a consumer's next row reads (finished ones read none)."""
        return min((_row_range(layers[c], next_row[c], height(t))[0] for c in consumers[t]
                    if next_row[c] < layers[c].out_shape[0]), default=produced[t])

    def compute(l: int, y: int) -> None:
        for t in _inputs(layers[l], l):
            if t <= lowest_first:
                continue                      # the block input: whole, read in place
            need = _row_range(layers[l], y, height(t))[1]
            while produced[t] < need:
                compute(t - 1, produced[t] + 1)
        out = l + 1
        if out <= end:                        # the row enters the ring of tensor `out`
            span[out] = max(span[out], y - oldest_needed(out) + 1)
        produced[out] = y
        next_row[l] = y + 1

    for y in range(layers[end].out_shape[0]):
        compute(end, y)
    rows = {l: produced[l + 1] + 1 for l in range(lowest_first, end + 1)}
    macs = {l: int(_row_taps(layers[l])[:rows[l]].sum() * _col_taps(layers[l]).sum())
            * _tap_macs(layers[l]) if layers[l].has_window else 0
            for l in range(lowest_first, end + 1)}
    return RowSweep(end, lowest_first, span, rows, macs)

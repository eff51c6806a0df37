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
from .exact_cost import _col_taps, _row_taps, _tap_macs, demand_sweep

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
    oldest: dict[int, list[int]]   # tensor -> first row still read as `end` writes each row

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
    """The row rings of a line-buffer block (the demand-driven sweep along the rows) and the
    MACs of the rows every layer really produces."""
    layers = model.layers
    oldest: dict[int, list[int]] = {}
    span, produced = demand_sweep(model, end, lowest_first, axis=0, oldest=oldest)
    rows = {l: produced[l + 1] + 1 for l in range(lowest_first, end + 1)}
    macs = {l: int(_row_taps(layers[l])[:rows[l]].sum() * _col_taps(layers[l]).sum())
            * _tap_macs(layers[l]) if layers[l].has_window else 0
            for l in range(lowest_first, end + 1)}
    return RowSweep(end, lowest_first, span, rows, macs, oldest)

"""The line-buffer scheme of a fusion block: rows streamed, nothing recomputed (F = 1).

Every layer of the block produces its output rows in order, each row over the full width, on
demand: to compute a row, a layer first has its inputs produce the rows it lacks (the same
descent as the H-cache's columns, turned by 90 degrees). Every internal tensor lives in a ring of
whole rows holding from the oldest row any consumer still needs to the newest row produced: k
rows in front of a k x k window, one in front of a 1x1 layer, and for a residual skip tensor also
the rows by which the add's main path lags. The block input is read in place, whole. An
upsampling layer reads its input rows by its own rule (geometry.input_span: a nearest x2's row
r reads row r // 2): two output rows per input row, so the ring in front of it holds one row.

The C runtime (library/src/schemes/line_buffer.c) and the numpy reference (msf_pio/reference/
schemes/line_buffer.py) follow this order; the ring rows computed here size their rings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...model import ir
from ...model.ir import Model
from .. import stream_input
from ..blocks import Costs, Family, block_edges
from ..edge import Edge
from ..geometry import demand_sweep, rows_macs
from ..kernel_counts import add, block_counts, kernel_class, spatial_counts, specialised

NAME = "line-buffer"
EXECUTOR = "line_buffer"      # reference/schemes/line_buffer.py, library/src/schemes/line_buffer.c


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
    macs = {l: rows_macs(layers[l], rows[l]) for l in range(lowest_first, end + 1)}
    return RowSweep(end, lowest_first, span, rows, macs, oldest)


def edges(model: Model, fams: list[Family]) -> list[Edge]:
    """Blocks of two layers or more (one layer and a head computes every row once either way:
    the H-cache edge covers it)."""
    out = []
    for fam in fams:
        if fam.lowest == fam.end:
            continue
        written = np.arange(1, model.layers[fam.end].out_shape[0] + 1)
        for first in fam.firsts(alone=False):
            fam.reach(first)
            sweep, costs = fam.cached(NAME, lambda lo: _costs(model, row_sweep(model, fam.end, lo)))
            if costs.floor(first) > fam.cap:      # so are the longer blocks' rings
                break
            # a streamed input: the first block also keeps one window of the first layer's rows
            lead = stream_input.input_ring(model, stream_input.window_rows(
                model, sweep.rows[0])) if model.stream_input and first == 0 else []
            out += block_edges(model, fam, first, NAME, 1, costs,
                               (sweep.oldest[first], written), lead)
    return out


def _costs(model: Model, sweep: RowSweep) -> tuple[RowSweep, Costs]:
    """The sweep, and the rings and MACs of the blocks it holds (a ring is the same wherever
    the block starts)."""
    rings = {r["tensor"]: r for r in sweep.rings(model, sweep.lowest_first)}
    return sweep, Costs(sweep.end, sweep.lowest_first, rings, rings, sweep.layer_macs)


def _row_call(layer) -> bool:
    """line_buffer.c computes a whole output row per kernel call (msf_row_mode): a depthwise
    (its row kernel), or a layer whose window is one pixel (1x1, stride 1, no padding) and
    whose values do not depend on the pixel's place (not a per-element PReLU)."""
    if layer.op == ir.DEPTHWISE:
        return True
    if layer.op in ir.UPSAMPLE_OPS:         # its column kernel, pixel by pixel
        return False
    one_pixel = all(layer.window(axis) == (1, 1, 0) for axis in (0, 1)) \
        if layer.has_window else True
    return one_pixel and not layer.slope_per_pixel


def ring_slides(model: Model, end: int, lowest: int, ring_rows: dict[int, int]) -> dict:
    """Per internal tensor of the blocks ending at `end`, the bytes its ring's slides move and
    their number (line_buffer.c's msf_ring_admit: a row that finds the ring full moves the
    rows from the first one still read, or the newest capacity - 1, to the ring's start)."""
    lives: dict[int, list[int]] = {}
    demand_sweep(model, end, lowest, axis=0, lives=lives)
    out = {}
    for t, kept in lives.items():
        cap, moved, slides, row0 = ring_rows[t], 0, 0, 0
        for i, live in enumerate(kept):
            if i - row0 >= cap:
                new = max(live, i - cap + 1)
                moved, slides, row0 = moved + i - new, slides + 1, new
        _, w, c = model.tensor_shape(t)
        out[t] = {"memmove.bytes": moved * w * c, "ring.slides": slides}
    return out


def layer_counts(model: Model, end: int, lowest: int, tile_rows: int, wide: int,
                 memo: dict | None = None) -> Callable[[int, bool, bool], dict]:
    """Latency counts of every spatial layer lowest..end of the blocks ending at `end`, as
    of(layer, whole_input, staged): every row once over the full width, a kernel call per row
    or per pixel (the last layer's pixels go one by one when staged; every layer reads whole
    rows), and the slides of the ring it writes (ring_slides). `memo`: unused (one row sweep
    per end)."""
    sweep = row_sweep(model, end, lowest)
    slides = ring_slides(model, end, lowest, sweep.ring_rows)
    special = specialised(model)

    def of(l: int, whole_input: bool, staged: bool) -> dict:
        layer = model.layers[l]
        rows, cols = sweep.rows[l], layer.out_shape[1]
        # a call per row (the row as the one column of the transposed layer; a depthwise row:
        # its row kernel) or per pixel
        by_row = _row_call(layer) and not (l == end and staged)
        per_call, calls = (cols, 1) if by_row else (1, cols)
        counts = spatial_counts(layer, sweep.layer_macs[l], rows * calls, [per_call] * rows,
                                calls, True, wide, l in special,
                                across=by_row and layer.op == ir.DEPTHWISE)
        if by_row and layer.op != ir.DEPTHWISE:   # msf_block_row: the transposed layer's copy
            add(counts, {"ring.row_calls": rows})
        if layer.op in ir.UPSAMPLE_OPS:     # a pixel's call of its column kernel: its own price
            counts[f"{kernel_class(layer)}.calls"] = counts.pop("calls")
        return add(counts, slides.get(l + 1, {})) if l < end else counts
    return of


def counts(model: Model, e: Edge, end: int, staged: bool, wide: int) -> dict[str, int]:
    """Latency counts of the block's spatial layers (layer_counts)."""
    return block_counts(layer_counts(model, end, e.first, e.tile_rows, wide), e.first, end,
                        staged)


def layer_pixels(model: Model, e: Edge, end: int) -> dict[int, int]:
    """Output pixels every spatial layer computes: the rows it produces, full width."""
    rows = row_sweep(model, end, e.first).rows
    return {l: rows[l] * model.layers[l].out_shape[1] for l in range(e.first, end + 1)}


def label(e: Edge) -> str:
    return NAME


def json_fields(e: Edge) -> dict:
    return {}

"""The geometry every cache scheme shares: valid taps and MACs of a layer, the rows and columns
a block's tensors must provide (tile starts, the H-cache's schedule, the demand-driven sweep
along the rows or the columns) and the arena bytes of whole tensors.

A leaf of the exact cost model: it imports no scheme; the schemes (schemes/), the shared edge
walker (blocks.py), the latency counts and the code generator build on it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import ir
from ..model.ir import Layer, Model


# -- per-layer geometry -------------------------------------------------------------------
def valid_taps(out_len: int, in_len: int, kernel: int, stride: int, pad: int) -> np.ndarray:
    """Number of kernel taps that fall inside the input, for every output position of one axis."""
    start = np.arange(out_len) * stride - pad
    return np.minimum(start + kernel, in_len) - np.maximum(start, 0)


def tap_macs(layer: Layer) -> int:
    """MACs per valid tap per output pixel (all output channels)."""
    return layer.cin * layer.cout if layer.op == ir.CONV else layer.cout


def layer_macs(layer: Layer) -> int:
    """MACs of a layer run whole (the unfused count)."""
    if layer.has_window:
        return int(row_taps(layer).sum() * col_taps(layer).sum()) * tap_macs(layer)
    if layer.op == ir.GLOBAL_AVGPOOL:
        h, w, c = layer.in_shape
        return h * w * c
    if layer.op == ir.DENSE:
        h, w, c = layer.in_shape
        return h * w * c * layer.cout
    return 0   # add and pixel ops: no multiply-accumulate


def _axis_taps(layer: Layer, axis: int) -> np.ndarray:
    return valid_taps(layer.out_shape[axis], layer.in_shape[axis], *layer.window(axis))


def row_taps(layer: Layer) -> np.ndarray:
    """Valid kernel rows of every output row."""
    return _axis_taps(layer, 0)


def col_taps(layer: Layer) -> np.ndarray:
    """Valid kernel columns of every output column."""
    return _axis_taps(layer, 1)


def unfused_macs(model: Model) -> int:
    return sum(layer_macs(l) for l in model.layers)


def input_range(layer: Layer, i: int, in_len: int, axis: int) -> tuple[int, int]:
    """Input positions [lo, hi] along one axis that output position i of `layer` reads."""
    if layer.op in ir.BINARY_OPS:
        return i, i
    kernel, stride, pad = layer.window(axis)
    start = i * stride - pad
    return max(start, 0), min(start + kernel - 1, in_len - 1)


# -- block schedules ----------------------------------------------------------------------
@dataclass
class BlockSchedule:
    """Row needs per tile and column ring sizes of every tensor of blocks ending at layer `end`.

    Valid for every block start >= `lowest_first`: the rows and columns a tensor must provide
    depend only on the layers after it.
    """
    end: int                       # last spatial layer of the block
    lowest_first: int
    tile_rows: int                 # output rows of `end` per tile (the last tile may be shorter)
    row_lo: dict[int, np.ndarray]  # tensor -> first row needed, per tile (output row of `end`)
    row_hi: dict[int, np.ndarray]  # tensor -> one past the last row needed, per tile
    ring_cols: dict[int, int]      # tensor -> columns its ring must hold
    layer_macs: dict[int, int]     # layer -> MACs over all tiles

    def ring_rows(self, t: int) -> int:
        return int((self.row_hi[t] - self.row_lo[t]).max())

    def ring_bytes(self, model: Model, t: int) -> int:
        return self.ring_rows(t) * self.ring_cols[t] * model.tensor_shape(t)[2]


def tile_starts(height: int, tile_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """First and one-past-last output row of every tile of `tile_rows` rows."""
    lo = np.arange(0, height, tile_rows)
    return lo, np.minimum(lo + tile_rows, height)


def block_schedule(model: Model, end: int, lowest_first: int, tile_rows: int = 1,
                   sweep: tuple[dict, dict] | None = None) -> BlockSchedule:
    """The H-cache schedule with tiles of `tile_rows` rows; `sweep`: the column sweep of the
    same block if already simulated (it does not depend on the tiles)."""
    layers = model.layers
    spans, cols = sweep or column_sweep(model, end, lowest_first)
    lo, hi = {}, {}
    lo[end + 1], hi[end + 1] = tile_starts(layers[end].out_shape[0], tile_rows)
    macs: dict[int, int] = {}
    for l in range(end, lowest_first - 1, -1):          # rows: back-propagate every tile at once
        layer = layers[l]
        a, b = lo[l + 1], hi[l + 1]
        if layer.has_window:
            taps = np.concatenate([[0], np.cumsum(row_taps(layer))])
            n_row_taps = int((taps[b] - taps[a]).sum())
            macs[l] = n_row_taps * int(col_taps(layer)[:cols[l + 1] + 1].sum()) \
                * tap_macs(layer)
            h = layer.in_shape[0]
            need = [(np.maximum(a * layer.stride_h - layer.pad_top, 0),
                     np.minimum((b - 1) * layer.stride_h - layer.pad_top + layer.kernel_h, h))]
        else:
            macs[l] = 0
            need = [(a, b)]
        for t in model.inputs(l):
            if t < lowest_first:
                continue
            nlo, nhi = need[0]
            if t in lo:
                lo[t], hi[t] = np.minimum(lo[t], nlo), np.maximum(hi[t], nhi)
            else:
                lo[t], hi[t] = nlo, nhi
    return BlockSchedule(end, lowest_first, tile_rows, lo, hi, spans, macs)


def demand_sweep(model: Model, end: int, lowest_first: int, axis: int,
                 oldest: dict[int, list[int]] | None = None) -> tuple[dict, dict]:
    """Simulate the demand-driven sweep of a block along one axis (0: the rows of the line
    buffer, 1: the columns of one H-cache tile): the block's last layer produces its output
    positions in order, and every layer computes an input position when a consumer first reads
    it. Returns every internal tensor's span (from the oldest position a consumer still needs
    to the newest produced: its ring) and the last position of every tensor ever produced (a
    window with stride > kernel leaves the last ones unread, so nobody computes them).
    `oldest`, if given, receives for every tensor lowest_first..end the first position any
    consumer still reads as the last layer writes each of its positions (the extent: none)."""
    layers = model.layers
    consumers: dict[int, list[int]] = {}
    for l in range(lowest_first, end + 1):
        for t in model.inputs(l):
            consumers.setdefault(t, []).append(l)
    produced = {t: -1 for t in range(lowest_first, end + 2)}
    next_pos = {l: 0 for l in range(lowest_first, end + 1)}
    span = {t: 1 for t in range(lowest_first + 1, end + 2)}

    def extent(t: int) -> int:
        return model.tensor_shape(t)[axis]

    def reads(l: int, i: int, t: int) -> tuple[int, int]:
        return input_range(layers[l], i, extent(t), axis)

    def compute(l: int, i: int) -> None:
        for t in model.inputs(l):
            if t <= lowest_first:
                continue                      # made before the block: whole, read in place
            need = reads(l, i, t)[1]
            while produced[t] < need:
                compute(t - 1, produced[t] + 1)
        out = l + 1
        if oldest is not None and l == end:
            for t in range(lowest_first, end + 1):
                oldest.setdefault(t, []).append(min(
                    (reads(c, next_pos[c], t)[0] for c in consumers.get(t, ())
                     if next_pos[c] < layers[c].out_shape[axis]), default=extent(t)))
        produced[out] = i
        next_pos[l] = i + 1
        if out <= end:                        # consumers that are done read nothing more
            kept = min((reads(c, next_pos[c], out)[0] for c in consumers[out]
                        if next_pos[c] < layers[c].out_shape[axis]), default=i)
            span[out] = max(span[out], i - kept + 1)

    for i in range(layers[end].out_shape[axis]):
        compute(end, i)
    return span, produced


def column_sweep(model: Model, end: int, lowest_first: int) -> tuple[dict, dict]:
    """The column rings of one H-cache tile and the last column of every tensor produced."""
    return demand_sweep(model, end, lowest_first, axis=1)


# -- whole tensors in the arena -----------------------------------------------------------
def alive_before(model: Model, first: int) -> list[int]:
    """Tensors made before tensor `first` and read at or after layer `first`: a cut at `first`
    keeps them in the arena."""
    return [t for t, r in model.last_reader().items() if t < first <= r]


def arena_tensor_bytes(model: Model, t: int) -> int:
    """Arena bytes of a whole tensor; the network input and output are the caller's buffers,
    except that a streamed output needs one output pixel of staging; a stream layer's output
    lives in the state region (Model.state_bytes), which every edge holds."""
    if t == model.n_layers and model.stream_output:
        return model.output_shape[2]
    return 0 if t == 0 or model.is_output(t) or model.in_state(t) else model.tensor_bytes(t)


def writes_in_place(model: Model, first: int, last: int) -> bool:
    """An edge ending with an add over a skip tensor already in the arena writes over it, if no
    other layer of the edge and none after it reads that tensor."""
    tail = model.layers[last]
    return tail.op == ir.ADD and tail.skip < first and arena_tensor_bytes(model, tail.skip) > 0 \
        and not model.is_output(last + 1) and \
        [l for l in model.readers()[tail.skip] if l >= first] == [last]

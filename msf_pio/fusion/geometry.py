"""The geometry every cache scheme shares: valid taps and MACs of a layer, the rows and columns
a block's tensors must provide (tile starts, the H-cache's schedule, the demand-driven sweep
along the rows or the columns) and the arena bytes of whole tensors.

A leaf of the exact cost model: it imports no scheme; the schemes (schemes/), the shared edge
walker (blocks.py), the latency counts and the code generator build on it.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..model import ir
from ..model.ir import Layer, Model
from ..numerics import nearest_index


# -- per-layer geometry -------------------------------------------------------------------
@lru_cache(maxsize=4096)
def valid_taps(out_len: int, in_len: int, kernel: int, stride: int, pad: int) -> np.ndarray:
    """Number of kernel taps that fall inside the input, for every output position of one axis
    (read-only: kept for every layer of the same geometry, the graph asks for them per block)."""
    start = np.arange(out_len) * stride - pad
    taps = np.minimum(start + kernel, in_len) - np.maximum(start, 0)
    taps.setflags(write=False)
    return taps


@lru_cache(maxsize=4096)
def _prefix(out_len: int, in_len: int, kernel: int, stride: int, pad: int) -> np.ndarray:
    """Valid taps of positions 0..i-1, for every i in 0..out_len (read-only)."""
    out = np.concatenate([[0], np.cumsum(valid_taps(out_len, in_len, kernel, stride, pad))])
    out.setflags(write=False)
    return out


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
    if layer.op == ir.TRANSPOSE_CONV:       # C_in per tap landing inside the output
        rows, cols = (transposed_taps(layer.out_shape[a], layer.in_shape[a], *layer.window(a))
                      for a in (0, 1))
        return int(rows.sum() * cols.sum()) * layer.cin * layer.cout
    return 0   # add, pixel ops and resize: no multiply-accumulate


def _axis_taps(layer: Layer, axis: int) -> np.ndarray:
    return valid_taps(layer.out_shape[axis], layer.in_shape[axis], *layer.window(axis))


def tap_prefix(layer: Layer, axis: int) -> np.ndarray:
    """Valid kernel rows (axis 0) or columns (1) of the output positions before each one."""
    return _prefix(layer.out_shape[axis], layer.in_shape[axis], *layer.window(axis))


def row_taps(layer: Layer) -> np.ndarray:
    """Valid kernel rows of every output row."""
    return _axis_taps(layer, 0)


def col_taps(layer: Layer) -> np.ndarray:
    """Valid kernel columns of every output column."""
    return _axis_taps(layer, 1)


def transposed_taps(out_len: int, in_len: int, kernel: int, stride: int, pad: int) -> np.ndarray:
    """Kernel taps of a transposed convolution landing on every output position of one axis:
    input i's tap k lands on i * stride - pad + k, so output r takes the inputs
    ceil((r + pad - k + 1) / stride) .. floor((r + pad) / stride) within the input."""
    r = np.arange(out_len) + pad
    lo = np.maximum(-((kernel - 1 - r) // stride), 0)         # ceil((r - kernel + 1) / stride)
    hi = np.minimum(r // stride, in_len - 1)
    return np.maximum(hi - lo + 1, 0)


def unfused_macs(model: Model) -> int:
    return sum(layer_macs(l) for l in model.layers)


def input_span(layer: Layer, lo, hi, axis: int):
    """Input positions [first, last] along one axis (0 the rows, 1 the columns) that output
    positions lo..hi of `layer` read, clipped to the input: the one rule per op that the cost
    model, the reference and (library/src/edge.h) the C runtime follow. lo, hi: ints or arrays
    of them. A window reads lo s - p .. hi s - p + k - 1; a pixel-by-pixel op lo..hi; a
    nearest resize the positions its map gives lo and hi (monotone: numerics.nearest_index);
    a transposed conv, whose input i lands on i s - p .. i s - p + k - 1, the inputs
    ceil((lo + p - k + 1) / s) .. floor((hi + p) / s) (first > last: no tap lands there)."""
    n = layer.in_shape[axis]
    if layer.op == ir.RESIZE_NEAREST:
        index = nearest_map(layer, axis)
        first, last = index[lo], index[hi]
    elif layer.op == ir.TRANSPOSE_CONV:
        kernel, stride, pad = layer.window(axis)
        first = np.maximum(-((kernel - 1 - pad - np.asarray(lo)) // stride), 0)
        last = np.minimum((np.asarray(hi) + pad) // stride, n - 1)
    elif not layer.has_window:
        return lo, hi
    else:
        kernel, stride, pad = layer.window(axis)
        first = np.maximum(np.asarray(lo) * stride - pad, 0)
        last = np.minimum(np.asarray(hi) * stride - pad + kernel - 1, n - 1)
    if np.ndim(first) == 0:
        return int(first), int(last)
    return first, last


def nearest_map(layer: Layer, axis: int) -> np.ndarray:
    """A nearest resize's input position of every output position along one axis."""
    return _nearest(layer.in_shape[axis], layer.out_shape[axis], layer.align_corners,
                    layer.half_pixel)


@lru_cache(maxsize=1024)
def _nearest(in_len: int, out_len: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    index = nearest_index(in_len, out_len, align_corners, half_pixel)
    index.setflags(write=False)
    return index


def rows_macs(layer: Layer, rows: int) -> int:
    """MACs of output rows 0..rows-1 of a layer over its full width (a line buffer's)."""
    if layer.has_window:
        return int(row_taps(layer)[:rows].sum() * col_taps(layer).sum()) * tap_macs(layer)
    if layer.op == ir.TRANSPOSE_CONV:
        taps = [transposed_taps(layer.out_shape[a], layer.in_shape[a], *layer.window(a))
                for a in (0, 1)]
        return int(taps[0][:rows].sum() * taps[1].sum()) * layer.cin * layer.cout
    return 0


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
    same block if already simulated (it does not depend on the tiles). Kept per model (_kept);
    a wider window extends the one kept by the layers before it."""
    key = ("schedule", end, tile_rows)
    kept = _kept(model).get(key)
    if kept is None or kept.lowest_first > lowest_first:
        kept = _kept(model)[key] = _block_schedule(model, end, lowest_first, tile_rows, sweep,
                                                   kept)
    if kept.lowest_first == lowest_first:
        return kept
    lo = lowest_first
    return BlockSchedule(end, lo, tile_rows, _from(kept.row_lo, lo), _from(kept.row_hi, lo),
                         _from(kept.ring_cols, lo + 1), _from(kept.layer_macs, lo))


def _row_needs(layer: Layer, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and one-past-last input row a layer reads for output rows [a, b) of every tile
    (none for no rows, nor for rows no tap lands on, a transposed conv's: an empty interval,
    whose place only blocks holding the layer see; the H-cache refuses those)."""
    n = layer.out_shape[0]
    first, last = input_span(layer, np.minimum(a, n - 1), np.clip(b - 1, 0, n - 1), 0)
    first = np.minimum(first, last + 1)
    return first, np.where(b > a, last + 1, first)


def _block_schedule(model: Model, end: int, lowest_first: int, tile_rows: int,
                    sweep: tuple[dict, dict] | None,
                    narrower: BlockSchedule | None = None) -> BlockSchedule:
    """block_schedule afresh, or from the `narrower` window's: its tensors' rows are final (all
    their readers are in it); its layers' reads of tensors before it are added, then the layers
    before it back-propagate as from scratch."""
    layers = model.layers
    spans, cols = sweep or column_sweep(model, end, lowest_first)
    lo, hi = {}, {}
    macs: dict[int, int] = {}

    def read(t: int, need: tuple[np.ndarray, np.ndarray]) -> None:
        if t in lo:
            lo[t], hi[t] = np.minimum(lo[t], need[0]), np.maximum(hi[t], need[1])
        else:
            lo[t], hi[t] = need

    if narrower is None:
        lo[end + 1], hi[end + 1] = tile_starts(layers[end].out_shape[0], tile_rows)
        top = end
    else:
        lo.update(narrower.row_lo)
        hi.update(narrower.row_hi)
        macs.update(narrower.layer_macs)
        top = narrower.lowest_first - 1
        for l in range(top + 1, end + 1):             # skips from before the narrower window
            for t in model.inputs(l):
                if lowest_first <= t <= top:
                    read(t, _row_needs(layers[l], lo[l + 1], hi[l + 1]))
    for l in range(top, lowest_first - 1, -1):          # rows: back-propagate every tile at once
        layer = layers[l]
        a, b = lo[l + 1], hi[l + 1]
        if layer.has_window:
            taps = tap_prefix(layer, 0)
            n_row_taps = int((taps[b] - taps[a]).sum())
            macs[l] = n_row_taps * int(tap_prefix(layer, 1)[min(cols[l + 1] + 1,
                                                               layer.out_shape[1])]) \
                * tap_macs(layer)
        else:
            macs[l] = 0
        need = _row_needs(layer, a, b)
        for t in model.inputs(l):
            if t >= lowest_first:
                read(t, need)
    return BlockSchedule(end, lowest_first, tile_rows, lo, hi, spans, macs)


def _kept(model: Model) -> dict:
    """What this module keeps of a model (its sweeps and schedules, by block end): a block's
    tensors and layers get the same values from any window that holds them (a tensor's rows and
    columns depend only on the layers after it), so the widest window asked so far answers
    every narrower one. Kept beside the model's layer list, dropped when the list changes."""
    kept = model.__dict__.get("_geometry_kept")
    if kept is None or kept[0] is not model.layers or kept[1] != len(model.layers):
        kept = (model.layers, len(model.layers), {})
        model.__dict__["_geometry_kept"] = kept
    return kept[2]


def _from(values: dict, lo: int) -> dict:
    """The entries of keys >= lo (a narrower window's)."""
    return {k: v for k, v in values.items() if k >= lo}


def _read_ranges(layer: Layer, n: int, in_len: int, axis: int) -> tuple[list, list]:
    """input_span of output positions 0..n-1 of `layer`, as two lists (first, last)."""
    del in_len
    i = np.arange(n)
    first, last = input_span(layer, i, i, axis)
    return np.asarray(first).tolist(), np.asarray(last).tolist()


def demand_sweep(model: Model, end: int, lowest_first: int, axis: int,
                 oldest: dict[int, list[int]] | None = None,
                 lives: dict[int, list[int]] | None = None) -> tuple[dict, dict]:
    """_sweep, kept per model (_kept): the widest window simulated answers narrower ones."""
    record = oldest is not None or lives is not None
    key = ("sweep", end, axis, record)
    kept = _kept(model).get(key)
    if kept is None or kept[0] > lowest_first:
        first, live = ({}, {}) if record else (None, None)
        kept = _kept(model)[key] = (lowest_first, *_sweep(model, end, lowest_first, axis, first,
                                                          live), first, live)
    lo = lowest_first
    if oldest is not None:
        oldest.update({t: list(v) for t, v in kept[3].items() if t >= lo})
    if lives is not None:
        lives.update({t: list(v) for t, v in kept[4].items() if t > lo})
    return _from(kept[1], lo + 1), {**_from(kept[2], lo), lo: -1}   # the input: not made


def _sweep(model: Model, end: int, lowest_first: int, axis: int,
           oldest: dict[int, list[int]] | None = None,
           lives: dict[int, list[int]] | None = None) -> tuple[dict, dict]:
    """Simulate the demand-driven sweep of a block along one axis (0: the rows of the line
    buffer, 1: the columns of one H-cache tile): the block's last layer produces its output
    positions in order, and every layer computes an input position when a consumer first reads
    it. Returns every internal tensor's span (from the oldest position a consumer still needs
    to the newest produced: its ring) and the last position of every tensor ever produced (a
    window with stride > kernel leaves the last ones unread, so nobody computes them).
    `oldest`, if given, receives for every tensor lowest_first..end the first position any
    consumer still reads as the last layer writes each of its positions (the extent: none);
    `lives`, for every internal tensor, per position as it is produced, the first position any
    consumer still reads, at most the new one (a line-buffer ring's slide: msf_ring_admit).
    Every layer's reads are tabulated first (input_span of each output position): the
    simulation only looks them up, in lists indexed by layer and tensor."""
    layers, lo = model.layers, lowest_first
    extent = [model.tensor_shape(t)[axis] for t in range(lo, end + 2)]   # tensor t at t - lo
    n_out = [layers[l].out_shape[axis] for l in range(lo, end + 1)]      # layer l at l - lo
    needs: list[list[tuple[int, list]]] = []     # layer -> (tensor, last position read)
    consumers: list[list[tuple[int, int, list]]] = [[] for _ in extent]
    for l in range(lo, end + 1):
        own = []
        for t in model.inputs(l):
            if t < lo:
                continue
            a, b = _read_ranges(layers[l], n_out[l - lo], extent[t - lo], axis)
            consumers[t - lo].append((l - lo, n_out[l - lo], a))
            if t > lo:                        # made before the block: whole, read in place
                own.append((t - lo, b))
        needs.append(own)
    produced = [-1] * len(extent)
    next_pos = [0] * len(n_out)
    span = [1] * len(extent)

    def compute(k: int, i: int) -> None:      # layer lo + k computes position i
        for t, last_read in needs[k]:
            need = last_read[i]
            while produced[t] < need:
                compute(t - 1, produced[t] + 1)
        if oldest is not None and k == len(n_out) - 1:
            for t in range(len(extent) - 1):
                oldest.setdefault(t + lo, []).append(min(
                    (a[next_pos[c]] for c, n, a in consumers[t] if next_pos[c] < n),
                    default=extent[t]))
        out = k + 1
        produced[out] = i
        next_pos[k] = i + 1
        if out < len(n_out):                  # consumers that are done read nothing more
            kept = i                          # (none reading before i: a span of 1 at most)
            for c, n, a in consumers[out]:
                if next_pos[c] < n and a[next_pos[c]] < kept:
                    kept = a[next_pos[c]]
            if i - kept + 1 > span[out]:
                span[out] = i - kept + 1
            if lives is not None:
                lives.setdefault(out + lo, []).append(kept)

    for i in range(n_out[-1]):
        compute(len(n_out) - 1, i)
    return ({t + lo: span[t] for t in range(1, len(extent))},
            {t + lo: produced[t] for t in range(len(extent))})


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

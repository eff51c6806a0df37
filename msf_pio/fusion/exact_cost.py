"""The `exact` cost model: the arena bytes and MACs our generated code really uses.

A fusion block is costed once per cache scheme, as parallel edges the solvers choose between:
the H-cache below (library/src/executor.c), tiles of several rows under the H-cache, the line
buffer (line_buffer.py, library/src/line_buffer.c: rings of whole rows, nothing recomputed) and,
for inverted-residual triples, the channel split (channel_split.py, library/src/channel_split.c:
tiles whose expansion runs a channel group at a time). The H-cache, which the C fused-block
executor follows step for step:
- A fusion block produces its output one tile at a time: a tile is t consecutive output rows of
  its last spatial layer (t = 1: msf-CNN's H-cache; t in TILE_ROWS: the `tiles` scheme). For a
  tile every tensor provides the rows its consumers read, and within the tile the block sweeps
  the columns left to right, each layer computing its output column (all the tile's rows) on
  demand: columns are cached, the rows two tiles share are recomputed for each.
- Every tensor inside a block lives in a column ring: as many rows as the largest tile needs,
  as many columns as all its consumers read (a residual skip tensor inside a block needs more
  columns than its 1x1 consumer alone); the block input, and any tensor made before the block
  that a layer of it reads (a skip, a branch's stage input), is read in place from the arena.
  Padding taps are skipped, so rows and columns are clipped to the tensor, and MACs count only
  real taps (docs/design.md, cost models).
- Pixel ops (softmax over the channels, element-wise activations) are 1 x 1 windows: they fuse
  like any spatial layer, need one column of their input and count no MACs.
- A block may end with global average pooling (int32 accumulators) and a dense layer after it, so
  the last feature map is never stored whole.
- A graph is branched: a layer may read any earlier tensor. Every tensor made before an edge
  and read during or after it stays alive in the arena (a cut keeps it until its last reader);
  an add writes its output in place over a skip tensor made before the edge that nothing reads
  after it. No tensor made inside a block may be read after the block.
- The network input and output live in the caller's buffers (workspace excludes them), unless
  streamed: a streamed input keeps the rows the first edge reads in a ring (stream_input.py),
  a streamed output stages one pixel.
Buffers are packed byte-exact (no alignment padding): the int32 sums are read and written with
memcpy, so every arena byte of the peak edge is really written and measurable by painting.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import progress
from ..errors import MsfError
from ..model import ir
from ..model.ir import Layer, Model
from . import stream_input
from .edge import Edge

NAME = "exact"


# -- per-layer geometry -------------------------------------------------------------------
def _valid_taps(out_len: int, in_len: int, kernel: int, stride: int, pad: int) -> np.ndarray:
    """Number of kernel taps that fall inside the input, for every output position of one axis."""
    start = np.arange(out_len) * stride - pad
    return np.minimum(start + kernel, in_len) - np.maximum(start, 0)


def _tap_macs(layer: Layer) -> int:
    """MACs per valid tap per output pixel (all output channels)."""
    return layer.cin * layer.cout if layer.op == ir.CONV else layer.cout


def layer_macs(layer: Layer) -> int:
    """MACs of a layer run whole (the unfused count)."""
    if layer.has_window:
        return int(_row_taps(layer).sum() * _col_taps(layer).sum()) * _tap_macs(layer)
    if layer.op == ir.GLOBAL_AVGPOOL:
        h, w, c = layer.in_shape
        return h * w * c
    if layer.op == ir.DENSE:
        h, w, c = layer.in_shape
        return h * w * c * layer.cout
    return 0   # add and pixel ops: no multiply-accumulate


def _axis_taps(layer: Layer, axis: int) -> np.ndarray:
    return _valid_taps(layer.out_shape[axis], layer.in_shape[axis], *layer.window(axis))


def _row_taps(layer: Layer) -> np.ndarray:
    return _axis_taps(layer, 0)


def _col_taps(layer: Layer) -> np.ndarray:
    return _axis_taps(layer, 1)


def unfused_macs(model: Model) -> int:
    return sum(layer_macs(l) for l in model.layers)


def _check(model: Model) -> None:
    for i, layer in enumerate(model.layers):
        if layer.op not in ir.ALL_OPS:
            raise MsfError(f"unsupported op '{layer.op}'", source=model.source or model.name,
                           where=f"layers[{i}]")
    bad = ir.graph_error(model)
    if bad:
        raise MsfError(bad[1], source=model.source or model.name, where=f"layers[{bad[0]}]")


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

    def rings(self, model: Model, first: int) -> list[dict]:
        """A column ring per tensor first+1..end of the block first..end. The output of a
        depthwise layer written over its input's ring (reuse.py) has none of its own (rows 0);
        that input ring then also holds the rows by which the output is delayed."""
        from . import reuse
        over = {t for t in range(first + 1, self.end + 1)
                if reuse.depthwise_in_place(model, t, first, self.ring_cols) and
                reuse.delay_filled(model.layers[t - 1], self.ring_cols[t - 1], self.row_lo[t - 1],
                                   self.row_hi[t - 1], self.row_lo[t], self.row_hi[t])}
        out = []
        for t in range(first + 1, self.end + 1):
            if t in over:
                out.append({"kind": "ring", "tensor": t, "rows": 0, "cols": 1, "bytes": 0})
                continue
            rows = reuse.delayed_rows(model.layers[t], self.row_lo[t], self.row_hi[t],
                                      self.row_lo[t + 1]) if t + 1 in over else self.ring_rows(t)
            out.append({"kind": "ring", "tensor": t, "rows": rows, "cols": self.ring_cols[t],
                        "bytes": rows * self.ring_cols[t] * model.tensor_shape(t)[2]})
        return out


def _input_range(layer: Layer, i: int, in_len: int, axis: int) -> tuple[int, int]:
    """Input positions [lo, hi] along one axis that output position i of `layer` reads."""
    if layer.op in ir.BINARY_OPS:
        return i, i
    kernel, stride, pad = layer.window(axis)
    start = i * stride - pad
    return max(start, 0), min(start + kernel - 1, in_len - 1)


def tile_starts(height: int, tile_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """First and one-past-last output row of every tile of `tile_rows` rows."""
    lo = np.arange(0, height, tile_rows)
    return lo, np.minimum(lo + tile_rows, height)


def block_schedule(model: Model, end: int, lowest_first: int, tile_rows: int = 1,
                   sweep: tuple[dict, dict] | None = None) -> BlockSchedule:
    """The H-cache schedule with tiles of `tile_rows` rows; `sweep`: the column sweep of the
    same block if already simulated (it does not depend on the tiles)."""
    layers = model.layers
    spans, cols = sweep or _column_sweep(model, end, lowest_first)
    lo, hi = {}, {}
    lo[end + 1], hi[end + 1] = tile_starts(layers[end].out_shape[0], tile_rows)
    macs: dict[int, int] = {}
    for l in range(end, lowest_first - 1, -1):          # rows: back-propagate every tile at once
        layer = layers[l]
        a, b = lo[l + 1], hi[l + 1]
        if layer.has_window:
            taps = np.concatenate([[0], np.cumsum(_row_taps(layer))])
            row_taps = int((taps[b] - taps[a]).sum())
            macs[l] = row_taps * int(_col_taps(layer)[:cols[l + 1] + 1].sum()) * _tap_macs(layer)
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
        return _input_range(layers[l], i, extent(t), axis)

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
                    (reads(c, next_pos[c], t)[0] for c in consumers[t]
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


def _column_sweep(model: Model, end: int, lowest_first: int) -> tuple[dict, dict]:
    """The column rings of one H-cache tile and the last column of every tensor produced."""
    return demand_sweep(model, end, lowest_first, axis=1)


# -- edges --------------------------------------------------------------------------------
def alive_before(model: Model, first: int) -> list[int]:
    """Tensors made before tensor `first` and read at or after layer `first`: a cut at `first`
    keeps them in the arena."""
    return [t for t, r in model.last_reader().items() if t < first <= r]


def arena_tensor_bytes(model: Model, t: int) -> int:
    """Arena bytes of a whole tensor; the network input and output are the caller's buffers,
    except that a streamed output needs one output pixel of staging."""
    if t == model.n_layers and model.stream_output:
        return model.output_shape[2]
    return 0 if t in (0, model.n_layers) else model.tensor_bytes(t)


def writes_in_place(model: Model, first: int, last: int) -> bool:
    """An edge ending with an add over a skip tensor already in the arena writes over it, if no
    other layer of the edge and none after it reads that tensor."""
    tail = model.layers[last]
    return tail.op == ir.ADD and tail.skip < first and arena_tensor_bytes(model, tail.skip) > 0 \
        and last + 1 != model.n_layers and \
        [l for l in model.readers()[tail.skip] if l >= first] == [last]


def _edge_ram(model: Model, first: int, last: int, scratch: list[dict],
              shift: int | None = None) -> tuple[int, dict]:
    """Workspace bytes of an edge: its input, output, tensors alive across it and scratch
    buffers; with `shift` (reuse.py) the output may start that many bytes after the input,
    over the input rows already read."""
    from . import reuse
    skip_bytes = sum(arena_tensor_bytes(model, s) for s in alive_before(model, first))
    in_place = writes_in_place(model, first, last)
    in_bytes = arena_tensor_bytes(model, first)
    out_bytes = 0 if in_place else arena_tensor_bytes(model, last + 1)
    io = in_bytes + out_bytes if shift is None else reuse.region_bytes(in_bytes, out_bytes, shift)
    ram = io + skip_bytes + sum(b["bytes"] for b in scratch)
    detail = {"scratch": scratch} if scratch else {}
    if io < in_bytes + out_bytes:
        detail[reuse.DETAIL] = shift
    return ram, {**detail, "in_place": True} if in_place else detail


def _single(model: Model, i: int) -> Edge:
    ring = stream_input.input_ring(model, stream_input.window_rows(model)) if i == 0 else []
    ram, detail = _edge_ram(model, i, i, ring)
    return Edge(i, i, ram, layer_macs(model.layers[i]), "single", detail)


def _lowest_first(model: Model, end: int) -> int:
    """Smallest block start for a block whose spatial part ends at `end`: spatial layers only,
    and no tensor made inside the block may be read after it."""
    last_reader = model.last_reader()
    first = end
    while first > 0 and model.layers[first - 1].op in ir.SPATIAL_OPS:
        if last_reader[first] > end:          # tensor `first` would become internal
            break
        first -= 1
    return first


def _tails(model: Model, end: int) -> list[int]:
    """Possible last layers of a block whose spatial part ends at `end` (iterative head): the
    head's inputs are staged, so nothing after it may read them."""
    layers, tails, last_reader = model.layers, [end], model.last_reader()
    if end + 1 < len(layers) and layers[end + 1].op == ir.GLOBAL_AVGPOOL and \
            last_reader[end + 1] == end + 1:
        tails.append(end + 1)
        if end + 2 < len(layers) and layers[end + 2].op == ir.DENSE and \
                last_reader[end + 2] == end + 2:
            tails.append(end + 2)
    return tails


SCHEMES = ("h-cache", "tiles", "line-buffer", "channel-split")   # a fusion block's cache schemes
TILE_ROWS = (2, 4, 8, 16)   # tile heights of `tiles`: a few, so the graph stays small to solve


def _tile_heights(model: Model, end: int) -> list[int]:
    """Tile heights > 1 of a block ending at `end`, capped at its output height (one tile:
    nothing recomputed). A streamed network output stages one pixel: one row per tile."""
    if model.stream_output and end + 1 == model.n_layers:
        return []
    return sorted({min(t, model.layers[end].out_shape[0]) for t in TILE_ROWS} - {1})


def edges(model: Model, schemes: tuple[str, ...] = SCHEMES) -> list[Edge]:
    """Every single layer, and every fusion block once per cache scheme and tile height
    (parallel edges)."""
    from .line_buffer import row_sweep      # it builds on this module's geometry
    _check(model)
    stream_input.check(model)
    out = [_single(model, i) for i in range(model.n_layers)]
    step = progress.task("costing fusion blocks (last layer)", total=model.n_layers)
    for end, layer in enumerate(model.layers):
        step.update(end, f"{len(out)} edges")
        if layer.op not in ir.SPATIAL_OPS:
            continue
        lowest = _lowest_first(model, end)
        tails = _tails(model, end)
        if lowest == end and len(tails) == 1:
            continue
        columns = _column_sweep(model, end, lowest)
        scheds = {1: block_schedule(model, end, lowest, 1, columns)}
        if "tiles" in schemes and lowest < end:
            for t in _tile_heights(model, end):
                scheds[t] = block_schedule(model, end, lowest, t, columns)
        # one layer and a head computes every row once either way: the H-cache edge covers it
        sweep = row_sweep(model, end, lowest) if "line-buffer" in schemes and lowest < end \
            else None
        for first in range(end, lowest - 1, -1):
            # the first edge of a streamed input also keeps the input rows it reads (a tile's
            # rows under the H-cache, one window of the first layer under the line buffer)
            streamed = model.stream_input and first == 0
            # per option also the rows of the input still read as each step writes its rows
            options = [("h-cache" if t == 1 else "tiles", t, s.layer_macs,
                        (stream_input.input_ring(model, s.ring_rows(0)) if streamed else []) +
                        s.rings(model, first), (s.row_lo[first], s.row_hi[end + 1]))
                       for t, s in scheds.items() if t == 1 or first < end]
            if sweep is not None and first < end:
                options.append(("line-buffer", 1, sweep.layer_macs,
                                (stream_input.input_ring(model, stream_input.window_rows(model))
                                 if streamed else []) + sweep.rings(model, first),
                                (sweep.oldest[first], np.arange(1, layer.out_shape[0] + 1))))
            for last in tails:
                if last == first:
                    continue
                head_macs = sum(layer_macs(model.layers[l]) for l in range(end + 1, last + 1))
                for scheme, t, macs, ring, steps in options:
                    if scheme not in schemes:
                        continue
                    ram, detail = _edge_ram(model, first, last,
                                            block_scratch(model, ring, end, last, t),
                                            _output_shift(model, first, last, end, steps))
                    out.append(Edge(first, last, ram,
                                    sum(macs[l] for l in range(first, end + 1)) + head_macs,
                                    scheme, detail, t))
    step.close()
    if "channel-split" in schemes:           # inverted-residual triples (channel_split.py)
        from . import channel_split
        out += channel_split.edges(model)
    return out


def edge_layer_pixels(model: Model, e: Edge) -> dict[int, int]:
    """Layer -> output pixels (all channels) the edge e computes, recomputation included: the
    rows its scheme's schedule runs of each layer (the line buffer: full width; H-cache tiles:
    the columns the sweep produces); a head layer once. Over the unfused pixels it is each
    layer's recompute factor (benchmarks set time against it)."""
    from .line_buffer import row_sweep
    layers = model.layers
    pixels = {l: layers[l].out_shape[0] * layers[l].out_shape[1]
              for l in range(e.first, e.last + 1)}
    end = e.last
    while end > e.first and layers[end].op in ir.HEAD_OPS:
        end -= 1
    if end == e.first:                        # one spatial layer (and a head): every row once
        return pixels
    if e.scheme == "line-buffer":
        rows = row_sweep(model, end, e.first).rows
        cols = {l: layers[l].out_shape[1] for l in rows}
    else:                     # H-cache tiles; a channel split runs the same tiles per group
        sweep = _column_sweep(model, end, e.first)
        s = block_schedule(model, end, e.first, e.tile_rows, sweep)
        rows = {l: int((s.row_hi[l + 1] - s.row_lo[l + 1]).sum()) for l in range(e.first, end + 1)}
        cols = {l: sweep[1][l + 1] + 1 for l in rows}
    for l in range(e.first, end + 1):
        pixels[l] = rows[l] * cols[l]
    return pixels


def _output_shift(model: Model, first: int, last: int, end: int,
                  steps: tuple[np.ndarray, np.ndarray]) -> int | None:
    """The largest shift of the block's output after its input (reuse.py), None if they cannot
    share bytes; an iterative head writes its output once every input row is read."""
    from . import reuse
    if not reuse.possible(model, first, last):
        return None
    if last > end:
        steps = ([model.tensor_shape(first)[0]], [model.tensor_shape(last + 1)[0]])
    return reuse.max_shift(model, first, last, *steps)


def block_scratch(model: Model, rings: list[dict], end: int, last: int,
                  tile_rows: int = 1) -> list[dict]:
    """The block's scratch buffers in arena order: its rings, then for an iterative head a
    staging column of one tile's rows and the int32 sums of global pooling."""
    out = list(rings)
    if last > end:
        c = model.layers[end].cout
        out.append({"kind": "staging", "tensor": end + 1, "rows": tile_rows, "cols": 1,
                    "bytes": tile_rows * c})
        out.append({"kind": "sums", "tensor": end + 2, "bytes": 4 * c})
    return out

"""The fusion blocks of a model and what every cache scheme's block edge shares.

A block is a run of spatial layers first..end (possibly ending in an iterative head, layers up
to `last`); blocks ending at the same spatial layer `end` form a family that shares the rows and
columns its tensors must provide (geometry.py). Whatever the scheme, a block edge's RAM is its
input, output and the tensors alive across it (geometry.py), plus the scheme's scratch buffers
(rings, a head's staging column and int32 sums), its output possibly written over the input
rows already read (reuse.py); its MACs are those its schedule runs plus the head's. The schemes
(schemes/) say which blocks they cache how; this module walks the families and weighs an edge.

A family is walked from its last layer back, its blocks growing one layer at a time. What a
tensor's ring holds depends only on the layers after it, so the schedules are simulated over a
window of the family's last layers, widened when a block reaches past it (doubled, or as far
as the last family's), and every block's rings and MACs are sums from the family's end
(Costs): a block costs the same whatever its length. A family may have a RAM cap (bounds.py):
the rings of the tensors after a block's first internal one only add up as the block grows, so
once they alone exceed the cap no longer block of the family is costed, and no block above the
cap becomes an edge.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..model import ir
from ..model.ir import Model
from . import reuse, stream_input
from .edge import Edge, LazyDetail
from .geometry import (BlockSchedule, alive_before, arena_tensor_bytes, block_schedule,
                       column_sweep, layer_macs, writes_in_place)

WINDOW = 8           # layers a family's schedules first hold (then twice as many, and so on)


class Cuts:
    """What the edges starting at a tensor share, asked once per tensor: the bytes of the
    tensors alive across a cut there, and whether the tensor is on top of the arena."""

    def __init__(self, model: Model):
        self.model = model
        self._skip: dict[int, int] = {}
        self._top: dict[int, bool] = {}
        self._shift: dict[tuple[int, int], bool] = {}
        self.reached = 0      # how far back (layers) the last family's window had to go

    def skip_bytes(self, first: int) -> int:
        if first not in self._skip:
            self._skip[first] = sum(arena_tensor_bytes(self.model, s)
                                    for s in alive_before(self.model, first))
        return self._skip[first]

    def shift_possible(self, first: int, last: int) -> bool:
        """reuse.possible, asked once per block (every scheme and tile height asks)."""
        if (first, last) not in self._shift:
            if first not in self._top:
                self._top[first] = first > 0 and reuse.on_top(self.model, first)
            self._shift[first, last] = reuse.possible(self.model, first, last, self._top[first])
        return self._shift[first, last]


@dataclass
class Family:
    """Blocks whose spatial part ends at layer `end`: first in lowest..end, last in `tails`.
    The column sweep and the H-cache schedules of each tile height are simulated once per
    window (tensors `start`..end), for every scheme that reads them; `cap`: no block of more
    RAM is an edge."""
    model: Model
    end: int
    lowest: int
    tails: list[int]
    cap: float = math.inf
    cuts: Cuts | None = field(default=None, repr=False)
    start: int = -1
    _cache: dict = field(default_factory=dict, repr=False)
    _over: dict = field(default_factory=dict, repr=False)   # column_costs' in-place outputs

    def __post_init__(self):
        if self.cuts is None:
            self.cuts = Cuts(self.model)
        if self.start < 0:
            self.start = max(self.lowest, self.end - WINDOW)

    def reach(self, first: int) -> None:
        """Widens the window to hold the block from `first`: at least doubling it, and at once
        as far back as the last family widened to (its neighbour's blocks are likely as long:
        a window simulated again and again as it doubles costs more than one too long)."""
        if first < self.start:
            self.start = max(self.lowest, min(first, 2 * self.start - self.end,
                                              self.end - self.cuts.reached))
            self.cuts.reached = self.end - self.start
            self._cache.clear()

    def cached(self, key, make: Callable[[int], object]):
        """make(start) for the current window, computed once per window."""
        if key not in self._cache:
            self._cache[key] = make(self.start)
        return self._cache[key]

    @property
    def columns(self) -> tuple[dict, dict]:
        return self.cached("columns", lambda lo: column_sweep(self.model, self.end, lo))

    def schedule(self, tile_rows: int, first: int | None = None) -> BlockSchedule:
        """The H-cache schedule of `tile_rows` rows per tile, holding the block from `first`
        (default: the family's lowest start)."""
        self.reach(self.lowest if first is None else first)
        return self.cached(("schedule", tile_rows), lambda lo: block_schedule(
            self.model, self.end, lo, tile_rows, self.columns))

    def column_costs(self, tile_rows: int, first: int) -> "Costs":
        """The column rings and MACs of the H-cache blocks of `tile_rows` rows per tile."""
        s = self.schedule(tile_rows, first)
        return self.cached(("column costs", tile_rows),
                           lambda lo: column_costs(self.model, s, self._over))

    def firsts(self, alone: bool = True) -> list[int]:
        """Block starts, last layer first; `alone`: also the block of `end` alone with a head.
        A detection head's output is read by no block: none starts there, nor at a layer that
        reads only older tensors than the one before it (a branch's first layer: a block's
        input is the tensor before its first layer; an excite's map is read in place)."""
        return [f for f in range(self.end if alone else self.end - 1, self.lowest - 1, -1)
                if not self.model.is_output(f) and f in self.model.inputs(f)]


class Costs:
    """What the blocks first..end of a family share under one scheme and tile height, for
    every start from the window's: the ring of each internal tensor (`leading`: as the block's
    first internal tensor, `inner`: as a later one) and each layer's MACs, summed from the end."""

    def __init__(self, end: int, start: int, inner: dict[int, dict], leading: dict[int, dict],
                 layer_macs: dict[int, int]):
        self.end, self.start = end, start
        self.inner, self.leading = inner, leading
        self._rings = {end + 1: 0}                       # tensor t -> inner bytes of t..end
        for t in range(end, start, -1):
            self._rings[t] = self._rings[t + 1] + inner[t]["bytes"]
        self._macs = {end + 1: 0}                        # layer l -> MACs of l..end
        for l in range(end, start - 1, -1):
            self._macs[l] = self._macs[l + 1] + layer_macs[l]

    def floor(self, first: int) -> int:
        """Ring bytes every block from `first` or before has: the tensors after the first
        internal one (they only add up as the block grows)."""
        return self._rings[first + 2] if first + 2 <= self.end else 0

    def ring_bytes(self, first: int) -> int:
        return self.leading[first + 1]["bytes"] + self.floor(first) if first < self.end else 0

    def rings(self, first: int) -> list[dict]:
        if first >= self.end:
            return []
        return [dict(self.leading[first + 1])] + \
            [dict(self.inner[t]) for t in range(first + 2, self.end + 1)]

    def macs(self, first: int) -> int:
        return self._macs[first]


def upsamples(model: Model, first: int, end: int) -> bool:
    """Whether the block first..end holds an upsampling layer (a scheme whose executor does
    not run them refuses the block)."""
    return any(model.layers[l].op in ir.UPSAMPLE_OPS for l in range(first, end + 1))


def lowest_first(model: Model, end: int) -> int:
    """Smallest block start for a block whose spatial part ends at `end`: spatial and
    upsampling layers only,
    no tensor made inside the block may be read after it, and the 1 x 1 x C vector of a
    per-channel product is made before it (read whole, not row by row)."""
    last_reader = model.last_reader()
    vectors = {model.layers[l].skip for l in range(end + 1) if model.broadcasts(l)}
    first = end
    while first > 0 and model.layers[first - 1].op in ir.BLOCK_OPS:
        if model.is_output(first) or last_reader[first] > end or first in vectors:
            break                               # tensor `first` would become internal
        first -= 1
    return first


def tails(model: Model, end: int) -> list[int]:
    """Possible last layers of a block whose spatial part ends at `end` (iterative head): the
    head's inputs are staged, so nothing after it may read them."""
    layers, out, last_reader = model.layers, [end], model.last_reader()
    if end + 1 < len(layers) and layers[end + 1].op == ir.GLOBAL_AVGPOOL and \
            last_reader[end + 1] == end + 1:
        out.append(end + 1)
        if end + 2 < len(layers) and layers[end + 2].op == ir.DENSE and \
                last_reader[end + 2] == end + 2:
            out.append(end + 2)
    return out


def families(model: Model, cap: float = math.inf) -> list[Family]:
    """Every family with a block of more than one layer (one spatial layer and a head count);
    `cap`: the RAM above which no block becomes an edge."""
    out, cuts = [], Cuts(model)
    for end, layer in enumerate(model.layers):
        if layer.op not in ir.BLOCK_OPS:
            continue
        fam = Family(model, end, lowest_first(model, end), tails(model, end), cap, cuts)
        if fam.lowest < fam.end or len(fam.tails) > 1:
            out.append(fam)
    return out


def edge_ram(model: Model, first: int, last: int, scratch: list[dict],
             shift: int | None = None) -> tuple[int, dict]:
    """Workspace bytes of an edge: its input, output, tensors alive across it and scratch
    buffers; with `shift` (reuse.py) the output may start that many bytes after the input,
    over the input rows already read."""
    ram, detail = io_ram(model, first, last, sum(b["bytes"] for b in scratch), shift)
    return ram, {**({"scratch": scratch} if scratch else {}), **detail}


def io_ram(model: Model, first: int, last: int, scratch_bytes: int, shift: int | None = None,
           skip_bytes: int | None = None) -> tuple[int, dict]:
    """edge_ram of scratch buffers of `scratch_bytes` in all, and the edge's detail but the
    scratch; `skip_bytes`: the tensors alive across the edge, if known. A streaming model's
    state is alive across every edge."""
    if skip_bytes is None:
        skip_bytes = sum(arena_tensor_bytes(model, s) for s in alive_before(model, first))
    in_place = writes_in_place(model, first, last)
    in_bytes = arena_tensor_bytes(model, first)
    out_bytes = 0 if in_place else arena_tensor_bytes(model, last + 1)
    io = in_bytes + out_bytes if shift is None else reuse.region_bytes(in_bytes, out_bytes, shift)
    detail = {}
    if io < in_bytes + out_bytes:
        detail[reuse.DETAIL] = shift
    if in_place:
        detail["in_place"] = True
    return io + skip_bytes + scratch_bytes + model.state_bytes(), detail


def output_shift(model: Model, first: int, last: int, end: int,
                 steps: tuple[np.ndarray, np.ndarray], cuts: Cuts | None = None) -> int | None:
    """The largest shift of the block's output after its input (reuse.py), None if they cannot
    share bytes; an iterative head writes its output once every input row is read. `steps`:
    per write step, the first input row still read and the output rows written by then."""
    if not (reuse.possible(model, first, last) if cuts is None
            else cuts.shift_possible(first, last)):
        return None
    if last > end:
        steps = ([model.tensor_shape(first)[0]], [model.tensor_shape(last + 1)[0]])
    return reuse.max_shift(model, first, last, *steps)


def head_scratch(model: Model, end: int, last: int, tile_rows: int = 1) -> list[dict]:
    """An iterative head's scratch buffers: a staging column of one tile's rows and the int32
    sums of global pooling (none without a head)."""
    if last == end:
        return []
    c = model.layers[end].cout
    return [{"kind": "staging", "tensor": end + 1, "rows": tile_rows, "cols": 1,
             "bytes": tile_rows * c},
            {"kind": "sums", "tensor": end + 2, "bytes": 4 * c}]


def block_scratch(model: Model, rings: list[dict], end: int, last: int,
                  tile_rows: int = 1) -> list[dict]:
    """The block's scratch buffers in arena order: its rings, then an iterative head's."""
    return list(rings) + head_scratch(model, end, last, tile_rows)


def input_ring(model: Model, first: int, rows: int) -> list[dict]:
    """The streamed network input's ring of `rows` rows, if the block starts at it."""
    return stream_input.input_ring(model, rows) if model.stream_input and first == 0 else []


def block_edges(model: Model, fam: Family, first: int, scheme: str, tile_rows: int,
                costs: Costs, steps: tuple, lead: list[dict] = (), **detail) -> list[Edge]:
    """The edges of the block first..end under a scheme, one per last layer of the family (a
    head or none) within the family's cap: the rings and MACs of `costs`, after the scratch
    buffers `lead` (a streamed input's ring), its write `steps` (output_shift), `detail` added
    to the edge's. An edge's detail (its scratch buffers) is made when first read."""
    out = []
    rings = costs.ring_bytes(first) + sum(b["bytes"] for b in lead)
    for last in fam.tails:
        if last == first:
            continue
        head = head_scratch(model, fam.end, last, tile_rows)
        ram, tail = io_ram(model, first, last, rings + sum(b["bytes"] for b in head),
                           output_shift(model, first, last, fam.end, steps, fam.cuts),
                           fam.cuts.skip_bytes(first))
        if ram > fam.cap:
            continue
        head_macs = sum(layer_macs(model.layers[l]) for l in range(fam.end + 1, last + 1))

        def make(first=first, head=head, tail=tail) -> dict:
            scratch = [dict(b) for b in lead] + costs.rings(first) + head
            return {**({"scratch": scratch} if scratch else {}), **tail, **detail}

        out.append(Edge(first, last, ram, costs.macs(first) + head_macs, scheme,
                        LazyDetail(make), tile_rows))
    return out


def column_costs(model: Model, s: BlockSchedule, memo: dict | None = None) -> Costs:
    """The column ring of every tensor of the H-cache blocks of schedule `s` (tiles of any
    height). The output of a depthwise layer written over its input's ring (reuse.py) has none
    of its own (rows 0); that input ring then also holds the rows by which the output is
    delayed. Whether a depthwise output is written so depends on the block's start only in
    that the depthwise layer must not be the block's first (`memo`, kept across the windows of
    one family: the answer per tile height and tensor)."""
    lo, end = s.lowest_first, s.end
    memo = {} if memo is None else memo

    def written_over(t: int) -> bool:
        if (s.tile_rows, t) not in memo:
            memo[s.tile_rows, t] = reuse.depthwise_in_place(model, t, t - 2, s.ring_cols) and \
                reuse.delay_filled(model.layers[t - 1], s.ring_cols[t - 1], s.row_lo[t - 1],
                                   s.row_hi[t - 1], s.row_lo[t], s.row_hi[t])
        return memo[s.tile_rows, t]

    over = {t for t in range(lo + 2, end + 1) if written_over(t)}

    def ring(t: int) -> dict:
        rows = reuse.delayed_rows(model.layers[t], s.row_lo[t], s.row_hi[t],
                                  s.row_lo[t + 1]) if t + 1 in over else s.ring_rows(t)
        return {"kind": "ring", "tensor": t, "rows": rows, "cols": s.ring_cols[t],
                "bytes": rows * s.ring_cols[t] * model.tensor_shape(t)[2]}

    leading = {t: ring(t) for t in range(lo + 1, end + 1)}
    inner = {t: {"kind": "ring", "tensor": t, "rows": 0, "cols": 1, "bytes": 0} if t in over
             else leading[t] for t in range(lo + 1, end + 1)}
    return Costs(end, lo, inner, leading, s.layer_macs)


def column_rings(model: Model, s: BlockSchedule, first: int) -> list[dict]:
    """The column rings of the H-cache block first..end of schedule `s` (column_costs)."""
    return column_costs(model, s).rings(first)

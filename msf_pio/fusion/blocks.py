"""The fusion blocks of a model and what every cache scheme's block edge shares.

A block is a run of spatial layers first..end (possibly ending in an iterative head, layers up
to `last`); blocks ending at the same spatial layer `end` form a family that shares the rows and
columns its tensors must provide (geometry.py). Whatever the scheme, a block edge's RAM is its
input, output and the tensors alive across it (geometry.py), plus the scheme's scratch buffers
(rings, a head's staging column and int32 sums), its output possibly written over the input
rows already read (reuse.py); its MACs are those its schedule runs plus the head's. The schemes
(schemes/) say which blocks they cache how; this module walks the families and weighs an edge.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model import ir
from ..model.ir import Model
from . import reuse, stream_input
from .edge import Edge
from .geometry import (BlockSchedule, alive_before, arena_tensor_bytes, block_schedule,
                       column_sweep, layer_macs, writes_in_place)


@dataclass
class Family:
    """Blocks whose spatial part ends at layer `end`: first in lowest..end, last in `tails`.
    The column sweep and the H-cache schedules of each tile height are simulated once, for
    every scheme that reads them."""
    model: Model
    end: int
    lowest: int
    tails: list[int]
    _columns: tuple | None = field(default=None, repr=False)
    _schedules: dict = field(default_factory=dict, repr=False)

    @property
    def columns(self) -> tuple[dict, dict]:
        if self._columns is None:
            self._columns = column_sweep(self.model, self.end, self.lowest)
        return self._columns

    def schedule(self, tile_rows: int) -> BlockSchedule:
        if tile_rows not in self._schedules:
            self._schedules[tile_rows] = block_schedule(self.model, self.end, self.lowest,
                                                        tile_rows, self.columns)
        return self._schedules[tile_rows]

    def firsts(self, alone: bool = True) -> range:
        """Block starts, last layer first; `alone`: also the block of `end` alone with a head."""
        return range(self.end if alone else self.end - 1, self.lowest - 1, -1)


def lowest_first(model: Model, end: int) -> int:
    """Smallest block start for a block whose spatial part ends at `end`: spatial layers only,
    and no tensor made inside the block may be read after it."""
    last_reader = model.last_reader()
    first = end
    while first > 0 and model.layers[first - 1].op in ir.SPATIAL_OPS:
        if last_reader[first] > end:          # tensor `first` would become internal
            break
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


def families(model: Model) -> list[Family]:
    """Every family with a block of more than one layer (one spatial layer and a head count)."""
    out = []
    for end, layer in enumerate(model.layers):
        if layer.op not in ir.SPATIAL_OPS:
            continue
        fam = Family(model, end, lowest_first(model, end), tails(model, end))
        if fam.lowest < fam.end or len(fam.tails) > 1:
            out.append(fam)
    return out


def edge_ram(model: Model, first: int, last: int, scratch: list[dict],
             shift: int | None = None) -> tuple[int, dict]:
    """Workspace bytes of an edge: its input, output, tensors alive across it and scratch
    buffers; with `shift` (reuse.py) the output may start that many bytes after the input,
    over the input rows already read."""
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


def output_shift(model: Model, first: int, last: int, end: int,
                 steps: tuple[np.ndarray, np.ndarray]) -> int | None:
    """The largest shift of the block's output after its input (reuse.py), None if they cannot
    share bytes; an iterative head writes its output once every input row is read. `steps`:
    per write step, the first input row still read and the output rows written by then."""
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


def input_ring(model: Model, first: int, rows: int) -> list[dict]:
    """The streamed network input's ring of `rows` rows, if the block starts at it."""
    return stream_input.input_ring(model, rows) if model.stream_input and first == 0 else []


def block_edges(model: Model, fam: Family, first: int, scheme: str, tile_rows: int,
                macs: dict[int, int], rings: list[dict], steps: tuple, **detail) -> list[Edge]:
    """The edges of the block first..end under a scheme, one per last layer of the family (a
    head or none): the scheme's `rings` and per-layer `macs`, its write `steps` (output_shift),
    `detail` added to the edge's."""
    out = []
    for last in fam.tails:
        if last == first:
            continue
        head_macs = sum(layer_macs(model.layers[l]) for l in range(fam.end + 1, last + 1))
        ram, d = edge_ram(model, first, last, block_scratch(model, rings, fam.end, last,
                                                            tile_rows),
                          output_shift(model, first, last, fam.end, steps))
        out.append(Edge(first, last, ram, sum(macs[l] for l in range(first, fam.end + 1))
                        + head_macs, scheme, {**d, **detail}, tile_rows))
    return out


def column_rings(model: Model, s: BlockSchedule, first: int) -> list[dict]:
    """A column ring per tensor first+1..end of the H-cache block first..end (tiles of any
    height). The output of a depthwise layer written over its input's ring (reuse.py) has none
    of its own (rows 0); that input ring then also holds the rows by which the output is
    delayed."""
    over = {t for t in range(first + 1, s.end + 1)
            if reuse.depthwise_in_place(model, t, first, s.ring_cols) and
            reuse.delay_filled(model.layers[t - 1], s.ring_cols[t - 1], s.row_lo[t - 1],
                               s.row_hi[t - 1], s.row_lo[t], s.row_hi[t])}
    out = []
    for t in range(first + 1, s.end + 1):
        if t in over:
            out.append({"kind": "ring", "tensor": t, "rows": 0, "cols": 1, "bytes": 0})
            continue
        rows = reuse.delayed_rows(model.layers[t], s.row_lo[t], s.row_hi[t],
                                  s.row_lo[t + 1]) if t + 1 in over else s.ring_rows(t)
        out.append({"kind": "ring", "tensor": t, "rows": rows, "cols": s.ring_cols[t],
                    "bytes": rows * s.ring_cols[t] * model.tensor_shape(t)[2]})
    return out

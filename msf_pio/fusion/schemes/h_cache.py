"""msf-CNN's H-cache: a fusion block run one output row per tile, column by column.

A fusion block produces its output one tile at a time: a tile is t consecutive output rows of
its last spatial layer (t = 1 here: msf-CNN's H-cache; more rows: the `tiles` scheme, tiles.py).
For a tile every tensor provides the rows its consumers read, and within the tile the block
sweeps the columns left to right, each layer computing its output column (all the tile's rows)
on demand: columns are cached, the rows two tiles share are recomputed for each. Every tensor
inside a block lives in a column ring: as many rows as the largest tile needs, as many columns
as all its consumers read (a residual skip tensor inside a block needs more columns than its
1x1 consumer alone); the block input, and any tensor made before the block that a layer of it
reads (a skip, a branch's stage input), is read in place from the arena. A depthwise output may
live in its input's ring (reuse.py). A block holding an upsampling layer is refused (its
executor's column rings and row back-propagation know only windows): no edge. The schedule is geometry.block_schedule, the rings
blocks.column_costs; the C executor is library/src/schemes/h_cache.c, the numpy reference
msf_pio/reference/schemes/h_cache.py.
"""
from __future__ import annotations

from typing import Callable

from ...model.ir import Model
from .. import stream_input
from ..blocks import Family, block_edges, upsamples
from ..edge import Edge
from ..geometry import block_schedule, column_sweep
from ..kernel_counts import block_counts, spatial_counts, specialised

NAME = "h-cache"
EXECUTOR = "h_cache"          # reference/schemes/h_cache.py, library/src/schemes/h_cache.c


def tile_edges(model: Model, fams: list[Family], name: str,
               heights: Callable[[Family], list[int]]) -> list[Edge]:
    """H-cache block edges under `name`, for every tile height heights(family) gives (a height
    > 1 for blocks of two layers or more only: one layer and a head computes every row once)."""
    out = []
    for fam in fams:
        for t in heights(fam):
            for first in fam.firsts(alone=t == 1):
                if upsamples(model, first, fam.end):   # so do the longer blocks
                    break
                costs = fam.column_costs(t, first)
                if costs.floor(first) > fam.cap:      # so are the longer blocks' rings
                    break
                s = fam.schedule(t, first)
                # a streamed input: the first block also keeps the input rows a tile reads
                lead = stream_input.input_ring(model, s.ring_rows(0)) \
                    if model.stream_input and first == 0 else []
                out += block_edges(model, fam, first, name, t, costs,
                                   (s.row_lo[first], s.row_hi[fam.end + 1]), lead)
    return out


def edges(model: Model, fams: list[Family]) -> list[Edge]:
    return tile_edges(model, fams, NAME, lambda fam: [1])


def rows_and_columns(model: Model, e: Edge, end: int):
    """The tiles' schedule of the block e.first..end and the columns every layer produces."""
    sweep = column_sweep(model, end, e.first)
    return block_schedule(model, end, e.first, e.tile_rows, sweep), sweep[1]


def layer_counts(model: Model, end: int, lowest: int, tile_rows: int, wide: int,
                 memo: dict | None = None) -> Callable[[int, bool, bool], dict]:
    """Latency counts of every spatial layer lowest..end of the blocks ending at `end`, as
    of(layer, whole_input, staged): every tile, one kernel call per column; the block's first
    layer reads the whole block input, the others column rings. `memo`: a dict kept across
    calls (the column sweep is the same for every tile height)."""
    memo = {} if memo is None else memo
    if ("columns", end, lowest) not in memo:
        memo["columns", end, lowest] = column_sweep(model, end, lowest)
    sweep = memo["columns", end, lowest]
    sched, produced = block_schedule(model, end, lowest, tile_rows, sweep), sweep[1]
    special = specialised(model)

    def of(l: int, whole_input: bool, staged: bool) -> dict:
        rows = (sched.row_hi[l + 1] - sched.row_lo[l + 1]).tolist()
        cols = produced[l + 1] + 1
        return spatial_counts(model.layers[l], sched.layer_macs[l], len(rows) * cols, rows,
                              cols, whole_input, wide, l in special, sched.ring_cols.get(l))
    return of


def counts(model: Model, e: Edge, end: int, staged: bool, wide: int) -> dict[str, int]:
    """Latency counts of the block's spatial layers (layer_counts)."""
    return block_counts(layer_counts(model, end, e.first, e.tile_rows, wide), e.first, end,
                        staged)


def layer_pixels(model: Model, e: Edge, end: int) -> dict[int, int]:
    """Output pixels every spatial layer computes: its rows over all tiles (recomputed ones
    included) times the columns the sweep produces."""
    s, produced = rows_and_columns(model, e, end)
    return {l: int((s.row_hi[l + 1] - s.row_lo[l + 1]).sum()) * (produced[l + 1] + 1)
            for l in range(e.first, end + 1)}


def label(e: Edge) -> str:
    return NAME


def json_fields(e: Edge) -> dict:
    return {}

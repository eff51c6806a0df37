"""The registry of cache schemes: how a fusion block keeps its internal tensors.

A scheme is one module of this package; the graph builder (exact_cost.py), the latency model
(latency.py), the plan JSON and reports, the numpy reference (msf_pio/reference/schemes/) and
the code generator read it only through this registry. A scheme module has:
- NAME: the name plans, reports and --schemes use;
- EXECUTOR: the executor that runs its blocks, a file in msf_pio/reference/schemes/ and in
  library/src/schemes/ (C enum MSF_<EXECUTOR>): new schemes may reuse one (tiles: the H-cache's);
- edges(model, families): its block edges, with exact RAM and MACs (blocks.py weighs them);
- counts(model, edge, end, staged, wide): the latency counts of the block's spatial layers
  first..end as its executor runs them (kernel_counts.py); `staged`: the last layer's pixels
  go one by one (an iterative head, a streamed end);
- optionally layer_counts(model, end, lowest, tile_rows, wide, memo): counts per layer of the
  blocks ending at `end` (latency.count_table prices a family of blocks at once with it; a
  layer's counts may not depend on where its block starts, but for a first layer reading the
  whole input and a last one staging); `memo` a dict shared by one table's calls;
- layer_pixels(model, edge, end): the output pixels every spatial layer computes;
- label(edge), json_fields(edge): its parameters, as reports and the plan JSON give them.
The order below is the order of parallel edges between the same tensors (the solvers keep the
first of equal ones).
"""
from __future__ import annotations

from types import ModuleType

from ..edge import Edge
from . import channel_split, h_cache, line_buffer, tiles

REGISTRY: tuple[ModuleType, ...] = (h_cache, tiles, line_buffer, channel_split)


def names() -> tuple[str, ...]:
    return tuple(s.NAME for s in REGISTRY)


def get(name: str) -> ModuleType:
    for s in REGISTRY:
        if s.NAME == name:
            return s
    raise KeyError(name)


def label(e: Edge) -> str:
    """The edge's scheme as reports print it, e.g. `tiles t=4`, `channel-split g=16 t=5`
    (a single layer: `single`)."""
    return get(e.scheme).label(e) if e.scheme in names() else e.scheme


def json_fields(e: Edge) -> dict:
    """The scheme's parameters in the plan JSON's block (e.g. tile_rows)."""
    return get(e.scheme).json_fields(e) if e.scheme in names() else {}

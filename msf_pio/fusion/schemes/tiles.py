"""Tiles: the H-cache (h_cache.py) with tiles of t = 2, 4, 8 or 16 output rows, capped at the
block's height: rings of more rows, fewer rows recomputed. Run by the H-cache's executors."""
from __future__ import annotations

from ...model.ir import Model
from ..blocks import Family
from ..edge import Edge
from . import h_cache

NAME = "tiles"
EXECUTOR = h_cache.EXECUTOR
TILE_ROWS = (2, 4, 8, 16)   # a few, so the graph stays small to solve


def heights(model: Model, end: int) -> list[int]:
    """Tile heights > 1 of a block ending at `end`, capped at its output height (one tile:
    nothing recomputed). A streamed network output stages one pixel: one row per tile."""
    if model.stream_output and end + 1 == model.n_layers:
        return []
    return sorted({min(t, model.layers[end].out_shape[0]) for t in TILE_ROWS} - {1})


def edges(model: Model, fams: list[Family]) -> list[Edge]:
    return h_cache.tile_edges(model, fams, NAME, lambda fam: heights(model, fam.end)
                              if fam.lowest < fam.end else [])


counts = h_cache.counts
layer_counts = h_cache.layer_counts
layer_pixels = h_cache.layer_pixels


def label(e: Edge) -> str:
    return f"{NAME} t={e.tile_rows}"


def json_fields(e: Edge) -> dict:
    return {"tile_rows": e.tile_rows}

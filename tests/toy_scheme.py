"""A toy cache scheme, as a new scheme is written (docs/architecture.md): the H-cache in tiles of
exactly three output rows, run by the H-cache's executors. It is this one file; registering it
is one line (tests/test_toy_scheme.py adds it to msf_pio.fusion.schemes.REGISTRY)."""
from msf_pio.fusion.schemes import h_cache

NAME = "tiles-3"
EXECUTOR = h_cache.EXECUTOR        # reference/schemes/h_cache.py, library/src/schemes/h_cache.c
ROWS = 3


def edges(model, fams):
    """Blocks of two layers or more whose output has more than three rows, unless it is a
    streamed network output (staged a pixel at a time: one row per tile)."""
    def heights(fam):
        streamed = model.stream_output and fam.end + 1 == model.n_layers
        taller = model.layers[fam.end].out_shape[0] > ROWS
        return [ROWS] if fam.lowest < fam.end and taller and not streamed else []
    return h_cache.tile_edges(model, fams, NAME, heights)


counts = h_cache.counts
layer_pixels = h_cache.layer_pixels


def label(e):
    return NAME


def json_fields(e):
    return {"tile_rows": e.tile_rows}

"""The channel-split schedule in numpy: an inverted-residual triple (1x1 expand -> depthwise ->
1x1 project) run as H-cache tiles whose expansion is computed one channel group at a time.

Written from the scheme's definition (msf_pio/fusion/schemes/channel_split.py), not from its code: for a
tile of t output rows and each group of g expanded channels, the column sweep computes the
group's expanded columns on demand into a column ring of g channels, the group's depthwise
output column (t rows, g channels) into a one-column ring, and adds its projection (the group's
input channels of the project's weights) to int32 sums of the tile's output; after the last
group the sums plus the bias are requantized. The rings are ColumnRing's (h_cache.py): reading
a pixel they do not hold raises RingError, so a run checks the cost model's buffer sizes.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ... import numerics as nm
from ...fusion.schemes.channel_split import group_model
from ...model.ir import Model
from .h_cache import ColumnRing, tile_rows_needed
from ..overlap import SharedRegion
from ..regions import input_span, ring_sizes, run_region


def run_edge(model: Model, e, tensors: dict[int, np.ndarray],
             shared: SharedRegion | None = None) -> np.ndarray:
    """Tensor e.last + 1 of the channel-split edge e (groups of e.detail["g"] channels)."""
    return run_block(model, e.first, e.tile_rows, e.detail["g"], ring_sizes(e), tensors,
                     shared)[0]


def run_block(model: Model, first: int, tile_rows: int, g: int,
              rings: dict[int, tuple[int, int]], tensors: dict[int, np.ndarray],
              shared: SharedRegion | None = None) -> tuple[np.ndarray, dict]:
    """Tensor first + 3 of the triple first..first+2 under the channel split with tiles of
    `tile_rows` rows, groups of g channels and `rings` (tensor -> (rows, columns)) for the
    expanded tensor and the depthwise output; `tensors` holds the block input. Also returns,
    per (layer, row, column), the part of the layer's channels computed there (expand and
    depthwise: output channels, project: input channels), summed over tiles and groups."""
    i, exp, dw, end = first, first + 1, first + 2, first + 2
    p = model.layers[end]
    rq = nm.requantization(model, end)
    height, width, cout = p.out_shape
    out = np.zeros(p.out_shape, dtype=np.int8)
    computed: dict[tuple[int, int, int], Fraction] = {}
    part = Fraction(g, model.layers[i].cout)
    groups = [(c, group_model(model, i, c, g)) for c in range(0, model.layers[i].cout, g)]

    def count(l: int, rows: tuple[int, int], x: int) -> None:
        for r in range(rows[0], rows[1] + 1):
            computed[(l, r, x)] = computed.get((l, r, x), 0) + part

    for y0 in range(0, height, tile_rows):
        y1 = min(y0 + tile_rows, height) - 1
        need = tile_rows_needed(model, i, end, y0, y1)
        sums = np.zeros((y1 - y0 + 1, width, cout), dtype=np.int64)
        for c, sub in groups:
            ring = {t: ColumnRing(t, *rings[t], g) for t in (exp, dw)}
            for t in (exp, dw):
                ring[t].start_tile(need[t][0])
            produced = -1

            def read(t: int, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
                if t == i:
                    if shared:
                        shared.read(r0, r1, c0, c1)
                    return tensors[i][r0:r1 + 1, c0:c1 + 1]
                return ring[t].get(t, r0, r1, c0, c1)

            for x in range(width):
                while produced < input_span(sub.layers[i + 1], x, x, 1)[1]:
                    produced += 1
                    column = run_region(sub, i, need[exp], (produced, produced), read)[:, 0]
                    ring[exp].put(exp, produced, need[exp][0], column)
                    count(i, need[exp], produced)
                column = run_region(sub, i + 1, need[dw], (x, x), read)[:, 0]
                ring[dw].put(dw, x, need[dw][0], column)
                count(i + 1, need[dw], x)
                held = read(dw, *need[dw], x, x)[:, 0].astype(np.int64) + rq.input_offset
                sums[:, x] += held @ p.weights.w[:, 0, 0, c:c + g].astype(np.int64).T
                count(end, (y0, y1), x)
        acc = sums + p.weights.bias.astype(np.int64)
        rows = nm.multiply_by_quantized_multiplier(acc, rq.multiplier, rq.shift) + \
            rq.output_offset
        out[y0:y1 + 1] = np.clip(rows, rq.act_min, rq.act_max)
        if shared:
            shared.wrote(y0, y1, 0, width - 1)
    return out, computed

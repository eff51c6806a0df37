"""The channel-split scheme of an inverted-residual triple: 1x1 expand -> depthwise -> 1x1 project.

H-cache tiles of t output rows (the H-cache's schedule, geometry.block_schedule) whose expansion
is computed g channels at a time (the depthwise is per channel, so a group needs only its own
channels): per tile and group, the column sweep keeps a column ring of the group's g expanded
channels, computes the group's depthwise output one column at a time (t rows x g channels) and
projects it at once into int32 partial sums of the tile's output (t x W x C_out); once every
group is in, the sums are requantized (bias, per-channel multiplier, zero point, activation)
into the block output. Every expanded pixel is computed once per tile, in one group: the MACs
are the tile schedule's; the expansion ring is g / C_exp as large, at the price of the sums.

The C runtime (library/src/schemes/channel_split.c) and the numpy reference (msf_pio/reference/
schemes/channel_split.py) follow this order; this module sizes their buffers.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...model import ir
from ...model.ir import Model, Weights
from ..blocks import Family, edge_ram, output_shift
from ..edge import Edge
from ..geometry import BlockSchedule, block_schedule, column_sweep
from ..kernel_counts import add, spatial_counts, specialised, sums_counts
from . import h_cache, tiles

NAME = "channel-split"
EXECUTOR = "channel_split"    # reference/schemes/channel_split.py, library/src/schemes/channel_split.c
GROUPS = (8, 16, 24, 32, 48)      # channel groups tried: a few, so the graph stays small to solve
TILE_ROWS = (1,) + tiles.TILE_ROWS


def is_triple(model: Model, i: int) -> bool:
    """Layers i..i+2 are a chain 1x1 expand (stride 1) of the block input -> depthwise k x k
    (k > 1) -> 1x1 project (stride 1) whose internal tensors nothing else reads, and neither
    end is streamed."""
    L = model.layers
    if i + 2 >= model.n_layers:
        return False
    e, d, p = L[i], L[i + 1], L[i + 2]
    pointwise = lambda l: l.op == ir.CONV and l.kernel == (1, 1) and l.stride == (1, 1) \
        and l.pad == (0, 0, 0, 0)
    last_reader = model.last_reader()
    return pointwise(e) and d.op == ir.DEPTHWISE and d.kernel_h > 1 and pointwise(p) and \
        model.input_of(i) == i and model.input_of(i + 1) == i + 1 and \
        model.input_of(i + 2) == i + 2 and \
        last_reader.get(i + 1) == i + 1 and last_reader.get(i + 2) == i + 2 and \
        not (model.stream_input and i == 0) and \
        not (model.stream_output and i + 3 == model.n_layers)


def groups(model: Model, i: int, sizes: tuple[int, ...] = GROUPS) -> list[int]:
    """Channel groups g (of `sizes`) of the triple from layer i: g divides C_exp, g < C_exp."""
    c = model.layers[i].cout
    return [g for g in sizes if c % g == 0 and g < c]


def group_model(model: Model, i: int, c: int, g: int, project: bool = False) -> Model:
    """The model with the expand (layer i) and the depthwise cut to expanded channels c..c+g,
    as one group of the split runs them (their weights too, where the model has them); with
    `project`, the project's input channels too (shapes only: its weights stay whole)."""
    part = lambda w, axis: None if w is None else Weights(
        np.take(w.w, range(c, c + g), axis=axis), w.bias[c:c + g], np.asarray(w.scales)[c:c + g])
    e, d, p = model.layers[i:i + 3]
    narrow = lambda s: (*s[:2], g)
    layers = list(model.layers)
    layers[i] = replace(e, out_shape=narrow(e.out_shape), weights=part(e.weights, 0))
    layers[i + 1] = replace(d, in_shape=narrow(d.in_shape), out_shape=narrow(d.out_shape),
                            weights=part(d.weights, 3))
    if project:
        layers[i + 2] = replace(p, in_shape=narrow(p.in_shape))
    return model.with_layers(layers)


def scratch(model: Model, i: int, sched: BlockSchedule, g: int) -> list[dict]:
    """The scratch buffers in arena order: the expansion's column ring and the depthwise output
    column, both of g channels, and the int32 sums of one tile's output."""
    exp, dw = i + 1, i + 2
    _, wo, co = model.tensor_shape(i + 3)
    rows, cols = sched.ring_rows(exp), sched.ring_cols[exp]
    t = sched.ring_rows(dw)
    return [{"kind": "ring", "tensor": exp, "rows": rows, "cols": cols, "channels": g,
             "bytes": rows * cols * g},
            {"kind": "ring", "tensor": dw, "rows": t, "cols": 1, "channels": g, "bytes": t * g},
            {"kind": "sums", "tensor": i + 3, "rows": t, "cols": wo, "bytes": 4 * t * wo * co}]


def split_edges(model: Model, sizes: tuple[int, ...] = GROUPS) -> list[Edge]:
    """One edge per triple, tile height and channel group (of `sizes`)."""
    out = []
    for i in range(model.n_layers):
        if not is_triple(model, i) or not groups(model, i, sizes):
            continue
        end = i + 2
        ho = model.layers[end].out_shape[0]
        columns = column_sweep(model, end, i)
        for t in sorted({min(t, ho) for t in TILE_ROWS}):
            s = block_schedule(model, end, i, t, columns)
            macs = sum(s.layer_macs[l] for l in range(i, end + 1))
            # the output is written when a tile's groups are all in: later than the H-cache
            # writes it, so the H-cache's shift over the input (reuse.py) holds as well
            shift = output_shift(model, i, end, end, (s.row_lo[i], s.row_hi[end + 1]))
            for g in groups(model, i, sizes):
                ram, detail = edge_ram(model, i, end, scratch(model, i, s, g), shift)
                out.append(Edge(i, end, ram, macs, NAME, {**detail, "g": g}, t))
    return out


def edges(model: Model, fams: list[Family]) -> list[Edge]:
    return split_edges(model)


def counts(model: Model, e: Edge, end: int, staged: bool, wide: int) -> dict[str, int]:
    """Latency counts as channel_split.c runs the triple: per group, the tiles' schedule of
    the group's expand and depthwise (the model's kernel instances: the generator picks them
    from the whole model's layers) and the project's pixels added into int32 sums; per tile,
    the sums cleared and requantized into the output."""
    g = e.detail["g"]
    sub = group_model(model, e.first, 0, g, project=True)
    n = model.layers[e.first].cout // g
    sched, produced = h_cache.rows_and_columns(sub, e, end)
    special = specialised(model)
    group: dict[str, int] = {}
    for l in range(e.first, end + 1):
        rows = (sched.row_hi[l + 1] - sched.row_lo[l + 1]).tolist()
        cols = produced[l + 1] + 1
        add(group, sums_counts(sub.layers[l], rows, cols) if l == end else
            spatial_counts(sub.layers[l], sched.layer_macs[l], len(rows) * cols, rows, cols,
                           l == e.first, wide, l in special, sched.ring_cols.get(l)))
    # the executor calls each group's kernels itself (no descent through the layers, no
    # msf_layer_column): a call of its own price
    group["split.calls"] = group.pop("calls")
    out = {k: v * n for k, v in group.items()}
    h, w, c = model.layers[end].out_shape
    return add(out, {"sums.outputs": h * w * c})


layer_pixels = h_cache.layer_pixels      # a group's tiles, all groups together: the tiles'


def label(e: Edge) -> str:
    return f"{NAME} g={e.detail['g']} t={e.tile_rows}"


def json_fields(e: Edge) -> dict:
    return {"tile_rows": e.tile_rows}

"""The counts the latency model prices, for one layer computing some pixels in some kernel calls.

The runtime's cost is linear in a few counts the exact cost model already knows for every layer
of an edge (latency.py explains them and prices them per board): MACs (of paired and of lone
pixels for dense convolutions), output elements, a dense convolution's window work (taps
gathered, runs of taps read where they lie) and kernel calls. Each cache scheme (schemes/) says
which calls its executor makes of which layers; this module turns a layer's calls into counts.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..model import ir
from .geometry import valid_taps

GATHER = 512                               # MSF_CONV_GATHER: window elements a DSP conv gathers

# feature names: <kernel class>.<count>
FEATURES = (
    "conv1x1.macs_pair", "conv1x1.macs_single", "conv1x1.outputs", "conv1x1.outputs_single",
    "conv1x1.taps",
    "conv.macs_pair", "conv.macs_single", "conv.outputs", "conv.outputs_single", "conv.taps",
    "conv.runs",
    "depthwise.macs", "depthwise.outputs", "add.outputs", "max_pool.macs", "max_pool.outputs",
    "avg_pool.macs", "avg_pool.outputs",
    "global_avgpool.macs", "dense.macs", "dense.outputs", "calls", "edge.count",
)


def kernel_class(layer) -> str:
    if layer.op == ir.CONV:
        return "conv1x1" if layer.kernel == (1, 1) else "conv"
    if layer.op in ir.PIXEL_OPS or layer.op == ir.RESIZE_NEAREST:
        return "add"     # uncalibrated: priced as the other MAC-free per-value kernel
    if layer.op == ir.TRANSPOSE_CONV:
        return "depthwise"   # uncalibrated: priced as the other scalar multiply-accumulate loop
    # max and average pools apart: an average divides per output (slow on some cores)
    return {ir.DEPTHWISE: "depthwise", ir.ADD: "add", ir.CONCAT: "add", ir.MUL: "add",
            ir.MAX_POOL: "max_pool",
            ir.AVG_POOL: "avg_pool", ir.GLOBAL_AVGPOOL: "global_avgpool",
            ir.DENSE: "dense"}[layer.op]


def window_work(layer, cls: str, macs: int, whole_input: bool, dsp: bool) -> dict:
    """Taps gathered, and runs of taps read where they lie, by a dense convolution of `macs`
    MACs, as conv2d_s8.c splits its pixels: one is gathered when the core has the DSP extension,
    its window spans whole kernel rows and holds 4..GATHER valid elements; the others read a run
    per valid kernel row of a whole tensor, or per valid tap of a column ring. Runs are counted
    once per output channel. The MACs split over the pixels as the whole layer's do (exact for a
    layer computed once; an H-cache's recomputed rows are taken alike)."""
    taps, rows_in, cols_in, runs = _window_sums(layer.out_shape, layer.in_shape, layer.kernel,
                                                layer.stride, layer.pad, cls == "conv", dsp)
    unit = macs / taps                                 # MACs per (valid row, valid column)
    gathered = unit * rows_in * cols_in
    counts = {f"{cls}.taps": round(gathered / layer.cout)}
    if cls == "conv":
        counts["conv.runs"] = round(unit / layer.cin * runs[1 if whole_input else 0])
    return counts


@lru_cache(maxsize=4096)
def _window_sums(out_shape, in_shape, kernel, stride, pad, runs: bool, dsp: bool) -> tuple:
    """What window_work needs of a layer's geometry, as integers: valid (row, column) taps of
    all pixels, the valid rows and columns of the gathered pixels, and the runs per valid
    (row, column) reading a whole tensor and column rings (indexed by whole_input)."""
    kh, kw = kernel
    rows = valid_taps(out_shape[0], in_shape[0], kh, stride[0], pad[0])
    cols = valid_taps(out_shape[1], in_shape[1], kw, stride[1], pad[1])
    size = rows * kw * in_shape[2]
    row_in = (size >= 4) & (size <= GATHER) if dsp else np.zeros(len(rows), bool)
    col_in = cols == kw
    per_run = (0, 0)
    if runs:                              # (a pointwise pixel's taps are one run: its outputs)
        per_run = tuple(int(rows.sum() * per_row.sum() - rows[row_in].sum() *
                            per_row[col_in].sum())    # runs per valid kernel row
                        for per_row in (cols, np.ones_like(cols)))
    return (int(rows.sum() * cols.sum()), int(rows[row_in].sum()), int(cols[col_in].sum()),
            per_run)


def spatial_counts(layer, macs: int, calls: int, rows_per_call: list[int], cols: int,
                   whole_input: bool, dsp: bool) -> dict:
    """Counts of a window layer or add computing `cols` columns for calls of the given rows;
    `whole_input`: it reads a whole tensor (else column rings); `dsp`: the core's SIMD paths."""
    cls = kernel_class(layer)
    rows = sum(rows_per_call)
    pixels = rows * cols
    counts = {"calls": calls, f"{cls}.outputs": pixels * layer.cout}
    if cls in ("conv", "conv1x1"):
        lone = sum(r % 2 for r in rows_per_call) * cols
        single = round(macs * lone / pixels) if pixels else 0
        counts[f"{cls}.macs_pair"] = macs - single
        counts[f"{cls}.macs_single"] = single
        counts[f"{cls}.outputs_single"] = lone * layer.cout
        counts.update(window_work(layer, cls, macs, whole_input, dsp))
    elif cls != "add":
        counts[f"{cls}.macs"] = macs
    return counts


def add(counts: dict[str, int], more: dict) -> dict[str, int]:
    """Adds `more` into `counts` (new features at the end) and returns it."""
    for k, v in more.items():
        counts[k] = counts.get(k, 0) + int(v)
    return counts


def block_counts(of, first: int, end: int, staged: bool) -> dict[str, int]:
    """The counts of a block's spatial layers first..end, from a scheme's layer_counts `of`
    (its first layer reads the whole block input)."""
    out: dict[str, int] = {}
    for l in range(first, end + 1):
        add(out, of(l, l == first, staged))
    return out

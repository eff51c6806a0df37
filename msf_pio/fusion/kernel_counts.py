"""The counts the latency model prices, for one layer computing some pixels in some kernel calls.

The runtime's cost is linear in a few counts the exact cost model already knows for every layer
of an edge (latency.py explains them and prices them per board): MACs (of paired and of lone
pixels for dense convolutions), output elements, a dense convolution's window work (taps
gathered, runs of taps read where they lie) and kernel calls. Each cache scheme (schemes/) says
which calls its executor makes of which layers; this module turns a layer's calls into counts.
"""
from __future__ import annotations

import numpy as np

from ..model import ir
from .geometry import col_taps, row_taps

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
    if layer.op in ir.PIXEL_OPS:
        return "add"     # uncalibrated: priced as the other MAC-free per-value kernel
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
    kw, cin = layer.kernel_w, layer.cin
    rows, cols = row_taps(layer), col_taps(layer)      # valid kernel rows / columns per pixel
    unit = macs / (rows.sum() * cols.sum())            # MACs per (valid row, valid column)
    size = rows * kw * cin
    row_in = (size >= 4) & (size <= GATHER) if dsp else np.zeros(len(rows), bool)
    col_in = cols == kw
    gathered = unit * rows[row_in].sum() * cols[col_in].sum()
    counts = {f"{cls}.taps": round(gathered / layer.cout)}
    if cls == "conv":                     # (a pointwise pixel's taps are one run: its outputs)
        per_row = np.ones_like(cols) if whole_input else cols     # runs per valid kernel row
        runs = rows.sum() * per_row.sum() - rows[row_in].sum() * per_row[col_in].sum()
        counts["conv.runs"] = round(unit / cin * runs)
    return counts


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

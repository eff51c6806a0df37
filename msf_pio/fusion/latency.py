"""Latency in the cost model: predicted instructions of an edge or a plan on a board.

The runtime's cost is linear in a few counts the exact cost model already knows for every layer
of an edge (msf_pio/fusion/exact_cost.py, the schedule the C executor follows):
- MACs, split for dense convolutions into those of paired pixels (the conv kernel computes two
  output rows per inner loop when a call has two rows) and of lone pixels (a fused block's last
  layer computes one row per call);
- output elements (one requantization each), and apart those of lone pixels: a dense
  convolution's inner loop over the input channels is set up once per (pixel pair, channel pair)
  and a lone pixel shares that set-up with fewer outputs;
- a dense convolution's window work that does not scale with the output channels: on cores with
  the DSP extension (Cortex-M4/M7) every window element is first gathered into a scratch
  ("taps"); elsewhere, and where a window is clipped at the sides or longer than the scratch,
  the inner loop runs over the taps where they lie, once per run of contiguous taps (a kernel
  row of a whole tensor, one tap of a column ring): its set-ups ("runs") weigh most where the
  input channels are few (MLPerf Tiny's 10x4 stem over one channel);
- kernel calls (one output column of one tile row: window set-up, the executor's descent), one
  coefficient for every kernel.
Per board, a profile holds an instructions-per-count coefficient for each (kernel class, count),
measured on the emulated boards by benchmarks/calibrate_latency.py (QEMU -icount: instructions,
so cycles = instructions) and stored in latency_profiles.json beside this file.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..errors import MsfError
from ..model import ir
from ..model.ir import Model
from . import channel_split
from .edge import Edge
from .exact_cost import _column_sweep as column_sweep
from .exact_cost import _col_taps, _row_taps, block_schedule, layer_macs
from .line_buffer import row_sweep

PROFILES = Path(__file__).with_name("latency_profiles.json")
DSP_CPUS = ("cortex-m4", "cortex-m7")      # __ARM_FEATURE_DSP: the kernels' SIMD paths
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
    return {ir.DEPTHWISE: "depthwise", ir.ADD: "add", ir.CONCAT: "add", ir.MAX_POOL: "max_pool",
            ir.AVG_POOL: "avg_pool", ir.GLOBAL_AVGPOOL: "global_avgpool",
            ir.DENSE: "dense"}[layer.op]


def _window_work(layer, cls: str, macs: int, whole_input: bool, dsp: bool) -> dict:
    """Taps gathered, and runs of taps read where they lie, by a dense convolution of `macs`
    MACs, as conv2d_s8.c splits its pixels: one is gathered when the core has the DSP extension,
    its window spans whole kernel rows and holds 4..GATHER valid elements; the others read a run
    per valid kernel row of a whole tensor, or per valid tap of a column ring. Runs are counted
    once per output channel. The MACs split over the pixels as the whole layer's do (exact for a
    layer computed once; an H-cache's recomputed rows are taken alike)."""
    kw, cin = layer.kernel_w, layer.cin
    rows, cols = _row_taps(layer), _col_taps(layer)    # valid kernel rows / columns per pixel
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


def _spatial_counts(layer, macs: int, calls: int, rows_per_call: list[int], cols: int,
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
        counts.update(_window_work(layer, cls, macs, whole_input, dsp))
    elif cls != "add":
        counts[f"{cls}.macs"] = macs
    return counts


def _row_call(layer) -> bool:
    """line_buffer.c computes a whole output row per kernel call (msf_row_mode): a depthwise
    (its row kernel), or a layer whose window is one pixel (1x1, stride 1, no padding) and
    whose values do not depend on the pixel's place (not a per-element PReLU)."""
    if layer.op == ir.DEPTHWISE:
        return True
    one_pixel = all(layer.window(axis) == (1, 1, 0) for axis in (0, 1)) \
        if layer.has_window else True
    return one_pixel and not layer.slope_per_pixel


def edge_counts(model: Model, first: int, last: int, scheme: str = "h-cache",
                tile_rows: int = 1, dsp: bool = False,
                group: int | None = None) -> dict[str, int]:
    """Feature counts of the edge first..last (a fusion block under `scheme`, H-cache tiles of
    `tile_rows` rows, channel groups of `group` channels) as the C executor runs it on a core
    with (`dsp`) or without the kernels' SIMD paths. A line buffer's ring slides (memmoves)
    are not a feature yet: not predicted."""
    layers = model.layers
    if scheme == "channel-split":     # channel_split.c: per group, the tiles' schedule of the
        sub = channel_split.group_model(model, first, 0, group, project=True)   # group's layers
        n = layers[first].cout // group   # (the project's outputs added into int32 sums)
        counts = {k: v * n for k, v in edge_counts(sub, first, last, "tiles", tile_rows,
                                                   dsp).items()}
        counts["edge.count"] = 1
        return counts
    counts: dict[str, int] = {"edge.count": 1}

    def add(c: dict) -> None:
        for k, v in c.items():
            counts[k] = counts.get(k, 0) + int(v)

    end = last
    while end >= first and layers[end].op in ir.HEAD_OPS:
        end -= 1                                      # end < first: a head layer alone
    for l in range(end + 1, last + 1):               # global pooling, dense
        layer = layers[l]
        cls = kernel_class(layer)
        add({f"{cls}.macs": layer_macs(layer)})
        if cls == "dense":
            add({"dense.outputs": layer.cout})
    if end < first:
        return counts
    stream = (model.stream_output and last + 1 == model.n_layers) or \
        (model.stream_input and first == 0)          # a streamed input: a row per tile
    if end == first:                                  # a single spatial layer
        layer = layers[first]
        oh, ow = layer.out_shape[:2]
        tile = oh if not (last > end or stream) else 1    # msf_run_edge's tile_rows
        add(_spatial_counts(layer, layer_macs(layer), ow * (oh // tile), [tile] * (oh // tile),
                            ow, True, dsp))
        return counts
    if scheme == "line-buffer":          # every row once; rings of whole rows
        sweep = row_sweep(model, end, first)
        staged = last > end or stream    # the last spatial layer's pixels go one by one
        for l in range(first, end + 1):
            rows, cols = sweep.rows[l], layers[l].out_shape[1]
            # a call per row (the row as the one column of the transposed layer) or per pixel
            per_call, calls = (cols, 1) if _row_call(layers[l]) and not (l == end and staged) \
                else (1, cols)
            add(_spatial_counts(layers[l], sweep.layer_macs[l], rows * calls, [per_call] * rows,
                                calls, True, dsp))
        return counts
    sched = block_schedule(model, end, first, tile_rows)
    _, produced = column_sweep(model, end, first)
    for l in range(first, end + 1):   # every tile, one call per column; inner layers read rings
        rows = [int(r) for r in sched.row_hi[l + 1] - sched.row_lo[l + 1]]
        cols = produced[l + 1] + 1
        add(_spatial_counts(layers[l], sched.layer_macs[l], len(rows) * cols, rows, cols,
                            l == first, dsp))
    return counts


@lru_cache(maxsize=None)
def _profiles() -> dict:
    if not PROFILES.is_file():
        return {}
    return json.loads(PROFILES.read_text())


def boards() -> list[str]:
    return sorted(_profiles())


class Coefficients(dict):
    """A board's instructions per count, and whether its core takes the kernels' DSP paths
    (which changes the counts, not only their prices)."""
    dsp = False


def profile(board: str) -> Coefficients:
    profiles = _profiles()
    if board not in profiles:
        raise MsfError(f"no latency profile for board {board!r} (calibrated: "
                       f"{', '.join(boards()) or 'none'}; benchmarks/calibrate_latency.py)")
    coefficients = Coefficients(profiles[board]["coefficients"])
    coefficients.dsp = has_dsp(board)
    return coefficients


def instructions(counts: dict[str, int], coefficients: dict[str, float]) -> float:
    return sum(coefficients.get(k, 0.0) * v for k, v in counts.items())


def edge_instructions(model: Model, edge: Edge, coefficients: dict[str, float]) -> float:
    return instructions(edge_counts(model, edge.first, edge.last, edge.scheme, edge.tile_rows,
                                    getattr(coefficients, "dsp", False), edge.detail.get("g")),
                        coefficients)


def plan_instructions(model: Model, blocks: list[Edge], coefficients: dict[str, float]) -> int:
    """Predicted instructions (= cycles under QEMU -icount) of msf_model_run for a plan."""
    return int(round(sum(edge_instructions(model, e, coefficients) for e in blocks)))


def _build(board: str) -> dict:
    """The build section of the board's manifest (msf_pio/pio/platform/boards), {} if none."""
    manifest = Path(__file__).parents[1] / "pio" / "platform" / "boards" / f"{board}.json"
    return json.loads(manifest.read_text())["build"] if manifest.is_file() else {}


def f_cpu(board: str) -> int:
    """Core clock of the part an emulated board stands in for (its manifest's build.f_cpu)."""
    return int(str(_build(board).get("f_cpu", "0")).rstrip("L"))


def has_dsp(board: str) -> bool:
    """Whether the board's core has the DSP extension the kernels' SIMD paths use."""
    return _build(board).get("cpu") in DSP_CPUS

"""Latency in the cost model: predicted instructions of an edge or a plan on a board.

The runtime's cost is linear in a few counts the exact cost model already knows for every layer
of an edge (each cache scheme's schedule, schemes/, the one its C executor follows; the counts
of one layer's kernel calls in kernel_counts.py):
- MACs, split for dense convolutions into those of pixels in blocks of three, pairs and lone
  pixels (a fused block's last layer computes one row per call), a lone pixel's channels in
  wide blocks (several channel pairs per input load: kernel_counts.wide_pairs) apart, and
  blocks of three over overlapping windows a few taps apart (kernel_counts.COMMONED_ROW), and
  the inner loop's slots that are no MAC (taps in groups of four, windows clipped by padding);
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
  coefficient for every kernel, but those a channel split's executor makes itself (no descent)
  and an upsampling layer's per pixel in a line buffer (a resize's copy, a transposed conv's
  taps found), each of its own price; a dense convolution's blocks of pixels (three, two, one:
  a block's own set-up whatever its output channels, which weighs where they are few);
- which instance of a kernel runs: a layer among the generator's specialised ones (at most
  kernel_counts.LIMIT shapes per kind) runs its shape's kernel (conv: blocks of three pixels),
  the others and a line buffer's depthwise rows the kernel for any shape (conv: pairs; folded
  depthwise: a cost per output of its own; a depthwise that does not fold: the channels past
  its groups of four one at a time, an extra cost per MAC); a folded depthwise window lying
  across the wrap of a column ring is copied, as one clipped at the sides is;
- the kernels the schedule calls on whole tensors: a transposed convolution's MACs, taps,
  outputs and pixels, a nearest resize's pixels and bytes, a stream or crop layer's bytes moved;
- a channel split's projection into int32 sums (pairs and lone pixels) and their
  requantization per output; a line buffer's ring slides (memmove: bytes and calls) and its
  row calls of a transposed layer (a copy of the layer's record each);
- per value, each kernel of its own fixed-point math: add, mul, hard-swish, logistic, softmax
  (leaky ReLU, PReLU, slice and concatenation, uncalibrated, priced as add); a global average
  pool's sums and a division per channel.
The arena's compaction between edges (memmove bytes) depends on the whole plan, not on an edge:
codegen/arena.py prices it once the arena is laid out (memmove.bytes, as a ring slide's).
Per board, a profile holds an instructions-per-count coefficient for each (kernel class, count),
measured on the emulated boards by benchmarks/calibrate_latency.py (QEMU -icount: instructions,
so cycles = instructions) and stored in latency_profiles.json beside this file.
"""
from __future__ import annotations

import json
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..errors import MsfError
from ..model import ir
from ..model.ir import Model
from . import schemes
from .edge import Edge
from .geometry import layer_macs
from .kernel_counts import (FEATURES, WIDE_DSP, add, kernel_class,  # noqa: F401
                            spatial_counts, specialised, whole_counts, wide_pairs)

PROFILES = Path(__file__).with_name("latency_profiles.json")
DSP_CPUS = ("cortex-m4", "cortex-m7")      # __ARM_FEATURE_DSP: the kernels' SIMD paths


def edge_counts(model: Model, first: int, last: int, scheme: str = "h-cache",
                tile_rows: int = 1, wide: int = WIDE_DSP,
                group: int | None = None) -> dict[str, int]:
    """Feature counts of the edge first..last (a fusion block under `scheme`, H-cache tiles of
    `tile_rows` rows, channel groups of `group` channels) as the C executor runs it on a core
    whose lone pixels take `wide` channel pairs per block (kernel_counts.wide_pairs): its head
    layers, a single layer, or the block's spatial layers as its scheme counts them
    (schemes/)."""
    layers = model.layers
    end = spatial_end(model, first, last)
    counts = head_counts(model, end, last)
    if end < first:
        return counts
    # a whole-tensor op, or an upsampling layer as a single edge: one call of its kernel on
    # whole tensors (in a line-buffer block its column kernel runs per pixel, counted by the
    # scheme as any spatial layer's)
    if layers[first].op in ir.WHOLE_OPS or \
            (end == first and layers[first].op in ir.UPSAMPLE_OPS):
        return add(counts, whole_counts(layers[first]))
    stream = _streamed(model, first, last)
    if end == first:                                  # a single spatial layer
        layer = layers[first]
        oh, ow = layer.out_shape[:2]
        tile = oh if not (last > end or stream) else 1    # msf_run_edge's tile_rows
        return add(counts, spatial_counts(layer, layer_macs(layer), ow * (oh // tile),
                                          [tile] * (oh // tile), ow, True, wide,
                                          first in specialised(model)))
    e = Edge(first, last, 0, 0, scheme, {} if group is None else {"g": group}, tile_rows)
    return add(counts, schemes.get(scheme).counts(model, e, end, last > end or stream, wide))


def spatial_end(model: Model, first: int, last: int) -> int:
    """The last spatial layer of the edge first..last (first - 1: a head layer alone)."""
    end = last
    while end >= first and model.layers[end].op in ir.HEAD_OPS:
        end -= 1
    return end


def head_counts(model: Model, end: int, last: int) -> dict[str, int]:
    """The edge's own count and those of its head layers end+1..last (global pooling, dense)."""
    counts: dict[str, int] = {"edge.count": 1}
    for l in range(end + 1, last + 1):
        layer = model.layers[l]
        cls = kernel_class(layer)
        add(counts, {f"{cls}.macs": layer_macs(layer), f"{cls}.outputs": layer.cout})
    return counts


def _streamed(model: Model, first: int, last: int) -> bool:
    """The edge's last spatial layer goes a pixel (a streamed output) or a row per tile (a
    streamed input) at a time."""
    return (model.stream_output and last + 1 == model.n_layers) or \
        (model.stream_input and first == 0)


def count_table(model: Model, edges: list[Edge], wide: int = WIDE_DSP,
                step=None) -> np.ndarray:
    """edge_counts of every edge, one row each, a column per FEATURES. The blocks of two
    spatial layers or more that end at the same layer under the same scheme and tile height
    share their layers' counts (a layer's counts do not depend on where its block starts, but
    for the first layer reading the whole input and the last one staging a head's or stream's
    pixels): their rows are sums from the end. `step` (a progress task) advances by edge."""
    index = {f: k for k, f in enumerate(FEATURES)}

    def vector(counts: dict) -> np.ndarray:
        v = np.zeros(len(FEATURES), dtype=np.int64)
        for k, n in counts.items():
            v[index[k]] += n
        return v

    table = np.zeros((len(edges), len(FEATURES)), dtype=np.int64)
    families: dict[tuple, list[int]] = {}
    for k, e in enumerate(edges):
        end = spatial_end(model, e.first, e.last)
        scheme = schemes.get(e.scheme) if e.scheme in schemes.names() else None
        if end > e.first and hasattr(scheme, "layer_counts"):
            families.setdefault((end, e.scheme, e.tile_rows), []).append(k)
        else:
            table[k] = vector(edge_counts(model, e.first, e.last, e.scheme, e.tile_rows, wide,
                                          e.detail.get("g")))
            if step is not None:
                step.advance()
    lowest: dict[int, int] = {}       # per end, the lowest block start of any scheme
    for (end, _, _), ks in families.items():
        lowest[end] = min([lowest.get(end, end)] + [edges[k].first for k in ks])
    memo: dict = {}                   # what a scheme's layer_counts share (a column sweep)
    for (end, name, tile_rows), ks in families.items():
        of = schemes.get(name).layer_counts(model, end, lowest[end], tile_rows, wide, memo)
        rings = {l: vector(of(l, False, False)) for l in range(lowest[end] + 1, end)}
        inner = {end: np.zeros(len(FEATURES), dtype=np.int64)}   # layers l..end-1, rings
        for l in range(end - 1, lowest[end], -1):
            inner[l] = inner[l + 1] + rings[l]
        tails: dict[tuple, np.ndarray] = {}
        for k in ks:
            e = edges[k]
            staged = e.last > end or _streamed(model, e.first, e.last)
            if (staged, e.last) not in tails:
                tails[staged, e.last] = vector(of(end, False, staged)) + \
                    vector(head_counts(model, end, e.last))
            table[k] = vector(of(e.first, True, False)) + inner[e.first + 1] + \
                tails[staged, e.last]
        if step is not None:
            step.advance(len(ks))
    return table


@lru_cache(maxsize=None)
def _profiles() -> dict:
    if not PROFILES.is_file():
        return {}
    return json.loads(PROFILES.read_text())


def boards() -> list[str]:
    return sorted(_profiles())


class Coefficients(dict):
    """A board's instructions per count, whether its core takes the kernels' DSP paths, and
    its lone pixels' channel pairs per block (which changes the counts, not only their
    prices)."""
    dsp = False
    wide = WIDE_DSP


def profile(board: str) -> Coefficients:
    profiles = _profiles()
    if board not in profiles:
        raise MsfError(f"no latency profile for board {board!r} (calibrated: "
                       f"{', '.join(boards()) or 'none'}; benchmarks/calibrate_latency.py)")
    coefficients = Coefficients(profiles[board]["coefficients"])
    coefficients.dsp = has_dsp(board)
    coefficients.wide = wide(board)
    return coefficients


def instructions(counts: dict[str, int], coefficients: dict[str, float]) -> float:
    return sum(coefficients.get(k, 0.0) * v for k, v in counts.items())


def edge_instructions(model: Model, edge: Edge, coefficients: dict[str, float]) -> float:
    return instructions(edge_counts(model, edge.first, edge.last, edge.scheme, edge.tile_rows,
                                    getattr(coefficients, "wide", WIDE_DSP),
                                    edge.detail.get("g")),
                        coefficients)


def edges_instructions(model: Model, edges: list[Edge], coefficients: dict[str, float],
                       step=None) -> np.ndarray:
    """edge_instructions of every edge (count_table: the blocks of a family share their
    layers' counts); `step` advances by edge. Summed feature by feature, so an edge's value
    does not depend on its row (a matrix product may add a row's terms in another order)."""
    table = count_table(model, edges, getattr(coefficients, "wide", WIDE_DSP), step)
    out = np.zeros(len(edges))
    for k, f in enumerate(FEATURES):
        if coefficients.get(f, 0.0):
            out += table[:, k] * coefficients[f]
    return out


def edges_exact(model: Model, edges: list[Edge], coefficients: dict[str, float],
                step=None) -> np.ndarray:
    """edge_instructions of every edge exactly, as integers of one unit (an object array of
    Python integers): a float coefficient is a binary fraction, so scaled by the largest
    denominator every coefficient is an integer, and so is every edge's and path's sum. Equal
    costs then compare equal whatever the order of their terms (floats would let two plans of
    the same counts go either way and skip the solver's tie rule)."""
    table = count_table(model, edges, getattr(coefficients, "wide", WIDE_DSP), step)
    ratios = {k: Fraction(coefficients[f]) for k, f in enumerate(FEATURES)
              if coefficients.get(f, 0.0)}
    unit = max((r.denominator for r in ratios.values()), default=1)
    out = np.zeros(len(edges), dtype=object)
    for k, r in ratios.items():
        out += table[:, k].astype(object) * int(r * unit)
    return out


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


def wide(board: str) -> int:
    """The channel pairs a lone pixel's block takes on the board's core (wide_pairs)."""
    return wide_pairs(has_dsp(board), _build(board).get("arch", ""))

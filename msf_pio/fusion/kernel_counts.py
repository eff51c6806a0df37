"""The counts the latency model prices, for one layer computing some pixels in some kernel calls.

The runtime's cost is linear in a few counts the exact cost model already knows for every layer
of an edge (latency.py explains them and prices them per board): MACs (for dense convolutions
of pixels in blocks of three, pairs and lone ones, a lone pixel's channels in wide blocks apart;
for a folded depthwise apart), output elements, a dense convolution's inner-loop set-ups and
expanded taps, a folded depthwise's pixels, padding taps and copied window rows, and kernel
calls, each as the kernel instance the layer runs (its shape's specialised kernel or the one for
any shape: specialised()); a channel split's projection into int32 sums (sums_counts); and the
work of the kernels the schedule calls on whole tensors (whole_counts). Each cache scheme
(schemes/) says which calls its executor makes of which layers; this module turns a layer's
calls into counts. Counts that depend on the core take `wide`: the channel pairs a lone pixel's
block takes per input load there (MSF_WIDE_PAIRS of mac_s8.h: wide_pairs()).
"""
from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache

import numpy as np

from ..model import ir
from .geometry import layer_macs

CONV_BUFFER = 1024     # int16 taps of a conv2d / dense stack buffer at most (MSF_CONV_BUFFER)
CHUNK_TAPS = 256       # a conv column's chunk of input rows: past 3 pixels, at most this many taps
DW_WINDOW = 2304       # bytes of a clipped 3x3 window a folded depthwise layer may copy
CHANNEL_CHUNK = 16     # output channels a window gathered in parts keeps (MSF_CHANNEL_CHUNK)
# specialised kernels per kind (conv2d, folded depthwise) at most, which codegen/specialise.py
# emits: about 0.1 s of compile each, so compile time stays bounded whatever the code budget.
# The other layers run the kernel for any shape (conv: pixels in pairs, no blocks of three),
# which the counts below follow.
LIMIT = 12
# The code budget of the specialised kernels (Model.code_budget; None: DEFAULT_BUDGET): the
# shapes are taken by the instructions they save per byte of code, best first, while the
# instances fit the budget. An instance counts at the largest code size measured for its kind
# over the three instruction sets (codegen/flash.py's estimate takes the same; the linked
# instances are 1.0-3.5 KB); the instructions saved are the latency counts of the layer's
# generic and specialised runs (as a vanilla plan runs it) priced per count at SAVED, the
# Cortex-M4 profile's coefficients (qemu_f412zg) of the counts that differ. The counts are taken
# as they were when SAVED was measured: one channel pair per lone pixel's block (SAVED_WIDE), its
# wide blocks' MACs priced as lone ones, blocks of three over near windows as any triple's.
INSTANCE_BYTES = {"conv": 3488, "depthwise": 2527}
SAVED = {"conv1x1.macs_triple": 0.7855, "conv1x1.macs_pair": 1.3131,
         "conv1x1.macs_single": 1.3539, "conv1x1.blocks": 73.3354,
         "conv.macs_triple": 1.0025, "conv.macs_pair": 1.5341, "conv.macs_single": 1.5341,
         "conv.blocks": 71.1652, "depthwise.outputs_any": 13.1195}
SAVED.update({"conv1x1.macs_wide": SAVED["conv1x1.macs_single"],
              "conv.macs_wide": SAVED["conv.macs_single"],
              "conv.macs_near": SAVED["conv.macs_triple"]})
SAVED_WIDE = 1
# the smallest whole KiB that keeps every shape of the four MLPerf Tiny files (VWW: 39,578 B)
DEFAULT_BUDGET = 39 * 1024

# feature names: <kernel class>.<count>
FEATURES = (
    "conv1x1.macs_triple", "conv1x1.macs_pair", "conv1x1.macs_single", "conv1x1.macs_wide",
    "conv1x1.outputs", "conv1x1.blocks", "conv1x1.taps", "conv1x1.pad_taps",
    "conv1x1.pixel_blocks",
    "conv.macs_triple", "conv.macs_near", "conv.macs_pair", "conv.macs_single", "conv.macs_wide",
    "conv.outputs", "conv.blocks", "conv.taps", "conv.pad_taps", "conv.parts",
    "conv.pixel_blocks",
    "sums.macs_pair", "sums.macs_single", "sums.outputs", "split.calls",
    "depthwise.macs", "depthwise.rest_macs", "depthwise.macs_folded", "depthwise.pad_taps",
    "depthwise.copies",
    "depthwise.outputs", "depthwise.outputs_any", "depthwise.pixels", "depthwise.copy_rows",
    "add.outputs", "mul.outputs", "hard_swish.outputs", "logistic.outputs", "softmax.outputs",
    "max_pool.macs", "max_pool.outputs", "avg_pool.macs", "avg_pool.outputs",
    "global_avgpool.macs", "global_avgpool.outputs", "dense.macs", "dense.outputs", "calls",
    "edge.count",
    "transpose_conv.macs", "transpose_conv.taps", "transpose_conv.outputs",
    "transpose_conv.pixels", "transpose_conv.calls", "resize.pixels", "resize.outputs",
    "resize.calls", "copy.bytes", "ring.slides", "ring.row_calls",
    # memmove's bytes: a line buffer's ring slides, and the arena's compaction between edges
    # (codegen/arena.py: per plan, once the arena is laid out)
    "memmove.bytes",
)
# channel pairs a lone pixel's block takes per input load (mac_s8.h, MSF_WIDE_PAIRS): two with
# the DSP extension (its 14 registers) and on Xtensa (16), three on RV32 (32)
WIDE_DSP, WIDE_RV32 = 2, 3


def wide_pairs(dsp: bool, arch: str) -> int:
    """MSF_WIDE_PAIRS of a core: with (`dsp`) or without the DSP extension, its `arch`."""
    return WIDE_DSP if dsp or arch == "xtensa" else WIDE_RV32


def kernel_class(layer) -> str:
    if layer.op == ir.CONV:
        return "conv1x1" if layer.kernel == (1, 1) else "conv"
    if layer.op in (ir.HARD_SWISH, ir.LOGISTIC, ir.SOFTMAX, ir.MUL):
        return layer.op          # fixed-point math per value, each its own price
    if layer.op in ir.PIXEL_OPS or layer.op == ir.CONCAT:
        return "add"     # uncalibrated: priced as the other MAC-free per-value kernel
    if layer.op == ir.TRANSPOSE_CONV:
        return "transpose_conv"
    if layer.op == ir.RESIZE_NEAREST:
        return "resize"
    # max and average pools apart: an average divides per output (slow on some cores)
    return {ir.DEPTHWISE: "depthwise", ir.ADD: "add", ir.MAX_POOL: "max_pool",
            ir.AVG_POOL: "avg_pool", ir.GLOBAL_AVGPOOL: "global_avgpool",
            ir.DENSE: "dense"}[layer.op]


def special_key(layer: ir.Layer):
    """What a layer's kernel is specialised to, but the requantization mode and clamp (conv2d:
    window, input channels, strides, left padding, output parity; depthwise: its channels)."""
    if layer.op == ir.CONV:
        return ("conv", *layer.kernel, layer.cin, *layer.stride, layer.pad_left,
                layer.cout % 2)
    return ("depthwise", layer.cin) if layer.op == ir.DEPTHWISE else None


def specialised(model, budget: float | None = None) -> frozenset:
    """The layers (indices) whose kernels the generator specialises: the shapes chosen by
    choose() under `budget` bytes (None: the model's code_budget, else DEFAULT_BUDGET)."""
    budget = code_budget(model, budget)
    shapes = tuple((special_key(l), l.kernel, l.stride, l.in_shape, l.out_shape)
                   for l in model.layers)
    if _memo.get("key") != (budget, shapes):     # the planner asks per edge: choose once
        keys = set(choose(model, budget))
        _memo.update(key=(budget, shapes), layers=frozenset(
            i for i, layer in enumerate(model.layers) if special_key(layer) in keys))
    return _memo["layers"]


_memo: dict = {}


def code_budget(model, budget: float | None = None) -> int | None:
    """The budget in force: `budget`, else the model's code_budget, else DEFAULT_BUDGET (None:
    unlimited)."""
    if budget is None:
        budget = getattr(model, "code_budget", None)
    if budget is None:
        budget = DEFAULT_BUDGET
    return None if math.isinf(budget) else int(budget)


def choose(model, budget: float | None = None) -> list:
    """The special_keys whose kernels the generator instantiates, best first: of the shapes
    that gain anything (a conv2d whose windows fit the buffer, a 3x3 depthwise that may fold:
    codegen/generate.py), ranked by instructions saved per byte of code, the longest prefix
    whose instances fit the budget (so a larger budget keeps a superset), at most LIMIT per
    kind."""
    budget = code_budget(model, budget)
    budget = math.inf if budget is None else budget
    saved = saved_instructions(model)
    ranked = sorted(saved, key=lambda k: (-saved[k] / INSTANCE_BYTES[k[0]], k))
    keep, used, per_kind = [], 0, Counter()
    for key in ranked:
        if used + INSTANCE_BYTES[key[0]] > budget:
            break
        if per_kind[key[0]] < LIMIT:
            keep.append(key)
            used += INSTANCE_BYTES[key[0]]
            per_kind[key[0]] += 1
    return keep


def budget_used(model, budget: float | None = None) -> int:
    """Bytes of the code budget the chosen instances take (INSTANCE_BYTES each)."""
    return sum(INSTANCE_BYTES[k[0]] for k in choose(model, budget))


def saved_instructions(model) -> dict:
    """Per special_key with anything to gain, the instructions its kernel saves per inference
    over the kernel for any shape: each layer of the shape run whole (a vanilla plan's calls),
    its counts both ways priced at SAVED."""
    saved: dict = {}
    for layer in model.layers:
        key = special_key(layer)
        if key is None or (key[0] == "conv" and not conv_fits(layer)) or \
                (key[0] == "depthwise" and not may_fold(layer)):
            continue
        oh, ow = layer.out_shape[:2]
        macs = layer_macs(layer)
        if not macs:
            continue
        runs = [spatial_counts(layer, macs, ow, [oh], ow, True, SAVED_WIDE, special)
                for special in (False, True)]
        gain = sum(SAVED.get(f, 0.0) * (runs[0].get(f, 0) - runs[1].get(f, 0))
                   for f in set(runs[0]) | set(runs[1]))
        if gain > 0:
            saved[key] = saved.get(key, 0.0) + gain
    return saved


# -- the conv kernel's chunks (library/src/kernels/conv2d_s8.h) ---------------------------------
# overlapping windows of pixels up to this many taps apart (a stride of kernel rows): a specialised
# kernel's three pixels read the same taps a few groups apart, which GCC -O3's predictive
# commoning kept in registers across groups and spilled on RV32 (a 3x3 stride-1 conv over 8
# input channels, 24 taps apart: 5.3 instructions per MAC on qemu_esp32c3). The kernels are built
# without it since (msf/requant.h's MSF_KERNEL_SPEED); the count stays apart, and every core's
# coefficient now prices it as any triple's (qemu_esp32c3 2.91 against 2.95 per MAC)
COMMONED_ROW = 32


def conv_row(kw: int, cin: int, sh: int) -> int:
    """Taps of a filter's kernel row: kw * cin, and a zero when a stride of sh rows would
    start a window on an odd tap (the kernels read windows a word at a time; msf_conv_row)."""
    return kw * cin + (kw * cin * sh) % 2


def conv_fits(layer) -> bool:
    """Whether a conv2d layer's two pixels' window rows fit the buffer (conv2d_s8.h): else its
    kernel gathers each pixel's window in parts (conv2d_s8.c)."""
    (kh, kw), sh = layer.kernel, layer.stride[0]
    return (kh + sh) * conv_row(kw, layer.cin, sh) <= CONV_BUFFER - 4


def conv_chunk(layer) -> int:
    """Output pixels per chunk of a conv column whose windows fit: three (one inner-loop block),
    more while windows overlap and the chunk's input rows stay within CHUNK_TAPS taps, at most
    out_h; past three a multiple of three. The chunk's input rows with 4 taps of slack are the
    kernel's stack buffer (codegen/kernel_data.scratch_bytes)."""
    (kh, kw), sh = layer.kernel, layer.stride[0]
    row = conv_row(kw, layer.cin, sh)
    most = ((CONV_BUFFER - 4) // row - kh) // sh + 1          # pixels the buffer holds at most
    p = min(3, most)
    while kh > sh and p + 3 <= most and ((p + 2) * sh + kh) * row + 4 <= CHUNK_TAPS:
        p += 3
    p = max(1, min(p, layer.out_shape[0]))
    return p - p % 3 if p > 3 else p          # the kernel's chunks: whole blocks past three


def kernel_chunk(layer, special: bool) -> int:
    """Output pixels per chunk as a kernel instance runs them (msf_conv2d_chunks: from the
    buffer's bytes, which hold conv_chunk pixels' rows, a multiple of its step past it: three
    in a specialised kernel, two in the kernel for any shape)."""
    p, step = conv_chunk(layer), 3 if special else 2
    return p - p % step if p > step else p


def may_fold(layer) -> bool:
    """Whether a depthwise layer's shape allows the folded 3x3 kernel (whether it folds also
    depends on its weights: codegen/kernel_data.folds)."""
    c = layer.cin
    return (layer.op == ir.DEPTHWISE and tuple(layer.kernel) == (3, 3) and c % 4 == 0 and
            9 * c <= DW_WINDOW)


def conv_calls(layer, rows_per_call: list[int], special: bool = True) -> dict:
    """Per column, the conv kernel's pixels in blocks of three, pairs and lone pixels, its inner
    loop set-ups (blocks) and the taps it expands, over calls of the given rows: each call's
    rows in chunks (kernel_chunk), a chunk's input rows expanded once, its pixels three at a
    time (`special`: the layer's specialised kernel), then a pair or a lone one; a window that
    does not fit: pairs, gathered in parts."""
    (kh, kw), sh = layer.kernel, layer.stride[0]
    calls = Counter(rows_per_call)
    fits = conv_fits(layer)
    special = special and fits
    return _conv_calls(kh, kw * layer.cin, sh, fits, kernel_chunk(layer, special), special,
                       tuple(sorted(calls.items())))


@lru_cache(maxsize=4096)
def _conv_calls(kh: int, run: int, sh: int, fits: bool, p: int, special: bool,
                calls: tuple) -> dict:
    """conv_calls of a kernel row of `run` taps, for (rows, number of calls) pairs."""
    px = {3: 0, 2: 0, 1: 0}
    taps = 0
    for r, n in calls:
        chunks = [p] * (r // p) + ([r % p] if r % p else []) if fits else [r]
        for m in chunks:
            if fits:
                taps += ((m - 1) * sh + kh) * run * n
            if special:
                px[3] += m // 3 * 3 * n
                m %= 3
            px[2] += m // 2 * 2 * n
            px[1] += m % 2 * n
    return {"px": px, "blocks": px[3] // 3 + px[2] // 2 + px[1], "taps": taps}


def copied_columns(layer, cols: int, slots: int | None) -> int:
    """Of a folded 3x3 depthwise layer's output columns 0..cols-1, those whose windows its
    kernel copies (msf_dw3x3_line): clipped at the sides, or lying across the wrap of the column
    ring of `slots` columns it reads (None: a whole tensor, or rows of a line buffer)."""
    x0 = np.arange(cols) * layer.stride[1] - layer.pad_left
    kw = layer.kernel_w
    copied = (x0 < 0) | (x0 + kw > layer.in_shape[1])
    if slots:
        copied |= x0 % slots + kw > slots
    return int(copied.sum())


def lone_blocks(layer, wide: int) -> tuple[int, int]:
    """A lone pixel's inner-loop blocks and the output channels of its wide ones, for a conv
    layer on a core taking `wide` channel pairs per block (msf_conv_channels: wide blocks while
    2 wide channels are left, then pairs; a window gathered in parts: per chunk of
    CHANNEL_CHUNK channels, wide blocks while `wide` of its pairs are left, pairs_partial)."""
    cout = layer.cout
    if conv_fits(layer):
        rest = cout % (2 * wide)
        return cout // (2 * wide) + -(-rest // 2), cout - rest
    blocks = channels = 0
    for c0 in range(0, cout, CHANNEL_CHUNK):
        count = min(CHANNEL_CHUNK, cout - c0)
        pairs = -(-count // 2)
        blocks += pairs // wide + pairs % wide
        channels += min(count, pairs // wide * wide * 2)
    return blocks, channels


def spatial_counts(layer, macs: int, calls: int, rows_per_call: list[int], cols: int,
                   whole_input: bool, wide: int, special: bool = True,
                   slots: int | None = None, across: bool = False) -> dict:
    """Counts of a window layer or add computing `cols` columns for calls of the given rows;
    `whole_input`: it reads a whole tensor (else column rings of `slots` columns); `wide`: the
    core's channel pairs per lone pixel's block (wide_pairs()); `special`: the layer is among
    the specialised ones (specialised()); `across`: the calls run along rows (a line buffer's
    depthwise row: the folded kernel for any shape, its windows copied where clipped at the
    sides)."""
    cls = kernel_class(layer)
    pixels = sum(rows_per_call) * cols
    counts = {"calls": calls, f"{cls}.outputs": pixels * layer.cout}
    if cls in ("conv", "conv1x1") and pixels:
        work = conv_calls(layer, rows_per_call, special)
        unit = macs / pixels                      # MACs per pixel, as the layer's average
        px = work["px"]
        n_lone, ch_wide = lone_blocks(layer, wide)
        counts[f"{cls}.macs_triple"] = round(unit * px[3] * cols)
        (kh, kw), sh = layer.kernel, layer.stride[0]
        if kh > sh and sh * conv_row(kw, layer.cin, sh) <= COMMONED_ROW:   # windows overlap
            counts["conv.macs_near"] = counts.pop("conv.macs_triple")
        counts[f"{cls}.macs_pair"] = round(unit * px[2] * cols)
        counts[f"{cls}.macs_wide"] = round(unit * px[1] * cols * ch_wide / layer.cout)
        counts[f"{cls}.macs_single"] = macs - counts.get(f"{cls}.macs_triple", 0) - \
            counts.get("conv.macs_near", 0) - counts[f"{cls}.macs_pair"] - \
            counts[f"{cls}.macs_wide"]
        # a block: one inner loop's set-up, per pixel block and channel pair (a lone pixel:
        # its own blocks)
        counts[f"{cls}.blocks"] = ((work["blocks"] - px[1]) * -(-layer.cout // 2) +
                                   px[1] * n_lone) * cols
        counts[f"{cls}.taps"] = work["taps"] * cols
        # a pixel block's own set-up (pointers, chunk), whatever its output channels: weighs
        # most where they are few (MobileNetV2 x0.35's projections to 5 and 8 channels)
        counts[f"{cls}.pixel_blocks"] = work["blocks"] * cols
        # a filter's taps in whole groups of four (kernel rows padded to even lengths): the
        # inner loop's slots that are no MAC, at the sides of a window clipped by padding too
        filter_slots = -(-kh * conv_row(kw, layer.cin, sh) // 4) * 4
        counts[f"{cls}.pad_taps"] = pixels * layer.cout * filter_slots - macs
        if cls == "conv" and not conv_fits(layer):  # gathered per pixel pair and channel chunk
            counts["conv.parts"] = round(macs / layer.cout) * -(-layer.cout // CHANNEL_CHUNK)
    elif cls == "depthwise" and may_fold(layer):
        # every tap of every window read, padding ones too; a window clipped at the sides or
        # across a ring's wrap is copied row by row (msf_dw3x3_line: three slots, input row iy
        # in slot iy mod 3): down a column the next copied window copies only its new rows,
        # along a line buffer's row every copied window its three; the kernel for any shape
        # costs more per output
        counts["depthwise.macs_folded"] = macs
        counts["depthwise.pixels"] = pixels       # a pixel's pointers, whatever its channels
        counts["depthwise.pad_taps"] = max(0, 9 * layer.cin * pixels - macs)
        if across:
            share = copied_columns(layer, layer.out_shape[1], None) / layer.out_shape[1]
            rows = 3 * round(pixels * share)
        else:
            down = min(layer.stride[0], 3)
            rows = sum(3 + (r - 1) * down for r in rows_per_call if r) * \
                copied_columns(layer, cols, None if whole_input else slots)
        counts["depthwise.copies"] = 3 * layer.cin * rows      # bytes, and rows: each row's
        counts["depthwise.copy_rows"] = rows                   # place is looked up apart
        if across or not special:
            counts["depthwise.outputs_any"] = pixels * layer.cout
    elif cls == "depthwise":
        # a window layer's kernel for any shape: channels in groups of four (per chunk of
        # MSF_DW_CHUNK = 16), the cin % 4 left one at a time, a scalar loop (extra per MAC)
        counts["depthwise.macs"] = macs
        counts["depthwise.rest_macs"] = macs * (layer.cin % 4) // layer.cin
    elif cls == "resize":                         # a pixel's copy (line buffer: a call each)
        counts["resize.pixels"] = pixels
    elif cls == "transpose_conv":                 # as the whole-tensor kernel: whole_counts
        counts["transpose_conv.macs"] = macs
        counts["transpose_conv.taps"] = macs // layer.cin
        counts["transpose_conv.pixels"] = pixels
    elif cls not in ("add", "mul", "hard_swish", "logistic", "softmax"):
        counts[f"{cls}.macs"] = macs
    return counts


def sums_counts(layer, rows_per_call: list[int], cols: int) -> dict:
    """Counts of a channel split's projection (a 1x1 `layer` over one group's input channels)
    into int32 sums, for calls of the given rows at each of `cols` columns
    (msf_conv2d_sums_column: rows in pairs, then a lone one; input-stationary, so every output
    channel's sums are loaded and stored once per slice of the input channels, a cost per
    MAC). The sums' requantization is the block's (channel_split.counts: sums.outputs)."""
    unit = layer.cin * layer.cout
    pairs = sum(r // 2 * 2 for r in rows_per_call) * cols
    lone = sum(r % 2 for r in rows_per_call) * cols
    return {"calls": len(rows_per_call) * cols, "sums.macs_pair": pairs * unit,
            "sums.macs_single": lone * unit}


def whole_counts(layer) -> dict[str, int]:
    """Counts of a layer the generated schedule calls on whole tensors (ir.WHOLE_OPS,
    ir.UPSAMPLE_OPS), one call: a stream layer copies its input's rows after the kept ones and
    at the end of the run moves its last rows to the front (stream_s8.c), a crop moves its rows
    (crop_s8.c); a nearest resize copies every output pixel from the one its index tables pick
    (resize_nearest_s8.c); a transposed convolution gathers, per output pixel and channel, the
    taps landing on it (transpose_conv_s8.c: its MACs, a loop set-up per tap and channel, a
    requantization per output, its first taps found per pixel)."""
    h, w, c = layer.out_shape
    if layer.op == ir.STREAM:
        return {"calls": 2, "copy.bytes": (layer.in_shape[0] + layer.state_rows) * w * c}
    if layer.op == ir.CROP:
        return {"calls": 1, "copy.bytes": h * w * c}
    if layer.op == ir.RESIZE_NEAREST:
        return {"calls": 1, "resize.pixels": h * w, "resize.outputs": h * w * c}
    macs = layer_macs(layer)
    return {"calls": 1, "transpose_conv.macs": macs, "transpose_conv.taps": macs // layer.cin,
            "transpose_conv.outputs": h * w * c, "transpose_conv.pixels": h * w}


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

"""The constant data of the C kernels, laid out the way their inner loops read it.

conv2d and dense weights: output channels in pairs, each pair's two filters interleaved four
taps at a time along the window (kernel row, then kernel column and input channel, each kernel
row padded to an even number of taps where the row stride is odd: conv_row), zero-padded to a multiple of four taps and to an even
number of channels, a group's bytes in the order SXTB16 splits into tap pairs: an inner loop
loads one word of each filter of the pair together (library/src/kernels/mac_s8.h). depthwise weights: channels in
groups of four, each group's taps one after the other, a tap's four weights as int16 in the lane
order of the Cortex-M SXTB16 split of an input word (channels 0, 2, then 1, 3), zero-padded to
a multiple of four channels (library/src/kernels/depthwise_conv2d_s8.c).

Per output channel a record {bias, mult, round, shift, right} (msf_channel_t in msf/requant.h).
A layer whose every channel allows it is requantized the fast way (MSF_RQ_FAST): with its
accumulators below 2^30 and its exponents negative, TFLite's
    clamp(rounding_shift(srdhm(acc, mult), right) + zero_point)
is (smmulr(2 acc, mult) + round + [acc < 0]) >> right with round = 2^(right-1) +
zero_point * 2^right (fast_output below; the sign of acc stands for the sign of the high
product, which only differs when that product is 0, where both round alike). A channel whose
weights are all zero has the constant output of its bias, which its record then gives with
mult 0. conv2d and dense layers then double their inputs as they expand them (but a dense
layer of at most half as many outputs as inputs), a folded depthwise its weights, and the bias
is stored doubled (MSF_RQ_FAST2): the accumulator arrives as the 2 acc the high product takes.
Other layers keep TFLite's steps (MSF_RQ_NARROW when the accumulators allow SMMULR, else
MSF_RQ_EXACT).
"""
from __future__ import annotations

import numpy as np

from .. import numerics
from ..fusion.kernel_counts import (CONV_BUFFER, DW_WINDOW, conv_chunk, conv_fits,  # noqa: F401
                                    conv_row, may_fold)
from ..model import ir

GROUP = 4                       # taps per word
RQ_EXACT, RQ_NARROW, RQ_FAST, RQ_FAST2 = 0, 1, 2, 3     # enum msf_requant in msf/requant.h
CHANNEL = np.dtype([("bias", "<i4"), ("mult", "<i4"), ("round", "<i4"), ("shift", "<i2"),
                    ("right", "<i2")])


def padded(n: int, m: int) -> int:
    return -(-n // m) * m


def conv_weights(w: np.ndarray, sh: int = 1) -> np.ndarray:
    """(cout, kh, kw, cin) or (cout, n) int8 -> the pair-interleaved layout (flat int8): each
    filter's kernel rows of conv_row taps, the filter padded to whole groups of four taps whose
    bytes hold taps 0, 2, 1, 3 (SXTB16 splits them into (0, 1) and (2, 3)), an odd last
    channel paired with zeros."""
    cout = w.shape[0]
    rows = w.reshape(cout, w.shape[1] if w.ndim == 4 else 1, -1)
    run = conv_row(rows.shape[2], 1, sh)
    taps = np.zeros((cout, rows.shape[1], run), np.int8)
    taps[:, :, :rows.shape[2]] = rows
    taps = taps.reshape(cout, -1)
    n4 = padded(taps.shape[1], GROUP) // GROUP
    out = np.zeros((padded(cout, 2), n4, GROUP), np.int8)
    out[:cout].reshape(cout, -1)[:, :taps.shape[1]] = taps
    out = out[..., [0, 2, 1, 3]]
    return out.reshape(-1, 2, n4, GROUP).transpose(0, 2, 1, 3).reshape(-1)


def depthwise_weights(w: np.ndarray) -> np.ndarray:
    """(1, kh, kw, c) int8 -> groups of four channels, taps in order, lanes (0, 2, 1, 3),
    int16."""
    c = w.shape[-1]
    taps = w.reshape(-1, c)
    out = np.zeros((len(taps), padded(c, GROUP)), np.int16)     # (doubled weights: int16)
    out[:, :c] = taps
    return out.reshape(len(taps), -1, GROUP)[..., [0, 2, 1, 3]].transpose(1, 0, 2).reshape(-1)


def fast_output(acc, mult, round_, right):
    """MSF_RQ_FAST's output (before the activation clamp) of int64 accumulators: the C
    kernels' arithmetic, checked against TFLite's steps by tests/test_kernel_data.py."""
    acc = np.asarray(acc, np.int64)
    x = (2 * acc * np.asarray(mult, np.int64) + (1 << 31)) >> 32
    return (x + round_ + (acc < 0) * -1) >> right


def channels(layer: ir.Layer, rq: numerics.ChannelRequant,
             fast: bool = True) -> tuple[np.ndarray, int]:
    """The per-channel records of a conv2d / depthwise / dense layer and its requant mode
    (fast=False: TFLite's steps even where the fast way applies)."""
    w = layer.weights.w
    cout = layer.cout
    per_channel = w.reshape(-1, cout) if layer.op == ir.DEPTHWISE else w.reshape(cout, -1).T
    dead = ~per_channel.any(axis=0)             # all-zero filters: the output is the bias'
    bound = numerics.accumulator_bound(layer, rq.input_offset)
    mult = np.asarray(rq.multiplier, np.int64)
    shift = np.asarray(rq.shift, np.int64)
    bias = layer.weights.bias.astype(np.int64)
    right = np.maximum(-shift, 0)
    constant = np.clip(numerics.multiply_by_quantized_multiplier(bias, mult, shift) + rq.output_offset,
                       rq.act_min, rq.act_max)
    round_ = (np.int64(1) << np.maximum(right - 1, 0)) + (rq.output_offset << right)
    # |x| < bound: the high product of 2 acc and a multiplier below 2^31 is at most |acc|
    fits = (shift < 0) & (right <= 30) & (bound < 1 << 30) & \
        (bound + np.abs(round_) + 1 < 1 << 31)
    fast = fast and bool(np.all(fits | dead))
    records = np.zeros(padded(cout, 2), CHANNEL)     # pairs: the last one padded
    records["bias"][:cout], records["mult"][:cout], records["shift"][:cout] = bias, mult, shift
    if fast:
        live = records[:cout]
        live["right"] = np.where(dead, 1, right)
        live["round"] = np.where(dead, 2 * constant, round_)
        live["mult"] = np.where(dead, 0, mult)
        live["bias"] = np.where(dead, 0, bias)
        return records, RQ_FAST
    return records, RQ_NARROW if rq.narrow else RQ_EXACT


def scratch_bytes(layer: ir.Layer, folded: bool) -> int:
    """Bytes of the stack buffer the kernel of a conv2d, dense or folded depthwise layer takes
    (msf_layer_t.scratch, a variable-length array in C; codegen/stack.py bounds the stack with
    it). conv2d: the input rows of a chunk of output pixels (kernel_counts.conv_chunk) with 4
    taps of slack, as int16; a window too long for two pixels: MSF_CONV_BUFFER, gathered in
    parts. dense: the input (or a part) and a group's padding. Folded depthwise: one 3x3 window
    of the channels. Small shapes, small frames: on a core without DSP as on one with it."""
    if layer.op == ir.DEPTHWISE:
        return 9 * padded(layer.cin, GROUP) if folded else 0
    if layer.op == ir.DENSE:
        n = int(np.prod(layer.in_shape))
        return 2 * (min(conv_row(1, n, 1), CONV_BUFFER - 4) + 4)
    if layer.op != ir.CONV:
        return 0
    if not conv_fits(layer):
        return 2 * CONV_BUFFER
    (kh, kw), sh = layer.kernel, layer.stride[0]
    return padded(2 * (((conv_chunk(layer) - 1) * sh + kh) * conv_row(kw, layer.cin, sh) + 4), 4)


def folds(layer: ir.Layer, rq: numerics.ChannelRequant, mode: int) -> bool:
    """Whether a depthwise layer takes the kernel's fast 3x3 path (msf_layer_t.folded): every
    window read whole (a clipped one copied with its outside taps as the input zero point), so
    that the input offset folds into the bias: acc = bias + offset * sum(w) + sum(x * w); the
    weights and bias doubled, so that the requantization needs no doubling of its own. Its
    partial sums stay within twice the accumulator bound, doubled: below 2^31."""
    return (may_fold(layer) and mode == RQ_FAST and
            bool(np.all(numerics.accumulator_bound(layer, rq.input_offset) < 1 << 29)))


def flash_bytes(layer: ir.Layer) -> int:
    """Bytes of a conv2d, depthwise, dense or transposed conv layer's weights and channel
    records as layer_data lays them out, from the shapes alone (a float model needs no
    quantization for it): the layout functions run on zeros of the weights' shape."""
    (ih, iw, ic), (_, _, oc) = layer.in_shape, layer.out_shape
    kh, kw = layer.kernel
    records = padded(oc, 2) * CHANNEL.itemsize
    if layer.op == ir.TRANSPOSE_CONV:
        return oc * kh * kw * ic + records
    if layer.op == ir.DEPTHWISE:
        return depthwise_weights(np.zeros((1, kh, kw, oc), np.int8)).nbytes + records
    shape = (oc, ih * iw * ic) if layer.op == ir.DENSE else (oc, kh, kw, ic)
    return conv_weights(np.zeros(shape, np.int8), layer.stride[0]).nbytes + records


def layer_data(layer: ir.Layer, rq: numerics.ChannelRequant, fast: bool = True) -> dict:
    """Weights (int8 or int16 array), channel records, requant mode, the depthwise `folded`
    flag and the kernel's stack buffer bytes of a conv2d, depthwise or dense layer, as the C
    kernels read them (fast=False: TFLite's requantization steps, nothing folded)."""
    if layer.op == ir.TRANSPOSE_CONV:           # its own kernel: OHWI, TFLite's steps
        records, mode = channels(layer, rq, fast=False)
        return {"weights": layer.weights.w.reshape(-1), "channels": records, "requant": mode,
                "folded": 0, "scratch": 0}
    records, mode = channels(layer, rq, fast)
    w = layer.weights.w
    folded = folds(layer, rq, mode)
    live = records[:layer.cout]
    if folded:
        sums = w.reshape(-1, layer.cout).astype(np.int64).sum(axis=0)
        live["bias"] = live["bias"].astype(np.int64) + rq.input_offset * sums * \
            (live["mult"] != 0)                      # a dead channel keeps its 0
        w = 2 * w.astype(np.int16)
    few = layer.op == ir.DENSE and 2 * layer.cout <= np.prod(layer.in_shape)
    if mode == RQ_FAST and (folded or layer.op != ir.DEPTHWISE) and not few:
        # conv2d and dense double their inputs, a folded depthwise its weights (a dense layer
        # of at most half as many outputs as inputs doubles its outputs: an instruction each,
        # against half of one per input)
        live["bias"] = 2 * live["bias"].astype(np.int64)
        mode = RQ_FAST2
    weights = depthwise_weights(w) if layer.op == ir.DEPTHWISE else conv_weights(w, layer.stride[0])
    return {"weights": weights, "channels": records, "requant": mode, "folded": int(folded),
            "scratch": scratch_bytes(layer, folded)}

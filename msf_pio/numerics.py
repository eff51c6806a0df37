"""TFLite int8 integer arithmetic: the one place where the project defines it in Python.

The numpy reference executor, the .tflite exporter and the C code generator all take their
multipliers, shifts, offsets and clamps from here, so the oracle, the TFLM check and the
generated firmware compute with the same integers (docs/design.md, numerics). Scales are rounded to
float32 first because that is how a .tflite stores them and how TFLM derives its multipliers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import ir
from .model.ir import Layer, Model, QParams

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
ADD_LEFT_SHIFT = 20   # TFLite's int8 ADD headroom: inputs are shifted up before rescaling


def f32(value) -> np.ndarray:
    """A scale as a .tflite stores it (float32), widened back to float64 for the arithmetic."""
    return np.asarray(value, dtype=np.float32).astype(np.float64)


# -- multipliers --------------------------------------------------------------------------
def quantize_multiplier(real) -> tuple[np.ndarray, np.ndarray]:
    """Real multiplier(s) -> (Q31 multiplier, power-of-two shift), as TFLite's QuantizeMultiplier.

    real = multiplier * 2**(shift - 31); rounding is half away from zero, a mantissa that rounds
    up to 2**31 is halved, and multipliers below 2**-31 become zero.
    """
    real = np.asarray(real, dtype=np.float64)
    mantissa, shift = np.frexp(real)
    fixed = (np.sign(mantissa) * np.floor(np.abs(mantissa) * (1 << 31) + 0.5)).astype(np.int64)
    carry = fixed == (1 << 31)
    fixed = np.where(carry, fixed // 2, fixed)
    shift = shift.astype(np.int64) + carry
    tiny = shift < -31
    return np.where(tiny, 0, fixed), np.where(tiny, 0, shift)


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """High 32 bits of 2*a*b, rounded to nearest (ties away from zero), INT32_MIN^2 saturated."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudged = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.sign(nudged) * (np.abs(nudged) >> 31)          # C division truncates toward zero
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, high)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """x / 2**exponent rounded to nearest, ties away from zero (gemmlowp's RoundingDivideByPOT)."""
    x = np.asarray(x, dtype=np.int64)
    exponent = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def multiply_by_quantized_multiplier(x, multiplier, shift) -> np.ndarray:
    """TFLite's double-rounding requantization: left shift, doubling high multiply, right shift."""
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    scaled = np.asarray(x, dtype=np.int64) * (np.int64(1) << left)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(scaled, multiplier), right)


def multiply_by_quantized_multiplier_smaller_than_one(x, multiplier, shift) -> np.ndarray:
    """The ADD kernel's variant for multipliers below one (shift <= 0): no left shift."""
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, multiplier),
                                  -np.asarray(shift, dtype=np.int64))


def activation_range(act: str, q: QParams) -> tuple[int, int]:
    """Clamp bounds of a fused activation in the output's int8 domain, as TFLite's
    CalculateActivationRangeQuantized: 0 and 6 quantized in float32, rounded half away."""
    def quantize(real: float) -> int:
        ratio = float(np.float32(real) / np.float32(q.scale))
        return q.zero_point + int(np.sign(ratio) * np.floor(abs(ratio) + 0.5))

    if act == "none":
        return INT8_MIN, INT8_MAX
    if act == "relu":
        return max(INT8_MIN, quantize(0.0)), INT8_MAX
    if act == "relu6":
        return max(INT8_MIN, quantize(0.0)), min(INT8_MAX, quantize(6.0))
    if act == "relu_0_to_1":
        return max(INT8_MIN, quantize(0.0)), min(INT8_MAX, quantize(1.0))
    if act == "relu_n1_to_1":
        return max(INT8_MIN, quantize(-1.0)), min(INT8_MAX, quantize(1.0))
    raise ValueError(f"unknown activation {act!r}")


def rounded_average(total, count) -> np.ndarray:
    """Sum of int8 values / count, rounded half away from zero (TFLite's AVERAGE_POOL_2D)."""
    total = np.asarray(total, dtype=np.int64)
    count = np.asarray(count, dtype=np.int64)
    half = count // 2
    return np.where(total > 0, (total + half) // count, -((half - total) // count))


# -- upsampling geometry ------------------------------------------------------------------
def nearest_index(in_len: int, out_len: int, align_corners: bool = False,
                  half_pixel: bool = False) -> np.ndarray:
    """The input position of every output position of a nearest-neighbour resize along one
    axis, in TFLite's float32 arithmetic (GetNearestNeighbor: floor, or round half away from
    zero with align_corners, of (i + 0.5 with half_pixel) x in / out, clipped to the input)."""
    one = np.float32
    if align_corners and out_len > 1:
        scale = one(in_len - 1) / one(out_len - 1)
    else:
        scale = one(in_len) / one(out_len)
    pos = (np.arange(out_len, dtype=np.float32) + one(0.5 if half_pixel else 0.0)) * scale
    pos = pos.astype(np.float32)
    index = np.floor(pos)
    if align_corners:                  # std::round of a position >= 0: half away from zero
        index = index + (pos - index >= one(0.5))
    index = np.minimum(index.astype(np.int64), in_len - 1)
    return np.maximum(index, 0) if half_pixel else index


def transposed_scatter(x: np.ndarray, w: np.ndarray, stride: tuple[int, int],
                       pad: tuple[int, int], out_hw: tuple[int, int]) -> np.ndarray:
    """sum over taps of x (N, H, W, C_in) times OHWI weights w, input pixel (i, j) tap (ky, kx)
    added to output pixel (i sh - pad_top + ky, j sw - pad_left + kx) within out_hw: a
    transposed convolution's sums without bias, in x's dtype (float64 sums of int8 products
    stay exact far beyond a layer's size)."""
    n, h, wd, _ = x.shape
    cout, kh, kw, _ = w.shape
    (sh, sw), (top, left), (oh, ow) = stride, pad, out_hw
    out = np.zeros((n, oh, ow, cout), x.dtype)
    if h == 0 or wd == 0:
        return out
    full = np.zeros((n, (h - 1) * sh + kh, (wd - 1) * sw + kw, cout), x.dtype)
    for ky in range(kh):
        for kx in range(kw):
            full[:, ky:ky + (h - 1) * sh + 1:sh, kx:kx + (wd - 1) * sw + 1:sw] += \
                x @ w[:, ky, kx, :].T.astype(x.dtype)
    # full's row j is output row j - top (a negative pad: a region of a larger output)
    (r, y), (c, z) = (max(top, 0), max(-top, 0)), (max(left, 0), max(-left, 0))
    rows, cols = min(oh - y, full.shape[1] - r), min(ow - z, full.shape[2] - c)
    if rows > 0 and cols > 0:
        out[:, y:y + rows, z:z + cols] = full[:, r:r + rows, c:c + cols]
    return out


# -- per-layer requantization parameters --------------------------------------------------
@dataclass(frozen=True)
class ChannelRequant:
    """conv2d / depthwise / dense: acc = sum(w * (x + input_offset)) + bias, then per channel
    out = clamp(MBQM(acc, multiplier[c], shift[c]) + output_offset, act_min, act_max)."""
    input_offset: int
    output_offset: int
    multiplier: np.ndarray     # int64, one per output channel (per-tensor weights: repeated)
    shift: np.ndarray          # int64, one per output channel
    act_min: int
    act_max: int
    # every accumulator the layer can make, shifted left by its channel's max(shift, 0), lies
    # in (-2^30, 2^30): the doubling high multiply is then a rounding high multiply of twice
    # it, one instruction on Cortex-M (SMMULR) where a 64-bit rounding takes five
    narrow: bool = False


def accumulator_bound(layer: Layer, input_offset: int) -> np.ndarray:
    """Largest |accumulator| of each output channel of a conv2d / depthwise / dense / transposed
    conv layer over
    every int8 input: |bias| + max |x + input_offset| * sum |w| (padding taps add nothing)."""
    w = np.abs(layer.weights.w.astype(np.int64))
    per_channel = w.reshape(w.shape[0], -1).sum(axis=1) if layer.op != ir.DEPTHWISE \
        else w.reshape(-1, w.shape[-1]).sum(axis=0)
    x = max(abs(-128 + input_offset), abs(127 + input_offset))
    return np.abs(layer.weights.bias.astype(np.int64)) + x * per_channel


@dataclass(frozen=True)
class AddRequant:
    """Residual add: both inputs are offset, shifted up by `left_shift`, rescaled to a common
    scale, summed, and the sum rescaled to the output (TFLite's int8 ADD)."""
    input1_offset: int
    input2_offset: int
    output_offset: int
    left_shift: int
    input1_multiplier: int
    input1_shift: int
    input2_multiplier: int
    input2_shift: int
    output_multiplier: int
    output_shift: int
    act_min: int
    act_max: int


@dataclass(frozen=True)
class MeanRequant:
    """Global average pooling that requantizes (TFLite MEAN over H, W): with n = H*W,
    out = clamp(MBQM(sum + n * input_offset, multiplier, shift) + output_offset); the
    multiplier folds 1/n into s_in/s_out (see mean_requant)."""
    input_offset: int
    output_offset: int
    multiplier: np.ndarray     # int64, one value
    shift: np.ndarray          # int64, one value
    act_min: int
    act_max: int


def mean_requant(s_in: float, s_out: float, n: int) -> tuple[int, int]:
    """TFLite MEAN's (multiplier, shift) for the sum of n values: QuantizeMultiplier(s_in/s_out),
    then the multiplier scaled by 2**k / n (int64, truncated) and the shift lowered by k, with
    k = floor(log2 n) clamped to 32 and to 31 + shift (so the final shift stays >= -31)."""
    multiplier, shift = (int(v) for v in quantize_multiplier(f32(s_in) / f32(s_out)))
    k = min(n.bit_length() - 1, 32, 31 + shift)
    return (multiplier << k) // n, shift - k


@dataclass(frozen=True)
class SoftmaxRequant:
    """TFLite int8 SOFTMAX over the channels (output 1/256, -128): per pixel the differences
    d = x - max(x) with d >= diff_min are scaled to Q5.26 by (multiplier, left_shift) and
    exponentiated in fixed point (reference/fixedpoint.py); the others give -128."""
    multiplier: int
    left_shift: int
    diff_min: int
    act_min: int = INT8_MIN
    act_max: int = INT8_MAX


SOFTMAX_DIFF_BITS = 5      # TFLite's kScaledDiffIntegerBits: exp's input is Q5.26
# More equal maxima than this overflow the Q12.19 sum's reciprocal exponent (TFLite aborts).
SOFTMAX_MAX_CHANNELS = 511
LOGISTIC_INPUT_BITS = 4    # TFLite's kInputIntegerBits for int8 LOGISTIC: Q4.27


def input_radius(integer_bits: int, left_shift: int) -> int:
    """TFLite's CalculateInputRadius (31 total bits): the largest |input| whose rescaled value
    still fits the fixed-point format."""
    return int(np.floor(((1 << integer_bits) - 1) * float(1 << (31 - integer_bits))
                        / float(1 << left_shift)))


def softmax_requant(s_in: float, beta: float) -> SoftmaxRequant:
    """TFLite's PreprocessSoftmaxScaling (double rounding): beta * s_in * 2**26, capped below
    2**31, as a multiplier above one."""
    real = min(float(f32(beta)) * float(f32(s_in)) * (1 << (31 - SOFTMAX_DIFF_BITS)),
               (1 << 31) - 1.0)
    multiplier, shift = (int(v) for v in quantize_multiplier(real))
    if shift < 0:
        raise ValueError(f"softmax input scale {s_in} x beta {beta} is too small for TFLite")
    return SoftmaxRequant(multiplier, shift, -input_radius(SOFTMAX_DIFF_BITS, shift))


@dataclass(frozen=True)
class ActivationRequant:
    """An element-wise activation (TFLite's int8 kernels):
    - hard_swish: multiplier1/shift1 = output multiplier (int16) and exponent, multiplier2/shift2
      = 'reluish' multiplier (int16) and exponent (HardSwishPrepare);
    - leaky_relu: multiplier1/shift1 = identity (s_in / s_out), multiplier2/shift2 = alpha;
    - prelu: multiplier1/shift1 = identity, multiplier2/shift2 = s_in * s_alpha / s_out, applied
      to (x + input_offset) * (alpha + alpha_offset), alpha the layer's int8 slopes per channel;
    - logistic: multiplier1/shift1 = input multiplier to Q4.27, limit = input range radius.
    input_offset is -zero_point of the input, output_offset the output's zero point."""
    input_offset: int
    output_offset: int
    multiplier1: int
    shift1: int
    multiplier2: int = 0
    shift2: int = 0
    limit: int = 0
    alpha_offset: int = 0
    act_min: int = INT8_MIN
    act_max: int = INT8_MAX


def _int16_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier then TFLite's DownScaleInt32ToInt16Multiplier (rounded, saturated)."""
    m32, shift = (int(v) for v in quantize_multiplier(real))
    m16 = 32767 if m32 >= INT32_MAX - (1 << 15) else (m32 + (1 << 15)) >> 16
    return m16, shift


def activation_requant(op: str, q_in: QParams, q_out: QParams, alpha: float = 0.0,
                       q_alpha: QParams | None = None) -> ActivationRequant:
    """Integer parameters of an element-wise activation, as TFLite Micro's Prepare derives them:
    double arithmetic on the float32 scales (TFLM's kernels widen before dividing; float32
    division gives other multipliers, and other bytes on ties)."""
    s_in, s_out = np.float32(q_in.scale), np.float32(q_out.scale)
    offsets = (-q_in.zero_point, q_out.zero_point)
    if op == ir.HARD_SWISH:
        hires = float(s_in) / 128.0
        m1, e1 = _int16_multiplier(hires / float(s_out))
        m2, e2 = _int16_multiplier(hires / (3.0 / 32768.0))
        if not -15 <= e1 <= 0 or not -15 <= e2 <= 15:
            raise ValueError(f"hard_swish scales {q_in.scale} -> {q_out.scale} are outside "
                             "TFLite's int16 fixed-point range")
        return ActivationRequant(*offsets, m1, e1, m2, e2)
    if op == ir.LEAKY_RELU:
        if not alpha >= 0:
            raise ValueError(f"leaky_relu alpha {alpha} must be >= 0")
        m1, e1 = quantize_multiplier(float(s_in) / float(s_out))
        m2, e2 = quantize_multiplier(float(s_in) * float(np.float32(alpha)) / float(s_out))
        return ActivationRequant(*offsets, int(m1), int(e1), int(m2), int(e2))
    if op == ir.PRELU:           # TFLM's CalculatePreluParams
        s_alpha = np.float32(q_alpha.scale)
        m1, e1 = quantize_multiplier(float(s_in) / float(s_out))
        m2, e2 = quantize_multiplier(float(s_in) * float(s_alpha) / float(s_out))
        return ActivationRequant(*offsets, int(m1), int(e1), int(m2), int(e2),
                                 alpha_offset=-q_alpha.zero_point)
    if op == ir.LOGISTIC:
        real = float(s_in) * float(1 << (31 - LOGISTIC_INPUT_BITS))
        m, shift = (int(v) for v in quantize_multiplier(real))
        if shift < 0:
            raise ValueError(f"logistic input scale {q_in.scale} is too small for TFLite")
        return ActivationRequant(*offsets, m, shift,
                                 limit=input_radius(LOGISTIC_INPUT_BITS, shift))
    raise ValueError(f"unknown activation op {op!r}")


@dataclass(frozen=True)
class MulRequant:
    """Element-wise product (TFLite's int8 MUL): out = clamp(MBQM((x + input1_offset) *
    (y + input2_offset), multiplier, shift) + output_offset), multiplier s1 s2 / s_out."""
    input1_offset: int
    input2_offset: int
    output_offset: int
    multiplier: int
    shift: int
    act_min: int
    act_max: int


@dataclass(frozen=True)
class PoolRequant:
    """Pools keep the input quantization: only the activation clamp remains."""
    act_min: int
    act_max: int


def requantization(model: Model, index: int) -> (ChannelRequant | AddRequant | MeanRequant |
                                                PoolRequant | SoftmaxRequant |
                                                ActivationRequant):
    """The integer parameters of layer `index`, derived from the model's scales."""
    layer = model.layers[index]
    q_in, q_out = model.tensor_q(model.input_of(index)), model.tensor_q(index + 1)
    if q_in is None or q_out is None:
        raise ValueError(f"layer {index} ({layer.name}): model is not quantized")
    act_min, act_max = activation_range(layer.act, q_out)
    if layer.op in (ir.CONV, ir.DEPTHWISE, ir.DENSE, ir.TRANSPOSE_CONV):
        if layer.weights is None:
            raise ValueError(f"layer {index} ({layer.name}): no weights")
        real = f32(q_in.scale) * f32(layer.weights.scales) / f32(q_out.scale)
        # one per output channel even for per-tensor weights (dense), so kernels index by channel
        multiplier, shift = quantize_multiplier(np.broadcast_to(real, (layer.cout,)))
        left = np.maximum(shift.astype(np.int64), 0)
        narrow = bool(np.all(accumulator_bound(layer, -q_in.zero_point) << left < 1 << 30))
        return ChannelRequant(-q_in.zero_point, q_out.zero_point, multiplier, shift,
                              act_min, act_max, narrow)
    if layer.op == ir.ADD:
        q_skip = model.tensor_q(layer.skip)
        s1, s2, so = f32(q_in.scale), f32(q_skip.scale), f32(q_out.scale)
        twice_max = 2.0 * max(s1, s2)
        m1, sh1 = quantize_multiplier(s1 / twice_max)
        m2, sh2 = quantize_multiplier(s2 / twice_max)
        mo, sho = quantize_multiplier(twice_max / ((1 << ADD_LEFT_SHIFT) * so))
        return AddRequant(-q_in.zero_point, -q_skip.zero_point, q_out.zero_point, ADD_LEFT_SHIFT,
                          int(m1), int(sh1), int(m2), int(sh2), int(mo), int(sho),
                          act_min, act_max)
    if layer.op == ir.GLOBAL_AVGPOOL and layer.requantize:
        h, w, _ = layer.in_shape
        multiplier, shift = mean_requant(q_in.scale, q_out.scale, h * w)
        return MeanRequant(-q_in.zero_point, q_out.zero_point, np.array([multiplier], np.int64),
                           np.array([shift], np.int64), act_min, act_max)
    if layer.op in ir.FIXED_OUTPUT_Q and q_out != ir.FIXED_OUTPUT_Q[layer.op]:
        raise ValueError(f"layer {index} ({layer.name}): TFLite's int8 {layer.op} outputs "
                         f"{ir.FIXED_OUTPUT_Q[layer.op]}, got {q_out}")
    if layer.op == ir.SOFTMAX:
        if layer.cin > SOFTMAX_MAX_CHANNELS:
            raise ValueError(f"layer {index} ({layer.name}): softmax over {layer.cin} channels "
                             f"(TFLite's int8 kernel takes at most {SOFTMAX_MAX_CHANNELS})")
        return softmax_requant(q_in.scale, layer.beta)
    if layer.op == ir.PRELU:
        shape = tuple(layer.in_shape) if layer.slope_per_pixel else (layer.cin,)
        if layer.weights is None or layer.weights.w.shape != shape:
            raise ValueError(f"layer {index} ({layer.name}): prelu needs slopes of shape "
                             f"{list(shape)}")
        return activation_requant(layer.op, q_in, q_out, q_alpha=QParams(
            float(layer.weights.scales[0]), int(layer.weights.zero_point)))
    if layer.op in ir.ELEMENTWISE_OPS:
        return activation_requant(layer.op, q_in, q_out, layer.alpha)
    if layer.op == ir.MUL:
        q_skip = model.tensor_q(layer.skip)
        m, sh = quantize_multiplier(f32(q_in.scale) * f32(q_skip.scale) / f32(q_out.scale))
        return MulRequant(-q_in.zero_point, -q_skip.zero_point, q_out.zero_point, int(m),
                          int(sh), act_min, act_max)
    if layer.op in (ir.SLICE, ir.CROP, ir.STREAM) and q_out != q_in:
        raise ValueError(f"layer {index} ({layer.name}): a {layer.op} keeps its input "
                         f"quantization, got {q_in} -> {q_out}")
    if layer.op in (ir.SLICE, ir.CROP, ir.STREAM):   # bytes moved (the state: as the input)
        return PoolRequant(act_min, act_max)
    if layer.op == ir.CONCAT:      # TFLite's int8 kernel copies: one quantization for all
        if not q_in == model.tensor_q(layer.skip) == q_out:
            raise ValueError(f"layer {index} ({layer.name}): TFLite's int8 concatenation needs "
                             f"its inputs and output quantized alike, got {q_in}, "
                             f"{model.tensor_q(layer.skip)} -> {q_out}")
        return PoolRequant(act_min, act_max)
    if layer.op in (ir.MAX_POOL, ir.AVG_POOL, ir.GLOBAL_AVGPOOL, ir.RESIZE_NEAREST):
        if q_out != q_in:
            raise ValueError(f"layer {index} ({layer.name}): a pool or resize keeps its input "
                             f"quantization, got {q_in} -> {q_out}")
        return PoolRequant(act_min, act_max)
    raise ValueError(f"layer {index}: unsupported op {layer.op!r}")

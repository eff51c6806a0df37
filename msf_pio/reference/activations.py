"""Pixel ops of the numpy reference with TFLite's int8 integer math: softmax over the channels
and the element-wise activations hard_swish, leaky_relu and logistic. Parameters come from
msf_pio.numerics; the C twins are library/src/kernels/softmax_s8.c and activation_s8.c."""
from __future__ import annotations

import numpy as np

from .. import numerics as nm
from ..model import ir
from . import fixedpoint as fp

SOFTMAX_SUM_BITS = 12          # TFLite's kAccumulationIntegerBits: the sum of exps is Q12.19


def softmax(rq: nm.SoftmaxRequant, x: np.ndarray) -> np.ndarray:
    """TFLite int8 SOFTMAX along the last axis; int64 values in [-128, 127]."""
    x = x.astype(np.int64)
    diff = x - x.max(axis=-1, keepdims=True)
    used = diff >= rq.diff_min
    scaled = fp.mul(np.where(used, diff, 0) << rq.left_shift, rq.multiplier)
    exps = fp.exp_on_negative_values(scaled, nm.SOFTMAX_DIFF_BITS)
    total = np.where(used, nm.rounding_divide_by_pot(exps, SOFTMAX_SUM_BITS), 0).sum(
        axis=-1, keepdims=True)
    scale, bits_over_unit = fp.reciprocal(total, SOFTMAX_SUM_BITS)
    out = nm.rounding_divide_by_pot(fp.mul(scale, exps), bits_over_unit + 31 - 8) + nm.INT8_MIN
    return np.where(used, np.clip(out, nm.INT8_MIN, nm.INT8_MAX), nm.INT8_MIN)


def _mul16(a, b, rounding: bool) -> np.ndarray:
    """int16 doubling high multiply: rounded to nearest (gemmlowp's SaturatingRoundingDoubling-
    HighMul) or toward zero (TFLite's SaturatingDoublingHighMul); -32768 squared saturates."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    if rounding:
        ab = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = np.sign(ab) * (np.abs(ab) >> 15)
    return np.where((a == -32768) & (b == -32768), 32767, high)


def _sat16(x) -> np.ndarray:
    return np.clip(x, -32768, 32767)


def hard_swish(rq: nm.ActivationRequant, x: np.ndarray) -> np.ndarray:
    """TFLite int8 HARD_SWISH: x * relu6(x + 3) / 6 in int16 fixed point."""
    hires = (x.astype(np.int64) + rq.input_offset) * 128
    preshift = _mul16(hires, rq.multiplier1, rounding=True)
    reluish = hires
    if rq.shift2 > 0:
        reluish = _sat16(reluish << (rq.shift2 - 1))
    reluish = _mul16(reluish, rq.multiplier2, rounding=True)
    if rq.shift2 > 0:
        reluish = _sat16(reluish << 1)
    elif rq.shift2 < 0:
        reluish = nm.rounding_divide_by_pot(reluish, -rq.shift2)
    reluish = (reluish + (1 << 15)) >> 1               # [-1, 1] -> [0, 1]
    out = nm.rounding_divide_by_pot(_mul16(reluish, preshift, rounding=False), -rq.shift1)
    return out + rq.output_offset


def leaky_relu(rq: nm.ActivationRequant, x: np.ndarray) -> np.ndarray:
    """TFLite int8 LEAKY_RELU: identity rescale above the zero point, alpha rescale below."""
    v = x.astype(np.int64) + rq.input_offset
    return rq.output_offset + np.where(
        v >= 0, nm.multiply_by_quantized_multiplier(v, rq.multiplier1, rq.shift1),
        nm.multiply_by_quantized_multiplier(v, rq.multiplier2, rq.shift2))


def logistic(rq: nm.ActivationRequant, x: np.ndarray) -> np.ndarray:
    """TFLite int8 LOGISTIC (output 1/256, -128): saturated outside the input radius."""
    v = x.astype(np.int64) + rq.input_offset
    inside = np.abs(v) < rq.limit
    q4 = nm.multiply_by_quantized_multiplier(np.where(inside, v, 0), rq.multiplier1, rq.shift1)
    out = nm.rounding_divide_by_pot(fp.logistic(q4, nm.LOGISTIC_INPUT_BITS), 23) + nm.INT8_MIN
    return np.where(inside, out, np.where(v > 0, nm.INT8_MAX, nm.INT8_MIN))


ELEMENTWISE = {ir.HARD_SWISH: hard_swish, ir.LEAKY_RELU: leaky_relu, ir.LOGISTIC: logistic}

"""gemmlowp-style fixed-point functions on int32 raw values (numpy, vectorized), as TFLite's int8
SOFTMAX and LOGISTIC use them. A value with `b` integer bits is raw / 2**(31 - b); results are Q0.31.
Written from the arithmetic (Taylor series around -1/8, a barrel shifter of exp(-2**k) constants,
three Newton-Raphson steps for 1 / (1 + x)); the C twin is library/src/kernels/fixedpoint.h.
"""
from __future__ import annotations

import numpy as np

from ..numerics import INT32_MAX, INT32_MIN, rounding_divide_by_pot
from ..numerics import saturating_rounding_doubling_high_mul as mul

ONE_Q0 = INT32_MAX                 # 1.0 in Q0.31 saturates to the largest raw value
EXP_MINUS_EIGHTH = 1895147668      # exp(-1/8) in Q0.31
ONE_THIRD = 715827883              # 1/3 in Q0.31
# exp(-2**k) in Q0.31 for k = -2 .. 4: multiplied in for every set bit of the integer part
EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
              (2, 39332535), (3, 720401), (4, 242))
FORTY_EIGHT_SEVENTEENTHS_Q2 = 1515870810      # 48/17 in Q2.29
MINUS_THIRTY_TWO_SEVENTEENTHS_Q2 = -1010580540


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def saturating_shift_left(x, exponent: int) -> np.ndarray:
    """x * 2**exponent clamped to int32 (gemmlowp's SaturatingRoundingMultiplyByPOT, exponent > 0)."""
    return np.clip(_i64(x) << exponent, INT32_MIN, INT32_MAX)


def _exp_quarter(a: np.ndarray) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0.31 in and out: a 4th-order Taylor series around -1/8."""
    x = a + (1 << 28)
    x2 = mul(x, x)
    x3 = mul(x2, x)
    x4 = mul(x2, x2)
    tail = rounding_divide_by_pot(mul(rounding_divide_by_pot(x4, 2) + x3, ONE_THIRD) + x2, 1)
    return EXP_MINUS_EIGHTH + mul(EXP_MINUS_EIGHTH, x + tail)


def exp_on_negative_values(a, integer_bits: int) -> np.ndarray:
    """exp(a) for a <= 0 given with `integer_bits` integer bits; Q0.31 result."""
    a = _i64(a)
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = (a & (quarter - 1)) - quarter              # a mod 1/4, shifted into [-1/4, 0)
    result = _exp_quarter(saturating_shift_left(a_mod, integer_bits) if integer_bits
                          else a_mod)
    remainder = a_mod - a                               # the multiple of 1/4 still to apply
    for exponent, multiplier in EXP_BARREL:
        if integer_bits > exponent:
            bit = (remainder >> (frac + exponent)) & 1
            result = np.where(bit == 1, mul(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, ONE_Q0, result)


def one_over_one_plus_x(a) -> np.ndarray:
    """1 / (1 + a) for a in [0, 1) (Q0.31 in and out): Newton-Raphson on half the denominator."""
    total = _i64(a) + ONE_Q0
    half = (total + np.where(total >= 0, 1, -1))
    half = np.sign(half) * (np.abs(half) // 2)          # C division truncates toward zero
    x = FORTY_EIGHT_SEVENTEENTHS_Q2 + mul(half, MINUS_THIRTY_TWO_SEVENTEENTHS_Q2)
    one_q2 = 1 << 29
    for _ in range(3):
        x = x + saturating_shift_left(mul(x, one_q2 - mul(half, x)), 2)
    return saturating_shift_left(x, 1)


def logistic(a, integer_bits: int) -> np.ndarray:
    """1 / (1 + exp(-a)) for any a with `integer_bits` integer bits; Q0.31 result."""
    a = _i64(a)
    positive = a > 0
    on_positive = one_over_one_plus_x(exp_on_negative_values(-np.abs(a), integer_bits))
    return np.where(a == 0, 1 << 30, np.where(positive, on_positive, ONE_Q0 - on_positive))


def reciprocal(x, integer_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's GetReciprocal of a positive sum with `integer_bits` integer bits:
    (1 / x scaled into [0.5, 1) as Q0.31, the number of bits x has above one)."""
    x = _i64(x)
    headroom = 32 - np.frexp(x.astype(np.float64))[1].astype(np.int64)   # leading zeros
    shifted_minus_one = ((x << headroom) & 0xFFFFFFFF) - (1 << 31)
    return one_over_one_plus_x(shifted_minus_one), integer_bits - headroom

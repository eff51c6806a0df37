"""msf_pio.numerics against literal scalar transcriptions of TFLite's C++ integer arithmetic
(Python ints, C truncating division) and against hand-worked values."""
import math

import numpy as np
import pytest

from msf_pio import numerics as nm
from msf_pio.model.ir import QParams

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def c_div(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def srdhm_scalar(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return c_div(ab + nudge, 1 << 31)


def rdbpot_scalar(x: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def mbqm_scalar(x: int, multiplier: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    return rdbpot_scalar(srdhm_scalar(x * (1 << left), multiplier), right)


def quantize_multiplier_scalar(real: float) -> tuple[int, int]:
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    fixed = int(math.copysign(math.floor(abs(q) * 2 ** 31 + 0.5), q))
    if fixed == 2 ** 31:
        fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return fixed, shift


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def test_quantize_multiplier_known_values():
    assert [tuple(map(int, nm.quantize_multiplier(r))) for r in (0.5, 1.0, 0.75, 0.0, 2.0 ** -40)] \
        == [(1 << 30, 0), (1 << 30, 1), (3 << 29, 0), (0, 0), (0, 0)]
    # a mantissa that rounds up to 2**31 carries into the exponent
    m, s = nm.quantize_multiplier(1.0 - 2.0 ** -40)
    assert (int(m), int(s)) == (1 << 30, 1)


def test_quantize_multiplier_matches_scalar(rng):
    reals = np.concatenate([10.0 ** rng.uniform(-12, 3, 2000), [1 - 2.0 ** -33, 2.0 ** -31]])
    m, s = nm.quantize_multiplier(reals)
    expected = [quantize_multiplier_scalar(r) for r in reals]
    assert [(int(a), int(b)) for a, b in zip(m, s)] == expected
    ok = m > 0
    np.testing.assert_allclose(m[ok] * 2.0 ** (s[ok] - 31.0), reals[ok], rtol=2 ** -30)


def test_srdhm_matches_scalar(rng):
    edges = [INT32_MIN, INT32_MIN + 1, -1, 0, 1, INT32_MAX, 1 << 30, -(1 << 30)]
    a = np.concatenate([rng.integers(INT32_MIN, INT32_MAX, 5000, endpoint=True), edges * 8])
    b = np.concatenate([rng.integers(INT32_MIN, INT32_MAX, 5000, endpoint=True),
                        np.repeat(edges, 8)])
    got = nm.saturating_rounding_doubling_high_mul(a, b)
    assert got.tolist() == [srdhm_scalar(int(x), int(y)) for x, y in zip(a, b)]


def test_rounding_divide_by_pot_ties_away_from_zero():
    x = np.array([3, -3, 5, -5, 6, -6, 7, -7, 0, -1, 1])
    assert nm.rounding_divide_by_pot(x, 1).tolist() == [2, -2, 3, -3, 3, -3, 4, -4, 0, -1, 1]
    assert nm.rounding_divide_by_pot(x, 2).tolist() == [1, -1, 1, -1, 2, -2, 2, -2, 0, 0, 0]


def test_rounding_divide_by_pot_matches_scalar(rng):
    x = rng.integers(INT32_MIN, INT32_MAX, 3000, endpoint=True)
    e = rng.integers(0, 32, 3000)
    assert nm.rounding_divide_by_pot(x, e).tolist() == [rdbpot_scalar(int(a), int(b))
                                                         for a, b in zip(x, e)]


def test_multiply_by_quantized_multiplier_matches_scalar(rng):
    x = rng.integers(-(1 << 22), 1 << 22, 4000)
    m = rng.integers(1 << 30, (1 << 31) - 1, 4000)
    s = rng.integers(-20, 8, 4000)
    got = nm.multiply_by_quantized_multiplier(x, m, s)
    assert got.tolist() == [mbqm_scalar(int(a), int(b), int(c)) for a, b, c in zip(x, m, s)]


def test_double_rounding_differs_from_exact_rounding_where_tflite_does():
    """5 * 0.5 * 2**-1 = 1.25: the high multiply rounds 2.5 to 3, the shift rounds 1.5 to 2,
    where a single rounding would give 1."""
    assert int(nm.multiply_by_quantized_multiplier(5, 1 << 30, -1)) == 2


def test_smaller_than_one_variant_has_no_left_shift(rng):
    x = rng.integers(-(1 << 28), 1 << 28, 1000)
    m = rng.integers(1 << 30, (1 << 31) - 1, 1000)
    s = rng.integers(-10, 1, 1000)
    np.testing.assert_array_equal(nm.multiply_by_quantized_multiplier_smaller_than_one(x, m, s),
                                  nm.multiply_by_quantized_multiplier(x, m, s))


@pytest.mark.parametrize("act, q, expected", [
    ("none", QParams(0.1, 5), (-128, 127)),
    ("relu", QParams(0.1, 5), (5, 127)),
    ("relu", QParams(0.1, -128), (-128, 127)),
    ("relu6", QParams(6 / 255, -128), (-128, 127)),
    ("relu6", QParams(0.05, -10), (-10, 110)),
    ("relu6", QParams(0.01, 20), (20, 127)),
])
def test_activation_range(act, q, expected):
    assert nm.activation_range(act, q) == expected


def test_rounded_average_matches_c(rng):
    total = rng.integers(-128 * 400, 127 * 400, 3000)
    count = rng.integers(1, 400, 3000)

    def c_avg(t, n):
        return c_div(t + n // 2, n) if t > 0 else c_div(t - n // 2, n)

    assert nm.rounded_average(total, count).tolist() == [c_avg(int(t), int(n))
                                                         for t, n in zip(total, count)]
    assert nm.rounded_average([3, -3, 5, -6], [2, 2, 4, 4]).tolist() == [2, -2, 1, -2]


def test_accumulator_bound_holds_for_the_worst_inputs_and_decides_narrow():
    """The bound behind msf_layer_t.narrow: the inputs pushing every product up, then down,
    make no larger accumulator, and a bias that takes the accumulator past 2^30 turns the
    narrow requantization off."""
    import dataclasses

    from .int8_models import single_op_model
    model = single_op_model([1, 1, 24], [{"op": "pointwise", "out": 8}], seed=3)
    layer, rq = model.layers[0], nm.requantization(model, 0)
    bound = nm.accumulator_bound(layer, rq.input_offset)
    w = layer.weights.w.reshape(8, 24).astype(np.int64)
    for sign in (1, -1):
        x = np.where(sign * w > 0, 127, -128)          # each product at its extreme
        acc = layer.weights.bias + ((x + rq.input_offset) * w).sum(axis=1)
        assert np.all(np.abs(acc) <= bound)
    assert rq.narrow
    big = dataclasses.replace(layer.weights, bias=np.full(8, 1 << 30, np.int32))
    model.layers[0] = dataclasses.replace(layer, weights=big)
    assert not nm.requantization(model, 0).narrow

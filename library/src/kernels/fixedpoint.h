/* Fixed-point exp, 1 / (1 + x) and logistic on int32 raw values, as TFLite's int8 SOFTMAX and
 * LOGISTIC compute them (gemmlowp's arithmetic). A value with b integer bits is raw / 2^(31 - b);
 * results are Q0.31. The Python twin is msf_pio/reference/fixedpoint.py. */
#ifndef MSF_FIXEDPOINT_H
#define MSF_FIXEDPOINT_H

#include "msf/requant.h"

/* a * 2^exponent (exponent > 0), saturated to int32 */
MSF_INLINE int32_t msf_fp_shl_sat(int32_t a, int32_t exponent)
{
    const int64_t v = (int64_t)a * ((int64_t)1 << exponent);
    return v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : (int32_t)v);
}

/* exp(a) for a in [-1/4, 0) in Q0.31: 4th-order Taylor series around -1/8 */
MSF_INLINE int32_t msf_fp_exp_quarter(int32_t a)
{
    const int32_t exp_minus_eighth = 1895147668, one_third = 715827883;
    const int32_t x = a + (1 << 28);
    const int32_t x2 = msf_srdhm(x, x);
    const int32_t x3 = msf_srdhm(x2, x);
    const int32_t x4 = msf_srdhm(x2, x2);
    const int32_t tail = msf_rounding_shift(
        msf_srdhm(msf_rounding_shift(x4, 2) + x3, one_third) + x2, 1);
    return exp_minus_eighth + msf_srdhm(exp_minus_eighth, x + tail);
}

/* exp(a) for a <= 0 with `integer_bits` (1..5) integer bits, in Q0.31 */
MSF_INLINE int32_t msf_fp_exp_negative(int32_t a, int32_t integer_bits)
{
    static const int32_t barrel[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535,
                                      720401, 242};      /* exp(-2^k), k = -2 .. 4 */
    if (a == 0) {
        return INT32_MAX;
    }
    const int32_t frac = 31 - integer_bits;
    const int32_t quarter = 1 << (frac - 2);
    const int32_t a_mod = (a & (quarter - 1)) - quarter;
    int32_t result = msf_fp_exp_quarter(msf_fp_shl_sat(a_mod, integer_bits));
    const int32_t remainder = a_mod - a;
    for (int32_t k = -2; k <= 4 && k < integer_bits; k++) {
        if (remainder & (1 << (frac + k))) {
            result = msf_srdhm(result, barrel[k + 2]);
        }
    }
    return result;
}

/* 1 / (1 + a) for a in [0, 1), Q0.31: three Newton-Raphson steps on half the denominator */
MSF_INLINE int32_t msf_fp_one_over_one_plus(int32_t a)
{
    const int64_t sum = (int64_t)a + INT32_MAX;
    const int32_t half = (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
    int32_t x = 1515870810 + msf_srdhm(half, -1010580540);     /* 48/17 - 32/17 d, Q2.29 */
    for (int32_t i = 0; i < 3; i++) {
        x = x + msf_fp_shl_sat(msf_srdhm(x, (1 << 29) - msf_srdhm(half, x)), 2);
    }
    return msf_fp_shl_sat(x, 1);
}

/* 1 / (1 + exp(-a)) for a with `integer_bits` integer bits, Q0.31 */
MSF_INLINE int32_t msf_fp_logistic(int32_t a, int32_t integer_bits)
{
    if (a == 0) {
        return 1 << 30;
    }
    const int32_t positive = msf_fp_one_over_one_plus(
        msf_fp_exp_negative(a > 0 ? -a : a, integer_bits));
    return a > 0 ? positive : INT32_MAX - positive;
}

#endif /* MSF_FIXEDPOINT_H */

/* TFLite int8 requantization, bit-exact with TFLite Micro's reference kernels: a Q31 multiplier
 * and a power-of-two exponent, applied with saturating rounding doubling high multiply and a
 * rounding right shift ("double rounding"). The Python twin is msf_pio/numerics.py. */
#ifndef MSF_REQUANT_H
#define MSF_REQUANT_H

#include <stdint.h>

static inline int32_t msf_srdhm(int32_t a, int32_t b)
{
    if (a == b && a == INT32_MIN) {
        return INT32_MAX;
    }
    int64_t ab = (int64_t)a * (int64_t)b;
    int32_t nudge = ab >= 0 ? (1 << 30) : (1 - (1 << 30));
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

static inline int32_t msf_rounding_shift(int32_t x, int32_t exponent)
{
    int32_t mask = (int32_t)((1u << exponent) - 1u);
    int32_t remainder = x & mask;
    int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

static inline int32_t msf_requantize(int32_t acc, int32_t mult, int32_t shift)
{
    int32_t left = shift > 0 ? shift : 0;
    int32_t right = shift > 0 ? 0 : -shift;
    return msf_rounding_shift(msf_srdhm((int32_t)((uint32_t)acc << left), mult), right);
}

static inline int8_t msf_clamp(int32_t v, int32_t lo, int32_t hi)
{
    return (int8_t)(v < lo ? lo : (v > hi ? hi : v));
}

#endif /* MSF_REQUANT_H */

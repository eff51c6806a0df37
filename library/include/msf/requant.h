/* TFLite int8 requantization, bit-exact with TFLite Micro's reference kernels: a Q31 multiplier
 * and a power-of-two exponent, applied with saturating rounding doubling high multiply and a
 * rounding right shift ("double rounding"). The Python twin is msf_pio/numerics.py. */
#ifndef MSF_REQUANT_H
#define MSF_REQUANT_H

#include <stdint.h>

/* Inlined even at -Os (firmware builds optimise for size; the kernels' helpers must not become
 * calls in their inner loops). */
#if defined(__GNUC__)
#define MSF_INLINE static inline __attribute__((always_inline))
#else
#define MSF_INLINE static inline
#endif

/* The kernels' translation units ask for -O3 when the firmware is built for size (PlatformIO
 * platforms build with -Os, which spills the blocked inner loops' accumulators to the stack);
 * the rest of the firmware keeps its flags. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE_SIZE__)
#define MSF_KERNEL_SPEED _Pragma("GCC optimize(\"O3\", \"no-schedule-insns\")")
#else
#define MSF_KERNEL_SPEED
#endif

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

/* msf_requantize(acc, mult, shift) == msf_rounding_shift(msf_srdhm(acc << left, mult), right)
 * for every multiplier a model can have (mult != INT32_MIN: multipliers are non-negative), in
 * fewer instructions: (a * b + 2^30) >> 31 (floor) equals TFLite's nudged truncating division
 * for both signs, and the saturating case a == b == INT32_MIN cannot occur; rounding half away
 * from zero by 2^right is (x + 2^(right-1) - [x < 0]) >> right for right > 0. */
MSF_INLINE int32_t msf_requantize(int32_t acc, int32_t mult, int32_t shift)
{
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t right = shift > 0 ? 0 : -shift;
    const int64_t ab = (int64_t)(int32_t)((uint32_t)acc << left) * mult + (1 << 30);
    const int32_t x = (int32_t)(ab >> 31);
    const int32_t half = (int32_t)((1u << right) >> 1);           /* 0 when right == 0 */
    const int32_t below = (x >> 31) & -(int32_t)(right > 0);      /* -1: negative, right > 0 */
    return (int32_t)((int64_t)x + half + below) >> right;
}

/* A requantized accumulator as an int8 output: multiplier and exponent, output zero point,
 * activation clamp. */
MSF_INLINE int8_t msf_output_s8(int32_t acc, int32_t mult, int32_t shift, int32_t out_offset,
                                   int32_t act_min, int32_t act_max)
{
    int32_t v = msf_requantize(acc, mult, shift) + out_offset;
    v = v < act_min ? act_min : v;
    return (int8_t)(v > act_max ? act_max : v);
}

static inline int8_t msf_clamp(int32_t v, int32_t lo, int32_t hi)
{
    return (int8_t)(v < lo ? lo : (v > hi ? hi : v));
}

#endif /* MSF_REQUANT_H */

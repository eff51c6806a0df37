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
 * platforms build with -Os, which spills the blocked inner loops' accumulators to the stack),
 * without turning short copy loops into calls of the C library's memcpy; the rest of the
 * firmware keeps its flags. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE_SIZE__)
#define MSF_KERNEL_SPEED                                                                  \
    _Pragma("GCC optimize(\"O3\", \"no-schedule-insns\", \"no-tree-loop-distribute-patterns\")")
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
 * from zero by 2^right is (x + 2^(right-1) - [x < 0]) >> right for right > 0. A kernel that
 * applies one channel's multiplier to several accumulators computes the channel's constants once
 * (msf_rq) and applies them to each (msf_rq_apply). */
typedef struct {
    int32_t mult, left, right, half, neg;     /* neg: -1 when right > 0, else 0 */
} msf_rq_t;

MSF_INLINE msf_rq_t msf_rq(int32_t mult, int32_t shift)
{
    msf_rq_t q;
    q.mult = mult;
    q.neg = shift >> 31;                                         /* -1: shift < 0 */
    q.left = shift & ~q.neg;                                     /* max(shift, 0) */
    q.right = q.left - shift;                                    /* max(-shift, 0) */
    q.half = (int32_t)((1u << q.right) >> 1);                    /* 0 when right == 0 */
    return q;
}

/* (a * b + 2^30) >> 31 */
MSF_INLINE int32_t msf_dhm(int32_t a, int32_t b)
{
#if defined(__GNUC__) && defined(__thumb2__) && (defined(__ARM_ARCH_7M__) || defined(__ARM_ARCH_7EM__))
    /* the rounding constant as immediates: GCC's SMLAL form keeps 2^30 and 0 in registers */
    uint32_t lo;
    int32_t hi;
    __asm__("smull %0, %1, %2, %3\n\t"
            "adds %0, %0, #0x40000000\n\t"
            "adc %1, %1, #0\n\t"
            "lsrs %0, %0, #31\n\t"
            "orr %0, %0, %1, lsl #1"
            : "=&r"(lo), "=&r"(hi) : "r"(a), "r"(b) : "cc");
    return (int32_t)lo;
#else
    return (int32_t)(((int64_t)a * b + (1 << 30)) >> 31);
#endif
}

MSF_INLINE int32_t msf_rq_apply(int32_t acc, const msf_rq_t q)
{
    const int32_t x = msf_dhm((int32_t)((uint32_t)acc << q.left), q.mult);
    return (int32_t)((int64_t)x + q.half + ((x >> 31) & q.neg)) >> q.right;
}

/* msf_rq_apply when |acc << q.left| < 2^30: then (a * b + 2^30) >> 31 is the rounding high
 * multiply of 2a by b, (2a * b + 2^31) >> 32 (Cortex-M's SMMULR): no 64-bit rounding. */
MSF_INLINE int32_t msf_rq_apply_narrow(int32_t acc, const msf_rq_t q)
{
    const int32_t a = (int32_t)((uint32_t)acc << (q.left + 1));
#if defined(__GNUC__) && defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
    int32_t x;
    __asm__("smmulr %0, %1, %2" : "=r"(x) : "r"(a), "r"(q.mult));
#else
    const int32_t x = (int32_t)(((int64_t)a * q.mult + ((int64_t)1 << 31)) >> 32);
#endif
    return (int32_t)((int64_t)x + q.half + ((x >> 31) & q.neg)) >> q.right;
}

MSF_INLINE int32_t msf_requantize(int32_t acc, int32_t mult, int32_t shift)
{
    return msf_rq_apply(acc, msf_rq(mult, shift));
}

/* The output side of a layer: zero point and activation clamp. */
typedef struct {
    int32_t offset, min, max;
} msf_out_t;

/* A requantized accumulator as an int8 output. */
MSF_INLINE int8_t msf_rq_output(int32_t acc, const msf_rq_t q, const msf_out_t o)
{
    int32_t v = msf_rq_apply(acc, q) + o.offset;
    v = v < o.min ? o.min : v;
    v = v > o.max ? o.max : v;
    return (int8_t)v;
}

/* A requantized accumulator as an int8 output: multiplier and exponent, output zero point,
 * activation clamp. */
MSF_INLINE int8_t msf_output_s8(int32_t acc, int32_t mult, int32_t shift, int32_t out_offset,
                                   int32_t act_min, int32_t act_max)
{
    const msf_out_t o = {out_offset, act_min, act_max};
    return msf_rq_output(acc, msf_rq(mult, shift), o);
}

/* Requantizes the accumulators of n consecutive output channels of `pixels` pixels (1 or 2),
 * stored channel after channel in pairs (acc[2 * ch + p]), into o0[ch] and, for pixel 1,
 * o0[d + ch], channel ch with mult[ch] and shift[ch]: the per-channel constants are computed
 * once for both pixels (library/src/kernels/requant_s8.c); `narrow`: the layer's, see
 * msf_rq_apply_narrow. */
void msf_requant_s8(const int32_t *acc, int32_t pixels, int32_t n, const int32_t *mult,
                    const int8_t *shift, const msf_out_t *out, int narrow, int8_t *o0,
                    int32_t d);

static inline int8_t msf_clamp(int32_t v, int32_t lo, int32_t hi)
{
    return (int8_t)(v < lo ? lo : (v > hi ? hi : v));
}

#endif /* MSF_REQUANT_H */

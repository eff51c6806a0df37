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
 * without turning short copy loops into calls of the C library's memcpy, and without predictive
 * commoning (on RV32 it carries loads across the conv's pixel-block iterations in registers it
 * lacks: a 1x1 conv over 30 channels spilled, 166,019 instructions against 120,950 without it on
 * qemu_esp32c3; Cortex-M code is unchanged); the rest of the firmware keeps its flags. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE_SIZE__)
#define MSF_KERNEL_SPEED                                                                  \
    _Pragma("GCC optimize(\"O3\", \"no-schedule-insns\", \"no-tree-loop-distribute-patterns\", \"no-store-merging\", \"no-tree-slp-vectorize\", \"no-predictive-commoning\")")
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

/* Requantization of one output channel of a conv2d, depthwise or dense layer, laid out by the
 * generator (msf_pio/codegen/kernel_data.py). */
typedef struct {
    int32_t bias;     /* the accumulator's start */
    int32_t mult;     /* Q31 multiplier */
    int32_t round;    /* MSF_RQ_FAST: 2^(right-1) + output zero point * 2^right */
    int16_t shift;    /* TFLite's exponent: left shift max(shift, 0), right shift max(-shift, 0) */
    int16_t right;    /* MSF_RQ_FAST: the right shift (>= 1) */
} msf_channel_t;

/* How a layer's accumulators become outputs: TFLite's steps (EXACT: 64-bit doubling high
 * multiply; NARROW: accumulators below 2^30 after the left shift, SMMULR), or FAST: no left
 * shift, a right shift of at least 1 and the zero point folded into `round` (msf_rq_fast);
 * FAST2: the same for accumulators the kernel makes doubled (inputs or weights doubled, the
 * record's bias too: msf_rq_fast2 saves the doubling of every output). */
enum msf_requant { MSF_RQ_EXACT = 0, MSF_RQ_NARROW = 1, MSF_RQ_FAST = 2, MSF_RQ_FAST2 = 3 };

/* MSF_RQ_FAST: TFLite's output before the activation clamp, zero point included:
 * (round(2 acc * mult / 2^32) + round + [acc < 0]) >> right, where the sign of acc stands for
 * that of the high product (they differ only when it is 0, and then both round alike). */
MSF_INLINE int32_t msf_rq_fast2(int32_t a, int32_t mult, int32_t round, int32_t right);

MSF_INLINE int32_t msf_rq_fast(int32_t acc, int32_t mult, int32_t round, int32_t right)
{
    return msf_rq_fast2((int32_t)((uint32_t)acc << 1), mult, round, right);
}

/* msf_rq_fast of a = 2 acc (an accumulator made doubled) */
MSF_INLINE int32_t msf_rq_fast2(int32_t a, int32_t mult, int32_t round, int32_t right)
{
#if defined(__GNUC__) && defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
    int32_t x;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(x) : "r"(a), "r"(mult), "r"(round));
#else
    const int64_t p = (int64_t)a * mult;   /* + 2^31, >> 32: the high word plus bit 31 */
    const int32_t x = (int32_t)(p >> 32) + (int32_t)((uint32_t)p >> 31) + round;
#endif
    return (x + (a >> 31)) >> right;
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
 * o0[d + ch], channel ch with ch[ch]'s record under the layer's `mode` (enum msf_requant): the
 * per-channel constants are loaded once for both pixels (library/src/kernels/requant_s8.c). */
void msf_requant_s8(const int32_t *acc, int32_t pixels, int32_t n, const msf_channel_t *ch,
                    const msf_out_t *out, int mode, int8_t *o0, int32_t d);

static inline int8_t msf_clamp(int32_t v, int32_t lo, int32_t hi)
{
    return (int8_t)(v < lo ? lo : (v > hi ? hi : v));
}

#endif /* MSF_REQUANT_H */

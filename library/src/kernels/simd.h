/* Word-at-a-time helpers of the kernels' inner loops. With the Cortex-M DSP extension
 * (__ARM_FEATURE_DSP: M4, M7, M33, M55) four int8 values are loaded as one word and split into
 * two pairs of int16 lanes (bytes 0 and 2, bytes 1 and 3), optionally adding an offset to each
 * lane in the same instruction (SXTAB16); SMLAD then multiplies and accumulates a pair of lanes
 * in one instruction. Elsewhere the kernels' portable loops are used.
 *
 * The instructions are written as inline assembly, not taken from <arm_acle.h>: GCC has the
 * SIMD32 and saturation intrinsics only from version 10, and PlatformIO's stm32cube builds use
 * GCC 7.2.1. None is volatile, so the compiler schedules them as it would the intrinsics. */
#ifndef MSF_SIMD_H
#define MSF_SIMD_H

#include <stdint.h>
#include <string.h>

#include "msf/requant.h"

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#define MSF_DSP 1

/* two int16 lanes in one word (low half: lane 0) */
typedef uint32_t msf_x2_t;

/* four int8 values at any alignment (Cortex-M3 and later load unaligned words) */
MSF_INLINE uint32_t msf_read4(const int8_t *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);   /* a word load, even under -fno-builtin */
    return v;
}

/* the offset in both int16 lanes */
MSF_INLINE msf_x2_t msf_lanes(int32_t offset)
{
    return ((uint32_t)offset & 0xFFFFu) | ((uint32_t)offset << 16);
}

/* bytes 0 and 2 of v, sign-extended, plus off2 */
MSF_INLINE msf_x2_t msf_even(uint32_t v, msf_x2_t off2)
{
    msf_x2_t r;
    __asm__("sxtab16 %0, %1, %2" : "=r"(r) : "r"(off2), "r"(v));
    return r;
}

/* bytes 1 and 3 of v, sign-extended, plus off2 (the rotation folded into the instruction) */
MSF_INLINE msf_x2_t msf_odd(uint32_t v, msf_x2_t off2)
{
    msf_x2_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(off2), "r"(v));
    return r;
}

MSF_INLINE msf_x2_t msf_even0(uint32_t v)
{
    msf_x2_t r;
    __asm__("sxtb16 %0, %1" : "=r"(r) : "r"(v));
    return r;
}

MSF_INLINE msf_x2_t msf_odd0(uint32_t v)
{
    msf_x2_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
    return r;
}

/* acc + x.lane0 * y.lane0 + x.lane1 * y.lane1 */
MSF_INLINE int32_t msf_smlad(msf_x2_t x, msf_x2_t y, int32_t acc)
{
    int32_t r;
    __asm__("smlad %0, %1, %2, %3" : "=r"(r) : "r"(x), "r"(y), "r"(acc));
    return r;
}

/* acc + x.lane0 * y.lane0 */
MSF_INLINE int32_t msf_smlabb(msf_x2_t x, msf_x2_t y, int32_t acc)
{
    int32_t r;
    __asm__("smlabb %0, %1, %2, %3" : "=r"(r) : "r"(x), "r"(y), "r"(acc));
    return r;
}

/* acc + x.lane1 * y.lane1 */
MSF_INLINE int32_t msf_smlatt(msf_x2_t x, msf_x2_t y, int32_t acc)
{
    int32_t r;
    __asm__("smlatt %0, %1, %2, %3" : "=r"(r) : "r"(x), "r"(y), "r"(acc));
    return r;
}

/* v saturated to [-128, 127] */
MSF_INLINE int32_t msf_ssat8(int32_t v)
{
    int32_t r;
    __asm__("ssat %0, #8, %1" : "=r"(r) : "r"(v));
    return r;
}

/* the larger (msf_max4) and smaller (msf_min4) int8 of a and b in each of the four bytes:
 * SSUB8 sets a GE flag per byte where a >= b, SEL picks by them (one asm statement, so that
 * nothing between the two touches the flags) */
MSF_INLINE uint32_t msf_max4(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(a), "r"(b) : "cc");
    return r;
}

MSF_INLINE uint32_t msf_min4(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("ssub8 %0, %1, %2\n\tsel %0, %2, %1" : "=&r"(r) : "r"(a), "r"(b) : "cc");
    return r;
}

/* a + b lane by lane */
MSF_INLINE msf_x2_t msf_sadd16(msf_x2_t a, msf_x2_t b)
{
    msf_x2_t r;
    __asm__("sadd16 %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

/* (lane 0 of a, lane 0 of b) */
MSF_INLINE msf_x2_t msf_pkhbt(msf_x2_t a, msf_x2_t b)
{
    msf_x2_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

/* (lane 1 of b, lane 1 of a) */
MSF_INLINE msf_x2_t msf_pkhtb(msf_x2_t a, msf_x2_t b)
{
    msf_x2_t r;
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

/* a = the word at p + off, b = the next one (p + off word-aligned, off an integer constant
 * expression): one LDRD, which compilers do not always form from two word loads */
#define MSF_LOAD2(p, off, a, b)                                                                \
    __asm__("ldrd %0, %1, [%2, %3]"                                                            \
            : "=r"(a), "=r"(b)                                                                 \
            : "r"(p), "n"(off), "m"(*(const uint64_t *)(const void *)((const char *)(p) + (off))))
#else
#define MSF_DSP 0
#endif

#endif /* MSF_SIMD_H */

/* Word-at-a-time helpers of the kernels' inner loops. With the Cortex-M DSP extension
 * (__ARM_FEATURE_DSP: M4, M7, M33, M55) four int8 values are loaded as one word and split into
 * two pairs of int16 lanes (bytes 0 and 2, bytes 1 and 3), optionally adding an offset to each
 * lane in the same instruction (SXTAB16); SMLAD then multiplies and accumulates a pair of lanes
 * in one instruction. Elsewhere the kernels' portable loops are used. */
#ifndef MSF_SIMD_H
#define MSF_SIMD_H

#include <stdint.h>
#include <string.h>

#include "msf/requant.h"

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#include <arm_acle.h>
#define MSF_DSP 1

/* four int8 values at any alignment (Cortex-M3 and later load unaligned words) */
MSF_INLINE uint32_t msf_read4(const int8_t *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);   /* a word load, even under -fno-builtin */
    return v;
}

/* the offset in both int16 lanes */
MSF_INLINE int16x2_t msf_lanes(int32_t offset)
{
    return (int16x2_t)(((uint32_t)offset & 0xFFFFu) | ((uint32_t)offset << 16));
}

/* bytes 0 and 2 of v, sign-extended, plus off2 */
MSF_INLINE int16x2_t msf_even(uint32_t v, int16x2_t off2)
{
    return __sxtab16(off2, (int8x4_t)v);
}

/* bytes 1 and 3 of v, sign-extended, plus off2 (the rotation folded into the instruction,
 * which GCC's intrinsics do not do) */
MSF_INLINE int16x2_t msf_odd(uint32_t v, int16x2_t off2)
{
    int16x2_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(off2), "r"(v));
    return r;
}

MSF_INLINE int16x2_t msf_even0(uint32_t v)
{
    return __sxtb16((int8x4_t)v);
}

MSF_INLINE int16x2_t msf_odd0(uint32_t v)
{
    int16x2_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
    return r;
}
#else
#define MSF_DSP 0
#endif

#endif /* MSF_SIMD_H */

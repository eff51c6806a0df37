/* Requantization of a run of output channels, shared by the kernels that first accumulate a
 * block of channels: one small loop, so that its registers hold only the run's pointers and
 * the output's zero point and clamp. With the DSP extension an output whose activation clamp
 * is the whole int8 range saturates in one instruction (SSAT). */
#include "msf/requant.h"
#include "simd.h"

MSF_KERNEL_SPEED

/* (full: the clamp is [-128, 127]; narrow: msf_rq_apply_narrow applies; compile-time constants
 * once inlined) */
MSF_INLINE int8_t output(const int full, const int narrow, int32_t acc, const msf_rq_t q,
                         const msf_out_t out)
{
    const int32_t v = (narrow ? msf_rq_apply_narrow(acc, q) : msf_rq_apply(acc, q)) + out.offset;
#if MSF_DSP
    if (full) {
        return (int8_t)msf_ssat8(v);
    }
#else
    (void)full;
#endif
    return msf_clamp(v, out.min, out.max);
}

MSF_INLINE void requant_run(const int pair, const int full, const int narrow,
                            const int32_t *acc, int32_t n, const int32_t *mult,
                            const int8_t *shift, const msf_out_t out, int8_t *o0, int32_t d)
{
    for (int32_t ch = 0; ch < n; ch++) {
        const msf_rq_t q = msf_rq(mult[ch], shift[ch]);
        o0[ch] = output(full, narrow, acc[2 * ch], q, out);
        if (pair) {
            o0[d + ch] = output(full, narrow, acc[2 * ch + 1], q, out);
        }
    }
}

/* one loop per (pixels, full, narrow): each a compile-time constant inside it */
#define MSF_REQUANT_CASE(pair, full, narrow) \
    requant_run(pair, full, narrow, acc, n, mult, shift, o, o0, d)

void msf_requant_s8(const int32_t *acc, int32_t pixels, int32_t n, const int32_t *mult,
                    const int8_t *shift, const msf_out_t *out, int narrow, int8_t *o0,
                    int32_t d)
{
    const msf_out_t o = *out;
    const int full = o.min == -128 && o.max == 127;
    switch ((pixels == 2) * 4 + full * 2 + (narrow != 0)) {
    case 7: MSF_REQUANT_CASE(1, 1, 1); break;
    case 6: MSF_REQUANT_CASE(1, 1, 0); break;
    case 5: MSF_REQUANT_CASE(1, 0, 1); break;
    case 4: MSF_REQUANT_CASE(1, 0, 0); break;
    case 3: MSF_REQUANT_CASE(0, 1, 1); break;
    case 2: MSF_REQUANT_CASE(0, 1, 0); break;
    case 1: MSF_REQUANT_CASE(0, 0, 1); break;
    default: MSF_REQUANT_CASE(0, 0, 0); break;
    }
}

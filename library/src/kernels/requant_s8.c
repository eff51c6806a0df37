/* Requantization of a run of output channels, shared by the kernels that first accumulate a
 * block of channels: one small loop, so that its registers hold only the run's pointers and
 * the output's zero point and clamp. With the DSP extension an output whose activation clamp
 * is the whole int8 range saturates in one instruction (SSAT). */
#include "msf/requant.h"
#include "simd.h"

MSF_KERNEL_SPEED

/* (full: the clamp is [-128, 127]; a compile-time constant once inlined) */
MSF_INLINE int8_t output(const int full, int32_t acc, const msf_rq_t q, const msf_out_t out)
{
#if MSF_DSP
    if (full) {
        return (int8_t)__ssat(msf_rq_apply(acc, q) + out.offset, 8);
    }
#else
    (void)full;
#endif
    return msf_rq_output(acc, q, out);
}

MSF_INLINE void requant_run(const int pair, const int full, const int32_t *acc, int32_t n,
                            const int32_t *mult, const int8_t *shift, const msf_out_t out,
                            int8_t *o0, int32_t d)
{
    for (int32_t ch = 0; ch < n; ch++) {
        const msf_rq_t q = msf_rq(mult[ch], shift[ch]);
        o0[ch] = output(full, acc[2 * ch], q, out);
        if (pair) {
            o0[d + ch] = output(full, acc[2 * ch + 1], q, out);
        }
    }
}

void msf_requant_s8(const int32_t *acc, int32_t pixels, int32_t n, const int32_t *mult,
                    const int8_t *shift, const msf_out_t *out, int8_t *o0, int32_t d)
{
    const msf_out_t o = *out;
    const int full = o.min == -128 && o.max == 127;
    if (pixels == 2) {
        if (full) {
            requant_run(1, 1, acc, n, mult, shift, o, o0, d);
        } else {
            requant_run(1, 0, acc, n, mult, shift, o, o0, d);
        }
    } else if (full) {
        requant_run(0, 1, acc, n, mult, shift, o, o0, d);
    } else {
        requant_run(0, 0, acc, n, mult, shift, o, o0, d);
    }
}

/* An accumulator of an output channel as the int8 output, under the layer's requantization
 * mode (enum msf_requant): shared by the kernels that keep per-channel records. */
#ifndef MSF_OUTPUT_H
#define MSF_OUTPUT_H

#include "msf/requant.h"
#include "simd.h"

/* Output of accumulator acc of channel c under `mode` (enum msf_requant; full: the clamp is
 * [-128, 127]; both compile-time constants once inlined). */
MSF_INLINE int8_t msf_channel_output(const int mode, const int full, int32_t acc,
                                     const msf_channel_t *c, const msf_out_t out)
{
    int32_t v;
    if (mode == MSF_RQ_FAST2) {
        v = msf_rq_fast2(acc, c->mult, c->round, c->right);
    } else if (mode == MSF_RQ_FAST) {
        v = msf_rq_fast(acc, c->mult, c->round, c->right);
    } else {
        const msf_rq_t q = msf_rq(c->mult, c->shift);
        v = (mode == MSF_RQ_NARROW ? msf_rq_apply_narrow(acc, q) : msf_rq_apply(acc, q)) +
            out.offset;
    }
#if MSF_DSP
    if (full) {
        return (int8_t)msf_ssat8(v);
    }
#else
    (void)full;
#endif
    return msf_clamp(v, out.min, out.max);
}

#endif /* MSF_OUTPUT_H */

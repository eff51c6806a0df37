/* Softmax over the channels of every pixel (TFLite int8 SOFTMAX: output scale 1/256, zero point
 * -128), one output column. Differences to the pixel's maximum become Q5.26 (fn_mult1, fn_shift1),
 * their exps are summed as Q12.19 and the sum's reciprocal scales each exp to the output; a
 * difference below fn_limit (TFLite's diff_min) gives -128. */
#include "msf/requant.h"
#include "msf/runtime.h"
#include "fixedpoint.h"

/* At the firmware's own optimisation level (-Os in PlatformIO builds), not MSF_KERNEL_SPEED:
 * it runs once per inference on the network's last pixel(s), where -O3's 3.6 KB of unrolled
 * code on Cortex-M4 buys nothing measurable */

/* exp(x - max) in Q0.31 for a difference d >= diff_min */
MSF_INLINE int32_t scaled_exp(const msf_layer_t *l, int32_t d)
{
    return msf_fp_exp_negative(msf_srdhm((int32_t)((uint32_t)d << l->fn_shift1), l->fn_mult1),
                               5);
}

void msf_softmax_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                        int32_t col, int32_t r0, int32_t r1)
{
    const int32_t c = l->in_c;
    for (int32_t row = r0; row < r1; row++) {
        const int8_t *x = msf_pixel(in, row, col);
        int8_t *o = msf_pixel(out, row, col);
        int32_t max = -128;
        for (int32_t ch = 0; ch < c; ch++) {
            max = x[ch] > max ? x[ch] : max;
        }
        int32_t sum = 0;
        for (int32_t ch = 0; ch < c; ch++) {
            const int32_t d = x[ch] - max;
            if (d >= l->fn_limit) {
                sum += msf_rounding_shift(scaled_exp(l, d), 12);
            }
        }
        /* reciprocal of the sum: normalised into [1, 2) as 1 + s, then 1 / (1 + s) */
        int32_t headroom = 0;
        while (!((uint32_t)sum << headroom & 0x80000000u)) {
            headroom++;
        }
        const int32_t scale = msf_fp_one_over_one_plus(
            (int32_t)(((uint32_t)sum << headroom) - 0x80000000u));
        const int32_t exponent = 12 - headroom + 31 - 8;
        for (int32_t ch = 0; ch < c; ch++) {   /* out may be in (x is read before): not aliased */
            const int32_t d = x[ch] - max;
            int32_t v = -128;
            if (d >= l->fn_limit) {
                v = msf_rounding_shift(msf_srdhm(scale, scaled_exp(l, d)), exponent) - 128;
            }
            o[ch] = msf_clamp(v, -128, 127);
        }
    }
}

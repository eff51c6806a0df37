/* Dense int8 convolution, one output column. */
#include "msf/requant.h"
#include "msf/runtime.h"
#include "window.h"

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#include <arm_acle.h>
#endif

/* sum over i of (x[i] + offset) * w[i] */
static int32_t dot_s8(const int8_t *x, const int8_t *w, int32_t n, int32_t offset)
{
    int32_t acc = 0, i = 0;
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
    /* four bytes a load: sign-extend byte pairs to halfwords while adding the offset to both
     * lanes, then two dual 16x16 multiply-accumulates */
    const int16x2_t off2 = (int16x2_t)(((uint32_t)offset & 0xFFFFu) | ((uint32_t)offset << 16));
    for (; i + 4 <= n; i += 4) {
        uint32_t xv, wv;
        memcpy(&xv, x + i, 4);
        memcpy(&wv, w + i, 4);
        int16x2_t x_even = __sxtab16(off2, (int8x4_t)xv);
        int16x2_t x_odd = __sxtab16(off2, (int8x4_t)((xv >> 8) | (xv << 24)));
        acc = __smlad(x_even, __sxtb16((int8x4_t)wv), acc);
        acc = __smlad(x_odd, __sxtb16((int8x4_t)((wv >> 8) | (wv << 24))), acc);
    }
#endif
    for (; i < n; i++) {
        acc += (x[i] + offset) * w[i];
    }
    return acc;
}

void msf_conv2d_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                       int32_t col, int32_t r0, int32_t r1)
{
    const int32_t k = l->kernel, cin = l->in_c;
    const int8_t *cols[MSF_MAX_KERNEL];
    for (int32_t row = r0; row < r1; row++) {
        msf_window_t w = msf_window(l, row, col);
        msf_window_columns(in, &w, cols);
        int8_t *o = msf_pixel(out, row, col);
        const int32_t run = (w.x1 - w.x0) * cin;
        /* a whole tensor holds the valid taps of one kernel row contiguously */
        const int contiguous = in->col_stride == cin && in->col_slots >= l->in_w;
        for (int32_t oc = 0; oc < l->out_c; oc++) {
            const int8_t *filter = l->weights + (int32_t)oc * k * k * cin;
            int32_t acc = l->bias ? l->bias[oc] : 0;
            for (int32_t ky = w.y0; ky < w.y1; ky++) {
                const int8_t *frow = filter + (ky * k + w.x0) * cin;
                const int32_t roff = (ky - w.y0) * in->row_stride;
                if (contiguous) {
                    acc += dot_s8(cols[w.x0] + roff, frow, run, l->in_offset);
                    continue;
                }
                for (int32_t kx = w.x0; kx < w.x1; kx++) {
                    acc += dot_s8(cols[kx] + roff, frow + (kx - w.x0) * cin, cin, l->in_offset);
                }
            }
            acc = msf_requantize(acc, l->mult[oc], l->shift[oc]) + l->out_offset;
            o[oc] = msf_clamp(acc, l->act_min, l->act_max);
        }
        MSF_COUNT((w.y1 - w.y0) * run * l->out_c);
    }
}

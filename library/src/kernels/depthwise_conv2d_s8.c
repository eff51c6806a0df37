/* Depthwise int8 convolution (depth multiplier 1), one output column. Four channels per inner
 * loop: one word of input and one word of weights per kernel tap; with the DSP extension the
 * four int8 lanes are split into int16 pairs (the input offset added in the same instruction)
 * and multiplied lane by lane (SMLABB/SMLATT), elsewhere four independent scalar sums. The
 * column fixes the valid kernel columns, so their pointers are found once per call. */
#include "msf/requant.h"
#include "msf/runtime.h"
#include "simd.h"
#include "window.h"

MSF_KERNEL_SPEED

/* acc[j] += sum over the valid taps of (x[tap][j] + offset) * w[tap][j] for channels j < lanes
 * (4, or 1 for the last channels); taps of kernel row ky at cols[kx] + roff + (ky - y0) *
 * row_stride, weights at w + (ky * k + kx) * c, for the `width` valid kernel columns from x0
 * (a constant in the instances for whole 3-, 5- and 7-wide windows: the loop unrolls) */
MSF_INLINE void dw_taps(const int lanes, const int32_t width, const msf_layer_t *l,
                        const int8_t *const *cols, const msf_window_t *w, int32_t roff,
                        int32_t row_stride, const int8_t *wt, int32_t acc[4])
{
    const int32_t k = l->kernel, c = l->in_c, offset = l->in_offset;
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
#if MSF_DSP
    const int16x2_t off2 = msf_lanes(offset);
#endif
    for (int32_t ky = w->y0; ky < w->y1; ky++, roff += row_stride) {
        const int8_t *wr = wt + ky * k * c;
        for (int32_t j = 0; j < width; j++) {
            const int8_t *x = cols[w->x0 + j] + roff, *f = wr + (w->x0 + j) * c;
            if (lanes == 1) {
                a0 += (x[0] + offset) * f[0];
                continue;
            }
#if MSF_DSP
            const uint32_t u = msf_read4(x), v = msf_read4(f);
            const int16x2_t xe = msf_even(u, off2), xo = msf_odd(u, off2);
            const int16x2_t we = msf_even0(v), wo = msf_odd0(v);
            a0 = __smlabb(xe, we, a0);
            a2 = __smlatt(xe, we, a2);
            a1 = __smlabb(xo, wo, a1);
            a3 = __smlatt(xo, wo, a3);
#else
            a0 += (x[0] + offset) * f[0];
            a1 += (x[1] + offset) * f[1];
            a2 += (x[2] + offset) * f[2];
            a3 += (x[3] + offset) * f[3];
#endif
        }
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* Output pixel o: four channels at a time, then the rest one by one. */
MSF_INLINE void dw_pixel(const int32_t width, const msf_layer_t *l, const int8_t *const *cols,
                         const msf_window_t *w, int32_t top, int32_t row_stride, int8_t *o)
{
    const int32_t c = l->in_c;
    const int32_t *b = l->bias;
    int32_t ch = 0;
    for (; ch + 4 <= c; ch += 4) {
        int32_t acc[4] = {b ? b[ch] : 0, b ? b[ch + 1] : 0, b ? b[ch + 2] : 0,
                          b ? b[ch + 3] : 0};
        dw_taps(4, width, l, cols, w, top + ch, row_stride, l->weights + ch, acc);
        for (int32_t j = 0; j < 4; j++) {
            o[ch + j] = msf_output_s8(acc[j], l->mult[ch + j], l->shift[ch + j], l->out_offset,
                                      l->act_min, l->act_max);
        }
    }
    for (; ch < c; ch++) {
        int32_t acc[4] = {b ? b[ch] : 0, 0, 0, 0};
        dw_taps(1, width, l, cols, w, top + ch, row_stride, l->weights + ch, acc);
        o[ch] = msf_output_s8(acc[0], l->mult[ch], l->shift[ch], l->out_offset, l->act_min,
                              l->act_max);
    }
}

void msf_depthwise_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                          int32_t col, int32_t r0, int32_t r1)
{
    const msf_window_t cw = msf_window(l, r0, col);
    const int8_t *cols[MSF_MAX_KERNEL];
    msf_window_columns(in, &cw, cols);
    const int32_t width = cw.x1 - cw.x0, rs = in->row_stride;
    for (int32_t row = r0; row < r1; row++) {
        const msf_window_t w = msf_window(l, row, col);
        /* offset of the pixel's first valid tap row from the cols[] pointers (row r0's) */
        const int32_t top = (w.in_row + w.y0 - (cw.in_row + cw.y0)) * rs;
        int8_t *o = msf_pixel(out, row, col);
        if (width == 3 && l->kernel == 3) {
            dw_pixel(3, l, cols, &w, top, rs, o);
        } else if (width == 5 && l->kernel == 5) {
            dw_pixel(5, l, cols, &w, top, rs, o);
        } else if (width == 7 && l->kernel == 7) {
            dw_pixel(7, l, cols, &w, top, rs, o);
        } else {
            dw_pixel(width, l, cols, &w, top, rs, o);
        }
        MSF_COUNT((w.y1 - w.y0) * width * l->in_c);
    }
}

/* Dense int8 convolution (conv2d, 1x1 included), one output column. Two output pixels (rows)
 * times two output channels per inner loop: every input word loaded serves two channels and
 * every weight word two pixels (CMSIS-NN's 2x2 matrix-multiply blocking). With the DSP
 * extension the pixels' valid taps are first gathered into a small stack scratch as int16 with
 * the input offset added (im2col), in the lane order SXTB16 gives the weights, so the inner
 * loop only loads, extends the weights and multiplies; elsewhere (and for windows larger than
 * the scratch) the taps are read where they lie, in a whole tensor or a column ring. Kernel
 * taps outside the input are skipped (their input is the zero point); a pixel whose window is
 * clipped unlike its neighbour's, or a lone last row, is computed alone (1x2 blocking). */
#include "msf/requant.h"
#include "msf/runtime.h"
#include "simd.h"
#include "window.h"

MSF_KERNEL_SPEED

/* acc[2p + q] += sum over i < n of (x_p[i] + offset) * w_q[i], for channels q in {0, 1} and
 * pixels p in {0, 1} (p = 0 only unless `pair`; a compile-time constant once inlined) */
MSF_INLINE void mac_2x2(const int pair, const int8_t *x0, const int8_t *x1, const int8_t *w0,
                        const int8_t *w1, int32_t n, int32_t offset, int32_t acc[4])
{
    int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3];
    int32_t i = 0;
#if MSF_DSP
    const int16x2_t off2 = msf_lanes(offset);
    for (; i + 4 <= n; i += 4) {
        const uint32_t v0 = msf_read4(w0 + i), v1 = msf_read4(w1 + i);
        const int16x2_t w0e = msf_even0(v0), w0o = msf_odd0(v0);
        const int16x2_t w1e = msf_even0(v1), w1o = msf_odd0(v1);
        const uint32_t u0 = msf_read4(x0 + i);
        int16x2_t xe = msf_even(u0, off2), xo = msf_odd(u0, off2);
        a00 = __smlad(xe, w0e, __smlad(xo, w0o, a00));
        a01 = __smlad(xe, w1e, __smlad(xo, w1o, a01));
        if (pair) {
            const uint32_t u1 = msf_read4(x1 + i);
            xe = msf_even(u1, off2);
            xo = msf_odd(u1, off2);
            a10 = __smlad(xe, w0e, __smlad(xo, w0o, a10));
            a11 = __smlad(xe, w1e, __smlad(xo, w1o, a11));
        }
    }
#endif
    for (; i < n; i++) {
        const int32_t p = x0[i] + offset;
        a00 += p * w0[i];
        a01 += p * w1[i];
        if (pair) {
            const int32_t q = x1[i] + offset;
            a10 += q * w0[i];
            a11 += q * w1[i];
        }
    }
    acc[0] = a00;
    acc[1] = a01;
    acc[2] = a10;
    acc[3] = a11;
}

#if MSF_DSP
#define MSF_CONV_GATHER 512   /* window elements per pixel gathered (a pair: 2 KB of stack) */

/* acc[2p + q] += sum over i < n of x_p[i] * w_q[i]: x_p gathered by gather(), so every four
 * elements are the words (x0, x2) and (x1, x3), matching SXTB16 of the weights */
MSF_INLINE void mac_gathered(const int pair, const int16_t *x0, const int16_t *x1,
                             const int8_t *w0, const int8_t *w1, int32_t n, int32_t acc[4])
{
    int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3];
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32_t v0 = msf_read4(w0 + i), v1 = msf_read4(w1 + i);
        const int16x2_t w0e = msf_even0(v0), w0o = msf_odd0(v0);
        const int16x2_t w1e = msf_even0(v1), w1o = msf_odd0(v1);
        int16x2_t xe, xo;
        __builtin_memcpy(&xe, x0 + i, 4);
        __builtin_memcpy(&xo, x0 + i + 2, 4);
        a00 = __smlad(xe, w0e, __smlad(xo, w0o, a00));
        a01 = __smlad(xe, w1e, __smlad(xo, w1o, a01));
        if (pair) {
            __builtin_memcpy(&xe, x1 + i, 4);
            __builtin_memcpy(&xo, x1 + i + 2, 4);
            a10 = __smlad(xe, w0e, __smlad(xo, w0o, a10));
            a11 = __smlad(xe, w1e, __smlad(xo, w1o, a11));
        }
    }
    for (; i < n; i++) {
        a00 += x0[i] * w0[i];
        a01 += x0[i] * w1[i];
        if (pair) {
            a10 += x1[i] * w0[i];
            a11 += x1[i] * w1[i];
        }
    }
    acc[0] = a00;
    acc[1] = a01;
    acc[2] = a10;
    acc[3] = a11;
}
#endif

/* Where a pixel's taps lie: the valid kernel columns [x0, x1) as `runs` runs of `run` bytes
 * (one run per kernel row in a whole tensor, one per tap in a column ring) starting at
 * cols[x0 + j] + top + (ky - y0) * row_stride, for the valid kernel rows [y0, y1). */
typedef struct {
    const int8_t *cols[MSF_MAX_KERNEL];
    int32_t x0, y0, y1, runs, run;
} taps_t;

#if MSF_DSP
/* The pixel's valid taps, run after run, as one stream of int16 plus the input offset, each
 * four elements stored as the words (x0, x2), (x1, x3) (what mac_gathered expects; the last
 * n % 4 in order). */
MSF_INLINE void gather(const taps_t *t, int32_t top, int32_t row_stride, int32_t offset,
                       int16_t *dst)
{
    const int16x2_t off2 = msf_lanes(offset);
    const int32_t n = (t->y1 - t->y0) * t->runs * t->run, full = n & ~3;
    int32_t e = 0;
    for (int32_t ky = t->y0; ky < t->y1; ky++) {
        for (int32_t j = 0; j < t->runs; j++) {
            const int8_t *x = t->cols[t->x0 + j] + top + (ky - t->y0) * row_stride;
            int32_t i = 0;
            if ((e & 3) == 0) {                      /* whole words while aligned to a group */
                for (; i + 4 <= t->run; i += 4, e += 4) {
                    const uint32_t u = msf_read4(x + i);
                    const int16x2_t lo = msf_even(u, off2), hi = msf_odd(u, off2);
                    __builtin_memcpy(dst + e, &lo, 4);
                    __builtin_memcpy(dst + e + 2, &hi, 4);
                }
            }
            for (; i < t->run; i++, e++) {
                const int32_t at = e < full ? (e & ~3) | ((e & 1) << 1) | ((e >> 1) & 1) : e;
                dst[at] = (int16_t)(x[i] + offset);
            }
        }
    }
}
#endif

/* Output pixel o0 (and, when `pair`, o1, whose taps lie `second` bytes further) */
MSF_INLINE void conv_pixels(const int pair, const msf_layer_t *l, const taps_t *t, int32_t top,
                            int32_t row_stride, int32_t second, int8_t *o0, int8_t *o1)
{
    const int32_t k = l->kernel, cin = l->in_c, cout = l->out_c, filter = k * k * cin;
#if MSF_DSP
    /* a window spanning whole kernel rows has its weights in one run too: one stream */
    const int32_t n = (t->y1 - t->y0) * k * cin;
    int16_t scratch[2][MSF_CONV_GATHER];
    const int gathered = t->x0 == 0 && t->runs * t->run == k * cin && n <= MSF_CONV_GATHER;
    if (gathered) {
        gather(t, top, row_stride, l->in_offset, scratch[0]);
        if (pair) {
            gather(t, top + second, row_stride, l->in_offset, scratch[1]);
        }
    }
#endif
    for (int32_t oc = 0; oc < cout; oc += 2) {
        const int32_t oc1 = oc + 1 < cout ? oc + 1 : oc;
        const int8_t *f0 = l->weights + oc * filter + t->x0 * cin;
        const int8_t *f1 = l->weights + oc1 * filter + t->x0 * cin;
        const int32_t b0 = l->bias ? l->bias[oc] : 0, b1 = l->bias ? l->bias[oc1] : 0;
        int32_t acc[4] = {b0, b1, b0, b1};
#if MSF_DSP
        if (gathered) {
            const int32_t woff = t->y0 * k * cin;
            mac_gathered(pair, scratch[0], scratch[1], f0 + woff, f1 + woff, n, acc);
        }
#else
        const int gathered = 0;
#endif
        for (int32_t ky = t->y0; ky < t->y1 && !gathered; ky++) {
            const int32_t roff = top + (ky - t->y0) * row_stride, woff = ky * k * cin;
            for (int32_t j = 0; j < t->runs; j++) {
                const int8_t *x = t->cols[t->x0 + j] + roff;
                mac_2x2(pair, x, x + second, f0 + woff + j * cin, f1 + woff + j * cin, t->run,
                        l->in_offset, acc);
            }
        }
        const int32_t m0 = l->mult[oc], m1 = l->mult[oc1], s0 = l->shift[oc], s1 = l->shift[oc1];
        o0[oc] = msf_output_s8(acc[0], m0, s0, l->out_offset, l->act_min, l->act_max);
        o0[oc1] = msf_output_s8(acc[1], m1, s1, l->out_offset, l->act_min, l->act_max);
        if (pair) {
            o1[oc] = msf_output_s8(acc[2], m0, s0, l->out_offset, l->act_min, l->act_max);
            o1[oc1] = msf_output_s8(acc[3], m1, s1, l->out_offset, l->act_min, l->act_max);
        }
    }
}

void msf_conv2d_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                       int32_t col, int32_t r0, int32_t r1)
{
    const int32_t cin = l->in_c, s = l->stride;
    /* the column fixes the valid kernel columns of every pixel; cols[] point at row r0's */
    const msf_window_t c = msf_window(l, r0, col);
    taps_t t;
    msf_window_columns(in, &c, t.cols);
    /* a whole tensor holds the valid taps of one kernel row contiguously: one run per row */
    const int contiguous = in->col_stride == cin && in->col_slots >= l->in_w;
    t.x0 = c.x0;
    t.runs = contiguous ? 1 : c.x1 - c.x0;
    t.run = contiguous ? (c.x1 - c.x0) * cin : cin;
    for (int32_t row = r0; row < r1;) {
        const msf_window_t w = msf_window(l, row, col);
        const msf_window_t w2 = msf_window(l, row + 1, col);
        const int32_t top = (w.in_row + w.y0 - (c.in_row + c.y0)) * in->row_stride;
        int8_t *o0 = msf_pixel(out, row, col);
        t.y0 = w.y0;
        t.y1 = w.y1;
        /* pair with the next row when its window is clipped alike */
        if (row + 1 < r1 && w2.y0 == w.y0 && w2.y1 == w.y1) {
            conv_pixels(1, l, &t, top, in->row_stride, s * in->row_stride, o0,
                        msf_pixel(out, row + 1, col));
            MSF_COUNT(2 * (w.y1 - w.y0) * (c.x1 - c.x0) * cin * l->out_c);
            row += 2;
        } else {
            conv_pixels(0, l, &t, top, in->row_stride, 0, o0, o0);
            MSF_COUNT((w.y1 - w.y0) * (c.x1 - c.x0) * cin * l->out_c);
            row += 1;
        }
    }
}

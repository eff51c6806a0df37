/* The folded 3x3 depthwise convolution (msf_layer_t.folded: the input offset in the bias,
 * weights and bias doubled, kernel_data.folds): its inner loop as an inline template of the
 * channel count, which the generated code instantiates with it as a constant (MSF_DW3X3_KERNEL,
 * msf_pio/codegen/specialise.py: every tap's offset immediate) and depthwise_conv2d_s8.c with
 * the layer's.
 *
 * Every tap of a window is read, so that a group of four channels runs the same 9 taps for
 * every pixel: a window inside the input is read where it lies (its three rows as pointers),
 * a window whose rows leave the input reads a row of the input zero point for them (which adds
 * nothing: the folded bias counts every tap's offset), one whose columns leave it is first
 * copied with its outside taps as the zero point. */
#ifndef MSF_DEPTHWISE_CONV2D_S8_H
#define MSF_DEPTHWISE_CONV2D_S8_H

#include "msf/runtime.h"
#include "output.h"
#include "window.h"

#if defined(__GNUC__)
#define MSF_NOINLINE __attribute__((noinline))
typedef uint32_t __attribute__((may_alias)) msf_dw_word_t;
#else
#define MSF_NOINLINE
typedef uint32_t msf_dw_word_t;
#endif

/* `pixels` output pixels of a folded 3x3 layer of c channels (in groups of four), requantized
 * the fast way (full: the clamp is the int8 range): pixel i's window rows at r0, r1, r2 plus
 * i * step, its columns c bytes apart; its outputs at o + i * ostep. c and full are
 * compile-time constants in specialised kernels: the taps are immediate offsets. */
MSF_INLINE void msf_dw3x3_run(const int full, const msf_layer_t *l, const int8_t *r0,
                              const int8_t *r1, const int8_t *r2, int32_t step, int32_t pixels,
                              int8_t *o, int32_t ostep, const int32_t c)
{
    const msf_out_t oq = {l->out_offset, l->act_min, l->act_max};
    for (int32_t i = 0; i < pixels; i++, r0 += step - c, r1 += step - c, r2 += step - c,
                 o += ostep - c) {
        const msf_dw_word_t *w = (const msf_dw_word_t *)(const void *)l->weights;
        const msf_channel_t *ch = l->channels;
        for (int32_t g = 0; g < c; g += 4, r0 += 4, r1 += 4, r2 += 4, w += 18, ch += 4,
                     o += 4) {
            int32_t a0 = ch[0].bias, a1 = ch[1].bias, a2 = ch[2].bias, a3 = ch[3].bias;
#if MSF_DSP
            /* tap k: input word at t, weights at words 2k, 2k + 1 of the group */
#define MSF_DW_TAP(t, k)                                                                       \
    do {                                                                                       \
        const uint32_t u = msf_read4(t);                                                       \
        const msf_x2_t xe = msf_even0(u), xo = msf_odd0(u);                                    \
        uint32_t we, wo;                                                                       \
        MSF_LOAD2(w, 8 * (k), we, wo);                                                         \
        a0 = msf_smlabb(xe, we, a0);                                                           \
        a2 = msf_smlatt(xe, we, a2);                                                           \
        a1 = msf_smlabb(xo, wo, a1);                                                           \
        a3 = msf_smlatt(xo, wo, a3);                                                           \
    } while (0)
            MSF_DW_TAP(r0, 0);
            MSF_DW_TAP(r0 + c, 1);
            MSF_DW_TAP(r0 + 2 * c, 2);
            MSF_DW_TAP(r1, 3);
            MSF_DW_TAP(r1 + c, 4);
            MSF_DW_TAP(r1 + 2 * c, 5);
            MSF_DW_TAP(r2, 6);
            MSF_DW_TAP(r2 + c, 7);
            MSF_DW_TAP(r2 + 2 * c, 8);
#undef MSF_DW_TAP
#else
            const int8_t *const rows[3] = {r0, r1, r2};
            for (int32_t ky = 0; ky < 3; ky++) {
                for (int32_t kx = 0; kx < 3; kx++) {
                    const int16_t *h = (const int16_t *)(const void *)(w + 6 * ky + 2 * kx);
                    const int8_t *t = rows[ky] + kx * c;
                    a0 += t[0] * h[0];
                    a2 += t[2] * h[1];
                    a1 += t[1] * h[2];
                    a3 += t[3] * h[3];
                }
            }
#endif
            const msf_channel_t c0 = ch[0], c1 = ch[1], c2 = ch[2], c3 = ch[3];
            const int8_t v0 = msf_channel_output(MSF_RQ_FAST2, full, a0, &c0, oq);
            const int8_t v1 = msf_channel_output(MSF_RQ_FAST2, full, a1, &c1, oq);
            const int8_t v2 = msf_channel_output(MSF_RQ_FAST2, full, a2, &c2, oq);
            const int8_t v3 = msf_channel_output(MSF_RQ_FAST2, full, a3, &c3, oq);
            o[0] = v0;
            o[1] = v1;
            o[2] = v2;
            o[3] = v3;
        }
    }
}

/* Kernel row ky of a clipped 3x3 window of layer l copied into `row` (3 c bytes), its outside
 * taps as the input zero point; the outside columns of a row inside the input only with `fill`
 * (a slot that held a row of the same window columns keeps them) (depthwise_conv2d_s8.c) */
void msf_dw3x3_window(const msf_layer_t *l, const msf_view_t *in, const msf_window_t *w,
                      int32_t ky, int fill, int8_t *row);

/* The pixels along a row (`across`) or a column of a folded 3x3 layer of c channels: output
 * pixels (row + i dr, col + i dc), i < n, into o + i ostep (full as msf_channel_output; c and
 * full compile-time constants in a specialised kernel, inlined whole into it). Along the line
 * a window's taps lie inside the input for a range of positions found from the stride and
 * padding: those run in one call; a window whose rows leave the input reads zero-point rows for
 * them, one whose columns leave it (or lie across a ring's wrap) is copied row by row into the
 * three slots of `window` (9 c bytes, msf_layer_t.scratch), input row iy in slot iy mod 3, so
 * that down a column the next window copies only its new rows (one of three at stride 1). The
 * zero-point rows take slot 0. */
MSF_INLINE void msf_dw3x3_line(const int full, const int32_t c, const msf_layer_t *l,
                               const msf_view_t *in, int32_t row, int32_t col, int across,
                               int32_t n, int8_t *o, int32_t ostep, int8_t *window)
{
    const int32_t s = across ? l->stride_w : l->stride_h;
    const int32_t pad = across ? l->pad_left : l->pad_top;
    const int32_t size = across ? l->in_w : l->in_h, first = across ? col : row;
    const int32_t q0 = (pad + s - 1) / s, q1 = (size - 3 + pad) / s + 1;
    const int32_t lo = q0 - first > 0 ? q0 - first : 0;        /* inside along the line */
    const int32_t hi = q1 - first < n ? q1 - first : n;
    int8_t *const zero = window;                                /* a row of zero points */
    int have_zero = 0;
    int32_t held[3] = {0, 0, 0}, held_col = INT32_MIN;    /* slot j: input row held[j] */
    for (int32_t i = 0; i < n;) {
        const int32_t r = across ? row : row + i, k = across ? col + i : col;
        const msf_window_t w = msf_window(l, r, k);
        int inside = !w.x0 && w.x1 == 3 && in->col_stride == c;
        const int8_t *t[3];
        for (int32_t ky = 0; inside && ky < 3; ky++) {      /* the rows: where they lie */
            const int32_t iy = w.in_row + ky;
            t[ky] = iy >= 0 && iy < l->in_h ? msf_pixel(in, iy, w.in_col) : 0;
            inside = !t[ky] || msf_pixel(in, iy, w.in_col + 2) == t[ky] + 2 * c;
        }
        int32_t m = 1;
        if (!inside) {                /* copied: the rows the slots do not hold of this column */
            if (held_col != w.in_col) {
                held[0] = held[1] = held[2] = INT32_MIN;
                held_col = w.in_col;
            }
            int32_t slot = w.in_row % 3;
            slot += slot < 0 ? 3 : 0;
            for (int32_t ky = 0; ky < 3; ky++, slot = slot == 2 ? 0 : slot + 1) {
                if (held[slot] != w.in_row + ky) {
                    msf_dw3x3_window(l, in, &w, ky, held[slot] == INT32_MIN,
                                     window + slot * 3 * c);
                    held[slot] = w.in_row + ky;
                }
                t[ky] = window + slot * 3 * c;
            }
            have_zero = 0;
        } else {
            /* a run of pixels inside (along a ring's row: if it does not wrap), or one whose
             * rows leave the input (its zero-point rows do not move along a line) */
            const int whole = i >= lo && i < hi && t[0] && t[1] && t[2] &&
                              (!across || in->col_slots >= l->in_w);
            m = whole ? hi - i : 1;
            if (!t[0] || !t[1] || !t[2]) {
                if (!have_zero) {               /* words: c is a multiple of four */
                    const uint32_t z = 0x01010101u * (uint8_t)-l->in_offset;
                    for (msf_dw_word_t *q = (msf_dw_word_t *)(void *)zero, *e = q + 3 * c / 4;
                         q != e; q++) {
                        *q = z;
                    }
                    have_zero = 1;
                    held[0] = INT32_MIN;                       /* slot 0 overwritten */
                }
                t[0] = t[0] ? t[0] : zero;
                t[1] = t[1] ? t[1] : zero;
                t[2] = t[2] ? t[2] : zero;
            }
        }
        const int32_t step = m > 1 ? s * (across ? c : in->row_stride) : 0;
        msf_dw3x3_run(full, l, t[0], t[1], t[2], step, m, o + i * ostep, ostep, c);
        MSF_COUNT((w.y1 - w.y0) * (w.x1 - w.x0) * c * m);
        i += m;
    }
}

/* A folded 3x3 depthwise kernel specialised to c channels (msf_layer_t.column, emitted by the
 * generated code), full as msf_channel_output */
#define MSF_DW3X3_KERNEL(name, c, full)                                                         \
    static void name(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,        \
                     int32_t col, int32_t r0, int32_t r1, void *scratch)                        \
    {                                                                                           \
        msf_dw3x3_line(full, c, l, in, r0, col, 0, r1 - r0, msf_pixel(out, r0, col),           \
                       out->row_stride, (int8_t *)scratch);                                     \
    }

#endif /* MSF_DEPTHWISE_CONV2D_S8_H */

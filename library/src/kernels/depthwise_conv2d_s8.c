/* Depthwise int8 convolution (depth multiplier 1), one output column (or one row of a line
 * buffer): a folded 3x3 layer (msf_layer_t.folded) by the template of depthwise_conv2d_s8.h
 * with its shape from the layer's fields (or its specialised instance, msf_layer_t.column),
 * any other here. Four channels per inner loop: one word of input and two words of weights per
 * kernel tap, the weights laid out as int16 in the lanes the input word splits into
 * (msf_pio/codegen/kernel_data.py: groups of four channels, lanes 0, 2 then 1, 3); with the DSP
 * extension the input word is split into int16 pairs with the input offset added (SXTAB16) and
 * multiplied lane by lane (SMLABB/SMLATT), elsewhere four scalar sums. The last 1-3 channels
 * run one at a time.
 *
 * The accumulators of a chunk of channels of two pixels (rows whose windows are clipped alike)
 * are kept (acc[2 * ch + p]) and requantized together by msf_requant_s8 (requant_s8.c), which
 * loads each channel's constants once for both pixels; the loop over a pixel's channels is a
 * function of its own per window width (3, 5, 7: the taps of a kernel row unroll). */
#include "depthwise_conv2d_s8.h"

MSF_KERNEL_SPEED


/* The column pointers are read again at every kernel row: kept in registers across the row
 * loop, they push its accumulators onto the stack (GCC 12 at -O3, 3x3: 7.1 -> 8.4 instructions
 * per MAC on the Cortex-M7 model). */
#if defined(__GNUC__)
#define MSF_RELOAD() __asm__ volatile("" ::: "memory")
#else
#define MSF_RELOAD() ((void)0)
#endif

#define MSF_DW_CHUNK 16       /* channels accumulated before requantizing (128 B of stack) */

/* One pixel's taps: its first valid tap row `top` bytes from the valid kernel columns' pointers
 * (cols[j], j < width), `rows` valid kernel rows `row_stride` apart; the weights of the first
 * valid tap of channel group 0 at w (int16), `kw` taps per kernel row, `group` int16 values from
 * one group of four channels to the next. */
typedef struct {
    const int8_t *const *cols;
    const int16_t *w;
    const msf_channel_t *ch;
    int32_t top, rows, row_stride, kw, group, offset;
} dw_pixel_t;

/* acc[2 j] = bias + the taps of channel 4 g + j, j < 4 */
MSF_INLINE void dw_group(const int32_t width, const dw_pixel_t *p, int32_t g, int32_t *acc)
{
    const int32_t rs = p->row_stride, kw4 = 4 * p->kw;
    const msf_channel_t *ch = p->ch + 4 * g;
    int32_t a0 = ch[0].bias, a1 = ch[1].bias, a2 = ch[2].bias, a3 = ch[3].bias;
    const int16_t *wr = p->w + g * p->group;
    int32_t roff = p->top + 4 * g;
#if MSF_DSP
    const msf_x2_t off2 = msf_lanes(p->offset);
#endif
    for (int32_t ky = 0; ky < p->rows; ky++, roff += rs, wr += kw4) {
        MSF_RELOAD();
        const int16_t *f = wr;
        for (int32_t j = 0; j < width; j++, f += 4) {
            const int8_t *x = p->cols[j] + roff;
#if MSF_DSP
            const uint32_t u = msf_read4(x);
            const msf_x2_t xe = msf_even(u, off2), xo = msf_odd(u, off2);
            const msf_x2_t we = ((const msf_dw_word_t *)f)[0];
            const msf_x2_t wo = ((const msf_dw_word_t *)f)[1];
            a0 = msf_smlabb(xe, we, a0);
            a2 = msf_smlatt(xe, we, a2);
            a1 = msf_smlabb(xo, wo, a1);
            a3 = msf_smlatt(xo, wo, a3);
#else
            const int32_t offset = p->offset;
            a0 += (x[0] + offset) * f[0];
            a2 += (x[2] + offset) * f[1];
            a1 += (x[1] + offset) * f[2];
            a3 += (x[3] + offset) * f[3];
#endif
        }
    }
    acc[0] = a0;
    acc[2] = a1;
    acc[4] = a2;
    acc[6] = a3;
}

/* acc[0] = bias + the taps of channel c (lane `lane` of its group's weights) */
MSF_INLINE void dw_channel(const int32_t width, const dw_pixel_t *p, int32_t c, int32_t *acc)
{
    static const uint8_t lane[4] = {0, 2, 1, 3};
    const int32_t rs = p->row_stride, kw4 = 4 * p->kw, offset = p->offset;
    int32_t a = p->ch[c].bias;
    const int16_t *wr = p->w + (c / 4) * p->group + lane[c % 4];
    int32_t roff = p->top + c;
    for (int32_t ky = 0; ky < p->rows; ky++, roff += rs, wr += kw4) {
        for (int32_t j = 0; j < width; j++) {
            a += (p->cols[j][roff] + offset) * wr[4 * j];
        }
    }
    acc[0] = a;
}

/* Accumulators of channels [c0, c0 + count) of one pixel into acc[2 * (ch - c0)]: groups of
 * four, then the channels of a last partial group one by one */
MSF_INLINE void dw_chunk(const int32_t width, const dw_pixel_t *pp, int32_t c0, int32_t count,
                         int32_t *acc)
{
    const dw_pixel_t copy = *pp, *p = &copy;   /* not reloaded after each accumulator store */
    const int32_t end = c0 + count;
    int32_t c = c0;
    for (; c + 4 <= end; c += 4, acc += 8) {
        dw_group(width, p, c / 4, acc);
    }
    for (; c < end; c++, acc += 2) {
        dw_channel(width, p, c, acc);
    }
}

static MSF_NOINLINE void dw_chunk3(const dw_pixel_t *p, int32_t c0, int32_t count, int32_t *acc)
{
    dw_chunk(3, p, c0, count, acc);
}

static MSF_NOINLINE void dw_chunk5(const dw_pixel_t *p, int32_t c0, int32_t count, int32_t *acc)
{
    dw_chunk(5, p, c0, count, acc);
}

static MSF_NOINLINE void dw_chunk7(const dw_pixel_t *p, int32_t c0, int32_t count, int32_t *acc)
{
    dw_chunk(7, p, c0, count, acc);
}

static MSF_NOINLINE void dw_chunk_any(int32_t width, const dw_pixel_t *p, int32_t c0,
                                      int32_t count, int32_t *acc)
{
    dw_chunk(width, p, c0, count, acc);
}

/* width: the pixel's valid kernel columns, of kw */
static void dw_pixel_chunk(int32_t width, int32_t kw, const dw_pixel_t *p, int32_t c0,
                           int32_t count, int32_t *acc)
{
    if (width == 3 && kw == 3) {
        dw_chunk3(p, c0, count, acc);
    } else if (width == 5 && kw == 5) {
        dw_chunk5(p, c0, count, acc);
    } else if (width == 7 && kw == 7) {
        dw_chunk7(p, c0, count, acc);
    } else {
        dw_chunk_any(width, p, c0, count, acc);
    }
}

void msf_dw3x3_window(const msf_layer_t *l, const msf_view_t *in, const msf_window_t *w,
                      int32_t ky, int fill, int8_t *row)
{
    const int32_t c = l->in_c;
    const uint32_t zero = 0x01010101u * (uint8_t)-l->in_offset;
    const int outside = ky < w->y0 || ky >= w->y1;
    for (int32_t kx = 0; kx < 3; kx++, row += c) {
        msf_dw_word_t *d = (msf_dw_word_t *)(void *)row, *const e = d + c / 4;
        if (outside || kx < w->x0 || kx >= w->x1) {
            for (; (outside || fill) && d != e; d++) {
                *d = zero;
            }
            continue;
        }
        const int8_t *t = msf_pixel(in, w->in_row + ky, w->in_col + kx);
        for (; d != e; d++, t += 4) {               /* whole words: c is a multiple of 4 */
            uint32_t v;
            memcpy(&v, t, 4);
            *d = v;
        }
    }
}

/* msf_dw3x3_line with the layer's channel count and clamp, in a window buffer of the layer's
 * scratch bytes (a variable-length array the stack predictor bounds from the same shape,
 * codegen/stack.py); or the layer's specialised kernel */
static MSF_NOINLINE void dw3x3_line(const msf_layer_t *l, const msf_view_t *in,
                                    const msf_view_t *out, int32_t row, int32_t col, int across,
                                    int32_t n, int8_t *o, int32_t ostep)
{
    int32_t window[(l->scratch + 3) / 4];
    if (l->column && !across) {
        l->column(l, in, out, col, row, row + n, window);
    } else {
        msf_dw3x3_line(l->act_min == -128 && l->act_max == 127, l->in_c, l, in, row, col,
                       across, n, o, ostep, (int8_t *)(void *)window);
    }
}

void msf_depthwise_special_column(const msf_layer_t *l, const msf_view_t *in,
                                  const msf_view_t *out, int32_t col, int32_t r0, int32_t r1)
{
    int32_t window[(l->scratch + 3) / 4];      /* as dw3x3_line's */
    l->column(l, in, out, col, r0, r1, window);
}

/* The pixel's fields every call shares: weights (the valid window's first tap set later),
 * strides, offset */
static void dw_pixels_init(const msf_layer_t *l, int32_t row_stride, dw_pixel_t p[2])
{
    for (int32_t i = 0; i < 2; i++) {
        p[i].ch = l->channels;
        p[i].row_stride = row_stride;
        p[i].kw = l->kernel_w;
        p[i].group = 4 * l->kernel_h * l->kernel_w;
        p[i].offset = l->in_offset;
    }
}

/* The chunks of channels of one pixel, or two (`pair`, p[1]), requantized into o and o + d */
static void dw_pixels(const msf_layer_t *l, int32_t width, const dw_pixel_t p[2], int pair,
                      int8_t *o, int32_t d)
{
    const msf_out_t oq = {l->out_offset, l->act_min, l->act_max};
    const int32_t c = l->in_c;
    int32_t acc[2 * MSF_DW_CHUNK];
    for (int32_t c0 = 0; c0 < c; c0 += MSF_DW_CHUNK) {
        const int32_t count = c - c0 < MSF_DW_CHUNK ? c - c0 : MSF_DW_CHUNK;
        for (int32_t i = 0; i <= pair; i++) {
            dw_pixel_chunk(width, l->kernel_w, &p[i], c0, count, acc + i);
        }
        msf_requant_s8(acc, 1 + pair, count, l->channels + c0, &oq, l->requant, o + c0, d);
    }
}

void msf_depthwise_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                          int32_t col, int32_t r0, int32_t r1)
{
    const int32_t kw = l->kernel_w, rs = in->row_stride, ors = out->row_stride;
    int8_t *o = msf_pixel(out, r0, col);
    if (l->folded) {
        dw3x3_line(l, in, out, r0, col, 0, r1 - r0, o, ors);
        return;
    }
    const msf_window_t cw = msf_window(l, r0, col);
    const int8_t *cols[MSF_MAX_KERNEL];
    msf_window_columns(in, &cw, cols);
    const int32_t width = cw.x1 - cw.x0;
    dw_pixel_t p[2];
    dw_pixels_init(l, rs, p);
    for (int32_t row = r0; row < r1;) {
        const msf_window_t w = msf_window(l, row, col);
        const msf_window_t w2 = msf_window(l, row + 1, col);
        /* pair with the next row when its window is clipped alike */
        const int pair = row + 1 < r1 && w2.y0 == w.y0 && w2.y1 == w.y1;
        for (int32_t i = 0; i <= pair; i++) {
            /* offset of the pixel's first valid tap row from the cols[] pointers (row r0's) */
            p[i].cols = cols + cw.x0;
            p[i].top = (w.in_row + i * l->stride_h + w.y0 - (cw.in_row + cw.y0)) * rs;
            p[i].rows = w.y1 - w.y0;
            p[i].w = (const int16_t *)(const void *)l->weights + 4 * (w.y0 * kw + cw.x0);
        }
        dw_pixels(l, width, p, pair, o, ors);
        MSF_COUNT((1 + pair) * (w.y1 - w.y0) * width * l->in_c);
        row += 1 + pair;
        o += (1 + pair) * ors;
    }
}

/* Output row `row`, columns [c0, c1): as msf_depthwise_column with the roles of rows and
 * columns swapped (pairs of columns whose windows are clipped alike), the pair's second pixel's
 * taps stride_w pixels further along the same rows of a view whose rows are contiguous. */
void msf_depthwise_row(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                       int32_t row, int32_t c0, int32_t c1)
{
    const int32_t kw = l->kernel_w;
    if (l->folded) {
        dw3x3_line(l, in, out, row, c0, 1, c1 - c0, msf_pixel(out, row, c0), out->col_stride);
        return;
    }
    dw_pixel_t p[2];
    dw_pixels_init(l, in->row_stride, p);
    for (int32_t i = 0; i < 2; i++) {
        p[i].top = i * l->stride_w * in->col_stride;
    }
    for (int32_t col = c0; col < c1;) {
        const msf_window_t w = msf_window(l, row, col);
        const msf_window_t w2 = msf_window(l, row, col + 1);
        const int pair = col + 1 < c1 && w2.x0 == w.x0 && w2.x1 == w.x1;
        const int8_t *cols[MSF_MAX_KERNEL];
        msf_window_columns(in, &w, cols);
        for (int32_t i = 0; i < 2; i++) {
            p[i].cols = cols + w.x0;
            p[i].rows = w.y1 - w.y0;
            p[i].w = (const int16_t *)(const void *)l->weights + 4 * (w.y0 * kw + w.x0);
        }
        dw_pixels(l, w.x1 - w.x0, p, pair, msf_pixel(out, row, col), out->col_stride);
        MSF_COUNT((1 + pair) * (w.y1 - w.y0) * (w.x1 - w.x0) * l->in_c);
        col += 1 + pair;
    }
}

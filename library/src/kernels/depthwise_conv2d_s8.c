/* Depthwise int8 convolution (depth multiplier 1), one output column. Four channels per inner
 * loop: one word of input and one word of weights per kernel tap; with the DSP extension the
 * four int8 lanes are split into int16 pairs (the input offset added in the same instruction)
 * and multiplied lane by lane (SMLABB/SMLATT), elsewhere four independent scalar sums. The
 * column fixes the valid kernel columns, so their pointers are found once per call.
 *
 * The accumulators of a chunk of channels of two pixels (rows whose windows are clipped alike)
 * are kept (acc[2 * ch + p]) and requantized together by msf_requant_s8 (requant_s8.c), which
 * computes each channel's requantization constants once for both pixels; the loop over a
 * pixel's channels is a function of its own per window width (3, 5, 7: the taps of a kernel
 * row unroll), whose registers the compiler allocates for that loop alone. */
#include "msf/requant.h"
#include "msf/runtime.h"
#include "simd.h"
#include "window.h"

MSF_KERNEL_SPEED

#if defined(__GNUC__)
#define MSF_NOINLINE __attribute__((noinline))
#else
#define MSF_NOINLINE
#endif

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
 * valid tap at w, `kc` bytes from one kernel row to the next, `c` from one column to the next. */
typedef struct {
    const int8_t *const *cols;
    const int8_t *w;
    const int32_t *bias;
    int32_t top, rows, row_stride, kc, c, offset;
} dw_pixel_t;

/* a[j] += sum over the valid taps of (x[tap][j] + offset) * w[tap][j] for channels j < lanes
 * (4, or 1 for the last channels), x and w `ch` bytes into each tap */
MSF_INLINE void dw_taps(const int lanes, const int32_t width, const dw_pixel_t *p, int32_t ch,
                        int32_t a[4])
{
    const int32_t offset = p->offset, rs = p->row_stride, kc = p->kc, c = p->c;
    int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
#if MSF_DSP
    const msf_x2_t off2 = msf_lanes(offset);
#endif
    const int8_t *wr = p->w + ch;
    int32_t roff = p->top + ch;
    for (int32_t ky = 0; ky < p->rows; ky++, roff += rs, wr += kc) {
        MSF_RELOAD();
        const int8_t *f = wr;
        for (int32_t j = 0; j < width; j++, f += c) {
            const int8_t *x = p->cols[j] + roff;
            if (lanes == 1) {
                a0 += (x[0] + offset) * f[0];
                continue;
            }
#if MSF_DSP
            const uint32_t u = msf_read4(x), v = msf_read4(f);
            const msf_x2_t xe = msf_even(u, off2), xo = msf_odd(u, off2);
            const msf_x2_t we = msf_even0(v), wo = msf_odd0(v);
            a0 = msf_smlabb(xe, we, a0);
            a2 = msf_smlatt(xe, we, a2);
            a1 = msf_smlabb(xo, wo, a1);
            a3 = msf_smlatt(xo, wo, a3);
#else
            a0 += (x[0] + offset) * f[0];
            a1 += (x[1] + offset) * f[1];
            a2 += (x[2] + offset) * f[2];
            a3 += (x[3] + offset) * f[3];
#endif
        }
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

/* acc[2 * j] = bias + taps of channel ch + j, for j < lanes (4, or 1) */
MSF_INLINE void dw_lanes(const int lanes, const int32_t width, const dw_pixel_t *p, int32_t ch,
                         int32_t *acc)
{
    const int32_t *b = p->bias;
    int32_t a[4] = {b ? b[ch] : 0, 0, 0, 0};
    for (int j = 1; j < lanes; j++) {
        a[j] = b ? b[ch + j] : 0;
    }
    dw_taps(lanes, width, p, ch, a);
    for (int j = 0; j < lanes; j++) {
        acc[2 * j] = a[j];
    }
}

/* Accumulators of channels [c0, c0 + count) of one pixel into acc[2 * (ch - c0)]: four
 * channels at a time; the last 1-3 with the DSP extension as the chunk's last four (one word
 * per tap instead of a pass per channel; the lanes done twice come out the same), elsewhere
 * one by one (four scalar lanes cost as much per channel as one) */
MSF_INLINE void dw_chunk(const int32_t width, const dw_pixel_t *pp, int32_t c0, int32_t count,
                         int32_t *acc)
{
    const dw_pixel_t copy = *pp, *p = &copy;   /* not reloaded after each accumulator store */
    const int32_t end = c0 + count;
    int32_t ch = c0;
    for (; ch + 4 <= end; ch += 4, acc += 8) {
        dw_lanes(4, width, p, ch, acc);
    }
    if (MSF_DSP && ch < end && count >= 4) {
        dw_lanes(4, width, p, end - 4, acc - 2 * (ch + 4 - end));
        return;
    }
    for (; ch < end; ch++, acc += 2) {
        dw_lanes(1, width, p, ch, acc);
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

/* Channels of the next chunk when `rest` remain: MSF_DW_CHUNK, cut so that the last chunk has
 * four or more (its tail in words) */
MSF_INLINE int32_t dw_chunk_count(int32_t rest)
{
    return rest <= MSF_DW_CHUNK ? rest : rest - MSF_DW_CHUNK < 4 ? rest - 4 : MSF_DW_CHUNK;
}

void msf_depthwise_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                          int32_t col, int32_t r0, int32_t r1)
{
    const int32_t kw = l->kernel_w, c = l->in_c;
    const msf_out_t oq = {l->out_offset, l->act_min, l->act_max};
    const msf_window_t cw = msf_window(l, r0, col);
    const int8_t *cols[MSF_MAX_KERNEL];
    msf_window_columns(in, &cw, cols);
    const int32_t width = cw.x1 - cw.x0, rs = in->row_stride, ors = out->row_stride;
    dw_pixel_t p[2];
    for (int32_t i = 0; i < 2; i++) {
        p[i].bias = l->bias;
        p[i].row_stride = rs;
        p[i].kc = kw * c;
        p[i].c = c;
        p[i].offset = l->in_offset;
    }
    int32_t acc[2 * MSF_DW_CHUNK];
    int8_t *o = msf_pixel(out, r0, col);
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
            p[i].w = l->weights + (w.y0 * kw + cw.x0) * c;
        }
        for (int32_t c0 = 0, count; c0 < c; c0 += count) {
            count = dw_chunk_count(c - c0);
            for (int32_t i = 0; i <= pair; i++) {
                dw_pixel_chunk(width, kw, &p[i], c0, count, acc + i);
            }
            msf_requant_s8(acc, 1 + pair, count, l->mult + c0, l->shift + c0, &oq, l->narrow,
                           o + c0, ors);
        }
        MSF_COUNT((1 + pair) * (w.y1 - w.y0) * width * c);
        row += 1 + pair;
        o += (1 + pair) * ors;
    }
}

/* Output row `row`, columns [c0, c1): as msf_depthwise_column with the roles of rows and
 * columns swapped (pairs of columns whose windows are clipped alike), the pair's second pixel's
 * taps stride_w pixels further along the same rows of a view whose rows are contiguous. The
 * column kernel keeps its own loop: its code, and so vanilla's speed, stays as it was. */
void msf_depthwise_row(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                       int32_t row, int32_t c0, int32_t c1)
{
    const int32_t kw = l->kernel_w, c = l->in_c;
    const msf_out_t oq = {l->out_offset, l->act_min, l->act_max};
    dw_pixel_t p[2];
    for (int32_t i = 0; i < 2; i++) {
        p[i].bias = l->bias;
        p[i].row_stride = in->row_stride;
        p[i].kc = kw * c;
        p[i].c = c;
        p[i].offset = l->in_offset;
        p[i].top = i * l->stride_w * in->col_stride;
    }
    int32_t acc[2 * MSF_DW_CHUNK];
    for (int32_t col = c0; col < c1;) {
        const msf_window_t w = msf_window(l, row, col);
        const msf_window_t w2 = msf_window(l, row, col + 1);
        const int pair = col + 1 < c1 && w2.x0 == w.x0 && w2.x1 == w.x1;
        const int8_t *cols[MSF_MAX_KERNEL];
        msf_window_columns(in, &w, cols);
        for (int32_t i = 0; i < 2; i++) {
            p[i].cols = cols + w.x0;
            p[i].rows = w.y1 - w.y0;
            p[i].w = l->weights + (w.y0 * kw + w.x0) * c;
        }
        int8_t *o = msf_pixel(out, row, col);
        for (int32_t ch = 0, count; ch < c; ch += count) {
            count = dw_chunk_count(c - ch);
            for (int32_t i = 0; i <= pair; i++) {
                dw_pixel_chunk(w.x1 - w.x0, kw, &p[i], ch, count, acc + i);
            }
            msf_requant_s8(acc, 1 + pair, count, l->mult + ch, l->shift + ch, &oq, l->narrow,
                           o + ch, out->col_stride);
        }
        MSF_COUNT((1 + pair) * (w.y1 - w.y0) * (w.x1 - w.x0) * c);
        col += 1 + pair;
    }
}

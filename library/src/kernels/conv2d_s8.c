/* Dense int8 convolution (conv2d, 1x1 included): the kernel of conv2d_s8.h instantiated with
 * the layer's fields as its shape (layers the generated code does not specialise, and the
 * tests' harness), and for windows whose rows do not fit MSF_CONV_BUFFER a per-pixel path: each
 * pixel's window gathered in parts of at most MSF_CONV_PART taps, the partial sums of
 * MSF_CHANNEL_CHUNK channels kept between parts.
 *
 * Also the input-stationary 1x1 projection into int32 sums of the channel split
 * (msf_conv2d_sums_column) and their requantization (msf_conv2d_sums_finish). */
#include "conv2d_s8.h"

MSF_KERNEL_SPEED

/* taps of one pixel's part of a window: two pixels' parts fill the buffer */
#define MSF_CONV_PART ((MSF_CONV_BUFFER - 8) / 2)

/* msf_conv_channels for one and two pixels under the layer's requantization mode, given at run
 * time (a shape's kernel specialises three) */
MSF_NOINLINE void msf_conv_channels1(const msf_layer_t *l, const int16_t *x, int32_t d,
                                     int32_t groups, int8_t *o, int32_t ors)
{
    msf_conv_channels(1, l->requant, l->act_min == -128 && l->act_max == 127, 0, l, x, d,
                      groups, l->out_c, o, ors);
}

static MSF_NOINLINE void channels2(const msf_layer_t *l, const int16_t *x, int32_t d,
                                   int32_t groups, int8_t *o, int32_t ors)
{
    msf_conv_channels(2, l->requant, l->act_min == -128 && l->act_max == 127, 0, l, x, d,
                      groups, l->out_c, o, ors);
}

void msf_conv_channels_any(const msf_layer_t *l, int32_t pixels, const int16_t *x, int32_t d,
                           int32_t groups, int8_t *o, int32_t ors)
{
    if (pixels == 2) {            /* direct calls: the stack predictor follows them */
        channels2(l, x, d, groups, o, ors);
    } else {
        msf_conv_channels1(l, x, d, groups, o, ors);
    }
}

void msf_conv_rows_clipped(int twice, const msf_layer_t *l, const msf_view_t *in, int32_t col,
                           int32_t a, int32_t z, int32_t kw, int32_t cin, int32_t row,
                           int32_t sw, int32_t pl, int16_t *buf)
{
    const int32_t ix0 = col * sw - pl, offset = l->in_offset;
    const int32_t x0 = ix0 < 0 ? -ix0 : 0;                   /* kernel columns inside */
    const int32_t x1 = l->in_w - ix0 < kw ? l->in_w - ix0 : kw;
    const int contiguous = in->col_stride == cin && in->col_slots >= l->in_w;
    const int32_t run = (contiguous ? x1 - x0 : 1) * cin;
    for (int32_t iy = a; iy < z; iy++, buf += row) {
        int32_t t = 0;
        if (iy >= 0 && iy < l->in_h) {
            for (; t < x0 * cin; t++) {
                buf[t] = 0;
            }
            for (int32_t kx = x0; kx < x1; kx += run / cin, t += run) {
                if (twice) {
                    msf_expand(1, msf_pixel(in, iy, ix0 + kx), run, offset, buf + t);
                } else {
                    msf_expand(0, msf_pixel(in, iy, ix0 + kx), run, offset, buf + t);
                }
            }
        }
        for (; t < row; t++) {
            buf[t] = 0;
        }
    }
}

/* `pairs` pairs of filters `stride` bytes apart from w on, over `groups` groups of the windows
 * at x (and x + d with `pair`), their accumulators started at and left in part[4 j ...]; one
 * pixel's MSF_WIDE_PAIRS pairs at a time while they last */
MSF_INLINE void pairs_partial(const int pair, const int16_t *x, int32_t d, const int8_t *w,
                              int32_t stride, int32_t groups, int32_t pairs, int32_t *part)
{
    int32_t j = 0;
    for (; !pair && j + MSF_WIDE_PAIRS <= pairs; j += MSF_WIDE_PAIRS,
                                                w += MSF_WIDE_PAIRS * stride,
                                                part += 4 * MSF_WIDE_PAIRS) {
        int32_t a[6];                     /* part[2 c]: channel c of the block, pixel 0 */
        for (int32_t c = 0; c < 2 * MSF_WIDE_PAIRS; c++) {
            a[c] = part[2 * c];
        }
        msf_mac_block(1, MSF_WIDE_PAIRS, x, 0, w, stride, groups, a);
        for (int32_t c = 0; c < 2 * MSF_WIDE_PAIRS; c++) {
            part[2 * c] = a[c];
        }
    }
    for (; j < pairs; j++, w += stride, part += 4) {
        if (pair) {
            msf_mac_block(2, 1, x, d, w, stride, groups, part);
        } else {                          /* part[2 c + p]: channel c of the pair, pixel 0 */
            int32_t a[2] = {part[0], part[2]};
            msf_mac_block(1, 1, x, 0, w, stride, groups, a);
            part[0] = a[0];
            part[2] = a[1];
        }
    }
}

static MSF_NOINLINE void partial1(const int16_t *x, const int8_t *w, int32_t stride,
                                  int32_t groups, int32_t pairs, int32_t *part)
{
    pairs_partial(0, x, 0, w, stride, groups, pairs, part);
}

static MSF_NOINLINE void partial2(const int16_t *x, int32_t d, const int8_t *w, int32_t stride,
                                  int32_t groups, int32_t pairs, int32_t *part)
{
    pairs_partial(1, x, d, w, stride, groups, pairs, part);
}

/* The part of taps [s0, s1) of one pixel's window (`pair` 0) or two (the second d taps
 * further) added to the accumulators of channels [c0, c0 + count), part[2 c + p] for channel
 * c0 + c and pixel p (msf_channels_part1_s8) */
MSF_INLINE void channels_part(const int pair, const msf_layer_t *l, const int16_t *x,
                              int32_t d, int32_t taps, int32_t s0, int32_t s1, int32_t c0,
                              int32_t count, int32_t *part, int8_t *o, int32_t ors)
{
    const int32_t stride = 8 * ((taps + 3) / 4), pairs = (count + 1) / 2;
    const msf_channel_t *ch = l->channels + c0;
    for (int32_t c = 0; s0 == 0 && c < 2 * pairs; c++) {
        part[2 * c] = part[2 * c + 1] = ch[c].bias;
    }
    const int8_t *w = l->weights + c0 / 2 * stride + 2 * s0;
    if (pair) {
        partial2(x, d, w, stride, (s1 - s0 + 3) / 4, pairs, part);
    } else {
        partial1(x, w, stride, (s1 - s0 + 3) / 4, pairs, part);
    }
    if (s1 == taps) {
        const msf_out_t oq = {l->out_offset, l->act_min, l->act_max};
        msf_requant_s8(part, 1 + pair, count, ch, &oq, l->requant, o + c0, ors);
    }
}

static void channels_part_any(const msf_layer_t *l, int32_t pixels, const int16_t *x,
                              int32_t d, int32_t taps, int32_t s0, int32_t s1, int32_t c0,
                              int32_t count, int32_t *part, int8_t *o, int32_t ors)
{
    if (pixels == 2) {
        channels_part(1, l, x, d, taps, s0, s1, c0, count, part, o, ors);
    } else {
        channels_part(0, l, x, d, taps, s0, s1, c0, count, part, o, ors);
    }
}

void msf_channels_part1_s8(const msf_layer_t *l, const int16_t *x, int32_t taps, int32_t s0,
                           int32_t s1, int32_t c0, int32_t count, int32_t *part, int8_t *o)
{
    channels_part(0, l, x, 0, taps, s0, s1, c0, count, part, o, 0);
}

/* Taps [s0, s1) of the window of output pixel (row, col) in filter order (kernel rows of
 * msf_conv_row taps), expanded into dst, padding as zeros, then zeros up to a whole group */
static void gather_part(const msf_layer_t *l, const msf_view_t *in, int32_t row, int32_t col,
                        int32_t s0, int32_t s1, int16_t *dst)
{
    const int32_t cin = l->in_c, kw = l->kernel_w, run = msf_conv_row(kw, cin, l->stride_h);
    const int32_t iy0 = row * l->stride_h - l->pad_top, ix0 = col * l->stride_w - l->pad_left;
    int16_t *t = dst;
    for (int32_t ky = 0; ky < l->kernel_h; ky++) {
        const int32_t iy = iy0 + ky;
        for (int32_t kx = 0; kx <= kw; kx++) {
            const int32_t e = ky * run + kx * cin;            /* the tap's first, its last */
            const int32_t end = kx < kw ? e + cin : (ky + 1) * run;
            const int32_t a = e > s0 ? e : s0, z = end < s1 ? end : s1, ix = ix0 + kx;
            if (a >= z) {
                continue;
            }
            if (kx < kw && iy >= 0 && iy < l->in_h && ix >= 0 && ix < l->in_w) {
                msf_expand(l->requant == MSF_RQ_FAST2, msf_pixel(in, iy, ix) + (a - e), z - a,
                           l->in_offset, t);
            } else {
                memset(t, 0, (size_t)(z - a) * sizeof *t);
            }
            t += z - a;
        }
    }
    while ((t - dst) & 3) {
        *t++ = 0;
    }
}

/* A window too long for the column buffer: pixel pairs, their windows gathered in parts */
static void conv_parts(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                       int32_t col, int32_t r0, int32_t r1, int16_t *x)
{
    const int32_t cout = l->out_c, ors = out->row_stride;
    const int32_t taps = l->kernel_h * msf_conv_row(l->kernel_w, l->in_c, l->stride_h);
    int32_t part[2 * MSF_CHANNEL_CHUNK];
    int8_t *o = msf_pixel(out, r0, col);
    for (int32_t row = r0; row < r1;) {
        const int pair = row + 1 < r1;
        for (int32_t c0 = 0; c0 < cout; c0 += MSF_CHANNEL_CHUNK) {
            const int32_t count = cout - c0 < MSF_CHANNEL_CHUNK ? cout - c0 : MSF_CHANNEL_CHUNK;
            for (int32_t s0 = 0; s0 < taps; s0 += MSF_CONV_PART) {
                const int32_t s1 = taps - s0 < MSF_CONV_PART ? taps : s0 + MSF_CONV_PART;
                gather_part(l, in, row, col, s0, s1, x);
                if (pair) {
                    gather_part(l, in, row + 1, col, s0, s1, x + MSF_CONV_PART + 4);
                }
                channels_part_any(l, 1 + pair, x, MSF_CONV_PART + 4, taps, s0, s1, c0, count,
                                  part, o, ors);
            }
        }
#ifdef MSF_COUNT_MACS
        for (int32_t r = row; r <= row + pair; r++) {         /* valid taps only */
            const msf_window_t w = msf_window(l, r, col);
            MSF_COUNT((w.y1 - w.y0) * (w.x1 - w.x0) * l->in_c * cout);
        }
#endif
        row += 1 + pair;
        o += (1 + pair) * ors;
    }
}

void msf_conv2d_run(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                    int32_t col, int32_t r0, int32_t r1, int16_t *buf)
{
    const int32_t kh = l->kernel_h, sh = l->stride_h, cin = l->in_c;
    if ((kh + sh) * msf_conv_row(l->kernel_w, cin, sh) > MSF_CONV_BUFFER - 4) {
        conv_parts(l, in, out, col, r0, r1, buf);    /* not two pixels' window rows */
        return;
    }
    msf_conv2d_chunks(0, l, in, out, col, r0, r1, buf, kh, l->kernel_w, cin, l->out_c, sh,
                      l->stride_w, l->pad_left, l->requant,
                      l->act_min == -128 && l->act_max == 127, 0);
}

void msf_conv2d_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                       int32_t col, int32_t r0, int32_t r1)
{
    /* the column buffer: as large as the layer's shape needs (a variable-length array the
     * stack predictor bounds from the same shape, codegen/stack.py) */
    int32_t scratch[(l->scratch + 3) / 4];
    if (l->column) {
        l->column(l, in, out, col, r0, r1, scratch);
    } else {
        msf_conv2d_run(l, in, out, col, r0, r1, (int16_t *)(void *)scratch);
    }
}

void msf_conv2d_special_column(const msf_layer_t *l, const msf_view_t *in,
                               const msf_view_t *out, int32_t col, int32_t r0, int32_t r1)
{
    int32_t scratch[(l->scratch + 3) / 4];     /* as msf_conv2d_column's */
    l->column(l, in, out, col, r0, r1, scratch);
}

/* s[ch] += sum over the slice's four input channels (eight, when `wide`: DSP only) at x of
 * (x[i] + offset) * f[ch * filter + i], for every output channel ch < cout, for pixel 0 (x0,
 * sums s0) and, with `pair`, pixel 1 (x1, s1): the slice's inputs stay in registers while
 * every output channel's weights stream past them */
MSF_INLINE void sums_slice(const int pair, const int wide, const int8_t *x0, const int8_t *x1,
                           int32_t offset, const int8_t *f, int32_t filter, int32_t cout,
                           int8_t *s0, int8_t *s1)
{
#if MSF_DSP
    const msf_x2_t off2 = msf_lanes(offset);
    const uint32_t u0 = msf_read4(x0), u1 = msf_read4(x1);
    const uint32_t t0 = wide ? msf_read4(x0 + 4) : 0, t1 = wide ? msf_read4(x1 + 4) : 0;
    const msf_x2_t e0 = msf_even(u0, off2), o0 = msf_odd(u0, off2);
    const msf_x2_t e1 = msf_even(u1, off2), o1 = msf_odd(u1, off2);
    const msf_x2_t e2 = msf_even(t0, off2), o2 = msf_odd(t0, off2);
    const msf_x2_t e3 = msf_even(t1, off2), o3 = msf_odd(t1, off2);
#else
    (void)wide;
    const int32_t p0 = x0[0] + offset, p1 = x0[1] + offset, p2 = x0[2] + offset;
    const int32_t p3 = x0[3] + offset, q0 = x1[0] + offset, q1 = x1[1] + offset;
    const int32_t q2 = x1[2] + offset, q3 = x1[3] + offset;
#endif
    for (int32_t ch = 0; ch < cout; ch++, f += filter, s0 += 4, s1 += 4) {
        int32_t a, b = 0;
        memcpy(&a, s0, 4);
        if (pair) {
            memcpy(&b, s1, 4);
        }
#if MSF_DSP
        const uint32_t v = msf_read4(f), v2 = wide ? msf_read4(f + 4) : 0;
        const msf_x2_t we = msf_even0(v), wo = msf_odd0(v);
        const msf_x2_t we2 = msf_even0(v2), wo2 = msf_odd0(v2);
        a = msf_smlad(e0, we, msf_smlad(o0, wo, a));
        b = msf_smlad(e1, we, msf_smlad(o1, wo, b));
        if (wide) {
            a = msf_smlad(e2, we2, msf_smlad(o2, wo2, a));
            b = msf_smlad(e3, we2, msf_smlad(o3, wo2, b));
        }
#else
        a += p0 * f[0] + p1 * f[1] + p2 * f[2] + p3 * f[3];
        b += q0 * f[0] + q1 * f[1] + q2 * f[2] + q3 * f[3];
#endif
        memcpy(s0, &a, 4);
        if (pair) {
            memcpy(s1, &b, 4);
        }
    }
}

/* s[ch] += sum over i < n of (x[i] + offset) * w[ch * filter + i] for every output channel
 * ch < cout, for pixel 0 (x0, sums s0) and, with `pair`, pixel 1 (x1, s1; x0 and s0 again
 * without); sums of any alignment. Input-stationary: the input channels in slices (eight with
 * the DSP extension, four, then one by one), each output channel's sums loaded and stored
 * once per slice. A channel-split projection has a group's few input channels per call, too
 * few to amortise conv_column's per-chunk accumulators and their separate addition. */
MSF_INLINE void sums_pixels(const int pair, const int8_t *x0, const int8_t *x1, int32_t n,
                            int32_t offset, const int8_t *w, int32_t filter, int32_t cout,
                            int8_t *s0, int8_t *s1)
{
    int32_t i = 0;
    for (; MSF_DSP && i + 8 <= n; i += 8) {
        sums_slice(pair, 1, x0 + i, x1 + i, offset, w + i, filter, cout, s0, s1);
    }
    for (; i + 4 <= n; i += 4) {
        sums_slice(pair, 0, x0 + i, x1 + i, offset, w + i, filter, cout, s0, s1);
    }
    for (; i < n; i++) {
        const int32_t p = x0[i] + offset, q = x1[i] + offset;
        const int8_t *f = w + i;
        for (int32_t ch = 0; ch < cout; ch++, f += filter) {
            int32_t a;
            memcpy(&a, s0 + 4 * ch, 4);
            a += p * f[0];
            memcpy(s0 + 4 * ch, &a, 4);
            if (pair) {
                memcpy(&a, s1 + 4 * ch, 4);
                a += q * f[0];
                memcpy(s1 + 4 * ch, &a, 4);
            }
        }
    }
}

static MSF_NOINLINE void sums_pair(const int8_t *x0, const int8_t *x1, int32_t n,
                                   int32_t offset, const int8_t *w, int32_t filter,
                                   int32_t cout, int8_t *s0, int8_t *s1)
{
    sums_pixels(1, x0, x1, n, offset, w, filter, cout, s0, s1);
}

static MSF_NOINLINE void sums_one(const int8_t *x0, int32_t n, int32_t offset, const int8_t *w,
                                  int32_t filter, int32_t cout, int8_t *s0)
{
    sums_pixels(0, x0, x0, n, offset, w, filter, cout, s0, s0);
}

void msf_conv2d_sums_column(const msf_layer_t *l, const msf_view_t *in, int8_t *sums,
                            int32_t row_stride, int32_t col, int32_t r0, int32_t r1)
{
    /* a 1x1 window: rows pair up in order, their taps where they lie */
    const int32_t cin = l->in_c, cout = l->out_c, step = l->stride_h * in->row_stride;
    const int8_t *x = msf_pixel(in, r0 * l->stride_h, col * l->stride_w);
    int32_t row = r0;
    for (; row + 2 <= r1; row += 2, x += 2 * step, sums += 2 * row_stride) {
        sums_pair(x, x + step, cin, l->in_offset, l->weights, cin, cout, sums,
                  sums + row_stride);
    }
    if (row < r1) {
        sums_one(x, cin, l->in_offset, l->weights, cin, cout, sums);
    }
    MSF_COUNT((r1 - r0) * cin * cout);
}

void msf_conv2d_sums_finish(const msf_layer_t *l, const int8_t *sums, int32_t pixels,
                            int8_t *out)
{
    const msf_out_t oq = {l->out_offset, l->act_min, l->act_max};
    const int32_t cout = l->out_c;
    int32_t acc[2 * MSF_CHANNEL_CHUNK];
    for (int32_t p = 0; p < pixels; p++, sums += 4 * cout, out += cout) {
        for (int32_t c0 = 0; c0 < cout; c0 += MSF_CHANNEL_CHUNK) {
            const int32_t count = cout - c0 < MSF_CHANNEL_CHUNK ? cout - c0 : MSF_CHANNEL_CHUNK;
            for (int32_t ch = 0; ch < count; ch++) {       /* MSF_RQ_FAST2: sums doubled */
                memcpy(&acc[2 * ch], sums + 4 * (c0 + ch), 4);
                acc[2 * ch] = acc[2 * ch] * (1 + (l->requant == MSF_RQ_FAST2)) +
                              l->channels[c0 + ch].bias;
            }
            msf_requant_s8(acc, 1, count, l->channels + c0, &oq, l->requant, out + c0, 0);
        }
    }
}

/* Dense int8 convolution (conv2d, 1x1 included), one output column. Two output pixels (rows)
 * times two output channels per inner loop: every input word loaded serves two channels and
 * every weight word two pixels (CMSIS-NN's 2x2 matrix-multiply blocking). With the DSP
 * extension the pixels' valid taps are first gathered into a small stack scratch as int16 with
 * the input offset added (im2col), in the lane order SXTB16 gives the weights, so the inner
 * loop only loads, extends the weights and multiplies; elsewhere (and for windows larger than
 * the scratch) the taps are read where they lie, in a whole tensor or a column ring. Kernel
 * taps outside the input are skipped (their input is the zero point); a pixel whose window is
 * clipped unlike its neighbour's, or a lone last row, is computed alone (1x2 blocking).
 *
 * The accumulators of a chunk of output channels are kept (acc[2 * ch + p]) and requantized
 * together by msf_requant_s8 (requant_s8.c), so that neither loop holds the other's values in
 * its registers; each loop over the channels of a pixel pair is a function of its own, whose
 * registers the compiler allocates for that loop alone. */
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

/* Where a pixel's taps lie: the valid kernel columns [x0, x1) as `runs` runs of `run` bytes
 * (one run per kernel row in a whole tensor, one per tap in a column ring) starting at
 * cols[x0 + j] + top + (ky - y0) * row_stride, for the valid kernel rows [y0, y1); a kernel
 * row is kw taps wide. */
typedef struct {
    const int8_t *cols[MSF_MAX_KERNEL];
    int32_t x0, y0, y1, runs, run, kw, cin;
} taps_t;

#define MSF_CONV_CHUNK 16     /* output channels accumulated before requantizing (128 B) */
#define MSF_CONV_GATHER 512   /* window elements per pixel gathered (a pair: 2 KB of stack) */

/* acc[2p + q] += sum over i < n of (x_p[i] + offset) * w_q[i], for channels q in {0, 1} and
 * pixels p in {0, 1} (p = 0 only unless `pair`; a compile-time constant once inlined) */
MSF_INLINE void mac_2x2(const int pair, const int8_t *x0, const int8_t *x1, const int8_t *w0,
                        const int8_t *w1, int32_t n, int32_t offset, int32_t acc[4])
{
    int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3];
    int32_t i = 0;
#if MSF_DSP
    const msf_x2_t off2 = msf_lanes(offset);
    for (; i + 4 <= n; i += 4) {
        const uint32_t v0 = msf_read4(w0 + i), v1 = msf_read4(w1 + i);
        const msf_x2_t w0e = msf_even0(v0), w0o = msf_odd0(v0);
        const msf_x2_t w1e = msf_even0(v1), w1o = msf_odd0(v1);
        const uint32_t u0 = msf_read4(x0 + i);
        msf_x2_t xe = msf_even(u0, off2), xo = msf_odd(u0, off2);
        a00 = msf_smlad(xe, w0e, msf_smlad(xo, w0o, a00));
        a01 = msf_smlad(xe, w1e, msf_smlad(xo, w1o, a01));
        if (pair) {
            const uint32_t u1 = msf_read4(x1 + i);
            xe = msf_even(u1, off2);
            xo = msf_odd(u1, off2);
            a10 = msf_smlad(xe, w0e, msf_smlad(xo, w0o, a10));
            a11 = msf_smlad(xe, w1e, msf_smlad(xo, w1o, a11));
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

/* Where a pixel's taps lie (the taps_t) and how its channels' accumulators are made: weights of
 * channel 0 at the pixel's first valid tap, `filter` bytes from one channel to the next */
typedef struct {
    const int8_t *w;
    const int32_t *bias;
    int32_t filter, offset, top, row_stride, second;
} direct_t;

/* Accumulators of output channel 0 (and 1, when `two`) of pixel 0 (and 1, whose taps lie
 * `second` bytes further), the taps read where they lie: acc[2 * q + p] for channel q, pixel p */
MSF_INLINE void direct_channels(const int pair, const int two, const taps_t *t,
                                const direct_t *d, const int8_t *f0, const int32_t *bias,
                                int32_t *acc)
{
    const int32_t kc = t->kw * t->cin, cin = t->cin, run = t->run, runs = t->runs;
    const int32_t offset = d->offset, row_stride = d->row_stride, second = d->second;
    const int8_t *f1 = f0 + (two ? d->filter : 0);
    int32_t a[4];
    a[0] = a[2] = bias ? bias[0] : 0;
    a[1] = a[3] = bias && two ? bias[1] : 0;
    int32_t roff = d->top;
    for (int32_t ky = t->y0; ky < t->y1; ky++, roff += row_stride, f0 += kc, f1 += kc) {
        for (int32_t j = 0; j < runs; j++) {
            const int8_t *x = t->cols[t->x0 + j] + roff;
            mac_2x2(pair, x, x + second, f0 + j * cin, f1 + j * cin, run, offset, a);
        }
    }
    acc[0] = a[0];
    acc[1] = a[2];
    if (two) {
        acc[2] = a[1];
        acc[3] = a[3];
    }
}

/* ... of `count` output channels, two at a time */
MSF_INLINE void direct_run(const int pair, const taps_t *t, const direct_t *d, int32_t count,
                           int32_t *acc)
{
    int32_t ch = 0;
    for (; ch + 2 <= count; ch += 2) {
        direct_channels(pair, 1, t, d, d->w + ch * d->filter, d->bias ? d->bias + ch : 0,
                        acc + 2 * ch);
    }
    if (ch < count) {
        direct_channels(pair, 0, t, d, d->w + ch * d->filter, d->bias ? d->bias + ch : 0,
                        acc + 2 * ch);
    }
}

static MSF_NOINLINE void direct_pair(const taps_t *t, const direct_t *d, int32_t count,
                                     int32_t *acc)
{
    direct_run(1, t, d, count, acc);
}

static MSF_NOINLINE void direct_one(const taps_t *t, const direct_t *d, int32_t count,
                                    int32_t *acc)
{
    direct_run(0, t, d, count, acc);
}

#if MSF_DSP

/* The gathered stream of a window of n >= 4 taps: tap e < whole = n & ~3 at position e, the
 * last r = n % 4 taps at the end of the group that follows, after 4 - r zeros (so that the last
 * group lines up with the window's last four weights, all inside the weight array); within
 * every group of four the words (x0, x2) and (x1, x3), matching SXTB16 of four weights. */

/* The gathered stream of the n int8 taps at x (contiguous) plus the input offset: whole words,
 * then the last r = n % 4 taps straight to their places in the zero-padded last group. x may lie
 * in dst's upper half (bytes [n, 2n)): each word is read before dst's lower part reaches it. */
MSF_INLINE void expand(const int8_t *x, int32_t n, int32_t offset, int16_t *dst)
{
    const msf_x2_t off2 = msf_lanes(offset);
    const int32_t whole = n & ~3, r = n - whole;
    for (int32_t e = 0; e < whole; e += 4) {
        const uint32_t u = msf_read4(x + e);
        const msf_x2_t lo = msf_even(u, off2), hi = msf_odd(u, off2);
        __builtin_memcpy(dst + e, &lo, 4);
        __builtin_memcpy(dst + e + 2, &hi, 4);
    }
    if (r) {                                     /* positions 4 - r.. of the last group */
        const int16_t last = (int16_t)(x[n - 1] + offset);
        const int16_t second = r >= 2 ? (int16_t)(x[n - 2] + offset) : 0;
        const int16_t third = r == 3 ? (int16_t)(x[n - 3] + offset) : 0;
        int16_t *g = dst + whole;
        g[0] = 0;
        g[1] = second;
        g[2] = third;
        g[3] = last;
    }
}

/* The pixel's n valid taps, run after run, as a gathered stream: a single run is expanded
 * where it lies; several (kernel rows of a whole tensor, taps of a column ring) are first
 * copied one after the other into the upper half of dst, then expanded. */
MSF_INLINE void gather(const taps_t *t, int32_t top, int32_t row_stride, int32_t offset,
                       int32_t n, int16_t *dst)
{
    const int8_t *x0 = t->cols[t->x0] + top;
    if (t->runs == 1 && t->y1 - t->y0 == 1) {
        expand(x0, n, offset, dst);
        return;
    }
    int8_t *stage = (int8_t *)dst + n, *s = stage;
    for (int32_t ky = t->y0; ky < t->y1; ky++) {
        for (int32_t j = 0; j < t->runs; j++, s += t->run) {
            const int8_t *x = t->cols[t->x0 + j] + top + (ky - t->y0) * row_stride;
            int32_t i = 0;
            for (; i + 4 <= t->run; i += 4) {
                const uint32_t u = msf_read4(x + i);
                __builtin_memcpy(s + i, &u, 4);
            }
            for (; i < t->run; i++) {
                s[i] = x[i];
            }
        }
    }
    expand(stage, n, offset, dst);
}

/* a += one group of four: weights w0 (channel 0) and w1 (channel 1), gathered taps x (pixel 0)
 * and x + MSF_CONV_GATHER (pixel 1) */
MSF_INLINE void mac_group(const int pair, const int16_t *x, const int8_t *w0, const int8_t *w1,
                          int32_t a[4])
{
    const uint32_t v0 = msf_read4(w0), v1 = msf_read4(w1);
    const msf_x2_t w0e = msf_even0(v0), w0o = msf_odd0(v0);
    const msf_x2_t w1e = msf_even0(v1), w1o = msf_odd0(v1);
    msf_x2_t xe, xo;
    __builtin_memcpy(&xe, x, 4);
    __builtin_memcpy(&xo, x + 2, 4);
    a[0] = msf_smlad(xe, w0e, msf_smlad(xo, w0o, a[0]));
    a[2] = msf_smlad(xe, w1e, msf_smlad(xo, w1o, a[2]));
    if (pair) {
        __builtin_memcpy(&xe, x + MSF_CONV_GATHER, 4);
        __builtin_memcpy(&xo, x + MSF_CONV_GATHER + 2, 4);
        a[1] = msf_smlad(xe, w0e, msf_smlad(xo, w0o, a[1]));
        a[3] = msf_smlad(xe, w1e, msf_smlad(xo, w1o, a[3]));
    }
}

/* Accumulators of output channel 0 (and 1, `filter` bytes of weights further, when `two`) of
 * pixel 0 (and 1) from the gathered stream(s) x of n >= 4 elements, channel 0's weights at w:
 * acc[2 * q + p] for channel q, pixel p */
MSF_INLINE void gathered_channels(const int pair, const int two, const int16_t *x,
                                  const int8_t *w, int32_t filter, const int32_t *bias,
                                  int32_t n, int32_t *acc)
{
    const int32_t whole = n & ~3, back = 4 - (n - whole);
    const int8_t *w1 = w + (two ? filter : 0);
    int32_t a[4];
    a[0] = a[1] = bias ? bias[0] : 0;
    a[2] = a[3] = bias && two ? bias[1] : 0;
    int32_t i = 0;
    for (; i < whole; i += 4) {
        mac_group(pair, x + i, w + i, w1 + i, a);
    }
    if (back != 4) {                   /* the last n % 4 taps: the window's last four weights */
        mac_group(pair, x + i, w + i - back, w1 + i - back, a);
    }
    acc[0] = a[0];
    acc[1] = a[1];
    if (two) {
        acc[2] = a[2];
        acc[3] = a[3];
    }
}

/* a[q] += one group of four gathered taps at x times channel q's four weights at w[q] + i */
MSF_INLINE void mac_group4(const int16_t *x, const int8_t *const w[4], int32_t i, int32_t a[4])
{
    msf_x2_t xe, xo;
    __builtin_memcpy(&xe, x, 4);
    __builtin_memcpy(&xo, x + 2, 4);
    for (int32_t q = 0; q < 4; q++) {
        const uint32_t v = msf_read4(w[q] + i);
        a[q] = msf_smlad(xe, msf_even0(v), msf_smlad(xo, msf_odd0(v), a[q]));
    }
}

/* Accumulators of output channels 0..3 (`filter` bytes of weights apart) of one pixel from its
 * gathered stream x of n >= 4 elements, into acc[2 * q] for channel q: a lone pixel's loaded
 * taps serve four channels, as a pair's serve two channels of two pixels */
MSF_INLINE void gathered_four(const int16_t *x, const int8_t *w, int32_t filter,
                              const int32_t *bias, int32_t n, int32_t *acc)
{
    const int32_t whole = n & ~3, back = 4 - (n - whole);
    const int8_t *const ws[4] = {w, w + filter, w + 2 * filter, w + 3 * filter};
    int32_t a[4];
    for (int32_t q = 0; q < 4; q++) {
        a[q] = bias ? bias[q] : 0;
    }
    int32_t i = 0;
    for (; i < whole; i += 4) {
        mac_group4(x + i, ws, i, a);
    }
    if (back != 4) {                   /* the last n % 4 taps: the window's last four weights */
        mac_group4(x + i, ws, i - back, a);
    }
    for (int32_t q = 0; q < 4; q++) {
        acc[2 * q] = a[q];
    }
}

/* ... of `count` output channels: a lone pixel four at a time, then two at a time */
MSF_INLINE void gathered_run(const int pair, const int16_t *x, const int8_t *w, int32_t filter,
                             const int32_t *bias, int32_t count, int32_t n, int32_t *acc)
{
    int32_t ch = 0;
    for (; !pair && ch + 4 <= count; ch += 4) {
        gathered_four(x, w + ch * filter, filter, bias ? bias + ch : 0, n, acc + 2 * ch);
    }
    for (; ch + 2 <= count; ch += 2) {
        gathered_channels(pair, 1, x, w + ch * filter, filter, bias ? bias + ch : 0, n,
                          acc + 2 * ch);
    }
    if (ch < count) {
        gathered_channels(pair, 0, x, w + ch * filter, filter, bias ? bias + ch : 0, n,
                          acc + 2 * ch);
    }
}

static MSF_NOINLINE void gathered_pair(const int16_t *x, const int8_t *w, int32_t filter,
                                       const int32_t *bias, int32_t count, int32_t n,
                                       int32_t *acc)
{
    gathered_run(1, x, w, filter, bias, count, n, acc);
}

static MSF_NOINLINE void gathered_one(const int16_t *x, const int8_t *w, int32_t filter,
                                      const int32_t *bias, int32_t count, int32_t n,
                                      int32_t *acc)
{
    gathered_run(0, x, w, filter, bias, count, n, acc);
}
#endif

/* s[ch] += acc[2 ch] and, for pixel 1, s[d + 4 ch] += acc[2 ch + 1], channel ch < n: int32
 * sums at any byte alignment (the arena is packed byte-exact) */
static void add_sums(const int32_t *acc, int32_t pixels, int32_t n, int8_t *s, int32_t d)
{
    for (int32_t p = 0; p < pixels; p++, s += d) {
        for (int32_t ch = 0; ch < n; ch++) {
            int32_t v;
            memcpy(&v, s + 4 * ch, 4);
            v += acc[2 * ch + p];
            memcpy(s + 4 * ch, &v, 4);
        }
    }
}

/* The cout channels of pixel 0 (and 1, with `pair`), MSF_CONV_CHUNK at a time: accumulated from
 * their gathered streams in scratch (`gathered`: n elements each) or from the taps t where they
 * lie (channel 0's weights at w0), then requantized into o (the next pixel `ors` bytes on) or,
 * with `sums`, added to int32 sums there */
MSF_INLINE void chunks(const msf_layer_t *l, const int gathered, const int pair,
                       const int16_t *scratch, int32_t n, const taps_t *t, direct_t *d,
                       const int8_t *w0, const int sums, int8_t *o, int32_t ors)
{
    const int32_t filter = d->filter, cout = l->out_c;
    const msf_out_t oq = {l->out_offset, l->act_min, l->act_max};
    int32_t acc[2 * MSF_CONV_CHUNK];
    for (int32_t c0 = 0; c0 < cout; c0 += MSF_CONV_CHUNK) {
        const int32_t count = cout - c0 < MSF_CONV_CHUNK ? cout - c0 : MSF_CONV_CHUNK;
        d->w = w0 + c0 * filter;
        d->bias = l->bias ? l->bias + c0 : 0;
#if MSF_DSP
        if (gathered) {
            if (pair) {
                gathered_pair(scratch, d->w, filter, d->bias, count, n, acc);
            } else {
                gathered_one(scratch, d->w, filter, d->bias, count, n, acc);
            }
        } else
#else
        (void)gathered;
        (void)scratch;
        (void)n;
#endif
        if (pair) {
            direct_pair(t, d, count, acc);
        } else {
            direct_one(t, d, count, acc);
        }
        if (sums) {
            add_sums(acc, 1 + pair, count, o + 4 * c0, ors);
        } else {
            msf_requant_s8(acc, 1 + pair, count, l->mult + c0, l->shift + c0, &oq, l->narrow,
                           o + c0, ors);
        }
    }
}

/* Output column `col`, rows [r0, r1): the first output pixel at o, `ors` bytes from one row to
 * the next; requantized into int8, or with `sums` added to int32 sums (msf_conv2d_sums_column) */
static void conv_column(const msf_layer_t *l, const msf_view_t *in, int8_t *o, int32_t ors,
                        int sums, int32_t col, int32_t r0, int32_t r1)
{
    const int32_t kw = l->kernel_w, cin = l->in_c, filter = l->kernel_h * kw * cin;
    /* the column fixes the valid kernel columns of every pixel; cols[] point at row r0's */
    const msf_window_t cw = msf_window(l, r0, col);
    taps_t t;
    msf_window_columns(in, &cw, t.cols);
    /* a whole tensor holds the valid taps of one kernel row contiguously: one run per row */
    const int contiguous = in->col_stride == cin && in->col_slots >= l->in_w;
    const int32_t rs = in->row_stride;
    t.x0 = cw.x0;
    t.runs = contiguous ? 1 : cw.x1 - cw.x0;
    t.run = contiguous ? (cw.x1 - cw.x0) * cin : cin;
    t.kw = kw;
    t.cin = cin;
    direct_t d = {0, 0, filter, l->in_offset, 0, rs, l->stride_h * rs};
#if MSF_DSP
    int16_t scratch[2 * MSF_CONV_GATHER];
    /* a window spanning whole kernel rows has its taps, and its weights, in one stream */
    const int whole_rows = cw.x0 == 0 && cw.x1 == kw;
#else
    int16_t *const scratch = 0;
    const int whole_rows = 0;
#endif
    for (int32_t row = r0; row < r1;) {
        const msf_window_t w = msf_window(l, row, col);
        const msf_window_t w2 = msf_window(l, row + 1, col);
        /* pair with the next row when its window is clipped alike */
        const int pair = row + 1 < r1 && w2.y0 == w.y0 && w2.y1 == w.y1;
        const int8_t *w0 = l->weights + (w.y0 * kw + cw.x0) * cin;
        t.y0 = w.y0;
        t.y1 = w.y1;
        d.top = (w.in_row + w.y0 - (cw.in_row + cw.y0)) * rs;
        const int32_t n = (w.y1 - w.y0) * kw * cin;
        const int gathered = whole_rows && n >= 4 && n <= MSF_CONV_GATHER;
#if MSF_DSP
        if (gathered) {
            gather(&t, d.top, rs, d.offset, n, scratch);
            if (pair) {
                gather(&t, d.top + d.second, rs, d.offset, n, scratch + MSF_CONV_GATHER);
            }
        }
#endif
        chunks(l, gathered, pair, scratch, n, &t, &d, w0, sums, o, ors);
        MSF_COUNT((1 + pair) * (w.y1 - w.y0) * (cw.x1 - cw.x0) * cin * l->out_c);
        row += 1 + pair;
        o += (1 + pair) * ors;
    }
}

/* conv_column for a 1x1 window without padding, requantized: never clipped, so the rows pair
 * up in order and a pixel's taps are its in_c channels where they lie, in any view; no window
 * to derive per row (a channel-split group's expansion calls this per group and column) */
static void pointwise_column(const msf_layer_t *l, const msf_view_t *in, int8_t *o,
                             int32_t ors, int32_t col, int32_t r0, int32_t r1)
{
    const int32_t cin = l->in_c, step = l->stride_h * in->row_stride;
    taps_t t;                           /* one run of cin taps per pixel (cols[0] alone set) */
    t.cols[0] = msf_pixel(in, r0 * l->stride_h, col * l->stride_w);
    t.x0 = t.y0 = 0;
    t.y1 = t.runs = t.kw = 1;
    t.run = t.cin = cin;
    direct_t d = {0, 0, cin, l->in_offset, 0, step, step};
#if MSF_DSP
    int16_t scratch[2 * MSF_CONV_GATHER];
    const int gathered = cin >= 4 && cin <= MSF_CONV_GATHER;
#else
    int16_t *const scratch = 0;
    const int gathered = 0;
#endif
    for (int32_t row = r0; row < r1;) {
        const int pair = row + 1 < r1;
#if MSF_DSP
        if (gathered) {
            expand(t.cols[0] + d.top, cin, d.offset, scratch);
            if (pair) {
                expand(t.cols[0] + d.top + step, cin, d.offset, scratch + MSF_CONV_GATHER);
            }
        }
#endif
        chunks(l, gathered, pair, scratch, cin, &t, &d, l->weights, 0, o, ors);
        row += 1 + pair;
        d.top += (1 + pair) * step;
        o += (1 + pair) * ors;
    }
    MSF_COUNT((r1 - r0) * cin * l->out_c);
}

void msf_conv2d_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                       int32_t col, int32_t r0, int32_t r1)
{
    if (l->kernel_h == 1 && l->kernel_w == 1 && !l->pad_top && !l->pad_left) {
        pointwise_column(l, in, msf_pixel(out, r0, col), out->row_stride, col, r0, r1);
        return;
    }
    conv_column(l, in, msf_pixel(out, r0, col), out->row_stride, 0, col, r0, r1);
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
    if (l->kernel_h != 1 || l->kernel_w != 1 || l->pad_top || l->pad_left) {
        conv_column(l, in, sums, row_stride, 1, col, r0, r1);
        return;
    }
    /* a 1x1 window is never clipped: rows pair up in order, their taps where they lie */
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
    int32_t acc[2 * MSF_CONV_CHUNK];
    for (int32_t p = 0; p < pixels; p++, sums += 4 * cout, out += cout) {
        for (int32_t c0 = 0; c0 < cout; c0 += MSF_CONV_CHUNK) {
            const int32_t count = cout - c0 < MSF_CONV_CHUNK ? cout - c0 : MSF_CONV_CHUNK;
            for (int32_t ch = 0; ch < count; ch++) {
                memcpy(&acc[2 * ch], sums + 4 * (c0 + ch), 4);
                acc[2 * ch] += l->bias ? l->bias[c0 + ch] : 0;
            }
            msf_requant_s8(acc, 1, count, l->mult + c0, l->shift + c0, &oq, l->narrow,
                           out + c0, 0);
        }
    }
}

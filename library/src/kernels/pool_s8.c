/* Max and average pooling (input and output share one quantization), one output column.
 *
 * A pixel's channels go four at a time, each group reading its window tap by tap (one kernel
 * column's taps are row_stride apart). On DSP cores the four channels are one word: SSUB8/SEL
 * keep the four maxima in one register, and SXTAB16 adds the four values into two registers of
 * int16 lanes (exact while the window has at most 256 taps: 256 x 128 = 32768); elsewhere four
 * int32 accumulators. The last in_c % 4 channels (and wider windows' sums) go one at a time. */
#include "msf/requant.h"
#include "msf/runtime.h"
#include "simd.h"
#include "window.h"

/* TFLite's average: the sum divided by the number of valid taps, rounded half away from 0. */
MSF_INLINE int32_t rounded_average(int32_t sum, int32_t count)
{
    return sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
}

/* The mean of a global pool from its sum: the rounded average in the input's quantization
 * (TFLite AVERAGE_POOL_2D), or, when the layer carries a multiplier, the sum requantized to the
 * output's (TFLite MEAN: the multiplier folds s_in / s_out and 1 / pixels). */
static int8_t global_mean(const msf_layer_t *l, int32_t sum, int32_t pixels)
{
    const int32_t v = l->mult ? msf_requantize(sum + pixels * l->in_offset, l->mult[0],
                                               l->shift[0]) + l->out_offset
                              : rounded_average(sum, pixels);
    return msf_clamp(v, l->act_min, l->act_max);
}

void msf_global_avgpool(const msf_layer_t *l, const int8_t *in, int8_t *out)
{
    const int32_t pixels = (int32_t)l->in_h * l->in_w, c = l->in_c;
    for (int32_t ch = 0; ch < c; ch++) {
        int32_t sum = 0;
        for (int32_t p = 0; p < pixels; p++) {
            sum += in[p * c + ch];
        }
        out[ch] = global_mean(l, sum, pixels);
    }
    MSF_COUNT(pixels * c);
}

/* Iterative form: the sums live in the arena as int32 (unaligned: memcpy). */
void msf_gap_accumulate(const msf_layer_t *l, const int8_t *pixel, int8_t *sums)
{
    for (int32_t ch = 0; ch < l->in_c; ch++) {
        int32_t s;
        memcpy(&s, sums + 4 * ch, 4);
        s += pixel[ch];
        memcpy(sums + 4 * ch, &s, 4);
    }
    MSF_COUNT(l->in_c);
}

void msf_gap_finish(const msf_layer_t *l, int8_t *sums, int8_t *out)
{
    const int32_t pixels = (int32_t)l->in_h * l->in_w;
    for (int32_t ch = 0; ch < l->in_c; ch++) {   /* out may overlap sums: byte ch <= 4 ch */
        int32_t s;
        memcpy(&s, sums + 4 * ch, 4);
        out[ch] = global_mean(l, s, pixels);
    }
}

/* The windowed pools below ask for speed (MSF_KERNEL_SPEED); the global pool's loops above keep
 * the firmware's flags. */
MSF_KERNEL_SPEED

#define MSF_LANE_TAPS 256   /* the most taps whose int8 sum an int16 lane holds */

/* One output pixel's window (its valid kernel columns' first taps, the column's taps
 * row_stride apart up to span bytes past the first) and the activation's range, held in registers
 * across the pixel's channel groups; for the int16 lanes of averages, their start and the
 * rounding's tie threshold (lane_average). */
typedef struct {
    const int8_t *const *cols;
    int32_t n_cols, row_stride, span, count, lo, hi;
    uint32_t bias, tie;
} taps_t;

MSF_INLINE int32_t average(int32_t sum, const taps_t *t)
{
    return msf_clamp(rounded_average(sum, t->count), t->lo, t->hi);
}

#if MSF_DSP
/* four int8 values (low byte first) clamped to [lo, hi] into o[0..3] */
MSF_INLINE void store4(uint32_t v, const taps_t *t, int8_t *o)
{
    v = msf_min4(msf_max4(v, (uint8_t)t->lo * 0x01010101u), (uint8_t)t->hi * 0x01010101u);
    __builtin_memcpy(o, &v, 4);
}

/* A lane holding x = s + 128 n + n / 2 (s the sum of n taps; 0 <= x < 65536 for n <= 256) to
 * TFLite's rounded average of s plus 128: floor(x / n) rounds s / n half up; for even n a tie
 * of s <= 0 must round down (half away from zero), so x - 1 there (tie = 128 n + n / 2 + 1;
 * for odd n no s is a tie and tie = 0). */
MSF_INLINE uint32_t lane_average(uint32_t x, const taps_t *t)
{
    x += (uint32_t)((int32_t)(x - t->tie) >> 31);
    return x / (uint32_t)t->count;
}
#endif

/* Channels [ch, ch + 4): the maxima, clamped. */
MSF_INLINE void max_group(const taps_t *t, int32_t ch, int8_t *o)
{
#if MSF_DSP
    uint32_t m = 0x80808080u;
    for (int32_t k = 0; k < t->n_cols; k++) {
        const int8_t *p = t->cols[k] + ch, *end = p + t->span;
        for (; p != end; p += t->row_stride) {
            m = msf_max4(m, msf_read4(p));
        }
    }
    store4(m, t, o + ch);
#else
    int32_t m0 = t->lo, m1 = m0, m2 = m0, m3 = m0;   /* the lower clamp as the start */
    for (int32_t k = 0; k < t->n_cols; k++) {
        const int8_t *p = t->cols[k] + ch, *end = p + t->span;
        for (; p != end; p += t->row_stride) {
            m0 = p[0] > m0 ? p[0] : m0;
            m1 = p[1] > m1 ? p[1] : m1;
            m2 = p[2] > m2 ? p[2] : m2;
            m3 = p[3] > m3 ? p[3] : m3;
        }
    }
    o[ch] = (int8_t)(m0 < t->hi ? m0 : t->hi);
    o[ch + 1] = (int8_t)(m1 < t->hi ? m1 : t->hi);
    o[ch + 2] = (int8_t)(m2 < t->hi ? m2 : t->hi);
    o[ch + 3] = (int8_t)(m3 < t->hi ? m3 : t->hi);
#endif
}

/* Channels [ch, ch + 4): the averages, from four int32 sums (any window). */
MSF_INLINE void avg_group_wide(const taps_t *t, int32_t ch, int8_t *o)
{
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int32_t k = 0; k < t->n_cols; k++) {
        const int8_t *p = t->cols[k] + ch, *end = p + t->span;
        for (; p != end; p += t->row_stride) {
            s0 += p[0];
            s1 += p[1];
            s2 += p[2];
            s3 += p[3];
        }
    }
    o[ch] = (int8_t)average(s0, t);
    o[ch + 1] = (int8_t)average(s1, t);
    o[ch + 2] = (int8_t)average(s2, t);
    o[ch + 3] = (int8_t)average(s3, t);
}

/* Channels [ch, ch + 4): the averages; on DSP cores in int16 lanes (at most MSF_LANE_TAPS
 * taps: the caller checks), each starting at the bias and ending as lane_average's x. */
MSF_INLINE void avg_group(const taps_t *t, int32_t ch, int8_t *o)
{
#if MSF_DSP
    msf_x2_t even = t->bias, odd = t->bias;   /* channels ch, ch + 2 and ch + 1, ch + 3 */
    for (int32_t k = 0; k < t->n_cols; k++) {
        const int8_t *p = t->cols[k] + ch, *end = p + t->span;
        for (; p != end; p += t->row_stride) {
            const uint32_t v = msf_read4(p);
            even = msf_even(v, even);
            odd = msf_odd(v, odd);
        }
    }
    const uint32_t q = lane_average(even & 0xFFFFu, t) | lane_average(odd & 0xFFFFu, t) << 8 |
                       lane_average(even >> 16, t) << 16 | lane_average(odd >> 16, t) << 24;
    store4(q ^ 0x80808080u, t, o + ch);   /* each byte's average + 128, less 128 */
#else
    avg_group_wide(t, ch, o);
#endif
}

enum { MAX_GROUP, AVG_GROUP, AVG_GROUP_WIDE };

/* Channels [ch, ch + 4) by one of the group kernels (a constant once inlined). */
MSF_INLINE void group(int kind, const taps_t *t, int32_t ch, int8_t *o)
{
    if (kind == MAX_GROUP) {
        max_group(t, ch, o);
    } else if (kind == AVG_GROUP) {
        avg_group(t, ch, o);
    } else {
        avg_group_wide(t, ch, o);
    }
}

/* The pixel's channels (at least four) four at a time; the last in_c % 4 as the group of the
 * last four (rewriting a few outputs with the same values). */
MSF_INLINE void groups(int kind, const taps_t *t, int32_t c, int8_t *o)
{
    int32_t ch = 0;
    for (; ch + 4 <= c; ch += 4) {
        group(kind, t, ch, o);
    }
    if (ch < c) {
        group(kind, t, c - 4, o);
    }
}

/* Below four channels: one at a time. */
MSF_INLINE void channels(int is_max, const taps_t *t, int32_t c, int8_t *o)
{
    for (int32_t ch = 0; ch < c; ch++) {
        int32_t acc = is_max ? -128 : 0;
        for (int32_t k = 0; k < t->n_cols; k++) {
            const int8_t *p = t->cols[k] + ch, *end = p + t->span;
            for (; p != end; p += t->row_stride) {
                acc = is_max ? (*p > acc ? *p : acc) : acc + *p;
            }
        }
        o[ch] = is_max ? msf_clamp(acc, t->lo, t->hi) : (int8_t)average(acc, t);
    }
}

void msf_pool_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                     int32_t col, int32_t r0, int32_t r1)
{
    const int8_t *cols[MSF_MAX_KERNEL];
    const int32_t c = l->in_c;
    const int is_max = l->op == MSF_MAX_POOL;
    for (int32_t row = r0; row < r1; row++) {
        msf_window_t w = msf_window(l, row, col);
        msf_window_columns(in, &w, cols);
        const int32_t rows = w.y1 - w.y0, n = rows * (w.x1 - w.x0);
        const uint32_t bias = (uint32_t)(128 * n + n / 2);
        const taps_t t = {cols + w.x0, w.x1 - w.x0, in->row_stride,
                          rows * in->row_stride, n, l->act_min, l->act_max,
                          bias | bias << 16, n % 2 ? 0 : bias + 1};
        int8_t *o = msf_pixel(out, row, col);
        if (c < 4) {
            channels(is_max, &t, c, o);
        } else if (is_max) {
            groups(MAX_GROUP, &t, c, o);
        } else if (!MSF_DSP || n <= MSF_LANE_TAPS) {
            groups(AVG_GROUP, &t, c, o);
        } else {
            groups(AVG_GROUP_WIDE, &t, c, o);
        }
        MSF_COUNT(t.count * c);
    }
}

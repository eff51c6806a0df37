/* Max and average pooling (input and output share one quantization), one output column. */
#include "msf/requant.h"
#include "msf/runtime.h"
#include "window.h"

/* TFLite's average: the sum divided by the number of valid taps, rounded half away from 0. */
static int32_t rounded_average(int32_t sum, int32_t count)
{
    return sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
}

void msf_pool_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                     int32_t col, int32_t r0, int32_t r1)
{
    const int8_t *cols[MSF_MAX_KERNEL];
    for (int32_t row = r0; row < r1; row++) {
        msf_window_t w = msf_window(l, row, col);
        msf_window_columns(in, &w, cols);
        const int32_t count = (w.y1 - w.y0) * (w.x1 - w.x0);
        int8_t *o = msf_pixel(out, row, col);
        for (int32_t ch = 0; ch < l->in_c; ch++) {
            int32_t acc = l->op == MSF_MAX_POOL ? -128 : 0;
            for (int32_t ky = w.y0; ky < w.y1; ky++) {
                for (int32_t kx = w.x0; kx < w.x1; kx++) {
                    int32_t v = cols[kx][(ky - w.y0) * in->row_stride + ch];
                    acc = l->op == MSF_MAX_POOL ? (v > acc ? v : acc) : acc + v;
                }
            }
            if (l->op == MSF_AVG_POOL) {
                acc = rounded_average(acc, count);
            }
            o[ch] = msf_clamp(acc, l->act_min, l->act_max);
        }
        MSF_COUNT(count * l->in_c);
    }
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

/* Element-wise int8 activations with TFLite's integer math, one output column:
 * HARD_SWISH (int16 fixed point), LEAKY_RELU (two rescales), PRELU (LEAKY_RELU with an int8
 * slope per channel or per element) and LOGISTIC (Q4.27 in, output scale 1/256, zero point -128).
 * Parameters: msf_pio/numerics.py (ActivationRequant). */
#include "msf/requant.h"
#include "msf/runtime.h"
#include "fixedpoint.h"

MSF_KERNEL_SPEED

static int32_t sat16(int32_t v)
{
    return v < -32768 ? -32768 : (v > 32767 ? 32767 : v);
}

/* int16 doubling high multiply, rounded to nearest or truncated toward zero */
static int32_t mul16(int32_t a, int32_t b, int rounding)
{
    if (a == -32768 && b == -32768) {
        return 32767;
    }
    int32_t ab = a * b;
    if (rounding) {
        ab += ab >= 0 ? (1 << 14) : 1 - (1 << 14);
    }
    return ab / (1 << 15);
}

static int32_t hard_swish(const msf_layer_t *l, int32_t x)
{
    const int32_t hires = (x + l->in_offset) * 128;
    const int32_t preshift = mul16(hires, l->fn_mult1, 1);
    int32_t reluish = hires;
    if (l->fn_shift2 > 0) {
        reluish = sat16(reluish * (1 << (l->fn_shift2 - 1)));
    }
    reluish = mul16(reluish, l->fn_mult2, 1);
    if (l->fn_shift2 > 0) {
        reluish = sat16(reluish * 2);
    } else if (l->fn_shift2 < 0) {
        reluish = msf_rounding_shift(reluish, -l->fn_shift2);
    }
    reluish = (reluish + (1 << 15)) >> 1;           /* [-1, 1] -> [0, 1] */
    return msf_rounding_shift(mul16(reluish, preshift, 0), -l->fn_shift1) + l->out_offset;
}

static int32_t leaky_relu(const msf_layer_t *l, int32_t x)
{
    const int32_t v = x + l->in_offset;
    return l->out_offset + (v >= 0 ? msf_requantize(v, l->fn_mult1, l->fn_shift1)
                                   : msf_requantize(v, l->fn_mult2, l->fn_shift2));
}

static int32_t prelu(const msf_layer_t *l, int32_t x, const int8_t *alpha)
{
    const int32_t v = x + l->in_offset;
    if (v >= 0) {
        return l->out_offset + msf_requantize(v, l->fn_mult1, l->fn_shift1);
    }
    const int32_t slope = *alpha + l->in2_offset;    /* |v * slope| <= 255 * 255 */
    return l->out_offset + msf_requantize(v * slope, l->fn_mult2, l->fn_shift2);
}

static int32_t logistic(const msf_layer_t *l, int32_t x)
{
    const int32_t v = x + l->in_offset;
    if (v <= -l->fn_limit) {
        return -128;
    }
    if (v >= l->fn_limit) {
        return 127;
    }
    const int32_t q4 = msf_requantize(v, l->fn_mult1, l->fn_shift1);
    return msf_rounding_shift(msf_fp_logistic(q4, 4), 23) - 128;
}

void msf_activation_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                           int32_t col, int32_t r0, int32_t r1)
{
    for (int32_t row = r0; row < r1; row++) {
        const int8_t *x = msf_pixel(in, row, col);
        int8_t *o = msf_pixel(out, row, col);
        /* the slopes of this pixel: the channel's, or the element's at (row, col) */
        const int8_t *alpha = l->slope_per_pixel
            ? l->weights + ((size_t)row * l->in_w + (size_t)col) * l->in_c : l->weights;
        for (int32_t ch = 0; ch < l->in_c; ch++) {
            int32_t v;
            if (l->op == MSF_HARD_SWISH) {
                v = hard_swish(l, x[ch]);
            } else if (l->op == MSF_LEAKY_RELU) {
                v = leaky_relu(l, x[ch]);
            } else if (l->op == MSF_PRELU) {
                v = prelu(l, x[ch], &alpha[ch]);
            } else {
                v = logistic(l, x[ch]);
            }
            o[ch] = msf_clamp(v, -128, 127);
        }
    }
}

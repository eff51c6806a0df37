/* Residual add (TFLite int8 ADD), one output column; `out` may alias either input. The three
 * rescales' constants are the layer's, found once per call; each value takes the narrow
 * requantization path when its bound allows it (msf_rq_apply_narrow): the inputs are at most
 * 255 << left_shift, their rescaled sum (multipliers below 1) at most twice that. */
#include "msf/requant.h"
#include "msf/runtime.h"
#include "simd.h"

MSF_KERNEL_SPEED

/* |x| <= bound: x << q.left lies in (-2^30, 2^30) */
MSF_INLINE int fits_narrow(int32_t bound, const msf_rq_t q)
{
    return q.left < 30 && bound < ((int32_t)1 << (30 - q.left));
}

MSF_INLINE int32_t rescale(const int narrow, int32_t x, const msf_rq_t q)
{
    return narrow ? msf_rq_apply_narrow(x, q) : msf_rq_apply(x, q);
}

MSF_INLINE void add_rows(const int narrow, const msf_layer_t *l, const msf_view_t *in,
                         const msf_view_t *in2, const msf_view_t *out, int32_t col, int32_t r0,
                         int32_t r1, const msf_rq_t q[3])
{
    const int32_t off1 = l->in_offset, off2 = l->in2_offset, shift = l->left_shift;
    const msf_out_t o = {l->out_offset, l->act_min, l->act_max};
    const int32_t c = l->out_c;
    for (int32_t row = r0; row < r1; row++) {
        const int8_t *a = msf_pixel(in, row, col);
        const int8_t *b = msf_pixel(in2, row, col);
        int8_t *d = msf_pixel(out, row, col);
        for (int32_t ch = 0; ch < c; ch++) {
            const int32_t x = (int32_t)((uint32_t)(a[ch] + off1) << shift);
            const int32_t y = (int32_t)((uint32_t)(b[ch] + off2) << shift);
            const int32_t sum = rescale(narrow, x, q[0]) + rescale(narrow, y, q[1]);
            d[ch] = msf_clamp(rescale(narrow, sum, q[2]) + o.offset, o.min, o.max);
        }
    }
}

void msf_add_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *in2,
                    const msf_view_t *out, int32_t col, int32_t r0, int32_t r1)
{
    const msf_rq_t q[3] = {msf_rq(l->in1_mult, l->in1_shift), msf_rq(l->in2_mult, l->in2_shift),
                           msf_rq(l->mult[0], l->shift[0])};
    /* inputs: |x + offset| <= 255, shifted up; the rescaled inputs (multipliers below 1:
     * non-positive exponents) add up to at most twice that */
    const int32_t input = l->left_shift < 22 ? (int32_t)255 << l->left_shift : INT32_MAX;
    const int narrow = input < INT32_MAX / 2 && l->in1_shift <= 0 && l->in2_shift <= 0 &&
                       fits_narrow(input, q[0]) && fits_narrow(input, q[1]) &&
                       fits_narrow(2 * input, q[2]);
    if (narrow) {
        add_rows(1, l, in, in2, out, col, r0, r1, q);
    } else {
        add_rows(0, l, in, in2, out, col, r0, r1, q);
    }
}

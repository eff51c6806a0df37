/* Element-wise product (TFLite int8 MUL), one output column: by a tensor of the same shape, or
 * (broadcast) by a 1 x 1 x C vector read at its pixel (0, 0), the gate of a squeeze-and-excite
 * block. out = clamp(MBQM((x + in_offset) (y + in2_offset), fn_mult1, fn_shift1) + out_offset);
 * parameters: msf_pio/numerics.py (MulRequant). `out` may alias the first input. */
#include "msf/requant.h"
#include "msf/runtime.h"

MSF_KERNEL_SPEED

void msf_mul_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *in2,
                    const msf_view_t *out, int32_t col, int32_t r0, int32_t r1)
{
    const msf_rq_t q = msf_rq(l->fn_mult1, l->fn_shift1);
    const int32_t c = l->out_c, off1 = l->in_offset, off2 = l->in2_offset;
    for (int32_t row = r0; row < r1; row++) {
        const int8_t *a = msf_pixel(in, row, col);
        const int8_t *b = l->broadcast ? msf_pixel(in2, 0, 0) : msf_pixel(in2, row, col);
        int8_t *d = msf_pixel(out, row, col);
        for (int32_t ch = 0; ch < c; ch++) {
            const int32_t v = msf_rq_apply((a[ch] + off1) * (b[ch] + off2), q);
            d[ch] = msf_clamp(v + l->out_offset, l->act_min, l->act_max);
        }
    }
}

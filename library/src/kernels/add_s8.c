/* Residual add (TFLite int8 ADD), one output column; `out` may alias either input. */
#include "msf/requant.h"
#include "msf/runtime.h"

void msf_add_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *in2,
                    const msf_view_t *out, int32_t col, int32_t r0, int32_t r1)
{
    for (int32_t row = r0; row < r1; row++) {
        const int8_t *a = msf_pixel(in, row, col);
        const int8_t *b = msf_pixel(in2, row, col);
        int8_t *o = msf_pixel(out, row, col);
        for (int32_t ch = 0; ch < l->out_c; ch++) {
            int32_t x = (int32_t)((uint32_t)(a[ch] + l->in_offset) << l->left_shift);
            int32_t y = (int32_t)((uint32_t)(b[ch] + l->in2_offset) << l->left_shift);
            int32_t sum = msf_requantize(x, l->in1_mult, l->in1_shift) +
                          msf_requantize(y, l->in2_mult, l->in2_shift);
            int32_t v = msf_requantize(sum, l->mult[0], l->shift[0]) + l->out_offset;
            o[ch] = msf_clamp(v, l->act_min, l->act_max);
        }
    }
}

/* Concatenation along channels (TFLite int8 CONCATENATION, axis = channels), one output column:
 * the first input's channels, then the second's. TFLite's int8 kernel requires both inputs
 * quantized as the output (msf_pio/numerics.py checks it), so pixels are copied unchanged. */
#include "msf/runtime.h"

void msf_concat_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *in2,
                       const msf_view_t *out, int32_t col, int32_t r0, int32_t r1)
{
    const size_t c1 = (size_t)l->in_c, c2 = (size_t)(l->out_c - l->in_c);
    for (int32_t row = r0; row < r1; row++) {
        int8_t *o = msf_pixel(out, row, col);
        memcpy(o, msf_pixel(in, row, col), c1);
        memcpy(o + c1, msf_pixel(in2, row, col), c2);
    }
}

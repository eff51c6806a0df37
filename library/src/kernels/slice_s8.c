/* Channels [begin, begin + out_c) of the input (TFLite int8 SPLIT, STRIDED_SLICE, SLICE over
 * the channels), one output column: bytes copied, the quantization is the input's. */
#include "msf/runtime.h"

void msf_slice_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                      int32_t col, int32_t r0, int32_t r1)
{
    for (int32_t row = r0; row < r1; row++) {   /* memmove: the output may overlap the input */
        memmove(msf_pixel(out, row, col), msf_pixel(in, row, col) + l->begin, (size_t)l->out_c);
    }
}

/* Rows [begin, begin + out_h) of a whole tensor (TFLite int8 STRIDED_SLICE over time of a
 * streaming model), every column and channel: bytes copied, the quantization is the input's. */
#include "msf/runtime.h"

void msf_crop_rows(const msf_layer_t *l, const int8_t *in, int8_t *out)
{
    const size_t row = (size_t)l->in_w * l->in_c;
    memmove(out, in + (size_t)l->begin * row, (size_t)l->out_h * row);
}

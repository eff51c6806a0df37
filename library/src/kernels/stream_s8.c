/* A stateful streaming model's ring buffer (TFLite's READ_VARIABLE, CONCATENATION over time,
 * STRIDED_SLICE of the last rows, ASSIGN_VARIABLE): the output, in the arena's state region
 * across runs, holds the rows kept from the last run, then the input's rows; at the end of the
 * run its last rows become the next run's kept ones. Bytes copied, one quantization for all
 * (TFLite Micro's int8 CONCATENATION requires it). */
#include "msf/runtime.h"

void msf_stream_rows(const msf_layer_t *l, const int8_t *in, int8_t *out)
{
    const size_t row = (size_t)l->in_w * l->in_c;
    memcpy(out + (size_t)l->begin * row, in, (size_t)l->in_h * row);
}

void msf_stream_keep(const msf_layer_t *l, int8_t *out)
{
    const size_t row = (size_t)l->in_w * l->in_c;
    memmove(out, out + (size_t)l->in_h * row, (size_t)l->begin * row);
}

/* A stateful streaming model's ring buffer (TFLite's READ_VARIABLE, CONCATENATION over time,
 * STRIDED_SLICE of the last rows, ASSIGN_VARIABLE), whole tensors: the output is the state's
 * rows then the input's, and its last rows are the next run's state. Bytes copied, one
 * quantization for all (TFLite Micro's int8 CONCATENATION requires it). */
#include "msf/runtime.h"

void msf_stream_rows(const msf_layer_t *l, int8_t *state, const int8_t *in, int8_t *out)
{
    const size_t row = (size_t)l->in_w * l->in_c;
    const size_t kept = (size_t)l->begin * row, total = (size_t)l->out_h * row;
    memcpy(out, state, kept);
    memcpy(out + kept, in, total - kept);
    memcpy(state, out + total - kept, kept);
}

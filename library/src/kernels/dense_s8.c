/* Fully connected int8 layer (per-tensor weight scale, as TFLite Micro's reference). */
#include "msf/requant.h"
#include "msf/runtime.h"

void msf_dense(const msf_layer_t *l, const int8_t *in, int8_t *out)
{
    const int32_t n = (int32_t)l->in_h * l->in_w * l->in_c;
    for (int32_t o = 0; o < l->out_c; o++) {
        const int8_t *w = l->weights + o * n;
        int32_t acc = l->bias ? l->bias[o] : 0;
        for (int32_t i = 0; i < n; i++) {
            acc += (in[i] + l->in_offset) * w[i];
        }
        acc = msf_requantize(acc, l->mult[0], l->shift[0]) + l->out_offset;
        out[o] = msf_clamp(acc, l->act_min, l->act_max);
    }
    MSF_COUNT(n * l->out_c);
}

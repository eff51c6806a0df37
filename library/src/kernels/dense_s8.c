/* Fully connected int8 layer (per-channel or per-tensor weight scales, as TFLite Micro's
 * reference; the generator repeats a per-tensor multiplier for every output). Four output
 * neurons per inner loop, so every input word loaded (and offset) serves four weight rows. */
#include "msf/requant.h"
#include "msf/runtime.h"
#include "simd.h"

MSF_KERNEL_SPEED

/* acc[q] += sum over i < n of (x[i] + offset) * w[q * n + i] for rows q < rows (4, or 1) */
MSF_INLINE void mac_rows(const int rows, const int8_t *x, const int8_t *w, int32_t n,
                         int32_t offset, int32_t acc[4])
{
    const int8_t *w1 = w + n, *w2 = w + 2 * n, *w3 = w + 3 * n;
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    int32_t i = 0;
#if MSF_DSP
    const msf_x2_t off2 = msf_lanes(offset);
    for (; i + 4 <= n; i += 4) {
        const uint32_t u = msf_read4(x + i);
        const msf_x2_t xe = msf_even(u, off2), xo = msf_odd(u, off2);
        uint32_t v = msf_read4(w + i);
        a0 = msf_smlad(xe, msf_even0(v), msf_smlad(xo, msf_odd0(v), a0));
        if (rows == 4) {
            v = msf_read4(w1 + i);
            a1 = msf_smlad(xe, msf_even0(v), msf_smlad(xo, msf_odd0(v), a1));
            v = msf_read4(w2 + i);
            a2 = msf_smlad(xe, msf_even0(v), msf_smlad(xo, msf_odd0(v), a2));
            v = msf_read4(w3 + i);
            a3 = msf_smlad(xe, msf_even0(v), msf_smlad(xo, msf_odd0(v), a3));
        }
    }
#endif
    for (; i < n; i++) {
        const int32_t p = x[i] + offset;
        a0 += p * w[i];
        if (rows == 4) {
            a1 += p * w1[i];
            a2 += p * w2[i];
            a3 += p * w3[i];
        }
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

void msf_dense(const msf_layer_t *l, const int8_t *in, int8_t *out)
{
    const int32_t n = (int32_t)l->in_h * l->in_w * l->in_c;
    const int32_t *b = l->bias;
    int32_t o = 0;
    for (; o + 4 <= l->out_c; o += 4) {
        int32_t acc[4] = {b ? b[o] : 0, b ? b[o + 1] : 0, b ? b[o + 2] : 0, b ? b[o + 3] : 0};
        mac_rows(4, in, l->weights + o * n, n, l->in_offset, acc);
        for (int32_t j = 0; j < 4; j++) {
            out[o + j] = msf_output_s8(acc[j], l->mult[o + j], l->shift[o + j], l->out_offset,
                                       l->act_min, l->act_max);
        }
    }
    for (; o < l->out_c; o++) {
        int32_t acc[4] = {b ? b[o] : 0, 0, 0, 0};
        mac_rows(1, in, l->weights + o * n, n, l->in_offset, acc);
        out[o] = msf_output_s8(acc[0], l->mult[o], l->shift[o], l->out_offset, l->act_min,
                               l->act_max);
    }
    MSF_COUNT(n * l->out_c);
}

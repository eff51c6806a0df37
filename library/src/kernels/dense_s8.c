/* Fully connected int8 layer (per-channel or per-tensor weight scales, as TFLite Micro's
 * reference; the generator repeats a per-tensor multiplier for every output): the 1x1 conv of
 * one pixel (mac_s8.h) over its n inputs, expanded once, or for a long input per part and
 * chunk of output channels. */
#include "mac_s8.h"

MSF_KERNEL_SPEED

#define MSF_DENSE_PART (MSF_CONV_BUFFER - 4)

void msf_dense(const msf_layer_t *l, const int8_t *in, int8_t *out)
{
    const int32_t n = (int32_t)l->in_h * l->in_w * l->in_c, cout = l->out_c;
    const int32_t taps = msf_conv_row(1, n, 1);     /* the filter: one row of n taps */
    int32_t buffer[(l->scratch + 3) / 4];      /* the input's taps, or a part's, and a group's
                                                * padding: codegen/kernel_data.scratch_bytes */
    int16_t *const x = (int16_t *)(void *)buffer;
    int32_t part[2 * MSF_CHANNEL_CHUNK];
    if (taps <= MSF_DENSE_PART) {
        msf_expand(l->requant == MSF_RQ_FAST2, in, n, l->in_offset, x);
        x[n] = x[n + 1] = x[n + 2] = x[n + 3] = 0;          /* the last group's padding */
        msf_conv_channels1(l, x, 0, (taps + 3) / 4, out, 0);
    }
    for (int32_t c0 = 0; taps > MSF_DENSE_PART && c0 < cout; c0 += MSF_CHANNEL_CHUNK) {
        const int32_t count = cout - c0 < MSF_CHANNEL_CHUNK ? cout - c0 : MSF_CHANNEL_CHUNK;
        for (int32_t s0 = 0; s0 < taps; s0 += MSF_DENSE_PART) {
            const int32_t s1 = taps - s0 < MSF_DENSE_PART ? taps : s0 + MSF_DENSE_PART;
            const int32_t m = (n < s1 ? n : s1) - s0;
            msf_expand(l->requant == MSF_RQ_FAST2, in + s0, m, l->in_offset, x);
            memset(x + m, 0, 4 * sizeof *x);
            msf_channels_part1_s8(l, x, taps, s0, s1, c0, count, part, out);
        }
    }
    MSF_COUNT(n * cout);
}

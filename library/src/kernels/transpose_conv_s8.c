/* Transposed convolution (TFLite int8 TRANSPOSE_CONV) of a whole HWC tensor, as a gather:
 * input pixel (i, j) adds its tap (ky, kx) to output pixel (i stride_h - pad_top + ky,
 * j stride_w - pad_left + kx), so output row r takes the taps ky = (r + pad_top) mod stride_h,
 * + stride_h, ... of input rows (r + pad_top - ky) / stride_h inside the input, and alike for
 * the columns. The int32 sums are TFLM's scatter's, added in another order; then the bias and
 * the per-channel requantization of a conv (msf_pio/numerics.py: TFLite's steps, the channel
 * records of msf/requant.h). Weights OHWI. Called by the generated schedule itself: an
 * upsampling layer is never inside a fusion block. With a sink (a streamed network output),
 * `out` is one pixel handed to it pixel after pixel. */
#include "msf/requant.h"
#include "msf/runtime.h"

MSF_KERNEL_SPEED

/* The first tap along one axis landing on output position `pos`, and its input position. */
static inline int32_t msf_first_tap(int32_t pos, int32_t pad, int32_t stride, int32_t *i)
{
    *i = (pos + pad) / stride;
    return (pos + pad) % stride;
}

void msf_transpose_conv_s8(const msf_layer_t *l, const int8_t *in, int8_t *out,
                           const msf_sink_t *sink)
{
    const int32_t cin = l->in_c, kh = l->kernel_h, kw = l->kernel_w, off = l->in_offset;
    for (int32_t row = 0; row < l->out_h; row++) {
        int32_t i0;
        const int32_t ky0 = msf_first_tap(row, l->pad_top, l->stride_h, &i0);
        for (int32_t col = 0; col < l->out_w; col++) {
            int32_t j0;
            const int32_t kx0 = msf_first_tap(col, l->pad_left, l->stride_w, &j0);
            for (int32_t oc = 0; oc < l->out_c; oc++) {
                const int8_t *filter = l->weights + (size_t)oc * kh * kw * cin;
                int32_t acc = l->channels[oc].bias;
                for (int32_t ky = ky0, i = i0; ky < kh && i >= 0; ky += l->stride_h, i--) {
                    for (int32_t kx = kx0, j = j0; i < l->in_h && kx < kw && j >= 0;
                         kx += l->stride_w, j--) {
                        if (j >= l->in_w) {
                            continue;
                        }
                        const int8_t *x = in + ((size_t)i * l->in_w + j) * cin;
                        const int8_t *w = filter + (ky * kw + kx) * cin;
                        for (int32_t c = 0; c < cin; c++) {
                            acc += (x[c] + off) * w[c];
                        }
                        MSF_COUNT(cin);
                    }
                }
                out[oc] = msf_output_s8(acc, l->channels[oc].mult, l->channels[oc].shift,
                                        l->out_offset, l->act_min, l->act_max);
            }
            if (sink) {
                sink->fn(row, col, out, l->out_c, sink->ctx);
            } else {
                out += l->out_c;
            }
        }
    }
}

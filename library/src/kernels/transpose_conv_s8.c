/* Transposed convolution (TFLite int8 TRANSPOSE_CONV) of a whole HWC tensor, as a gather:
 * input pixel (i, j) adds its tap (ky, kx) to output pixel (i stride_h - pad_top + ky,
 * j stride_w - pad_left + kx), so output row r takes the taps ky = (r + pad_top) mod stride_h,
 * + stride_h, ... of input rows (r + pad_top - ky) / stride_h inside the input, and alike for
 * the columns. The int32 sums are TFLM's scatter's, added in another order; then the bias and
 * the per-channel requantization of a conv (msf_pio/numerics.py: TFLite's steps, the channel
 * records of msf/requant.h). Weights OHWI. A single layer's whole tensor is called by the
 * generated schedule itself; with a sink (a streamed network output), `out` is one pixel
 * handed to it pixel after pixel. Inside a fusion block (the line buffer), a column at a time
 * through msf_layer_column. */
#include "msf/requant.h"
#include "msf/runtime.h"

MSF_KERNEL_SPEED

/* The first tap along one axis landing on output position `pos`, and its input position. */
static inline int32_t msf_first_tap(int32_t pos, int32_t pad, int32_t stride, int32_t *i)
{
    *i = (pos + pad) / stride;
    return (pos + pad) % stride;
}

/* Output pixels (row, col) .. (row, col + n - 1) into out, out + step, ..., their taps from
 * the input rows at `in`, input pixel (i, j) at in + (i - row0) * row_stride + j * cin (whole
 * rows of the input). Not inlined: inside the callers' loops the tap loop's values spilled to
 * the stack (2x slower); a run of pixels per call, as a whole row costs one call. */
static __attribute__((noinline)) void msf_transposed_pixels(
    const msf_layer_t *l, const int8_t *in, int32_t row0, int32_t row_stride, int32_t row,
    int32_t col, int32_t n, int8_t *out, int32_t step)
{
    const int32_t cin = l->in_c, kh = l->kernel_h, kw = l->kernel_w, off = l->in_offset;
    int32_t i0;
    const int32_t ky0 = msf_first_tap(row, l->pad_top, l->stride_h, &i0);
    for (int32_t last = col + n; col < last; col++, out += step) {
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
                    const int8_t *x = in + (size_t)(i - row0) * row_stride + (size_t)j * cin;
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
    }
}

void msf_transpose_conv_s8(const msf_layer_t *l, const int8_t *in, int8_t *out,
                           const msf_sink_t *sink)
{
    const int32_t row_stride = l->in_w * l->in_c;
    for (int32_t row = 0; row < l->out_h; row++) {
        if (!sink) {
            msf_transposed_pixels(l, in, 0, row_stride, row, 0, l->out_w, out, l->out_c);
            out += (size_t)l->out_w * l->out_c;
            continue;
        }
        for (int32_t col = 0; col < l->out_w; col++) {
            msf_transposed_pixels(l, in, 0, row_stride, row, col, 1, out, 0);
            sink->fn(row, col, out, l->out_c, sink->ctx);
        }
    }
}

/* Output column `col`, rows [r0, r1), inside a fusion block (a line buffer: the input's rows
 * whole, from the view's row0; msf_pio/fusion/schemes/line_buffer.py). */
void msf_transpose_conv_column(const msf_layer_t *l, const msf_view_t *in,
                               const msf_view_t *out, int32_t col, int32_t r0, int32_t r1)
{
    for (int32_t row = r0; row < r1; row++) {
        msf_transposed_pixels(l, in->base, in->row0, in->row_stride, row, col, 1,
                              msf_pixel(out, row, col), 0);
    }
}

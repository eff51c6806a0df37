/* Average pooling that counts every tap of its window (TFLite AVERAGE_POOL_2D after a PAD, ONNX
 * AveragePool with count_include_pad): the padding taps hold the input's zero point and the
 * divisor is kernel_h x kernel_w; only the taps inside the input are read. One output column. */
#include "msf/requant.h"
#include "msf/runtime.h"
#include "window.h"

void msf_avg_pool_padded_column(const msf_layer_t *l, const msf_view_t *in,
                                const msf_view_t *out, int32_t col, int32_t r0, int32_t r1)
{
    const int8_t *cols[MSF_MAX_KERNEL];
    const int32_t count = (int32_t)l->kernel_h * l->kernel_w;
    for (int32_t row = r0; row < r1; row++) {
        msf_window_t w = msf_window(l, row, col);
        msf_window_columns(in, &w, cols);
        const int32_t padding = count - (w.y1 - w.y0) * (w.x1 - w.x0);
        int8_t *o = msf_pixel(out, row, col);
        for (int32_t ch = 0; ch < l->in_c; ch++) {
            int32_t acc = -padding * l->in_offset;         /* zero point x padding taps */
            for (int32_t ky = w.y0; ky < w.y1; ky++) {
                for (int32_t kx = w.x0; kx < w.x1; kx++) {
                    acc += cols[kx][(ky - w.y0) * in->row_stride + ch];
                }
            }
            acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count;
            o[ch] = msf_clamp(acc, l->act_min, l->act_max);
        }
        MSF_COUNT((count - padding) * l->in_c);
    }
}

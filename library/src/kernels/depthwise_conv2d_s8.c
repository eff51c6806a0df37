/* Depthwise int8 convolution (depth multiplier 1), one output column. */
#include "msf/requant.h"
#include "msf/runtime.h"
#include "window.h"

void msf_depthwise_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                          int32_t col, int32_t r0, int32_t r1)
{
    const int32_t k = l->kernel, c = l->in_c;
    const int8_t *cols[MSF_MAX_KERNEL];
    for (int32_t row = r0; row < r1; row++) {
        msf_window_t w = msf_window(l, row, col);
        msf_window_columns(in, &w, cols);
        int8_t *o = msf_pixel(out, row, col);
        for (int32_t ch = 0; ch < c; ch++) {
            int32_t acc = l->bias ? l->bias[ch] : 0;
            for (int32_t ky = w.y0; ky < w.y1; ky++) {
                const int32_t roff = (ky - w.y0) * in->row_stride + ch;
                const int8_t *wrow = l->weights + ky * k * c + ch;
                for (int32_t kx = w.x0; kx < w.x1; kx++) {
                    acc += (cols[kx][roff] + l->in_offset) * wrow[kx * c];
                }
            }
            acc = msf_requantize(acc, l->mult[ch], l->shift[ch]) + l->out_offset;
            o[ch] = msf_clamp(acc, l->act_min, l->act_max);
        }
        MSF_COUNT((w.y1 - w.y0) * (w.x1 - w.x0) * c);
    }
}

/* Nearest-neighbour resize (TFLite int8 RESIZE_NEAREST_NEIGHBOR) of a whole HWC tensor: every
 * output pixel is a copy of the input pixel its row and column map to. The maps are tables in
 * flash (l->index: out_h input rows, then out_w input columns) computed with TFLite's float32
 * arithmetic by msf_pio/numerics.py (nearest_index), so no float runs here. A single layer's
 * whole tensor is called by the generated schedule itself; with a sink (a streamed network
 * output), `out` is one pixel handed to it pixel after pixel. Inside a fusion block (the line
 * buffer), a column at a time through msf_layer_column. */
#include "msf/runtime.h"

void msf_resize_nearest_s8(const msf_layer_t *l, const int8_t *in, int8_t *out,
                           const msf_sink_t *sink)
{
    const size_t c = l->out_c, in_row = (size_t)l->in_w * c;
    for (int32_t y = 0; y < l->out_h; y++) {
        const int8_t *src = in + l->index[y] * in_row;
        for (int32_t x = 0; x < l->out_w; x++) {
            memcpy(out, src + l->index[l->out_h + x] * c, c);
            if (sink) {
                sink->fn(y, x, out, l->out_c, sink->ctx);
            } else {
                out += c;
            }
        }
    }
}

void msf_resize_nearest_column(const msf_layer_t *l, const msf_view_t *in,
                               const msf_view_t *out, int32_t col, int32_t r0, int32_t r1)
{
    const int32_t x = l->index[l->out_h + col];
    for (int32_t y = r0; y < r1; y++) {
        memcpy(msf_pixel(out, y, col), msf_pixel(in, l->index[y], x), (size_t)l->out_c);
    }
}

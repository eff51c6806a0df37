/* The channel-split executor of an inverted-residual triple (1x1 expand -> depthwise -> 1x1
 * project): H-cache tiles of tile_rows output rows whose expansion runs one channel group at a
 * time. Per tile and group, the column sweep computes the group's expanded columns on demand
 * into a column ring of the group's channels, the group's depthwise output one column at a time
 * and, at once, its projection into int32 sums of the tile's output (the group's part of every
 * output channel's accumulator); once every group is in, the sums are requantized into the
 * block output. The kernels run on the group's channels through per-group layers (b->groups:
 * expand, depthwise, project), laid out by the code generator. The Python twin of this schedule
 * is msf_pio/fusion/schemes/channel_split.py, which sizes the buffers. Neither end of a triple
 * is streamed, nor does it read an older tensor. */
#include "../edge.h"
#include "schemes.h"

void msf_run_channel_split(const msf_block_t *b, int8_t *arena, int8_t *in, int8_t *out,
                           const int8_t *input, const msf_sink_t *sink,
                           const msf_source_t *source)
{
    (void)input, (void)sink, (void)source;
    const msf_layer_t *E = &b->layers[0], *D = &b->layers[1], *P = &b->layers[2];
    const int32_t g = b->groups[0].out_c, n_groups = E->out_c / g;
    const int32_t tile = b->tile_rows > 1 ? b->tile_rows : 1;
    const int32_t pixel = 4 * P->out_c, row = pixel * P->out_w;   /* bytes of sums */
    const msf_ring_t *ring = &b->rings[0], *column = &b->rings[1];
    int8_t *sums = arena + b->sums_offset;
    const msf_view_t x = msf_whole_view(in, E->in_w, E->in_c);
    for (int32_t y0 = 0; y0 < P->out_h; y0 += tile) {
        const int32_t y1 = y0 + tile < P->out_h ? y0 + tile : P->out_h;
        /* the expanded rows the depthwise reads for output rows [y0, y1) (1x1 layers: the
         * project's rows are the depthwise's, the expansion's its input's) */
        const int32_t a = y0 * D->stride_h - D->pad_top;
        const int32_t z = (y1 - 1) * D->stride_h - D->pad_top + D->kernel_h;
        const int32_t e0 = a > 0 ? a : 0, e1 = z < D->in_h ? z : D->in_h;
        memset(sums, 0, (size_t)(y1 - y0) * (size_t)row);
        for (int32_t k = 0; k < n_groups; k++) {
            const msf_layer_t *ge = &b->groups[3 * k], *gd = ge + 1, *gp = ge + 2;
            const msf_view_t ev = {arena + ring->offset, e0, g, (int32_t)ring->rows * g,
                                   ring->cols};
            const msf_view_t dv = {arena + column->offset, y0, g, (int32_t)column->rows * g, 1};
            int32_t produced = -1;
            for (int32_t c = 0; c < P->out_w; c++) {
                const int32_t need = msf_last_input(gd, c, 0);
                while (produced < need) {
                    msf_conv2d_column(ge, &x, &ev, ++produced, e0, e1);
                }
                msf_depthwise_column(gd, &ev, &dv, c, y0, y1);
                msf_conv2d_sums_column(gp, &dv, sums + c * pixel, row, c, y0, y1);
            }
        }
        for (int32_t r = y0; r < y1; r++) {
            msf_conv2d_sums_finish(P, sums + (r - y0) * row, P->out_w,
                                   out + (size_t)r * (size_t)P->out_w * P->out_c);
        }
    }
}

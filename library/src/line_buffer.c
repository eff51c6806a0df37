/* The line-buffer executor of a fusion block: every layer produces its output rows in order,
 * each over the full width, on demand (msf_ready_layer with rows), so nothing is recomputed.
 * An internal tensor lives in a ring of whole rows sized by msf_pio/fusion/line_buffer.py, which
 * simulates exactly this order (msf_ring_admit keeps a ring's rows contiguous). A streamed
 * network input enters its ring a row at a time, just before the first layer reads it. */
#include "edge.h"

void msf_run_line_buffer(const msf_block_t *b, int8_t *arena, int8_t *in, int8_t *out,
                         const int8_t *input, const msf_sink_t *sink,
                         const msf_source_t *source)
{
    const msf_layer_t *L = b->layers;
    const int32_t n = b->n;
    const msf_layer_t *last = &L[n - 1];
    const int staged = b->head || b->stream;       /* the last layer's pixels go one by one */
    msf_view_t view[n + 1];                        /* local tensor t = output of layer t - 1 */
    msf_view_t outer[2 * n];                       /* inputs made before the block input */
    int32_t capacity[n], produced[n + 1], next[n], path[n], depth = 0, pulled = -1;

    view[0] = msf_whole_view(in, L[0].in_w, L[0].in_c);
    for (int32_t t = 1; t < n; t++) {
        const msf_ring_t *r = &b->rings[t - 1];
        view[t] = msf_whole_view(arena + r->offset, r->cols, L[t - 1].out_c);
        capacity[t] = r->rows;
        produced[t] = -1;
    }
    view[n] = msf_output_view(b, arena, out);
    msf_outer_views(b, arena, in, input, view, outer);
    for (int32_t l = 0; l < n; l++) {
        next[l] = 0;
    }
    for (int32_t y = 0; y < last->out_h; y++) {
        while (next[n - 1] <= y) {
            const int32_t l = msf_ready_layer(b, next, produced, 1, path, &depth);
            const int32_t row = next[l];
            if (l == 0) {
                msf_pull_rows(b, source, &view[0], &pulled,
                              msf_last_input(&L[0], row, 1));
            }
            if (l < n - 1) {
                msf_ring_admit(&view[l + 1], capacity[l + 1], row);
            }
            if (l == n - 1 && staged) {
                view[n].row0 = row;
            }
            for (int32_t x = 0; x < L[l].out_w; x++) {
                msf_block_column(b, view, outer, l, x, row, row + 1);
                if (l == n - 1 && staged) {
                    msf_pixel_done(b, arena, sink, &view[n], row, x);
                }
            }
            produced[l + 1] = row;
            next[l] = row + 1;
            depth--;
        }
    }
    msf_pull_rows(b, source, &view[0], &pulled, INT32_MAX);   /* rows no window reads */
    if (b->head) {
        msf_head_finish(b, arena, out, sink);
    }
}

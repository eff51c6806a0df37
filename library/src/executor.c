/* The edge executor: single layers, and fusion blocks under msf-CNN's H-cache (a line-buffer
 * block goes to line_buffer.c). An H-cache block produces its output one tile at a time: a tile
 * is tile_rows output rows (msf-CNN: one). Within a tile it sweeps the columns left to right and
 * every layer computes its output column (the rows the tile needs of it) on demand, reading its
 * input from a column ring (or, for the block's first layer, from the whole input tensor). The
 * rows two tiles share are recomputed for each; columns are cached. A streamed network input
 * enters a ring of whole rows a tile's rows at a time (tiles only move down). The Python twin of this
 * schedule is msf_pio/fusion/exact_cost.py, which sizes the rings by simulating this order. */
#include "edge.h"

#ifdef MSF_COUNT_MACS
uint64_t msf_macs;
#endif

void msf_layer_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *in2,
                      const msf_view_t *out, int32_t col, int32_t r0, int32_t r1)
{
    switch (l->op) {
    case MSF_CONV2D:
        msf_conv2d_column(l, in, out, col, r0, r1);
        break;
    case MSF_DEPTHWISE:
        msf_depthwise_column(l, in, out, col, r0, r1);
        break;
    case MSF_ADD:
        msf_add_column(l, in, in2, out, col, r0, r1);
        break;
    case MSF_SOFTMAX:
        msf_softmax_column(l, in, out, col, r0, r1);
        break;
    case MSF_HARD_SWISH:
    case MSF_LEAKY_RELU:
    case MSF_LOGISTIC:
    case MSF_PRELU:
        msf_activation_column(l, in, out, col, r0, r1);
        break;
    default:
        msf_pool_column(l, in, out, col, r0, r1);
        break;
    }
}

void msf_run_edge(const msf_block_t *b, int8_t *arena, const int8_t *input, int8_t *output,
                  const msf_sink_t *sink, const msf_source_t *source)
{
    const msf_layer_t *L = b->layers;
    int8_t *in = msf_locate(arena, b->in_offset, input);
    int8_t *out = b->out_offset == MSF_EXTERNAL ? output : arena + b->out_offset;
    const int32_t n = b->n;
    int32_t pulled = -1;
    if (n == 0) {                                  /* a single head layer */
        msf_view_t whole = msf_whole_view(in, L[0].in_w, L[0].in_c);
        msf_pull_rows(b, source, &whole, &pulled, INT32_MAX);   /* its ring: every row */
        if (L[0].op == MSF_GLOBAL_AVGPOOL) {
            msf_global_avgpool(&L[0], in, out);
        } else {
            msf_dense(&L[0], in, out);
        }
        msf_emit(b, sink, 0, 0, out, L[0].out_c);
        return;
    }
    if (b->scheme == MSF_LINE_BUFFER) {
        msf_run_line_buffer(b, arena, in, out, input, sink, source);
        return;
    }
    const msf_layer_t *last = &L[n - 1];
    msf_view_t view[n + 1];                        /* local tensor t = input of layer t */
    msf_view_t skip[n];                            /* adds: skip inputs made before the block */
    int32_t lo[n + 1], hi[n + 1], produced[n + 1], next[n], path[n], depth = 0;

    view[0] = msf_whole_view(in, L[0].in_w, L[0].in_c);
    for (int32_t t = 1; t < n; t++) {
        const msf_ring_t *r = &b->rings[t - 1];
        msf_view_t v = {arena + r->offset, 0, L[t].in_c, (int32_t)r->rows * L[t].in_c, r->cols};
        view[t] = v;
    }
    view[n] = msf_output_view(b, arena, out);
    msf_skip_views(b, arena, input, skip);

    /* A fused block computes tile_rows output rows per tile (rows are recomputed, columns are
     * cached); a single layer writing a whole tensor is one tile of all its rows, so every
     * kernel call computes a whole output column and the bookkeeping below runs once. */
    const int staged = b->head || b->stream;
    const int32_t tile_rows = n == 1 && !staged && !b->in_rows ? last->out_h
                              : b->tile_rows > 1 ? b->tile_rows : 1;
    for (int32_t y = 0; y < last->out_h; y += tile_rows) {
        /* rows each tensor provides for this tile row: back-propagate, hull over consumers */
        for (int32_t t = 0; t < n; t++) {
            lo[t] = INT32_MAX;
            hi[t] = -1;
        }
        lo[n] = y;
        hi[n] = y + tile_rows < last->out_h ? y + tile_rows : last->out_h;
        for (int32_t l = n - 1; l >= 0; l--) {
            int32_t a = lo[l + 1], z = hi[l + 1];
            if (L[l].op != MSF_ADD) {
                a = a * L[l].stride - L[l].pad_top;
                z = (z - 1) * L[l].stride - L[l].pad_top + L[l].kernel;
                a = a > 0 ? a : 0;
                z = z < L[l].in_h ? z : L[l].in_h;
            } else if (L[l].skip >= b->first) {
                int32_t s = L[l].skip - b->first;
                lo[s] = a < lo[s] ? a : lo[s];
                hi[s] = z > hi[s] ? z : hi[s];
            }
            lo[l] = a < lo[l] ? a : lo[l];
            hi[l] = z > hi[l] ? z : hi[l];
        }
        for (int32_t t = 1; t < n; t++) {
            view[t].row0 = lo[t];
            produced[t] = -1;
        }
        if (staged) {
            view[n].row0 = y;
        }
        msf_pull_rows(b, source, &view[0], &pulled, hi[0] - 1);   /* the tile's input rows */
        for (int32_t l = 0; l < n; l++) {
            next[l] = 0;
        }
        /* columns, on demand: descend to the first layer whose inputs are ready, compute its
         * next column, start again from the top (the order exact_cost.py simulates) */
        for (int32_t x = 0; x < last->out_w; x++) {
            while (next[n - 1] <= x) {
                const int32_t l = msf_ready_layer(b, next, produced, 0, path, &depth);
                const msf_view_t *in2 = NULL;
                if (L[l].op == MSF_ADD) {
                    in2 = L[l].skip >= b->first ? &view[L[l].skip - b->first] : &skip[l];
                }
                msf_layer_column(&L[l], &view[l], in2, &view[l + 1], next[l], lo[l + 1],
                                 hi[l + 1]);
                produced[l + 1] = next[l]++;
                depth--;
                for (int32_t r = lo[n]; l == n - 1 && staged && r < hi[n]; r++) {
                    msf_pixel_done(b, arena, sink, &view[n], r, next[l] - 1);
                }
            }
        }
    }
    msf_pull_rows(b, source, &view[0], &pulled, INT32_MAX);   /* rows no tile reads */
    if (b->head) {
        msf_head_finish(b, arena, out, sink);
    }
}

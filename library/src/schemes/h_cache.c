/* The H-cache executor: fusion blocks under msf-CNN's H-cache and its tiles, and single layers.
 * An H-cache block produces its output one tile at a time: a tile is tile_rows output rows
 * (msf-CNN: one). Within a tile it sweeps the columns left to right and every layer computes its
 * output column (the rows the tile needs of it) on demand, reading its inputs from column rings
 * (or whole from the arena: the block input and older tensors, such as a skip or a shortcut
 * conv's stage input). The rows two tiles share are recomputed for each; columns are cached. A
 * streamed network input enters a ring of whole rows a tile's rows at a time (tiles only move
 * down). The Python twin of this schedule is msf_pio/fusion/schemes/h_cache.py (its geometry:
 * geometry.block_schedule and the column sweep), which sizes the rings by simulating this
 * order. */
#include "../edge.h"
#include "schemes.h"

/* A depthwise output written over its input's column ring (msf_pio/fusion/reuse.py): ring
 * rows 0. Output pixel (r, x) goes where input pixel (r s - p, x s - p), the top-left tap of
 * its window, lives; only outputs at or before (r, x) read it, so the depthwise column kernel,
 * which computes a column's rows in order and writes each sum after reading its taps, never
 * reads a pixel it has overwritten. */
MSF_INLINE int msf_in_place(const msf_block_t *b, int32_t t)
{
    return t > 1 && t < b->n && b->rings[t - 1].rows == 0;
}

/* Points the in-place output view `out` at column `col` (rows from `row0`) of layer l. */
static inline void msf_over_input(msf_view_t *out, const msf_view_t *in, const msf_layer_t *l,
                                  int32_t col, int32_t row0)
{
    int32_t slot = (col * l->stride_w - l->pad_left) % in->col_slots;
    slot += slot < 0 ? in->col_slots : 0;
    out->base = in->base + slot * in->col_stride +
                (row0 * l->stride_h - l->pad_top - in->row0) * in->row_stride;
    out->row0 = row0;
}

void msf_run_h_cache(const msf_block_t *b, int8_t *arena, int8_t *in, int8_t *out,
                     const int8_t *input, const msf_sink_t *sink, const msf_source_t *source)
{
    const msf_layer_t *L = b->layers;
    const int32_t n = b->n;
    int32_t pulled = -1;
    const msf_layer_t *last = &L[n - 1];
    msf_view_t view[n + 1];                        /* local tensor t = output of layer t - 1 */
    msf_view_t outer[2 * n];                       /* inputs made before the block input */
    int32_t lo[n + 1], hi[n + 1], produced[n + 1], next[n], path[n], depth = 0;

    view[0] = msf_whole_view(in, L[0].in_w, L[0].in_c);
    for (int32_t t = 1; t < n; t++) {
        const msf_ring_t *r = &b->rings[t - 1];
        const int32_t c = L[t - 1].out_c;
        msf_view_t v = {arena + r->offset, 0, c, (int32_t)r->rows * c, r->cols};
        if (msf_in_place(b, t)) {       /* rows s apart in the input's ring, one column */
            msf_view_t over = {0, 0, L[t - 1].stride_h * view[t - 1].row_stride, 0, 1};
            v = over;
        }
        view[t] = v;
    }
    view[n] = msf_output_view(b, arena, out);
    msf_outer_views(b, arena, in, input, view, outer);

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
        for (int32_t l = n - 1; l >= 0; l--) {        /* consumers come after producers */
            int32_t a = lo[l + 1], z = hi[l + 1];
            if (msf_n_inputs(&L[l]) == 1) {
                a = a * L[l].stride_h - L[l].pad_top;
                z = (z - 1) * L[l].stride_h - L[l].pad_top + L[l].kernel_h;
                a = a > 0 ? a : 0;
                z = z < L[l].in_h ? z : L[l].in_h;
            }
            for (int k = 0; k < msf_n_inputs(&L[l]); k++) {
                const int32_t s = msf_input_tensor(&L[l], k) - b->first;
                if (s >= 0) {
                    lo[s] = a < lo[s] ? a : lo[s];
                    hi[s] = z > hi[s] ? z : hi[s];
                }
            }
        }
        for (int32_t t = 1; t < n; t++) {
            view[t].row0 = lo[t];
            produced[t] = -1;
            if (msf_in_place(b, t + 1)) {  /* from the first row of the output's delay */
                const int32_t d = lo[t + 1] * L[t].stride_h - L[t].pad_top;
                view[t].row0 = d < lo[t] ? d : lo[t];
            }
        }
        if (staged) {
            view[n].row0 = y;
        }
        msf_pull_rows(b, source, &view[0], &pulled, hi[0] - 1);   /* the tile's input rows */
        for (int32_t l = 0; l < n; l++) {
            next[l] = 0;
        }
        /* columns, on demand: descend to the first layer whose inputs are ready, compute its
         * next column, start again from the top (the order the column sweep simulates) */
        for (int32_t x = 0; x < last->out_w; x++) {
            while (next[n - 1] <= x) {
                const int32_t l = msf_ready_layer(b, next, produced, 0, path, &depth);
                if (msf_in_place(b, l + 1)) {   /* a depthwise reading local tensor l */
                    msf_over_input(&view[l + 1], &view[l], &L[l], next[l], lo[l + 1]);
                }
                msf_block_column(b, view, outer, l, next[l], lo[l + 1], hi[l + 1]);
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

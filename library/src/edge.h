/* What the two fusion-block executors (executor.c: H-cache, line_buffer.c: line buffer) share:
 * where an edge's tensors are, its output view (a whole tensor, the staged pixel of an
 * iterative head or of a streamed output) and the head's last step. Internal to the runtime. */
#ifndef MSF_EDGE_H
#define MSF_EDGE_H

#include "msf/runtime.h"

static inline msf_view_t msf_whole_view(int8_t *base, int32_t width, int32_t channels)
{
    msf_view_t v = {base, 0, width * channels, channels, width};
    return v;
}

static inline int8_t *msf_locate(int8_t *arena, uint32_t offset, const int8_t *external)
{
    /* the caller's input is only ever read: the cast drops const for the shared view type */
    return offset == MSF_EXTERNAL ? (int8_t *)(uintptr_t)external : arena + offset;
}

/* Last input position (row or column, by `pad` and `len`) that output position i reads. */
static inline int32_t msf_last_input(const msf_layer_t *l, int32_t i, int32_t pad, int32_t len)
{
    if (l->op == MSF_ADD) {
        return i;
    }
    int32_t c = i * l->stride - pad + l->kernel - 1;
    return c < len - 1 ? c : len - 1;
}

/* The layer to run next on the way to the block's last layer's next position (a column, or
 * with `rows` a row): descend from the last layer through the first input lacking what it
 * reads (its own input, then an add's skip made in the block) to a layer whose inputs are
 * ready. next[l]: the next position of layer l; produced[t]: the last of local tensor t (the
 * input of layer t; tensor 0, the block input, is whole). This is the order the cost model
 * simulates (exact_cost.py's column sweep, line_buffer.py's row sweep: a recursion).
 * The descent is kept in path[0 .. *depth) (the last layer first) and resumed from the layer
 * that lacked the returned layer's output once the caller pops it (--*depth) after computing
 * it: computing a layer changes only what its consumer on the path reads, so the layers
 * above that one would descend the same way again. */
static inline int32_t msf_ready_layer(const msf_block_t *b, const int32_t *next,
                                      const int32_t *produced, int rows, int32_t *path,
                                      int32_t *depth)
{
    const msf_layer_t *L = b->layers;
    if (*depth == 0) {
        path[(*depth)++] = b->n - 1;
    }
    int32_t l = path[*depth - 1];
    for (;;) {
        const int32_t need = rows ? msf_last_input(&L[l], next[l], L[l].pad_top, L[l].in_h)
                                  : msf_last_input(&L[l], next[l], L[l].pad_left, L[l].in_w);
        int32_t lacking = -1;
        if (l > 0 && produced[l] < need) {
            lacking = l;
        } else if (L[l].op == MSF_ADD && L[l].skip > b->first &&
                   produced[L[l].skip - b->first] < need) {
            lacking = L[l].skip - b->first;
        }
        if (lacking < 0) {
            return l;
        }
        l = lacking - 1;
        path[(*depth)++] = l;
    }
}

/* The view the block's last spatial layer writes: a staged column of one tile's rows for a
 * head (whose int32 sums start at 0), one staged pixel for a streamed output (H-cache tiles of
 * one row), else the whole output tensor. */
static inline msf_view_t msf_output_view(const msf_block_t *b, int8_t *arena, int8_t *out)
{
    const msf_layer_t *last = &b->layers[b->n - 1];
    if (b->head) {
        memset(arena + b->sums_offset, 0, 4u * last->out_c);
        msf_view_t v = {arena + b->staging_offset, 0, last->out_c, last->out_c, 1};
        return v;
    }
    if (b->stream) {
        msf_view_t v = {out, 0, last->out_c, last->out_c, 1};
        return v;
    }
    return msf_whole_view(out, last->out_w, last->out_c);
}

/* Views of the skip inputs made before the block (adds reading a tensor older than its input). */
static inline void msf_skip_views(const msf_block_t *b, int8_t *arena, const int8_t *input,
                                  msf_view_t *skip)
{
    for (int32_t l = 0; l < b->n; l++) {
        const msf_layer_t *L = &b->layers[l];
        if (L->op == MSF_ADD && L->skip < b->first) {
            skip[l] = msf_whole_view(msf_locate(arena, b->skip_offset[l], input), L->out_w,
                                     L->out_c);
        }
    }
}

static inline void msf_emit(const msf_block_t *b, const msf_sink_t *sink, int32_t row,
                            int32_t col, const int8_t *pixel, int32_t channels)
{
    if (b->stream) {
        sink->fn(row, col, pixel, channels, sink->ctx);
    }
}

/* A pixel of the last spatial layer is ready in the staging view: pool it or hand it on. */
static inline void msf_pixel_done(const msf_block_t *b, int8_t *arena, const msf_sink_t *sink,
                                  const msf_view_t *staged, int32_t row, int32_t col)
{
    const int8_t *pixel = msf_pixel(staged, row, col);
    if (b->head) {
        msf_gap_accumulate(&b->layers[b->n], pixel, arena + b->sums_offset);
    } else {
        msf_emit(b, sink, row, col, pixel, b->layers[b->n - 1].out_c);
    }
}

/* The head's last step once every pixel is pooled: the mean, then maybe dense. */
static inline void msf_head_finish(const msf_block_t *b, int8_t *arena, int8_t *out,
                                   const msf_sink_t *sink)
{
    const msf_layer_t *gap = &b->layers[b->n];
    int8_t *sums = arena + b->sums_offset;
    if (b->head == 1) {
        msf_gap_finish(gap, sums, out);
    } else {
        msf_gap_finish(gap, sums, sums);       /* pooled vector over its own sums */
        msf_dense(&b->layers[b->n + 1], sums, out);
    }
    msf_emit(b, sink, 0, 0, out, b->layers[b->n + b->head - 1].out_c);
}

/* Makes room for row `row` in the ring view v of `capacity` rows holding rows row0 .. row - 1.
 * The ring keeps its rows contiguous and in order, so the column kernels read a window's rows
 * with one row stride as in a whole tensor: when a new row does not fit, the rows still held
 * slide to the front of the ring (a memmove of capacity - 1 rows). */
static inline void msf_ring_admit(msf_view_t *v, int32_t capacity, int32_t row)
{
    if (row - v->row0 < capacity) {
        return;
    }
    const int32_t row0 = row - capacity + 1;
    memmove(v->base, v->base + (row0 - v->row0) * v->row_stride,
            (size_t)(capacity - 1) * (size_t)v->row_stride);
    v->row0 = row0;
}

/* A streamed input: pulls its rows up to `row` (clipped to the input) into the ring view v,
 * in order; *pulled is the last row pulled so far. No-op for a whole input. */
static inline void msf_pull_rows(const msf_block_t *b, const msf_source_t *source,
                                 msf_view_t *v, int32_t *pulled, int32_t row)
{
    const int32_t last = b->layers[0].in_h - 1;
    row = row < last ? row : last;
    while (b->in_rows && *pulled < row) {
        ++*pulled;
        msf_ring_admit(v, b->in_rows, *pulled);
        source->fn(*pulled, msf_pixel(v, *pulled, 0), source->ctx);
    }
}

/* The line-buffer executor of a fusion block (line_buffer.c). */
void msf_run_line_buffer(const msf_block_t *b, int8_t *arena, int8_t *in, int8_t *out,
                         const int8_t *input, const msf_sink_t *sink,
                         const msf_source_t *source);

#endif /* MSF_EDGE_H */

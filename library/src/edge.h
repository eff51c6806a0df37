/* The shared edge walker: what the cache schemes' executors (schemes/) share, and calls no
 * executor: where an edge's tensors are, the demand-driven descent to the next layer to run,
 * a layer's column through its kernel (edge.c), its output view (a whole tensor, the staged
 * pixel of an iterative head or of a streamed output), the head's last step, rings of rows
 * and a streamed input's rows. Internal to the runtime. The helpers run once or more per
 * kernel call are MSF_INLINE: the firmware's -Os build made some of them out-of-line calls
 * inside the demand-driven descent. */
#ifndef MSF_EDGE_H
#define MSF_EDGE_H

#include "msf/requant.h"
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

/* Inputs of a layer: two for add and concatenation (pixel by pixel), else one. Input k's
 * model tensor index and channels. */
MSF_INLINE int msf_n_inputs(const msf_layer_t *l)
{
    return l->op == MSF_ADD || l->op == MSF_CONCAT || l->op == MSF_MUL ? 2 : 1;
}

MSF_INLINE int32_t msf_input_tensor(const msf_layer_t *l, int k)
{
    return k ? l->skip : l->input;
}

static inline int32_t msf_input_channels(const msf_layer_t *l, int k)
{
    return !k ? l->in_c : l->op == MSF_CONCAT ? l->out_c - l->in_c : l->out_c;
}

/* First and last input positions (rows with `rows`, else columns) that output position i
 * reads, clipped to the input: msf_pio/fusion/geometry.py's input_span, op by op. A window
 * reads i s - p .. i s - p + k - 1; a nearest resize the position its map gives; a transposed
 * conv, whose input j lands on j s - p .. j s - p + k - 1, the inputs ceil((i + p - k + 1) / s)
 * .. floor((i + p) / s) (first > last: no tap lands on i); a pixel-by-pixel op i. */
MSF_INLINE int32_t msf_first_input(const msf_layer_t *l, int32_t i, int rows)
{
    if (msf_n_inputs(l) == 2) {
        return i;
    }
    if (l->op == MSF_RESIZE_NEAREST) {
        return l->index[rows ? i : l->out_h + i];
    }
    const int32_t s = rows ? l->stride_h : l->stride_w, p = rows ? l->pad_top : l->pad_left;
    if (l->op == MSF_TRANSPOSE_CONV) {
        const int32_t reach = i + p - (rows ? l->kernel_h : l->kernel_w) + 1;
        return reach > 0 ? (reach + s - 1) / s : 0;
    }
    const int32_t c = i * s - p;
    return c > 0 ? c : 0;
}

MSF_INLINE int32_t msf_last_input(const msf_layer_t *l, int32_t i, int rows)
{
    if (msf_n_inputs(l) == 2) {
        return i;
    }
    if (l->op == MSF_RESIZE_NEAREST) {
        return l->index[rows ? i : l->out_h + i];
    }
    const int32_t s = rows ? l->stride_h : l->stride_w, p = rows ? l->pad_top : l->pad_left;
    const int32_t c = l->op == MSF_TRANSPOSE_CONV ? (i + p) / s
                                                  : i * s - p + (rows ? l->kernel_h : l->kernel_w) - 1;
    const int32_t len = rows ? l->in_h : l->in_w;
    return c < len - 1 ? c : len - 1;
}

/* The layer to run next on the way to the block's last layer's next position (a column, or
 * with `rows` a row): descend from the last layer through the first input lacking what it
 * reads (its first input, then its second, if made in the block) to a layer whose inputs are
 * ready. next[l]: the next position of layer l; produced[t]: the last of local tensor t (the
 * output of layer t - 1; tensor 0, the block input, and older tensors are whole). This is the
 * order the cost model simulates (msf_pio/fusion/geometry.py's demand sweep along the
 * columns or the rows: a recursion). The descent is kept in path[0 .. *depth) (the last layer
 * first) and resumed from the layer that lacked the returned layer's output once the caller
 * pops it (--*depth) after computing it: computing a layer changes only what its consumer on
 * the path reads, so the layers above that one would descend the same way again. */
MSF_INLINE int32_t msf_ready_layer(const msf_block_t *b, const int32_t *next,
                                   const int32_t *produced, int rows, int32_t *path,
                                   int32_t *depth)
{
    const msf_layer_t *L = b->layers;
    if (*depth == 0) {
        path[(*depth)++] = b->n - 1;
    }
    int32_t l = path[*depth - 1];
    for (;;) {
        const int32_t need = msf_last_input(&L[l], next[l], rows);
        int32_t lacking = -1;
        for (int k = 0; k < msf_n_inputs(&L[l]) && lacking < 0; k++) {
            const int32_t t = msf_input_tensor(&L[l], k) - b->first;
            if (t > 0 && produced[t] < need) {
                lacking = t;
            }
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

/* Whole views of the tensors the block reads that are not made in it: the block input
 * (view[0], shaped as its readers read it) and, per layer l and input k, an older tensor in
 * outer[2 l + k] (a skip, a branch's stage input). */
static inline void msf_outer_views(const msf_block_t *b, int8_t *arena, int8_t *in,
                                   const int8_t *input, msf_view_t *view, msf_view_t *outer)
{
    for (int32_t l = 0; l < b->n; l++) {
        const msf_layer_t *L = &b->layers[l];
        for (int k = 0; k < msf_n_inputs(L); k++) {
            const int32_t t = msf_input_tensor(L, k), c = msf_input_channels(L, k);
            if (t == b->first) {
                view[0] = msf_whole_view(in, L->in_w, c);
            } else if (t < b->first) {
                outer[2 * l + k] = msf_whole_view(
                    msf_locate(arena, b->outer_offset[2 * l + k], input), L->in_w, c);
            }
        }
    }
}

/* Input k of block layer l: a view of a tensor made in the block (or its input), or older. */
MSF_INLINE const msf_view_t *msf_input_view(const msf_block_t *b, const msf_view_t *view,
                                            const msf_view_t *outer, int32_t l, int k)
{
    const int32_t t = msf_input_tensor(&b->layers[l], k);
    return t >= b->first ? &view[t - b->first] : &outer[2 * l + k];
}

/* Runs layer l of the block on output column `col`, rows [r0, r1), into view[l + 1]. */
MSF_INLINE void msf_block_column(const msf_block_t *b, const msf_view_t *view,
                                 const msf_view_t *outer, int32_t l, int32_t col,
                                 int32_t r0, int32_t r1)
{
    const msf_layer_t *L = &b->layers[l];
    msf_layer_column(L, msf_input_view(b, view, outer, l, 0),
                     msf_n_inputs(L) == 2 ? msf_input_view(b, view, outer, l, 1) : NULL,
                     &view[l + 1], col, r0, r1);
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

/* Makes room for row `row` in the ring view v of `capacity` rows holding rows row0 .. row - 1,
 * of which no reader needs those before `live`. The ring keeps its rows contiguous and in
 * order, so the column kernels read a window's rows with one row stride as in a whole tensor:
 * when a new row does not fit, the rows still held and needed slide to the front of the ring
 * (a memmove of at most capacity - 1 rows; a stride-2 reader leaves fewer). */
static inline void msf_ring_admit(msf_view_t *v, int32_t capacity, int32_t row, int32_t live)
{
    if (row - v->row0 < capacity) {
        return;
    }
    int32_t row0 = row - capacity + 1;
    row0 = live > row ? row : live > row0 ? live : row0;
    memmove(v->base, v->base + (row0 - v->row0) * v->row_stride,
            (size_t)(row - row0) * (size_t)v->row_stride);
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
        msf_ring_admit(v, b->in_rows, *pulled, 0);
        source->fn(*pulled, msf_pixel(v, *pulled, 0), source->ctx);
    }
}

/* The runtime's dispatch of a layer's output column by its op's kernel, as a template over
 * the ops a model uses (msf/dispatch.h): `ops` a constant set of MSF_BIT(enum msf_op). */
#define MSF_BIT(x) (1u << (x))
#define MSF_EVERY 0xFFFFFFFFu
/* Pseudo-ops of an `ops` set: some conv2d (depthwise) layer runs the kernel for any shape.
 * A layer with its specialised kernel (msf_layer_t.column) has it called directly; without
 * the bit every layer of the op has one, so the kernel for any shape is not linked. */
#define MSF_CONV2D_ANY 30
#define MSF_DEPTHWISE_ANY 31

/* A call is made only if its op's (or scheme's) bit is in the set: with every bit, these are
 * the runtime's dispatches as written; the generated model's sets leave out the calls of the
 * ops and schemes it does not run. */
#define MSF_ACTIVATIONS (MSF_BIT(MSF_HARD_SWISH) | MSF_BIT(MSF_LEAKY_RELU) | \
                         MSF_BIT(MSF_LOGISTIC) | MSF_BIT(MSF_PRELU))
#define MSF_POOLS (MSF_BIT(MSF_MAX_POOL) | MSF_BIT(MSF_AVG_POOL))

MSF_INLINE void msf_layer_column_of(uint32_t ops, const msf_layer_t *l, const msf_view_t *in,
                                    const msf_view_t *in2, const msf_view_t *out, int32_t col,
                                    int32_t r0, int32_t r1)
{
    switch (l->op) {
    case MSF_CONV2D:
        if ((ops & MSF_BIT(MSF_CONV2D)) && (!(ops & MSF_BIT(MSF_CONV2D_ANY)) || l->column)) {
            msf_conv2d_special_column(l, in, out, col, r0, r1);
        } else if (ops & MSF_BIT(MSF_CONV2D)) {
            msf_conv2d_column(l, in, out, col, r0, r1);
        }
        break;
    case MSF_DEPTHWISE:
        if ((ops & MSF_BIT(MSF_DEPTHWISE)) && (!(ops & MSF_BIT(MSF_DEPTHWISE_ANY)) || l->column)) {
            msf_depthwise_special_column(l, in, out, col, r0, r1);
        } else if (ops & MSF_BIT(MSF_DEPTHWISE)) {
            msf_depthwise_column(l, in, out, col, r0, r1);
        }
        break;
    case MSF_ADD:
        if (ops & MSF_BIT(MSF_ADD)) {
            msf_add_column(l, in, in2, out, col, r0, r1);
        }
        break;
    case MSF_CONCAT:
        if (ops & MSF_BIT(MSF_CONCAT)) {
            msf_concat_column(l, in, in2, out, col, r0, r1);
        }
        break;
    case MSF_MUL:
        if (ops & MSF_BIT(MSF_MUL)) {
            msf_mul_column(l, in, in2, out, col, r0, r1);
        }
        break;
    case MSF_SLICE:
        if (ops & MSF_BIT(MSF_SLICE)) {
            msf_slice_column(l, in, out, col, r0, r1);
        }
        break;
    case MSF_RESIZE_NEAREST:
        if (ops & MSF_BIT(MSF_RESIZE_NEAREST)) {
            msf_resize_nearest_column(l, in, out, col, r0, r1);
        }
        break;
    case MSF_TRANSPOSE_CONV:
        if (ops & MSF_BIT(MSF_TRANSPOSE_CONV)) {
            msf_transpose_conv_column(l, in, out, col, r0, r1);
        }
        break;
    case MSF_AVG_POOL_PADDED:
        if (ops & MSF_BIT(MSF_AVG_POOL_PADDED)) {
            msf_avg_pool_padded_column(l, in, out, col, r0, r1);
        }
        break;
    case MSF_SOFTMAX:
        if (ops & MSF_BIT(MSF_SOFTMAX)) {
            msf_softmax_column(l, in, out, col, r0, r1);
        }
        break;
    case MSF_HARD_SWISH:
    case MSF_LEAKY_RELU:
    case MSF_LOGISTIC:
    case MSF_PRELU:
        if (ops & MSF_ACTIVATIONS) {
            msf_activation_column(l, in, out, col, r0, r1);
        }
        break;
    default:                                        /* max and average pooling */
        if (ops & MSF_POOLS) {
            msf_pool_column(l, in, out, col, r0, r1);
        }
        break;
    }
}

#endif /* MSF_EDGE_H */

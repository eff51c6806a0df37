/* The fused-block executor (msf-CNN's H-cache): a block produces its output one row at a time
 * (a tile row); within a row it sweeps the columns left to right and every layer computes its
 * output column by column on demand, reading its input from a column ring (or, for the block's
 * first layer, from the whole input tensor). Rows are recomputed for every tile row; columns are
 * cached. The Python twin of this schedule is msf_pio/fusion/exact_cost.py, which sizes the
 * rings by simulating exactly this order. */
#include "msf/runtime.h"

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
        msf_activation_column(l, in, out, col, r0, r1);
        break;
    default:
        msf_pool_column(l, in, out, col, r0, r1);
        break;
    }
}

static msf_view_t whole_view(int8_t *base, int32_t width, int32_t channels)
{
    msf_view_t v = {base, 0, width * channels, channels, width};
    return v;
}

static int8_t *locate(int8_t *arena, uint32_t offset, const int8_t *external)
{
    /* the caller's input is only ever read: the cast drops const for the shared view type */
    return offset == MSF_EXTERNAL ? (int8_t *)(uintptr_t)external : arena + offset;
}

/* Last input column that output column `col` of layer l reads. */
static int32_t last_input_column(const msf_layer_t *l, int32_t col)
{
    if (l->op == MSF_ADD) {
        return col;
    }
    int32_t c = col * l->stride - l->pad_left + l->kernel - 1;
    return c < l->in_w - 1 ? c : l->in_w - 1;
}

static void head_finish(const msf_block_t *b, int8_t *arena, int8_t *out)
{
    const msf_layer_t *gap = &b->layers[b->n];
    int8_t *sums = arena + b->sums_offset;
    if (b->head == 1) {
        msf_gap_finish(gap, sums, out);
    } else {
        msf_gap_finish(gap, sums, sums);       /* pooled vector over its own sums */
        msf_dense(&b->layers[b->n + 1], sums, out);
    }
}

static void emit(const msf_block_t *b, const msf_sink_t *sink, int32_t row, int32_t col,
                 const int8_t *pixel, int32_t channels)
{
    if (b->stream) {
        sink->fn(row, col, pixel, channels, sink->ctx);
    }
}

void msf_run_edge(const msf_block_t *b, int8_t *arena, const int8_t *input, int8_t *output,
                  const msf_sink_t *sink)
{
    const msf_layer_t *L = b->layers;
    int8_t *in = locate(arena, b->in_offset, input);
    int8_t *out = b->out_offset == MSF_EXTERNAL ? output : arena + b->out_offset;
    const int32_t n = b->n;
    if (n == 0) {                                  /* a single head layer */
        if (L[0].op == MSF_GLOBAL_AVGPOOL) {
            msf_global_avgpool(&L[0], in, out);
        } else {
            msf_dense(&L[0], in, out);
        }
        emit(b, sink, 0, 0, out, L[0].out_c);
        return;
    }
    const msf_layer_t *last = &L[n - 1];
    msf_view_t view[n + 1];                        /* local tensor t = input of layer t */
    msf_view_t skip[n];                            /* adds: skip inputs made before the block */
    int32_t lo[n + 1], hi[n + 1], produced[n + 1], next[n];

    view[0] = whole_view(in, L[0].in_w, L[0].in_c);
    for (int32_t t = 1; t < n; t++) {
        const msf_ring_t *r = &b->rings[t - 1];
        msf_view_t v = {arena + r->offset, 0, L[t].in_c, (int32_t)r->rows * L[t].in_c, r->cols};
        view[t] = v;
    }
    if (b->head) {
        msf_view_t v = {arena + b->staging_offset, 0, last->out_c, last->out_c, 1};
        view[n] = v;
        memset(arena + b->sums_offset, 0, 4u * last->out_c);
    } else if (b->stream) {                        /* one output pixel, handed to the sink */
        msf_view_t v = {out, 0, last->out_c, last->out_c, 1};
        view[n] = v;
    } else {
        view[n] = whole_view(out, last->out_w, last->out_c);
    }
    for (int32_t l = 0; l < n; l++) {
        if (L[l].op == MSF_ADD && L[l].skip < b->first) {
            skip[l] = whole_view(locate(arena, b->skip_offset[l], input), L[l].out_w, L[l].out_c);
        }
    }

    /* A fused block computes one output row per tile row (rows are recomputed, columns are
     * cached); a single layer writing a whole tensor is one tile of all its rows, so every
     * kernel call computes a whole output column and the bookkeeping below runs once. */
    const int32_t tile_rows = n == 1 && !b->head && !b->stream ? last->out_h : 1;
    for (int32_t y = 0; y < last->out_h; y += tile_rows) {
        /* rows each tensor provides for this tile row: back-propagate, hull over consumers */
        for (int32_t t = 0; t < n; t++) {
            lo[t] = INT32_MAX;
            hi[t] = -1;
        }
        lo[n] = y;
        hi[n] = y + tile_rows;
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
        if (b->head || b->stream) {
            view[n].row0 = y;
        }
        for (int32_t l = 0; l < n; l++) {
            next[l] = 0;
        }
        /* columns, on demand: descend to the first layer whose inputs are ready, compute its
         * next column, start again from the top (the order exact_cost.py simulates) */
        for (int32_t x = 0; x < last->out_w; x++) {
            while (next[n - 1] <= x) {
                int32_t l = n - 1;
                for (;;) {
                    int32_t lacking = -1;
                    int32_t need = last_input_column(&L[l], next[l]);
                    if (l > 0 && produced[l] < need) {
                        lacking = l;
                    } else if (L[l].op == MSF_ADD && L[l].skip > b->first &&
                               produced[L[l].skip - b->first] < need) {
                        lacking = L[l].skip - b->first;
                    }
                    if (lacking < 0) {
                        break;
                    }
                    l = lacking - 1;
                }
                const msf_view_t *in2 = NULL;
                if (L[l].op == MSF_ADD) {
                    in2 = L[l].skip >= b->first ? &view[L[l].skip - b->first] : &skip[l];
                }
                msf_layer_column(&L[l], &view[l], in2, &view[l + 1], next[l], lo[l + 1],
                                 hi[l + 1]);
                produced[l + 1] = next[l]++;
                if (l == n - 1 && b->head) {
                    msf_gap_accumulate(&L[n], view[n].base, arena + b->sums_offset);
                } else if (l == n - 1) {
                    emit(b, sink, y, next[l] - 1, view[n].base, last->out_c);
                }
            }
        }
    }
    if (b->head) {
        head_finish(b, arena, out);
        emit(b, sink, 0, 0, out, L[n + b->head - 1].out_c);
    }
}

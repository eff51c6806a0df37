/* The line-buffer executor of a fusion block: every layer produces its output rows in order,
 * each over the full width, on demand (msf_ready_layer with rows), so nothing is recomputed.
 * An internal tensor lives in a ring of whole rows sized by msf_pio/fusion/schemes/
 * line_buffer.py, which simulates exactly this order (msf_ring_admit keeps a ring's rows
 * contiguous). A streamed network input enters its ring a row at a time, just before the first
 * layer reads it. */
#include "../edge.h"
#include "schemes.h"

enum { MSF_BY_PIXEL, MSF_BY_ROW, MSF_DEPTHWISE_ROW };

/* How layer l computes an output row: pixel by pixel, one kernel call each, unless every
 * tensor it touches keeps the row's pixels contiguous (a whole tensor or a line-buffer ring,
 * not a staged pixel) and it is
 * - a depthwise layer: its row kernel pairs the row's pixels (msf_depthwise_row);
 * - a layer whose window is one pixel (1x1, stride 1, no padding: pointwise convs, adds,
 *   activations; not a per-element slope, indexed by the pixel's place, nor a per-channel
 *   product, whose vector stays at its own pixel (0, 0)): the row is a column
 *   of the transposed tensor, so the column kernel gets the row's W pixels in one call (the
 *   1x1 conv pairs them). */
static int msf_row_mode(const msf_block_t *b, const msf_view_t *view, const msf_view_t *outer,
                        int32_t l)
{
    const msf_layer_t *L = &b->layers[l];
    int whole = view[l + 1].col_slots >= L->out_w;
    for (int k = 0; k < msf_n_inputs(L); k++) {
        whole = whole && msf_input_view(b, view, outer, l, k)->col_slots >= L->in_w;
    }
    if (whole && L->op == MSF_DEPTHWISE) {
        return MSF_DEPTHWISE_ROW;
    }
    if (L->op == MSF_RESIZE_NEAREST || L->op == MSF_TRANSPOSE_CONV) {
        return MSF_BY_PIXEL;          /* upsampling: its column kernel (rows by its own rule) */
    }
    const int pixel = L->kernel_h == 1 && L->kernel_w == 1 && L->stride_h == 1 &&
                      L->stride_w == 1 && !L->pad_top && !L->pad_left &&
                      !(L->op == MSF_PRELU && L->slope_per_pixel) &&
                      !(L->op == MSF_MUL && L->broadcast);
    return whole && pixel ? MSF_BY_ROW : MSF_BY_PIXEL;
}

/* Row `row` of v as a transposed view's column: its pixel (x, any column) is v's (row, x). */
MSF_INLINE msf_view_t msf_row_view(const msf_view_t *v, int32_t row)
{
    msf_view_t t = {msf_pixel(v, row, 0), 0, v->col_stride, 0, 1};
    return t;
}

/* Output row `row` of layer l in one kernel call (msf_row_mode): by the depthwise row kernel,
 * or by the column kernel on the transposed layer. */
static void msf_block_row(const msf_block_t *b, const msf_view_t *view,
                          const msf_view_t *outer, int32_t l, int32_t row, int mode)
{
    const msf_layer_t *L = &b->layers[l];
    if (mode == MSF_DEPTHWISE_ROW) {
        msf_depthwise_row(L, msf_input_view(b, view, outer, l, 0), &view[l + 1], row, 0,
                          L->out_w);
        return;
    }
    msf_layer_t t = *L;
    t.in_h = L->in_w;
    t.in_w = L->in_h;
    t.out_h = L->out_w;
    t.out_w = L->out_h;
    const msf_view_t in = msf_row_view(msf_input_view(b, view, outer, l, 0), row);
    const msf_view_t in2 = msf_n_inputs(L) == 2
        ? msf_row_view(msf_input_view(b, view, outer, l, 1), row) : in;
    const msf_view_t out = msf_row_view(&view[l + 1], row);
    msf_layer_column(&t, &in, msf_n_inputs(L) == 2 ? &in2 : NULL, &out, row, 0, t.out_h);
}

/* The first row of local tensor t a layer of the block still reads (next[m]: layer m's next
 * output row; a layer done reads nothing more): the rows before it are dead, and a ring need
 * not keep them. */
static int32_t msf_first_live(const msf_block_t *b, const int32_t *next, int32_t t)
{
    int32_t live = INT32_MAX;
    for (int32_t m = 0; m < b->n; m++) {
        const msf_layer_t *L = &b->layers[m];
        for (int k = 0; k < msf_n_inputs(L); k++) {
            if (msf_input_tensor(L, k) - b->first == t && next[m] < L->out_h) {
                const int32_t r = msf_first_input(L, next[m], 1);
                live = r < live ? r : live;
            }
        }
    }
    return live;
}

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
    int mode[n];

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
        mode[l] = l == n - 1 && staged ? MSF_BY_PIXEL : msf_row_mode(b, view, outer, l);
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
                msf_ring_admit(&view[l + 1], capacity[l + 1], row,
                               msf_first_live(b, next, l + 1));
            }
            if (l == n - 1 && staged) {
                view[n].row0 = row;
            }
            if (mode[l] != MSF_BY_PIXEL) {
                msf_block_row(b, view, outer, l, row, mode[l]);
            }
            for (int32_t x = 0; x < L[l].out_w && mode[l] == MSF_BY_PIXEL; x++) {
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

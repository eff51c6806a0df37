/* ctypes entry points for tests/test_kernels_c.py: a flat, stable case description that the
 * harness turns into the runtime's msf_layer_t by field name, so the test does not mirror the
 * runtime's struct layout; tiles are run column by column as the fused executor does. */
#include "msf/runtime.h"

typedef struct {
    int32_t op, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left;
    int32_t in_h, in_w, in_c, out_h, out_w, out_c;
    int32_t in_offset, out_offset, act_min, act_max;
    int32_t in2_offset, left_shift, in1_mult, in1_shift, in2_mult, in2_shift, requant, folded,
        scratch;
    const int8_t *weights;
    const msf_channel_t *channels;
    const int32_t *mult;
    const int8_t *shift;
} harness_case_t;

/* A tensor view as the test lays it out: rows from row0, column c in slot c % col_slots. */
typedef struct {
    int8_t *base;
    int32_t row0, row_stride, col_stride, col_slots;
} harness_view_t;

static msf_layer_t layer_of(const harness_case_t *c)
{
    msf_layer_t l;
    memset(&l, 0, sizeof l);
    l.op = (uint8_t)c->op;
    l.kernel_h = (uint8_t)c->kernel_h;
    l.kernel_w = (uint8_t)c->kernel_w;
    l.stride_h = (uint8_t)c->stride_h;
    l.stride_w = (uint8_t)c->stride_w;
    l.pad_top = (uint8_t)c->pad_top;
    l.pad_left = (uint8_t)c->pad_left;
    l.in_h = (uint16_t)c->in_h;
    l.in_w = (uint16_t)c->in_w;
    l.in_c = (uint16_t)c->in_c;
    l.out_h = (uint16_t)c->out_h;
    l.out_w = (uint16_t)c->out_w;
    l.out_c = (uint16_t)c->out_c;
    l.skip = -1;
    l.in_offset = c->in_offset;
    l.out_offset = c->out_offset;
    l.act_min = c->act_min;
    l.act_max = c->act_max;
    l.weights = c->weights;
    l.channels = c->channels;
    l.mult = c->mult;
    l.shift = c->shift;
    l.requant = (uint8_t)c->requant;
    l.folded = (uint8_t)c->folded;
    l.scratch = (uint16_t)c->scratch;
    l.in2_offset = c->in2_offset;
    l.left_shift = c->left_shift;
    l.in1_mult = c->in1_mult;
    l.in1_shift = (int8_t)c->in1_shift;
    l.in2_mult = c->in2_mult;
    l.in2_shift = (int8_t)c->in2_shift;
    return l;
}

static msf_view_t view_of(const harness_view_t *v)
{
    msf_view_t m;
    m.base = v->base;
    m.row0 = v->row0;
    m.row_stride = v->row_stride;
    m.col_stride = v->col_stride;
    m.col_slots = v->col_slots;
    return m;
}

/* Output rows [r0, r1) x columns [c0, c1) of a window layer or an add. */
void harness_tile(const harness_case_t *c, const harness_view_t *in, const harness_view_t *in2,
                  const harness_view_t *out, int32_t r0, int32_t r1, int32_t c0, int32_t c1)
{
    msf_layer_t l = layer_of(c);
    msf_view_t vin = view_of(in), vout = view_of(out);
    msf_view_t vin2 = in2 ? view_of(in2) : vin;
    for (int32_t col = c0; col < c1; col++) {
        msf_layer_column(&l, &vin, &vin2, &vout, col, r0, r1);
    }
}

void harness_global_avgpool(const harness_case_t *c, const int8_t *in, int8_t *out)
{
    msf_layer_t l = layer_of(c);
    msf_global_avgpool(&l, in, out);
}

/* The iterative head: pixels accumulated one at a time into int32 sums, then averaged. */
void harness_gap_iterative(const harness_case_t *c, const int8_t *in, int8_t *sums, int8_t *out)
{
    msf_layer_t l = layer_of(c);
    memset(sums, 0, 4 * (size_t)c->in_c);
    for (int32_t p = 0; p < c->in_h * c->in_w; p++) {
        msf_gap_accumulate(&l, in + p * c->in_c, sums);
    }
    msf_gap_finish(&l, sums, out);
}

void harness_dense(const harness_case_t *c, const int8_t *in, int8_t *out)
{
    msf_layer_t l = layer_of(c);
    msf_dense(&l, in, out);
}

uint64_t harness_take_macs(void)
{
#ifdef MSF_COUNT_MACS
    uint64_t n = msf_macs;
    msf_macs = 0;
    return n;
#else
    return 0;
#endif
}

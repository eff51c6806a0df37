/* msf-pio C runtime: int8 layers (TFLite semantics) computed one output column at a time, and
 * the fused-block executor that chains them with column rings (the H-cache of msf-CNN).
 * Generated code (msf_model.c) describes a plan with the structs below and calls msf_run_*. */
#ifndef MSF_RUNTIME_H
#define MSF_RUNTIME_H

#include <stdint.h>
#include <string.h>

#include "msf/requant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A window onto an HWC int8 tensor: a whole tensor, or a column ring holding the rows
 * [row0, row0 + rows) of `col_slots` columns (column c lives in slot c % col_slots). */
typedef struct {
    int8_t *base;
    int32_t row0;
    int32_t row_stride;   /* bytes from one row to the next */
    int32_t col_stride;   /* bytes from one column slot to the next */
    int32_t col_slots;
} msf_view_t;

static inline int8_t *msf_pixel(const msf_view_t *v, int32_t row, int32_t col)
{
    return v->base + (row - v->row0) * v->row_stride + (col % v->col_slots) * v->col_stride;
}

enum msf_op {
    MSF_CONV2D = 0, MSF_DEPTHWISE = 1, MSF_ADD = 2, MSF_MAX_POOL = 3, MSF_AVG_POOL = 4,
    MSF_GLOBAL_AVGPOOL = 5, MSF_DENSE = 6, MSF_SOFTMAX = 7, MSF_HARD_SWISH = 8,
    MSF_LEAKY_RELU = 9, MSF_LOGISTIC = 10, MSF_PRELU = 11, MSF_CONCAT = 12, MSF_MUL = 13,
    MSF_SLICE = 14, MSF_AVG_POOL_PADDED = 15, MSF_STREAM = 16, MSF_CROP = 17,
    MSF_RESIZE_NEAREST = 18, MSF_TRANSPOSE_CONV = 19
};

/* One layer with its quantization folded into TFLite integer parameters. A window is
 * kernel_h x kernel_w taps, moved by stride_h rows and stride_w columns. */
typedef struct msf_layer {
    uint8_t op, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left;
    uint16_t in_h, in_w, in_c, out_h, out_w, out_c;
    int16_t input;                /* model tensor index of the (first) input */
    int16_t skip;                 /* add, concat: model tensor index of the second input */
    int32_t in_offset;            /* -zero_point of the (first) input */
    int32_t out_offset;           /* zero_point of the output */
    int32_t act_min, act_max;
    const int8_t *weights;        /* conv2d and dense: filters in interleaved pairs; depthwise:
                                   * int16 groups of four channels (the layouts of
                                   * msf_pio/codegen/kernel_data.py); the projection of a channel
                                   * split's group: OHWI; prelu alpha (C) or (H, W, C) */
    const msf_channel_t *channels;   /* conv2d, depthwise, dense: per output channel bias and
                                      * requantization */
    const int32_t *mult;          /* add: the output's Q31 multiplier; a requantizing global
                                   * avgpool (TFLite MEAN): its multiplier */
    const int8_t *shift;          /* matching power-of-two exponents */
    uint8_t requant;              /* conv2d, depthwise, dense: enum msf_requant (the generator
                                   * bounds the accumulators from the weights) */
    uint8_t folded;               /* depthwise 3x3, MSF_RQ_FAST: the input offset folded into
                                   * the bias and weights and bias doubled (kernel_data.folds) */
    /* add (TFLite's scheme: both inputs rescaled to 2^left_shift * twice the max scale);
     * prelu: in2_offset is -zero_point of its alpha */
    int32_t in2_offset, left_shift, in1_mult, in2_mult;
    int8_t in1_shift, in2_shift;
    /* pixel ops (TFLite's parameters): leaky relu and prelu: identity (1) and alpha (2)
     * rescales (prelu's applies to the input times the channel's alpha); hard
     * swish: int16 output (1) and 'reluish' (2) multipliers; logistic and softmax: the input
     * multiplier (1) and fn_limit, the input radius (logistic) or smallest difference (softmax) */
    int32_t fn_mult1, fn_mult2, fn_limit;
    int8_t fn_shift1, fn_shift2;
    uint8_t slope_per_pixel;      /* prelu: alpha is (H, W, C), one slope per element */
    uint8_t broadcast;            /* mul: the second input is 1 x 1 x C, read at pixel (0, 0)
                                   * (in2_offset, fn_mult1 and fn_shift1: TFLite's MUL) */
    uint16_t begin;               /* slice: the first input channel taken; crop: the first input
                                   * row; stream: the rows of state kept across runs */
    const uint16_t *index;        /* resize: the input row of every output row, then the input
                                   * column of every output column (msf_pio/numerics.py) */
    uint16_t scratch;             /* conv2d, dense, folded depthwise: bytes of the kernel's stack
                                   * buffer, from the shape (codegen/kernel_data.scratch_bytes) */
    /* conv2d, folded depthwise: the kernel specialised to this layer's shape by the generated
     * code (msf/kernels.h), or 0: the kernel takes the shape from the fields above; it runs
     * in the buffer of `scratch` bytes its caller allocates */
    void (*column)(const struct msf_layer *l, const msf_view_t *in, const msf_view_t *out,
                   int32_t col, int32_t r0, int32_t r1, void *scratch);
} msf_layer_t;

/* A column ring of a tensor inside a fusion block. */
typedef struct {
    uint32_t offset;              /* arena offset */
    uint16_t rows, cols;          /* capacity: rows per tile, column slots; rows 0: a
                                   * depthwise output over its input's ring (h-cache) */
} msf_ring_t;

#define MSF_EXTERNAL 0xFFFFFFFFu  /* tensor offset meaning: the caller's input or output */

/* Receives a streamed network output pixel by pixel (row, column, `channels` int8 values). */
typedef struct {
    void (*fn)(int32_t row, int32_t col, const int8_t *pixel, int32_t channels, void *ctx);
    void *ctx;
} msf_sink_t;

/* Pulls a streamed network input row by row (a camera's rows): writes row `row` (width x
 * channels int8 values) to dst. The runtime asks for every row exactly once, in order. */
typedef struct {
    void (*fn)(int32_t row, int8_t *dst, void *ctx);
    void *ctx;
} msf_source_t;

/* How a fusion block caches its internal tensors: the executor that runs it
 * (library/src/schemes/, one file each, dispatched by msf_run_edge). */
enum msf_scheme {
    MSF_H_CACHE = 0,      /* column rings, output rows in tiles of tile_rows rows (msf-CNN:
                           * one), the rows two tiles share recomputed for each */
    MSF_LINE_BUFFER = 1,  /* rings of whole rows, nothing recomputed */
    MSF_CHANNEL_SPLIT = 2 /* an inverted-residual triple as H-cache tiles whose expansion runs
                           * a channel group at a time into int32 sums */
};

/* One edge of the plan: a single layer, or a fusion block of `n` spatial layers, optionally
 * ending in an iterative head (global average pooling, then maybe dense). */
typedef struct {
    const msf_layer_t *layers;    /* n spatial layers, then the head layers */
    uint8_t n, head;              /* head: 0 none, 1 global avgpool, 2 global avgpool + dense */
    uint8_t stream;               /* 1: the network output, one pixel staged at out_offset */
    uint8_t scheme;               /* enum msf_scheme (fusion blocks) */
    uint16_t first;               /* model tensor index of the block input */
    uint16_t tile_rows;           /* H-cache: output rows per tile (0 means 1) */
    uint16_t in_rows;             /* a streamed network input: rows of its ring at in_offset
                                   * (0: the input is whole) */
    uint32_t in_offset;           /* arena offsets (or MSF_EXTERNAL) of the block input, */
    uint32_t out_offset;          /* its output, */
    const uint32_t *outer_offset; /* and, per spatial layer, of its two inputs (first, second)
                                   * if made before the block input (a skip, a branch input) */
    const msf_ring_t *rings;      /* n - 1 rings for the block's internal tensors: column
                                   * rings (H-cache) or rings of whole rows (line buffer) */
    uint32_t staging_offset;      /* head: one output pixel of the last spatial layer */
    uint32_t sums_offset;         /* head: int32 sums of global average pooling; channel
                                   * split: int32 sums of a tile's output */
    const msf_layer_t *groups;    /* channel split: per group, its expand, depthwise and
                                   * project layers over the group's channels */
} msf_block_t;

/* Kernels: output column `col`, rows [r0, r1) of a window layer (conv, depthwise, pools), an
 * add or a concatenation along channels (`in2` is the second input) or a pixel op (softmax over
 * channels, element-wise activation). */
void msf_conv2d_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                       int32_t col, int32_t r0, int32_t r1);
void msf_depthwise_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                          int32_t col, int32_t r0, int32_t r1);
/* ... of a layer the generated code specialised (msf_layer_t.column set; a depthwise layer
 * folded): its kernel called with a stack buffer of the layer's scratch bytes, and nothing of
 * the kernel for any shape linked (msf/dispatch.h's MSF_CONV2D_ANY, MSF_DEPTHWISE_ANY) */
void msf_conv2d_special_column(const msf_layer_t *l, const msf_view_t *in,
                               const msf_view_t *out, int32_t col, int32_t r0, int32_t r1);
void msf_depthwise_special_column(const msf_layer_t *l, const msf_view_t *in,
                                  const msf_view_t *out, int32_t col, int32_t r0, int32_t r1);
/* Output row `row`, columns [c0, c1) of a depthwise layer whose input and output keep that
 * row's pixels contiguous (col_slots covering the width): a line buffer's row. */
void msf_depthwise_row(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                       int32_t row, int32_t c0, int32_t c1);
void msf_pool_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                     int32_t col, int32_t r0, int32_t r1);
void msf_add_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *in2,
                    const msf_view_t *out, int32_t col, int32_t r0, int32_t r1);
void msf_concat_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *in2,
                       const msf_view_t *out, int32_t col, int32_t r0, int32_t r1);
void msf_softmax_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                        int32_t col, int32_t r0, int32_t r1);
void msf_mul_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *in2,
                    const msf_view_t *out, int32_t col, int32_t r0, int32_t r1);
void msf_slice_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                      int32_t col, int32_t r0, int32_t r1);
/* An average pool that counts every tap of its window, the padding ones as the input's zero
 * point (a PAD before TFLite's AVERAGE_POOL_2D, ONNX's count_include_pad). */
void msf_avg_pool_padded_column(const msf_layer_t *l, const msf_view_t *in,
                                const msf_view_t *out, int32_t col, int32_t r0, int32_t r1);
void msf_activation_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                           int32_t col, int32_t r0, int32_t r1);
/* Whole tensors moved by rows (a streaming model's ring buffer, STRIDED_SLICE over time), called
 * by the generated schedule itself (never inside a block). A stream layer's output lives in the
 * arena's state region: its `begin` rows kept from the last run, then the input's rows, which
 * msf_stream_rows writes; msf_stream_keep, at the end of the run, moves its last `begin` rows
 * to the start. A crop's output is the input's rows [begin, begin + out_h). */
void msf_stream_rows(const msf_layer_t *l, const int8_t *in, int8_t *out);
void msf_stream_keep(const msf_layer_t *l, int8_t *out);
void msf_crop_rows(const msf_layer_t *l, const int8_t *in, int8_t *out);
void msf_layer_column(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *in2,
                      const msf_view_t *out, int32_t col, int32_t r0, int32_t r1);

/* A 1x1 (or any) conv's output column of rows [r0, r1) added to int32 sums without bias or
 * requantization (sums: row r0's pixel, `row_stride` bytes per row, 4 bytes per channel, any
 * alignment), its input channels being a part of the layer's (channel split); and the finish:
 * `pixels` pixels of sums plus the bias requantized into int8 output pixels. */
void msf_conv2d_sums_column(const msf_layer_t *l, const msf_view_t *in, int8_t *sums,
                            int32_t row_stride, int32_t col, int32_t r0, int32_t r1);
void msf_conv2d_sums_finish(const msf_layer_t *l, const int8_t *sums, int32_t pixels,
                            int8_t *out);

/* Heads: global average pooling (whole tensor, or accumulated pixel by pixel into int32
 * sums) and dense on a vector. */
void msf_global_avgpool(const msf_layer_t *l, const int8_t *in, int8_t *out);
void msf_gap_accumulate(const msf_layer_t *l, const int8_t *pixel, int8_t *sums);
void msf_gap_finish(const msf_layer_t *l, int8_t *sums, int8_t *out);
void msf_dense(const msf_layer_t *l, const int8_t *in, int8_t *out);

/* Upsampling: nearest-neighbour resize (TFLite's RESIZE_NEAREST_NEIGHBOR, maps in `index`) and
 * transposed convolution (TRANSPOSE_CONV, OHWI weights, a conv's per-channel requantization).
 * A single layer's whole HWC tensors, called by the generated schedule itself: with a `sink`
 * (a streamed network output; else 0), `out` is one pixel handed to it pixel by pixel. Inside
 * a line-buffer block, an output column of rows [r0, r1) (input rows whole in the view). */
void msf_resize_nearest_s8(const msf_layer_t *l, const int8_t *in, int8_t *out,
                           const msf_sink_t *sink);
void msf_transpose_conv_s8(const msf_layer_t *l, const int8_t *in, int8_t *out,
                           const msf_sink_t *sink);
void msf_resize_nearest_column(const msf_layer_t *l, const msf_view_t *in,
                               const msf_view_t *out, int32_t col, int32_t r0, int32_t r1);
void msf_transpose_conv_column(const msf_layer_t *l, const msf_view_t *in,
                               const msf_view_t *out, int32_t col, int32_t r0, int32_t r1);

/* Runs one edge of the plan; `sink` receives the pixels of a streamed output (stream edges),
 * `source` gives the rows of a streamed input (edges with in_rows). */
void msf_run_edge(const msf_block_t *b, int8_t *arena, const int8_t *input, int8_t *output,
                  const msf_sink_t *sink, const msf_source_t *source);

/* Arena measurement (instrumented builds): before an edge, every arena byte outside the
 * buffers the edge reads is painted; after it, the bytes that changed are counted. Two passes
 * with different paints catch a byte written with the paint value itself. */
typedef struct {
    uint32_t offset, bytes;
} msf_span_t;

void msf_paint_free(int8_t *arena, uint32_t size, const msf_span_t *live, uint32_t n_live,
                    uint8_t paint);
uint32_t msf_count_written(const int8_t *arena, uint32_t size, const msf_span_t *live,
                           uint32_t n_live, uint8_t paint, int second_pass);

/* Edge profiling (builds with -DMSF_PROFILE_EDGES): the generated msf_model_run calls this
 * before (done = 0) and after (done = 1) every edge; the firmware defines it, e.g. to read a
 * cycle counter, so each fusion block's time can be set beside its predicted cost. */
void msf_profile_edge(uint32_t edge, int done);

/* custom_msf_profile = yes: prints "MSF edge=<k> cycles=<n>" for every edge of the last plain
 * run of the model (the monitor sets them beside the predicted cycles); otherwise nothing. */
void msf_profile_print(void);

/* Counters of the instrumented builds. */
#ifdef MSF_COUNT_MACS
extern uint64_t msf_macs;
#define MSF_COUNT(n) (msf_macs += (uint64_t)(n))
#else
#define MSF_COUNT(n) ((void)0)
#endif

#ifdef __cplusplus
}
#endif
#endif /* MSF_RUNTIME_H */

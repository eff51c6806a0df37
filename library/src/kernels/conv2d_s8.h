/* Dense int8 convolution (conv2d, 1x1 included), one output column: the kernel as an inline
 * template of the layer's shape, which the generated code instantiates with the shape as
 * constants (MSF_CONV2D_KERNEL, msf_pio/codegen/specialise.py: loops of known counts unrolled,
 * offsets immediate) and conv2d_s8.c with the layer's fields.
 *
 * No window is gathered per pixel (im2col-free): the kernel columns of the output column are
 * expanded once (mac_s8.h: int16, the input offset added), input row by input row, into a stack
 * buffer sized from the layer's shape (msf_layer_t.scratch): row y holds the kw * cin taps of
 * input row y (msf_conv_row: and a zero), padding rows and columns as zeros, so that the window
 * of every output pixel is kh consecutive buffer rows: one run of taps, in the filter's own
 * order, whatever the padding. The output rows run in chunks whose input rows fit the buffer,
 * three pixels and two output channels per inner loop (mac_s8.h). A layer whose window rows do
 * not fit MSF_CONV_BUFFER gathers each pixel's window in parts instead (conv2d_s8.c). */
#ifndef MSF_CONV2D_S8_H
#define MSF_CONV2D_S8_H

#include "mac_s8.h"
#include "window.h"

/* Input rows [a, z) of the kernel columns of output column col (rows outside the input, and
 * columns, as zeros) into buf, `row` int16 taps per input row, doubled with `twice`: a column
 * some of whose kernel columns are padding, or a view whose pixels are not next to each other
 * (a line buffer's ring, a cache), kernel column by kernel column (conv2d_s8.c: one copy shared
 * by every shape) */
void msf_conv_rows_clipped(int twice, const msf_layer_t *l, const msf_view_t *in, int32_t col,
                           int32_t a, int32_t z, int32_t kw, int32_t cin, int32_t row,
                           int32_t sw, int32_t pl, int16_t *buf);

/* ... any column; one whose kernel columns are all inside a whole tensor's rows (one run of kw
 * cin taps per input row) inline, with the shape's constants in a specialised kernel */
MSF_INLINE void msf_conv_rows(const int twice, const msf_layer_t *l, const msf_view_t *in,
                              int32_t col,
                              int32_t a, int32_t z, const int32_t kw, const int32_t cin,
                              const int32_t row, const int32_t sw, const int32_t pl,
                              int16_t *buf)
{
    const int32_t ix0 = col * sw - pl, offset = l->in_offset;
    /* a whole tensor keeps a row's kernel columns next to each other: one run */
    const int contiguous = in->col_stride == cin && in->col_slots >= l->in_w;
    if (!contiguous || ix0 < 0 || l->in_w - ix0 < kw) {
        msf_conv_rows_clipped(twice, l, in, col, a, z, kw, cin, row, sw, pl, buf);
        return;
    }
    const int32_t top = a > 0 ? a : 0;
    const int8_t *src = top < l->in_h ? msf_pixel(in, top, ix0) : 0;
    for (int32_t iy = a; iy < z; iy++, buf += row) {
        if (iy >= 0 && iy < l->in_h) {
            msf_expand(twice, src, kw * cin, offset, buf);
            src += in->row_stride;
            if (row > kw * cin) {
                buf[kw * cin] = 0;
            }
        } else {
            for (int32_t t = 0; t < row; t++) {
                buf[t] = 0;
            }
        }
    }
}

/* Output column col, rows [r0, r1) of a conv layer whose two pixels' window rows fit the
 * buffer: its input rows in chunks that fit `buf` (msf_layer_t.scratch bytes: the generator
 * sizes it from the shape, codegen/kernel_data.scratch_bytes), expanded by msf_conv_rows, their
 * output pixels three at a time (`special`: the shape's constants compiled in) or two, a lone
 * last row by the kernel for any shape. Inlined whole into each specialised kernel, so that
 * the kernel calls no code back through a pointer. */
MSF_INLINE void msf_conv2d_chunks(const int special, const msf_layer_t *l, const msf_view_t *in,
                                  const msf_view_t *out, int32_t col, int32_t r0, int32_t r1,
                                  int16_t *buf, const int32_t kh, const int32_t kw,
                                  const int32_t cin, const int32_t cout, const int32_t sh,
                                  const int32_t sw, const int32_t pl, const int mode,
                                  const int full, const int even)
{
    const int32_t pt = l->pad_top, row = msf_conv_row(kw, cin, sh);
    const int32_t groups = (kh * row + 3) / 4, ors = out->row_stride, step = special ? 3 : 2;
    /* output rows per chunk: a multiple of `step` whose input rows fit the buffer with its
     * slack */
    int32_t chunk = ((l->scratch / 2 - 4) / row - kh) / sh + 1;
    chunk = chunk > step ? chunk - chunk % step : chunk;
    int8_t *o = msf_pixel(out, r0, col);
    for (int32_t p = r0; p < r1;) {
        const int32_t q = r1 - p < chunk ? r1 : p + chunk;
        msf_conv_rows(mode == MSF_RQ_FAST2, l, in, col, p * sh - pt, (q - 1) * sh - pt + kh,
                      kw, cin, row, sw, pl, buf);
        int32_t r = p;
        for (; special && r + 3 <= q; r += 3, o += 3 * ors) {
            msf_conv_channels(3, mode, full, even, l, buf + (r - p) * sh * row, sh * row,
                              groups, cout, o, ors);
        }
        for (; r < q; r += 2) {                   /* pairs, and a lone last row */
            const int32_t n = q - r < 2 ? 1 : 2;
            msf_conv_channels_any(l, n, buf + (r - p) * sh * row, sh * row, groups, o, ors);
            o += n * ors;
        }
#ifdef MSF_COUNT_MACS
        for (r = p; r < q; r++) {                              /* valid taps only */
            const msf_window_t w = msf_window(l, r, col);
            MSF_COUNT((w.y1 - w.y0) * (w.x1 - w.x0) * cin * cout);
        }
#endif
        p = q;
    }
}

/* Output column col, rows [r0, r1) of a conv layer with its shape from the layer's fields
 * (conv2d_s8.c), in the buffer msf_conv2d_column allocates */
void msf_conv2d_run(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,
                    int32_t col, int32_t r0, int32_t r1, int16_t *buf);

/* A conv kernel specialised to a shape (msf_layer_t.column, emitted by the generated code):
 * kh x kw window over cin input channels (the output channels: the layer's, even or not),
 * strides sh and sw, left padding pl, requantization mode and full as msf_channel_output; the
 * generator specialises only shapes whose two pixels' window rows fit MSF_CONV_BUFFER. */
#define MSF_CONV2D_KERNEL(name, kh, kw, cin, sh, sw, pl, mode, full, even)                     \
    static void name(const msf_layer_t *l, const msf_view_t *in, const msf_view_t *out,        \
                     int32_t col, int32_t r0, int32_t r1, void *scratch)                        \
    {                                                                                           \
        msf_conv2d_chunks(1, l, in, out, col, r0, r1, (int16_t *)scratch, kh, kw, cin,         \
                          l->out_c, sh, sw, pl, mode, full, even);                              \
    }

#endif /* MSF_CONV2D_S8_H */

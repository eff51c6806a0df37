/* Valid kernel taps of one output pixel of a window layer (padding taps are skipped: their
 * input is the zero point, which contributes nothing). */
#ifndef MSF_WINDOW_H
#define MSF_WINDOW_H

#include "msf/requant.h"
#include "msf/runtime.h"

typedef struct {
    int32_t y0, y1, x0, x1;       /* valid kernel rows [y0, y1) and columns [x0, x1) */
    int32_t in_row, in_col;       /* input position of kernel tap (0, 0) */
} msf_window_t;

MSF_INLINE msf_window_t msf_window(const msf_layer_t *l, int32_t row, int32_t col)
{
    msf_window_t w;
    w.in_row = row * l->stride_h - l->pad_top;
    w.in_col = col * l->stride_w - l->pad_left;
    w.y0 = w.in_row < 0 ? -w.in_row : 0;
    w.x0 = w.in_col < 0 ? -w.in_col : 0;
    w.y1 = l->in_h - w.in_row < l->kernel_h ? l->in_h - w.in_row : l->kernel_h;
    w.x1 = l->in_w - w.in_col < l->kernel_w ? l->in_w - w.in_col : l->kernel_w;
    return w;
}

#define MSF_MAX_KERNEL 11   /* kernel columns: the code generator refuses wider windows */

/* Pointers to the first valid tap of each valid kernel column: tap (ky, kx) is at
 * cols[kx] + (ky - y0) * row_stride. */
MSF_INLINE void msf_window_columns(const msf_view_t *in, const msf_window_t *w,
                                      const int8_t *cols[MSF_MAX_KERNEL])
{
    for (int32_t kx = w->x0; kx < w->x1; kx++) {
        cols[kx] = msf_pixel(in, w->in_row + w->y0, w->in_col + kx);
    }
}

#endif /* MSF_WINDOW_H */

/* The shared edge walker's one out-of-line step (edge.h has the rest): a layer's output column
 * by its op's kernel. Every scheme's executor (schemes/) runs its layers through it. */
#include "edge.h"

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
    case MSF_CONCAT:
        msf_concat_column(l, in, in2, out, col, r0, r1);
        break;
    case MSF_MUL:
        msf_mul_column(l, in, in2, out, col, r0, r1);
        break;
    case MSF_SLICE:
        msf_slice_column(l, in, out, col, r0, r1);
        break;
    case MSF_RESIZE_NEAREST:
        msf_resize_nearest_column(l, in, out, col, r0, r1);
        break;
    case MSF_TRANSPOSE_CONV:
        msf_transpose_conv_column(l, in, out, col, r0, r1);
        break;
    case MSF_AVG_POOL_PADDED:
        msf_avg_pool_padded_column(l, in, out, col, r0, r1);
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

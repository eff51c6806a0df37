/* The shared edge walker's one out-of-line step (edge.h has the rest): a layer's output column
 * by its op's kernel, for every op. Every scheme's executor (schemes/) runs its layers through
 * it. Weak: the generated model's own, over its ops only, replaces it (msf/dispatch.h). */
#include "edge.h"

__attribute__((weak)) void msf_layer_column(const msf_layer_t *l, const msf_view_t *in,
                                            const msf_view_t *in2, const msf_view_t *out,
                                            int32_t col, int32_t r0, int32_t r1)
{
    msf_layer_column_of(MSF_EVERY, l, in, in2, out, col, r0, r1);
}

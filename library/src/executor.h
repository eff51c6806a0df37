/* The runtime's dispatch of an edge to its executor, as a template over the schemes and single
 * head layers a model uses (msf/dispatch.h): `schemes` a constant set of MSF_BIT(enum
 * msf_scheme), `heads` of MSF_BIT(enum msf_op). */
#ifndef MSF_EXECUTOR_H
#define MSF_EXECUTOR_H

#include "edge.h"
#include "schemes/schemes.h"

MSF_INLINE void msf_run_edge_of(uint32_t schemes, uint32_t heads, const msf_block_t *b,
                                int8_t *arena, const int8_t *input, int8_t *output,
                                const msf_sink_t *sink, const msf_source_t *source)
{
    const msf_layer_t *L = b->layers;
    int8_t *in = msf_locate(arena, b->in_offset, input);
    int8_t *out = b->out_offset == MSF_EXTERNAL ? output : arena + b->out_offset;
    if (b->n == 0) {                               /* a single head layer */
        int32_t pulled = -1;
        msf_view_t whole = msf_whole_view(in, L[0].in_w, L[0].in_c);
        msf_pull_rows(b, source, &whole, &pulled, INT32_MAX);   /* its ring: every row */
        if (L[0].op == MSF_GLOBAL_AVGPOOL) {
            if (heads & MSF_BIT(MSF_GLOBAL_AVGPOOL)) {
                msf_global_avgpool(&L[0], in, out);
            }
        } else {
            if (heads & MSF_BIT(MSF_DENSE)) {
                msf_dense(&L[0], in, out);
            }
        }
        msf_emit(b, sink, 0, 0, out, L[0].out_c);
        return;
    }
    /* direct calls, not a table of pointers: the stack predictor (msf_pio/codegen/stack.py)
     * follows each edge to its own executor */
    switch (b->scheme) {
    case MSF_LINE_BUFFER:
        if (schemes & MSF_BIT(MSF_LINE_BUFFER)) {
            msf_run_line_buffer(b, arena, in, out, input, sink, source);
        }
        break;
    case MSF_CHANNEL_SPLIT:
        if (schemes & MSF_BIT(MSF_CHANNEL_SPLIT)) {
            msf_run_channel_split(b, arena, in, out, input, sink, source);
        }
        break;
    case MSF_H_CACHE:
    default:
        if (schemes & MSF_BIT(MSF_H_CACHE)) {
            msf_run_h_cache(b, arena, in, out, input, sink, source);
        }
        break;
    }
}

#endif /* MSF_EXECUTOR_H */

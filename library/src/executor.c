/* The edge executor, the plan's one dispatch: a single head layer (global pooling or dense on a
 * whole tensor) runs here; every other edge, a single spatial layer or a fusion block, runs in
 * the executor of its cache scheme (schemes/, chosen by msf_block_t.scheme). For every scheme
 * and head; weak: the generated model's own, over its plan's only, replaces it
 * (msf/dispatch.h). */
#include "executor.h"

__attribute__((weak)) void msf_run_edge(const msf_block_t *b, int8_t *arena,
                                        const int8_t *input, int8_t *output,
                                        const msf_sink_t *sink, const msf_source_t *source)
{
    msf_run_edge_of(MSF_EVERY, MSF_EVERY, b, arena, input, output, sink, source);
}

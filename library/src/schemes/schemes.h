/* The executors of the cache schemes, one file each in this folder, all with one signature:
 * run the fusion block b (or a single spatial layer), reading its input `in` and writing its
 * output `out` (the arena's or the caller's buffers), `input` being the network input (older
 * tensors the block reads may be the caller's), `sink` and `source` a streamed output and input.
 * executor.c dispatches an edge to its executor by msf_block_t.scheme (enum msf_scheme). */
#ifndef MSF_SCHEMES_H
#define MSF_SCHEMES_H

#include "msf/runtime.h"

typedef void msf_executor_t(const msf_block_t *b, int8_t *arena, int8_t *in, int8_t *out,
                            const int8_t *input, const msf_sink_t *sink,
                            const msf_source_t *source);

msf_executor_t msf_run_h_cache;         /* h_cache.c: the H-cache and its tiles, single layers */
msf_executor_t msf_run_line_buffer;     /* line_buffer.c: rings of whole rows */
msf_executor_t msf_run_channel_split;   /* channel_split.c: inverted-residual triples */

#endif /* MSF_SCHEMES_H */

/* The instrumented builds' measurements: arena painting for measured RAM (msf_paint_free in
 * msf/runtime.h) and the counted MACs (MSF_COUNT). */
#include "msf/runtime.h"

#ifdef MSF_COUNT_MACS
uint64_t msf_macs;
#endif

#define MSF_PAINT_FIRST 0x55u    /* pass 1 paint; pass 2 paints 0xAA */

static int in_live(uint32_t i, const msf_span_t *live, uint32_t n_live)
{
    for (uint32_t s = 0; s < n_live; s++) {
        if (i - live[s].offset < live[s].bytes) {
            return 1;
        }
    }
    return 0;
}

void msf_paint_free(int8_t *arena, uint32_t size, const msf_span_t *live, uint32_t n_live,
                    uint8_t paint)
{
    for (uint32_t i = 0; i < size; i++) {
        if (!in_live(i, live, n_live)) {
            arena[i] = (int8_t)paint;
        }
    }
}

/* Pass 1 counts bytes that differ from its paint; pass 2 adds those pass 1 missed: bytes
 * written with pass 1's paint value. */
uint32_t msf_count_written(const int8_t *arena, uint32_t size, const msf_span_t *live,
                           uint32_t n_live, uint8_t paint, int second_pass)
{
    uint32_t count = 0;
    for (uint32_t i = 0; i < size; i++) {
        uint8_t v = (uint8_t)arena[i];
        if (v != paint && (!second_pass || v == MSF_PAINT_FIRST) && !in_live(i, live, n_live)) {
            count++;
        }
    }
    return count;
}

/* Benchmark firmware for the emulated boards: times msf_model_run alone (the demo firmware's
 * timed region also checks the output, ~50 instructions per output byte, which would swamp the
 * kernels of a one-layer model), then checks the output against the host reference and prints
 * the demo's MSF result line fields that benchmarks/kernel_instructions.py reads (and the stack
 * the run used, which benchmarks/mlperf_tiny.py reports). Board support
 * comes from the msf-pio library (msf/board.h); printing needs no C library. A build with
 * -DMSF_PROFILE_EDGES also prints every edge's cycles. */
#include <stdint.h>

#include "msf/board.h"
#include "msf/runtime.h"
#include "msf_golden.h"
#include "msf_model.h"

static int8_t output[MSF_MODEL_OUTPUT_BYTES];

#ifdef MSF_PROFILE_EDGES
/* Built with -DMSF_PROFILE_EDGES (kernel_instructions.py): each edge's cycles, printed as
 * "MSF edge=<k> cycles=<n>" lines before the result line. */
static uint64_t edge_cycles[MSF_MODEL_EDGES], edge_start;

void msf_profile_edge(uint32_t edge, int done)
{
    uint64_t now = msf_board_cycles();
    if (done) {
        edge_cycles[edge] += now - edge_start;
    } else {
        edge_start = now;
    }
}

static void print_edges(void)
{
    for (uint32_t k = 0; k < MSF_MODEL_EDGES; k++) {
        msf_board_put_dec("MSF edge=", k);
        msf_board_put_dec(" cycles=", edge_cycles[k]);
        msf_board_puts("\n");
    }
}
#else
static void print_edges(void) {}
#endif

static uint32_t crc32(const int8_t *p, uint32_t n)
{
    uint32_t crc = 0xFFFFFFFFu;
    for (uint32_t i = 0; i < n; i++) {
        crc ^= (uint8_t)p[i];
        for (int b = 0; b < 8; b++) {
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
        }
    }
    return ~crc;
}

int main(void)
{
    msf_board_init();
    uint64_t t0 = msf_board_cycles();
    msf_model_run(msf_golden_input, output);
    uint64_t cycles = msf_board_cycles() - t0;
    uint32_t crc = crc32(output, MSF_MODEL_OUTPUT_BYTES);
    int ok = crc == MSF_GOLDEN_OUTPUT_CRC32;
    print_edges();
    for (;;) {                     /* an emulator exits in msf_board_end_of_run */
        msf_board_puts("MSF model=");
        msf_board_puts(msf_model_info.name);
        msf_board_puts(" plan=");
        msf_board_puts(msf_model_info.plan);
        msf_board_puts(" board=bench clock=");
        msf_board_puts(msf_board_cycles_source());
        msf_board_put_dec(" cycles=", cycles);
        msf_board_put_dec(" arena=", msf_model_info.arena_bytes);
        msf_board_put_dec(" stack=", msf_board_stack_used());
        msf_board_put_dec(" macs=", msf_model_info.macs);
        msf_board_put_hex(" crc=", crc);
        msf_board_put_hex(" crc_ref=", MSF_GOLDEN_OUTPUT_CRC32);
        msf_board_puts(ok ? " status=ok\n" : " status=mismatch\n");
        msf_board_end_of_run(!ok);
    }
}

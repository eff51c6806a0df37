/* Benchmark firmware for the emulated boards: times msf_model_run alone (the demo firmware's
 * timed region also checks the output, ~50 instructions per output byte, which would swamp the
 * kernels of a one-layer model), then checks the output against the host reference and prints
 * the demo's MSF result line fields that benchmarks/kernel_instructions.py reads. */
#include <stdint.h>
#include <stdio.h>

#include "msf_board.h"
#include "msf_golden.h"
#include "msf_model.h"

static int8_t output[MSF_MODEL_OUTPUT_BYTES];

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
    uint64_t t0 = msf_board_cycles();
    msf_model_run(msf_golden_input, output);
    uint64_t cycles = msf_board_cycles() - t0;
    uint32_t crc = crc32(output, MSF_MODEL_OUTPUT_BYTES);
    int ok = crc == MSF_GOLDEN_OUTPUT_CRC32;
    printf("MSF model=%s plan=%s board=bench clock=%s cycles=%lu arena=%lu macs=%lu "
           "crc=0x%08lx crc_ref=0x%08lx status=%s\n",
           msf_model_info.name, msf_model_info.plan, msf_board_cycles_source(),
           (unsigned long)cycles, (unsigned long)msf_model_info.arena_bytes,
           (unsigned long)msf_model_info.macs, (unsigned long)crc,
           (unsigned long)MSF_GOLDEN_OUTPUT_CRC32, ok ? "ok" : "mismatch");
    return !ok;
}

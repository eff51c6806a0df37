/* msf-pio demo firmware: runs the generated model on the golden input, measures latency,
 * arena and stack, checks the output against the host reference and prints one MSF line. */
#include <stdint.h>
#include <stdio.h>

#ifdef MSF_QEMU
#include "msf_board.h"   /* the msf-qemu platform's board services */
#else
#include "board_real.h"  /* the same services on real boards */
#endif
#include "msf_golden.h"
#include "msf_model.h"

#ifndef MSF_BOARD_NAME
#define MSF_BOARD_NAME "unknown"
#endif
#ifndef MSF_CPU_HZ
#define MSF_CPU_HZ 0
#endif

typedef struct {
    uint32_t crc;          /* CRC-32 (zlib) of the output so far, pre-inverted */
    uint32_t offset;       /* output bytes seen */
    uint32_t mismatches;   /* bytes that differ from the host reference */
} msf_check_t;

static void check_bytes(msf_check_t *c, const int8_t *p, int32_t n)
{
    for (int32_t i = 0; i < n; i++, c->offset++) {
        c->mismatches += p[i] != msf_golden_output[c->offset];
        c->crc ^= (uint8_t)p[i];
        for (int b = 0; b < 8; b++) {
            c->crc = (c->crc >> 1) ^ (0xEDB88320u & (0u - (c->crc & 1u)));
        }
    }
}

#if MSF_MODEL_STREAM_OUTPUT
static void check_pixel(int32_t row, int32_t col, const int8_t *pixel, int32_t channels,
                        void *ctx)
{
    (void)row, (void)col;          /* pixels arrive in row-major order */
    check_bytes((msf_check_t *)ctx, pixel, channels);
}
#else
static int8_t output[MSF_MODEL_OUTPUT_BYTES];
#endif

/* Runs the model once on the golden input; returns the check of its output. */
msf_check_t msf_demo_run(void)
{
    msf_check_t c = {0xFFFFFFFFu, 0, 0};
#if MSF_MODEL_STREAM_OUTPUT
    msf_model_run_stream(msf_golden_input, check_pixel, &c);
#else
    msf_model_run(msf_golden_input, output);
    check_bytes(&c, output, MSF_MODEL_OUTPUT_BYTES);
#endif
    c.crc = ~c.crc;
    return c;
}

uint32_t msf_demo_measure_arena(void)
{
#if MSF_MODEL_STREAM_OUTPUT
    return msf_model_measure_arena(msf_golden_input, 0);
#else
    return msf_model_measure_arena(msf_golden_input, output);
#endif
}

/* printf-free unsigned 64-bit decimal (small libcs lack %llu). */
static const char *u64(uint64_t v, char buf[21])
{
    char *p = buf + 20;
    *p = 0;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return p;
}

#ifdef PIO_UNIT_TESTING
int msf_unit_tests(void);          /* test/test_model: bit-exactness and RAM checks */
#endif

int main(void)
{
    int failed = 0;
    uint64_t t0 = msf_board_cycles();
    msf_check_t c = msf_demo_run();
    uint64_t cycles = msf_board_cycles() - t0;
    uint32_t arena = msf_demo_measure_arena();
    uint32_t stack = (uint32_t)msf_board_stack_used();
    uint64_t us = MSF_CPU_HZ ? cycles * 1000000u / (uint64_t)MSF_CPU_HZ : 0;
    int ok = c.mismatches == 0 && c.offset == MSF_MODEL_OUTPUT_BYTES &&
             c.crc == MSF_GOLDEN_OUTPUT_CRC32 && arena == msf_model_info.arena_bytes;
    char b1[21], b2[21], b3[21];
    printf("MSF model=%s plan=%s board=%s clock=%s cycles=%s us=%s arena=%lu arena_pred=%lu "
           "stack=%lu ram=%lu ram_pred=%lu macs=%s crc=0x%08lx crc_ref=0x%08lx status=%s\n",
           msf_model_info.name, msf_model_info.plan, MSF_BOARD_NAME, msf_board_cycles_source(),
           u64(cycles, b1), u64(us, b2), (unsigned long)arena,
           (unsigned long)msf_model_info.peak_ram_predicted, (unsigned long)stack,
           (unsigned long)(arena + stack), (unsigned long)msf_model_info.peak_ram_predicted,
           u64(msf_model_info.macs, b3), (unsigned long)c.crc,
           (unsigned long)MSF_GOLDEN_OUTPUT_CRC32, ok ? "ok" : "mismatch");
    failed |= !ok;
#ifdef PIO_UNIT_TESTING
    failed |= msf_unit_tests();
#endif
    return failed;
}

#ifdef ESP_PLATFORM
void app_main(void);
void app_main(void)                /* ESP-IDF's entry point */
{
    (void)main();
}
#endif

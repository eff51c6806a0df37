/* The measuring harness: the demo's firmware (examples/msf_demo/src/main.c links here) and the
 * pio test firmware of a project from `msf-pio init` (test/test_msf/harness.c).
 *
 * Runs the generated model on the golden input, measures latency, arena
 * and stack, checks the output against the host reference and prints one MSF result line, again
 * and again on a real board (for a monitor opened after the upload), once on an emulator. A
 * release build runs the model once before its first line; a measuring build (pio test, the
 * emulated boards, custom_msf_measure = yes) runs it twice more, painting the arena.
 *
 * Board support comes from the msf-pio library (msf/board.h); printing needs no C library. */
#include <stdint.h>

#include "msf/board.h"
#include "msf/runtime.h"
#include "msf_golden.h"
#include "msf_model.h"

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

#if MSF_MODEL_STREAM_INPUT
/* A camera stand-in: the golden input's rows; a row asked twice or out of order is a mismatch. */
typedef struct {
    msf_check_t *check;
    int32_t next;          /* the row expected next */
} msf_rows_t;

static void golden_row(int32_t row, int8_t *dst, void *ctx)
{
    msf_rows_t *r = (msf_rows_t *)ctx;
    const int32_t n = MSF_MODEL_INPUT_W * MSF_MODEL_INPUT_C;
    r->check->mismatches += row != r->next;
    r->next = row + 1;
    for (int32_t i = 0; i < n; i++) {
        dst[i] = msf_golden_input[row * n + i];
    }
}
#endif

/* Runs the model once on the golden input; returns the check of its output. */
msf_check_t msf_demo_run(void)
{
    msf_check_t c = {0xFFFFFFFFu, 0, 0};
#if MSF_MODEL_STREAM_INPUT
    msf_rows_t rows = {&c, 0};
#if MSF_MODEL_STREAM_OUTPUT
    msf_model_run_streamed(golden_row, &rows, check_pixel, &c);
#else
    msf_model_run_streamed(golden_row, &rows, output);
    check_bytes(&c, output, MSF_MODEL_OUTPUT_BYTES);
#endif
    c.mismatches += rows.next != MSF_MODEL_INPUT_H;       /* every row pulled */
#elif MSF_MODEL_STREAM_OUTPUT
    msf_model_run_stream(msf_golden_input, check_pixel, &c);
#else
    msf_model_run(msf_golden_input, output);
    check_bytes(&c, output, MSF_MODEL_OUTPUT_BYTES);
#endif
    c.crc = ~c.crc;
    return c;
}

#ifdef MSF_MEASURE_ARENA
uint32_t msf_demo_measure_arena(void)
{
#if MSF_MODEL_STREAM_OUTPUT
    return msf_model_measure_arena(msf_golden_input, 0);
#else
    return msf_model_measure_arena(msf_golden_input, output);
#endif
}
#endif

typedef struct {
    msf_check_t check;
    uint64_t cycles, us;
    uint32_t hz, arena, stack;
    int measured;          /* arena painted and measured (else arena= and ram= print '-') */
    int ok;
} msf_result_t;

/* The result line of docs/design.md, with the counter's rate after its name. */
static void report(const msf_result_t *r)
{
    msf_board_puts("MSF model=");
    msf_board_puts(msf_model_info.name);
    msf_board_puts(" plan=");
    msf_board_puts(msf_model_info.plan);
    msf_board_puts(" board=" MSF_BOARD_NAME " clock=");
    msf_board_puts(msf_board_cycles_source());
    msf_board_put_dec(" hz=", r->hz);
    msf_board_put_dec(" cycles=", r->cycles);
    msf_board_put_dec(" us=", r->us);
    if (r->measured) {
        msf_board_put_dec(" arena=", r->arena);
    } else {
        msf_board_puts(" arena=-");
    }
    msf_board_put_dec(" arena_pred=", msf_model_info.peak_ram_predicted);
    msf_board_put_dec(" stack=", r->stack);
    if (r->measured) {
        msf_board_put_dec(" ram=", (uint64_t)r->arena + r->stack);
    } else {
        msf_board_puts(" ram=-");
    }
    msf_board_put_dec(" ram_pred=", msf_model_info.peak_ram_predicted);
    msf_board_put_dec(" macs=", msf_model_info.macs);
    msf_board_put_hex(" crc=", r->check.crc);
    msf_board_put_hex(" crc_ref=", MSF_GOLDEN_OUTPUT_CRC32);
    msf_board_puts(r->ok ? " status=ok\n" : " status=mismatch\n");
}

#ifdef PIO_UNIT_TESTING
int msf_unit_tests(void);          /* test/test_model: run once, then report on every pass */
void msf_unit_tests_report(void);
#endif

int main(void)
{
    msf_board_init();
    msf_result_t r;
    uint64_t t0 = msf_board_cycles();
    r.check = msf_demo_run();
    r.cycles = msf_board_cycles() - t0;
#ifdef MSF_MEASURE_ARENA
    r.arena = msf_demo_measure_arena();
    r.measured = 1;
#else
    r.arena = 0;
    r.measured = 0;
#endif
    r.stack = (uint32_t)msf_board_stack_used();
    r.hz = msf_board_cpu_hz();
    r.us = r.hz ? r.cycles * 1000000u / r.hz : 0;
    r.ok = r.check.mismatches == 0 && r.check.offset == MSF_MODEL_OUTPUT_BYTES &&
           r.check.crc == MSF_GOLDEN_OUTPUT_CRC32 &&
           (!r.measured || r.arena == msf_model_info.arena_bytes);
    int failed = !r.ok;
#ifdef PIO_UNIT_TESTING
    failed |= msf_unit_tests();
#endif
    for (;;) {                     /* an emulator exits in msf_board_end_of_run */
        msf_profile_print();       /* custom_msf_profile = yes: every edge's cycles */
        report(&r);
#ifdef PIO_UNIT_TESTING
        msf_unit_tests_report();
#endif
        msf_board_end_of_run(failed);
    }
}

/* On-target tests (pio test): output bytes equal the host's golden vector, a second run is
 * identical, and the measured arena equals the prediction and fits the RAM budget. The harness's
 * main (harness.c) runs them once and reports them with every result line. */
#include <stdint.h>

#include "msf/board.h"
#include "msf_golden.h"
#include "msf_model.h"

/* src/main.c */
typedef struct {
    uint32_t crc, offset, mismatches;
} msf_check_t;

msf_check_t msf_demo_run(void);
uint32_t msf_demo_measure_arena(void);

static msf_check_t first, second;
static uint32_t arena;
static int bitexact_ok, repeatable_ok, ram_ok;

int msf_unit_tests(void);
int msf_unit_tests(void)
{
    first = msf_demo_run();
    second = msf_demo_run();
    arena = msf_demo_measure_arena();
    bitexact_ok = first.mismatches == 0 && first.offset == MSF_MODEL_OUTPUT_BYTES;
    repeatable_ok = second.crc == first.crc && second.crc == MSF_GOLDEN_OUTPUT_CRC32;
    ram_ok = arena == msf_model_info.peak_ram_predicted && arena <= MSF_RAM_LIMIT;
    return !(bitexact_ok && repeatable_ok && ram_ok);
}

static void status(int ok)
{
    msf_board_puts(ok ? " status=ok\n" : " status=fail\n");
}

void msf_unit_tests_report(void);
void msf_unit_tests_report(void)
{
    msf_board_puts("MSF test_bitexact");
    msf_board_put_dec(" bytes=", first.offset);
    msf_board_put_dec(" mismatches=", first.mismatches);
    status(bitexact_ok);
    msf_board_puts("MSF test_repeatable");
    msf_board_put_hex(" crc=", second.crc);
    status(repeatable_ok);
    msf_board_puts("MSF test_ram");
    msf_board_put_dec(" arena=", arena);
    msf_board_put_dec(" predicted=", msf_model_info.peak_ram_predicted);
    msf_board_put_dec(" limit=", MSF_RAM_LIMIT);
    status(ram_ok);
}

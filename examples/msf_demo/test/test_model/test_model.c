/* On-target tests (pio test): output bytes equal the host's golden vector, a second run is
 * identical, and the measured arena equals the prediction and fits the RAM budget. */
#include <stdint.h>
#include <stdio.h>

#include "msf_golden.h"
#include "msf_model.h"

typedef struct {
    uint32_t crc, offset, mismatches;
} msf_check_t;

msf_check_t msf_demo_run(void);
uint32_t msf_demo_measure_arena(void);

static int report(const char *name, int ok, const char *detail)
{
    printf("MSF %s %s status=%s\n", name, detail, ok ? "ok" : "fail");
    return !ok;
}

int msf_unit_tests(void)
{
    char detail[96];
    int failed = 0;
    msf_check_t a = msf_demo_run();
    snprintf(detail, sizeof detail, "bytes=%lu mismatches=%lu", (unsigned long)a.offset,
             (unsigned long)a.mismatches);
    failed |= report("test_bitexact", a.mismatches == 0 && a.offset == MSF_MODEL_OUTPUT_BYTES,
                     detail);
    msf_check_t b = msf_demo_run();
    snprintf(detail, sizeof detail, "crc=0x%08lx", (unsigned long)b.crc);
    failed |= report("test_repeatable", b.crc == a.crc && b.crc == MSF_GOLDEN_OUTPUT_CRC32,
                     detail);
    uint32_t arena = msf_demo_measure_arena();
    snprintf(detail, sizeof detail, "arena=%lu predicted=%lu limit=%lu", (unsigned long)arena,
             (unsigned long)msf_model_info.peak_ram_predicted, (unsigned long)MSF_RAM_LIMIT);
    failed |= report("test_ram", arena == msf_model_info.peak_ram_predicted &&
                     arena <= MSF_RAM_LIMIT, detail);
    return failed;
}

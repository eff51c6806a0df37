/* Board-probe self-test, linked into the hello firmware by `pio test` (PIO_UNIT_TESTING). */
#include <stdint.h>

#include "msf/board.h"

#define DEEP_BYTES 1024u

int msf_hello_selftest(void);

/* Uses DEEP_BYTES of stack that the compiler cannot elide. */
static __attribute__((noinline)) unsigned deep(unsigned seed)
{
    volatile unsigned char buf[DEEP_BYTES];
    for (unsigned i = 0; i < DEEP_BYTES; i++) {
        buf[i] = (unsigned char)(seed + i);
    }
    return buf[seed % DEEP_BYTES];
}

int msf_hello_selftest(void)
{
    uint64_t c0 = msf_board_cycles();
    for (volatile unsigned i = 0; i < 10000u; i++) {
    }
    uint64_t c1 = msf_board_cycles();
    int cycles_ok = c1 > c0 && c1 - c0 >= 10000u;  /* >= one instruction per iteration */

    size_t before = msf_board_stack_used();
    (void)deep(7);
    size_t after = msf_board_stack_used();
    int stack_ok = after > before && after >= DEEP_BYTES && after < msf_board_stack_size();
    uint32_t hz = msf_board_cpu_hz();

    int ok = cycles_ok && stack_ok && hz > 0;
    msf_board_puts("MSF selftest source=");
    msf_board_puts(msf_board_cycles_source());
    msf_board_put_dec(" hz=", hz);
    msf_board_put_dec(" loop_cycles=", c1 - c0);
    msf_board_put_dec(" stack_before=", before);
    msf_board_put_dec(" stack_after=", after);
    msf_board_put_dec(" stack_size=", msf_board_stack_size());
    msf_board_puts(ok ? " status=ok\n" : " status=fail\n");
    return !ok;
}

/* Board-probe self-test, linked into the hello firmware by `pio test` (PIO_UNIT_TESTING). */
#include <stdio.h>
#include <string.h>

#include "msf_board.h"

#define DEEP_BYTES 1024u

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

    int ok = cycles_ok && stack_ok;
    printf("MSF selftest source=%s loop_cycles=%lu stack_before=%u stack_after=%u "
           "stack_size=%u status=%s\n", msf_board_cycles_source(), (unsigned long)(c1 - c0),
           (unsigned)before, (unsigned)after, (unsigned)msf_board_stack_size(),
           ok ? "ok" : "fail");
    return !ok;
}

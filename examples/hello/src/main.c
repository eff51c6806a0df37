/* Smallest msf-pio firmware: proves the build, the console, the cycle counter, the stack probe
 * and the exit status of a board (msf/board.h, from the msf-pio library). */
#include <stdint.h>

#include "msf/board.h"

#ifdef PIO_UNIT_TESTING
int msf_hello_selftest(void);  /* test/test_hello/selftest.c, linked only by `pio test` */
#endif

static uint32_t fib(unsigned n)  /* some work to count */
{
    uint32_t a = 0, b = 1;
    while (n--) {
        uint32_t t = a + b;
        a = b;
        b = t;
    }
    return a;
}

int main(void)
{
    msf_board_init();
    int failed = 0;
#ifdef PIO_UNIT_TESTING
    failed = msf_hello_selftest();
#endif
    uint64_t t0 = msf_board_cycles();
    volatile uint32_t f = fib(40);
    uint64_t cycles = msf_board_cycles() - t0;
    (void)f;
    for (;;) {  /* an emulator exits in msf_board_end_of_run; a real board says it again */
        msf_board_put_dec("MSF hello cycles=", cycles);
        msf_board_put_dec(" stack=", msf_board_stack_used());
        msf_board_puts(failed ? " status=fail\n" : " status=ok\n");
        msf_board_end_of_run(failed);
    }
}

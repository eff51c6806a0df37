/* Smallest msf-qemu firmware: proves build, UART, cycle counter, stack probe and exit status. */
#include <stdio.h>

#include "msf_board.h"

#ifdef PIO_UNIT_TESTING
int msf_hello_selftest(void);  /* test/test_hello/selftest.c, linked only by `pio test` */
#endif

static unsigned long fib(unsigned n)  /* some work to count */
{
    unsigned long a = 0, b = 1;
    while (n--) {
        unsigned long t = a + b;
        a = b;
        b = t;
    }
    return a;
}

int main(void)
{
    int failed = 0;
#ifdef PIO_UNIT_TESTING
    failed = msf_hello_selftest();
#endif
    uint64_t t0 = msf_board_cycles();
    volatile unsigned long f = fib(40);
    uint64_t cycles = msf_board_cycles() - t0;
    (void)f;
    printf("MSF hello cycles=%lu stack=%u status=%s\n", (unsigned long)cycles,
           (unsigned)msf_board_stack_used(), failed ? "fail" : "ok");
    return failed;
}

/* Architecture-neutral board services: stdio on the UART, stack painting, exit line. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "msf_board.h"

#define STACK_PAINT 0xA5C35A3Cu
#define PAINT_MARGIN 64u  /* words left unpainted below the painter's own frame */

/* picolibc.ld: the stack is [__heap_end, __stack), the top __stack_size bytes of RAM. */
extern uint32_t __heap_end[];
extern uint32_t __stack[];

void msf_board_arch_exit(int status) __attribute__((noreturn));  /* board_<arch>.c */
void msf_board_fault(const char *what, uint32_t cause, uint32_t pc) __attribute__((noreturn));

static int uart_put(char c, FILE *f)
{
    (void)f;
    msf_board_putchar(c);
    return (unsigned char)c;
}

static FILE uart_stream = FDEV_SETUP_STREAM(uart_put, NULL, NULL, _FDEV_SETUP_WRITE);
FILE *const stdout = &uart_stream;
FILE *const stderr = &uart_stream;
FILE *const stdin = &uart_stream;  /* no input: reads fail */

/* Runs from _start before main (init_array), on the stack it paints below itself. */
__attribute__((constructor(101))) static void paint_stack(void)
{
    volatile uint32_t *p = __heap_end;
    volatile uint32_t *limit = (volatile uint32_t *)__builtin_frame_address(0) - PAINT_MARGIN;
    while (p < limit) {
        *p++ = STACK_PAINT;
    }
}

size_t msf_board_stack_size(void)
{
    return (size_t)((char *)__stack - (char *)__heap_end);
}

size_t msf_board_stack_used(void)
{
    const uint32_t *p = __heap_end;
    while (p < __stack && *p == STACK_PAINT) {
        p++;
    }
    return (size_t)((const char *)__stack - (const char *)p);
}

static void put_str(const char *s)
{
    while (*s) {
        msf_board_putchar(*s++);
    }
}

static void put_hex(uint32_t v)
{
    put_str("0x");
    for (int shift = 28; shift >= 0; shift -= 4) {
        msf_board_putchar("0123456789abcdef"[(v >> shift) & 0xFu]);
    }
}

/* Trap handlers end here: a fault prints what and where, then exits (instead of hanging
 * until the runner's timeout). */
void msf_board_fault(const char *what, uint32_t cause, uint32_t pc)
{
    put_str("\nMSF fault=");
    put_str(what);
    put_str(" cause=");
    put_hex(cause);
    put_str(" pc=");
    put_hex(pc);
    msf_board_putchar('\n');
    _exit(MSF_BOARD_FAULT_STATUS);
}

/* picolibc's exit() ends here (after atexit handlers); main's return value arrives too. */
void _exit(int status)
{
    char digits[12];
    unsigned v = status < 0 ? 0u - (unsigned)status : (unsigned)status;
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    put_str("MSF exit=");
    if (status < 0) {
        msf_board_putchar('-');
    }
    while (n) {
        msf_board_putchar(digits[--n]);
    }
    msf_board_putchar('\n');
    msf_board_arch_exit(status);
}

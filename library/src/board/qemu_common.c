/* Board support for the msf-qemu emulated platform (msf_pio/pio/platform), the parts every
 * architecture shares: stack paint, console text, end of run, fault report. The platform
 * defines MSF_QEMU and F_CPU (the board manifest's build.f_cpu, the stood-in part's clock).
 *
 * End of run: "MSF exit=<status>" on the console, then QEMU exits with that status
 * (semihosting). The platform's runner (builder/qemu_run.py) fails a run that times out or never
 * prints that line: a killed QEMU exits 0. */
#if defined(MSF_QEMU)
#include "msf/board.h"
#include "qemu.h"

#define PAINT 0xA5C35A3Cu
#define PAINT_MARGIN 256u  /* bytes left unpainted below msf_board_init's own frame */

/* The linker script's stack, [__heap_end, __stack) (picolibc.ld's names; the Xtensa script
 * defines the same). Only their addresses are used, as integers. */
extern char __heap_end[], __stack[];

static uint64_t counter_at_init;

void msf_board_init(void)
{
    volatile uint32_t here = 0;
    uintptr_t top = ((uintptr_t)&here - PAINT_MARGIN) & ~(uintptr_t)3u;

    msf_qemu_arch_init();
    for (uintptr_t a = (uintptr_t)__heap_end; a < top; a += 4u) {
        *(volatile uint32_t *)a = PAINT;
    }
    counter_at_init = msf_qemu_counter();
}

uint64_t msf_board_cycles(void)
{
    return msf_qemu_counter() - counter_at_init;
}

uint32_t msf_board_cpu_hz(void)
{
    return (uint32_t)F_CPU;
}

size_t msf_board_stack_size(void)
{
    return (size_t)((uintptr_t)__stack - (uintptr_t)__heap_end);
}

size_t msf_board_stack_used(void)
{
    uintptr_t a = (uintptr_t)__heap_end;
    while (a < (uintptr_t)__stack && *(volatile const uint32_t *)a == PAINT) {
        a += 4u;
    }
    return (size_t)((uintptr_t)__stack - a);
}

void msf_board_puts(const char *s)
{
    size_t n = 0;
    while (s[n]) {
        n++;
    }
    msf_qemu_console_write(s, n);
}

static void put_hex(uint32_t v)
{
    char text[11] = "0x";
    for (int i = 0; i < 8; i++) {
        text[2 + i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 0xFu];
    }
    text[10] = '\0';
    msf_board_puts(text);
}

void msf_board_end_of_run(int status)
{
    char text[24];
    char *p = text + sizeof text;
    unsigned v = status < 0 ? 0u - (unsigned)status : (unsigned)status;

    *--p = '\0';
    *--p = '\n';
    do {
        *--p = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    if (status < 0) {
        *--p = '-';
    }
    msf_board_puts("MSF exit=");
    msf_board_puts(p);
    msf_qemu_exit(status);
}

void msf_qemu_fault(const char *what, uint32_t cause, uint32_t pc)
{
    msf_board_puts("\nMSF fault=");
    msf_board_puts(what);
    msf_board_puts(" cause=");
    put_hex(cause);
    msf_board_puts(" pc=");
    put_hex(pc);
    msf_board_puts("\n");
    msf_board_end_of_run(MSF_QEMU_FAULT_STATUS);
    for (;;) {
    }
}
#endif /* MSF_QEMU */

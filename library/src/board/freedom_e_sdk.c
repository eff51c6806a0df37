/* Board support for PlatformIO's freedom-e-sdk framework (HiFive1 Rev B, FE310-G002): the
 * console is freedom-metal's UART0 tty (115200, the J-Link's serial port), cycles are mcycle,
 * the stack is the SDK's stack segment (its size is set from msf-pio's board data,
 * build.freedom-e-sdk.stack_size).
 *
 * The SDK leaves the core at 16 MHz (the PLL bypassed, its design.dts); msf_board_init runs it
 * at MSF_CPU_HZ from the PLL through freedom-metal's clock API, whose rate-change callbacks set
 * the UART's divisor again for the new clock. The rate reported is the one the PLL's registers
 * give (metal_clock_get_rate_hz).
 *
 * Defines from the board data: MSF_CPU_HZ, MSF_MTIME_ADDR (the CLINT's mtime); the framework
 * builder gives MTIME_RATE_HZ_DEF (its rate). */
#if defined(MSF_FRAMEWORK_FREEDOM_E_SDK)
#include <metal/clock.h>
#include <metal/tty.h>
/* the BSP's generated machine header (the PLL's handle) is not -Wextra clean: its unused
 * parameters are its own */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <metal/machine.h>
#pragma GCC diagnostic pop

#include "msf/board.h"
#include "rv32_mcycle.h"

#define PAINT 0xA5C35A3Cu
#define PAINT_MARGIN 64u         /* bytes left unpainted below the painter's own frame */
#define REPORT_PERIOD_S 2u

/* freedom-metal's linker scripts: the stack segment, only their addresses are used. */
extern char metal_segment_stack_begin[], metal_segment_stack_end[];

static uint32_t cpu_hz;

static uint64_t mtime(void)
{
    volatile const uint32_t *t = (volatile const uint32_t *)(uintptr_t)MSF_MTIME_ADDR;
    uint32_t hi, lo;
    do {
        hi = t[1];
        lo = t[0];
    } while (hi != t[1]);
    return ((uint64_t)hi << 32) | lo;
}

uint64_t msf_board_cycles(void)
{
    return msf_rv32_mcycle();
}

/* The core clock from the PLL (hfclk): MSF_CPU_HZ if the PLL can make it. */
static uint32_t set_cpu_hz(void)
{
    struct metal_clock *hfclk = &__METAL_DT_SIFIVE_FE310_G000_PLL_HANDLE->clock;
    (void)metal_clock_set_rate_hz(hfclk, (long)MSF_CPU_HZ);
    return (uint32_t)metal_clock_get_rate_hz(hfclk);
}

/* Paints the stack segment below this frame through integer addresses (no C object). */
void msf_board_init(void)
{
    uintptr_t hi = ((uintptr_t)__builtin_frame_address(0) - PAINT_MARGIN) & ~(uintptr_t)3u;
    for (uintptr_t a = (uintptr_t)metal_segment_stack_begin; a < hi; a += 4u) {
        *(volatile uint32_t *)a = PAINT;
    }
    cpu_hz = set_cpu_hz();
}

void msf_board_puts(const char *s)
{
    while (*s) {
        (void)metal_tty_putc(*s++);   /* adds the \r before \n */
    }
}

const char *msf_board_cycles_source(void)
{
    return "mcycle";
}

uint32_t msf_board_cpu_hz(void)
{
    return cpu_hz;
}

size_t msf_board_stack_size(void)
{
    return (size_t)((uintptr_t)metal_segment_stack_end - (uintptr_t)metal_segment_stack_begin);
}

size_t msf_board_stack_used(void)
{
    uintptr_t a = (uintptr_t)metal_segment_stack_begin;
    while (a < (uintptr_t)metal_segment_stack_end && *(volatile const uint32_t *)a == PAINT) {
        a += 4u;
    }
    return (size_t)((uintptr_t)metal_segment_stack_end - a);
}

void msf_board_end_of_run(int status)
{
    (void)status;
    uint64_t start = mtime();
    while (mtime() - start < (uint64_t)REPORT_PERIOD_S * MTIME_RATE_HZ_DEF) {
    }
}
#endif /* MSF_FRAMEWORK_FREEDOM_E_SDK */

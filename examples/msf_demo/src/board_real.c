/* Real-board probes: DWT->CYCCNT on Cortex-M, mcycle on RISC-V, CCOUNT on Xtensa; the stack
 * high-water by painting a window below the stack pointer before the model runs. */
#ifndef MSF_QEMU
#include "board_real.h"

#define MSF_STACK_WINDOW 8192u     /* bytes below main's frame that the probe paints */
#define MSF_STACK_PAINT 0xA5u

static uint8_t *stack_top;

static void paint_stack(void)
{
    volatile uint8_t here = 0;
    stack_top = (uint8_t *)&here - 64;           /* keep clear of this frame */
    for (uint32_t i = 0; i < MSF_STACK_WINDOW; i++) {
        stack_top[-(int32_t)i] = MSF_STACK_PAINT;
    }
}

size_t msf_board_stack_used(void)
{
    uint32_t i = MSF_STACK_WINDOW;
    while (i > 0 && stack_top[-(int32_t)(i - 1)] == MSF_STACK_PAINT) {
        i--;
    }
    return i + 64u;
}

#if defined(__arm__)
#define DWT_CTRL (*(volatile uint32_t *)0xE0001000u)
#define DWT_CYCCNT (*(volatile uint32_t *)0xE0001004u)
#define DEMCR (*(volatile uint32_t *)0xE000EDFCu)
const char *msf_board_cycles_source(void) { return "dwt"; }
uint64_t msf_board_cycles(void)
{
    static uint64_t high;
    static uint32_t last;
    if (!(DWT_CTRL & 1u)) {
        paint_stack();
        DEMCR |= 1u << 24;                       /* trace enable */
        DWT_CYCCNT = 0;
        DWT_CTRL |= 1u;
    }
    uint32_t now = DWT_CYCCNT;
    high += now < last ? (1ull << 32) : 0;
    last = now;
    return high | now;
}
#elif defined(__riscv)
const char *msf_board_cycles_source(void) { return "mcycle"; }
uint64_t msf_board_cycles(void)
{
    static int painted;
    uint32_t hi, lo, hi2;
    if (!painted) {
        painted = 1;
        paint_stack();
    }
    do {
        __asm__ volatile("csrr %0, mcycleh" : "=r"(hi));
        __asm__ volatile("csrr %0, mcycle" : "=r"(lo));
        __asm__ volatile("csrr %0, mcycleh" : "=r"(hi2));
    } while (hi != hi2);
    return ((uint64_t)hi << 32) | lo;
}
#elif defined(__XTENSA__)
const char *msf_board_cycles_source(void) { return "ccount"; }
uint64_t msf_board_cycles(void)
{
    static int painted;
    static uint64_t high;
    static uint32_t last;
    uint32_t now;
    if (!painted) {
        painted = 1;
        paint_stack();
    }
    __asm__ volatile("rsr %0, ccount" : "=a"(now));
    high += now < last ? (1ull << 32) : 0;
    last = now;
    return high | now;
}
#endif
#endif /* MSF_QEMU */

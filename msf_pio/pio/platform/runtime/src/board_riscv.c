/* RISC-V board services (sifive_e, virt): SiFive or 16550 UART, mcycle, semihosting. */
#include "msf_board.h"

#define REG32(addr) (*(volatile uint32_t *)(addr))
#define REG8(addr) (*(volatile uint8_t *)(addr))

#if defined(MSF_UART_SIFIVE)
/* SiFive UART: txdata (bit 31 = full), txctrl (bit 0 = enable). */
#define UART_TXDATA REG32(MSF_UART_SIFIVE + 0x00u)
#define UART_TXCTRL REG32(MSF_UART_SIFIVE + 0x08u)
#elif defined(MSF_UART_NS16550)
/* 16550: THR at 0, LSR at 5 (bit 5 = transmit holding register empty). */
#define UART_THR REG8(MSF_UART_NS16550 + 0u)
#define UART_LSR REG8(MSF_UART_NS16550 + 5u)
#else
#error "board manifest must define MSF_UART_SIFIVE or MSF_UART_NS16550"
#endif

void msf_board_fault(const char *what, uint32_t cause, uint32_t pc) __attribute__((noreturn));

/* Any trap is a fault here (no interrupts are enabled): report mcause and mepc. */
__attribute__((interrupt("machine"), aligned(4))) static void trap(void)
{
    uint32_t cause, epc;
    __asm__ volatile("csrr %0, mcause" : "=r"(cause));
    __asm__ volatile("csrr %0, mepc" : "=r"(epc));
    msf_board_fault("trap", cause, epc);
}

__attribute__((constructor(101))) static void board_init(void)
{
    __asm__ volatile("csrw mtvec, %0" : : "r"(trap));
#if defined(MSF_UART_SIFIVE)
    UART_TXCTRL = 1u;
#endif
}

void msf_board_putchar(char c)
{
#if defined(MSF_UART_SIFIVE)
    while (UART_TXDATA & 0x80000000u) {
    }
    UART_TXDATA = (uint8_t)c;
#else
    while (!(UART_LSR & 0x20u)) {
    }
    UART_THR = (uint8_t)c;
#endif
}

uint64_t msf_board_cycles(void)
{
    uint32_t hi, lo, hi2;
    do {  /* rv32: re-read if the low half carried into the high half between reads */
        __asm__ volatile("csrr %0, mcycleh" : "=r"(hi));
        __asm__ volatile("csrr %0, mcycle" : "=r"(lo));
        __asm__ volatile("csrr %0, mcycleh" : "=r"(hi2));
    } while (hi != hi2);
    return ((uint64_t)hi << 32) | lo;
}

const char *msf_board_cycles_source(void)
{
    return "mcycle";
}

/* Semihosting SYS_EXIT_EXTENDED (0x20); on RV32 plain SYS_EXIT drops the status. The trap is
 * slli/ebreak/srai and must not be compressed. (The spec also wants it inside one page, which
 * only matters with an MMU; an alignment directive here breaks linker relaxation.) */
void msf_board_arch_exit(int status)
{
    uint32_t block[2] = {0x20026u /* ADP_Stopped_ApplicationExit */, (uint32_t)status};
    register uint32_t a0 __asm__("a0") = 0x20u;
    register uint32_t *a1 __asm__("a1") = block;
    for (;;) {
        __asm__ volatile(".option push\n\t.option norvc\n\t"
                         "slli zero, zero, 0x1f\n\tebreak\n\tsrai zero, zero, 0x7\n\t"
                         ".option pop"
                         : "+r"(a0) : "r"(a1) : "memory");
    }
}

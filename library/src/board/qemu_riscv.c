/* msf-qemu RISC-V boards (sifive_e, virt): SiFive UART (MSF_UART_SIFIVE) or 16550
 * (MSF_UART_NS16550), from the board manifest; mcycle; trap report; semihosting exit. */
#if defined(MSF_QEMU) && defined(__riscv)
#include "msf/board.h"
#include "qemu.h"
#include "rv32_mcycle.h"

#define REG32(addr) (*(volatile uint32_t *)(addr))
#define REG8(addr) (*(volatile uint8_t *)(addr))

#if defined(MSF_UART_SIFIVE)
/* SiFive UART: txdata (bit 31 = full), txctrl (bit 0 = enable). */
#define UART_TXDATA REG32(MSF_UART_SIFIVE + 0x00u)
#define UART_TXCTRL REG32(MSF_UART_SIFIVE + 0x08u)
#define UART_READY() (!(UART_TXDATA & 0x80000000u))
#define UART_PUT(c) (UART_TXDATA = (uint8_t)(c))
#define UART_ENABLE() (UART_TXCTRL = 1u)
#elif defined(MSF_UART_NS16550)
/* 16550: THR at 0, LSR at 5 (bit 5 = transmit holding register empty). */
#define UART_READY() (REG8(MSF_UART_NS16550 + 5u) & 0x20u)
#define UART_PUT(c) (REG8(MSF_UART_NS16550 + 0u) = (uint8_t)(c))
#define UART_ENABLE() ((void)0)
#else
#error "the board manifest must define MSF_UART_SIFIVE or MSF_UART_NS16550"
#endif

/* Any trap is a fault here (no interrupts are enabled): report mcause and mepc. */
__attribute__((interrupt("machine"), aligned(4))) static void trap(void)
{
    uint32_t cause, epc;
    __asm__ volatile("csrr %0, mcause" : "=r"(cause));
    __asm__ volatile("csrr %0, mepc" : "=r"(epc));
    msf_qemu_fault("trap", cause, epc);
}

void msf_qemu_arch_init(void)
{
    __asm__ volatile("csrw mtvec, %0" : : "r"(trap));
    UART_ENABLE();
}

void msf_qemu_console_write(const char *s, size_t n)
{
    UART_ENABLE();  /* cheap, and output before msf_board_init still appears */
    for (size_t i = 0; i < n; i++) {
        while (!UART_READY()) {
        }
        UART_PUT(s[i]);
    }
}

uint64_t msf_qemu_counter(void)
{
    return msf_rv32_mcycle();
}

const char *msf_board_cycles_source(void)
{
    return "mcycle";
}

/* Semihosting SYS_EXIT_EXTENDED (0x20); on RV32 plain SYS_EXIT drops the status. The trap is
 * slli/ebreak/srai and must not be compressed. (The spec also wants it inside one page, which
 * only matters with an MMU; an alignment directive here breaks linker relaxation.) */
void msf_qemu_exit(int status)
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
#endif /* MSF_QEMU && __riscv */

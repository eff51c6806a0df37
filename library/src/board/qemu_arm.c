/* msf-qemu Cortex-M boards (mps2-an500 / an386): CMSDK UART (MSF_UART_CMSDK, from the board
 * manifest), DWT->CYCCNT or SysTick, HardFault report, semihosting exit. */
#if defined(MSF_QEMU) && defined(__arm__)
#include "msf/board.h"
#include "qemu.h"

#define REG(addr) (*(volatile uint32_t *)(addr))

/* CMSDK APB UART: DATA, STATE (bit 0 = TX full), CTRL (bit 0 = TX enable), BAUDDIV. */
#define UART_DATA REG(MSF_UART_CMSDK + 0x00u)
#define UART_STATE REG(MSF_UART_CMSDK + 0x04u)
#define UART_CTRL REG(MSF_UART_CMSDK + 0x08u)
#define UART_BAUDDIV REG(MSF_UART_CMSDK + 0x10u)

#define DEMCR REG(0xE000EDFCu)
#define DWT_CTRL REG(0xE0001000u)
#define DWT_CYCCNT REG(0xE0001004u)
#define SYST_CSR REG(0xE000E010u)
#define SYST_RVR REG(0xE000E014u)
#define SYST_CVR REG(0xE000E018u)
#define SYST_RELOAD 0xFFFFFFu  /* 24-bit down counter */
#define SCB_CFSR REG(0xE000ED28u)

/* SysTick ticks per instruction under -icount (mps2: one tick per 40 instructions). */
#ifndef MSF_SYSTICK_DIV
#define MSF_SYSTICK_DIV 1u
#endif

static volatile uint32_t systick_wraps;
static int use_systick;
static uint32_t dwt_last, dwt_high;

/* Overrides picolibc's weak vector-table entry; counts SysTick reloads. */
void arm_systick_isr(void);
void arm_systick_isr(void)
{
    systick_wraps++;
}

/* HardFault (the other faults escalate to it): report CFSR and the stacked PC. */
void msf_qemu_arm_hardfault(const uint32_t *frame) __attribute__((used, noreturn));
void msf_qemu_arm_hardfault(const uint32_t *frame)
{
    msf_qemu_fault("hardfault", SCB_CFSR, frame[6]);
}

void arm_hardfault_isr(void) __attribute__((naked));
void arm_hardfault_isr(void)
{
    __asm__ volatile("tst lr, #4\n\tite eq\n\tmrseq r0, msp\n\tmrsne r0, psp\n\t"
                     "b msf_qemu_arm_hardfault");
}

static void uart_enable(void)
{
    UART_BAUDDIV = 16u;  /* the smallest divider the CMSDK UART accepts */
    UART_CTRL = 1u;
}

void msf_qemu_arch_init(void)
{
    uart_enable();
    DEMCR |= 1u << 24;  /* TRCENA: power the DWT */
    DWT_CYCCNT = 0u;
    DWT_CTRL |= 1u;     /* CYCCNTENA */
    for (volatile int i = 0; i < 8; i++) {
    }
    if (DWT_CYCCNT == 0u) {  /* QEMU implements no DWT: count with SysTick instead */
        use_systick = 1;
        SYST_RVR = SYST_RELOAD;
        SYST_CVR = 0u;
        SYST_CSR = 7u;  /* enable, interrupt on wrap, processor clock */
        for (int i = 0; i < 100000 && SYST_CVR == 0u; i++) {
        }  /* CVR reads 0 until the first tick loads the reload value */
    }
}

void msf_qemu_console_write(const char *s, size_t n)
{
    if (!(UART_CTRL & 1u)) {  /* printing before msf_board_init (exit from a constructor) */
        uart_enable();
    }
    for (size_t i = 0; i < n; i++) {
        while (UART_STATE & 1u) {
        }
        UART_DATA = (uint8_t)s[i];
    }
}

uint64_t msf_qemu_counter(void)
{
    if (!use_systick) {  /* 32 bits: extended on each read, so read at least once per wrap */
        uint32_t now = DWT_CYCCNT;
        dwt_high += now < dwt_last;
        dwt_last = now;
        return ((uint64_t)dwt_high << 32) | now;
    }
    uint32_t wraps, ticks;
    do {  /* re-read if a wrap interrupt landed between the two reads */
        wraps = systick_wraps;
        ticks = SYST_RELOAD - SYST_CVR;
    } while (wraps != systick_wraps);
    return ((uint64_t)wraps * (SYST_RELOAD + 1u) + ticks) * MSF_SYSTICK_DIV;
}

const char *msf_board_cycles_source(void)
{
    return use_systick ? "systick" : "dwt";
}

/* Semihosting SYS_EXIT_EXTENDED (0x20): the 32-bit SYS_EXIT cannot carry a status. */
void msf_qemu_exit(int status)
{
    uint32_t block[2] = {0x20026u /* ADP_Stopped_ApplicationExit */, (uint32_t)status};
    register uint32_t r0 __asm__("r0") = 0x20u;
    register uint32_t *r1 __asm__("r1") = block;
    for (;;) {
        __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    }
}
#endif /* MSF_QEMU && __arm__ */

/* Board services of the msf-qemu platform: serial output, a cycle counter, stack high-water,
 * exit with a status. The platform links them into every firmware; include this header to
 * use them. stdout/stderr (printf, puts) already go to the board's UART.
 *
 * End of run: exit(n) or returning n from main prints "MSF exit=<n>" on the UART, then stops
 * QEMU with status n (semihosting SYS_EXIT_EXTENDED). The runner (builder/qemu_run.py) fails
 * a run that times out or never prints that line: a killed QEMU exits 0. */
#ifndef MSF_BOARD_H
#define MSF_BOARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Write one byte to the board UART (blocking). */
void msf_board_putchar(char c);

/* Monotonic cycle count since start-up. In QEMU (-icount shift=0) this counts executed
 * instructions: RISC-V mcycle; Cortex-M DWT->CYCCNT, which QEMU leaves at 0, so then SysTick
 * scaled by MSF_SYSTICK_DIV (mps2: one tick per 40 instructions), resolution 40. */
uint64_t msf_board_cycles(void);

/* Which counter msf_board_cycles reads: "dwt", "systick" or "mcycle". */
const char *msf_board_cycles_source(void);

/* Stack bytes in use at the deepest point since start-up (the stack is painted before main)
 * and the size of the stack region. */
size_t msf_board_stack_used(void);
size_t msf_board_stack_size(void);

/* Exit status of a firmware stopped by a CPU fault (it prints "MSF fault=..." first). */
#define MSF_BOARD_FAULT_STATUS 99

/* Core clock of the real part this board stands in for (board manifest build.f_cpu). */
#ifndef F_CPU
#define F_CPU 0L
#endif

#ifdef __cplusplus
}
#endif

#endif /* MSF_BOARD_H */

/* What the msf-qemu board files share: qemu_common.c implements msf/board.h on top of one small
 * file per architecture (qemu_arm.c, qemu_riscv.c, qemu_xtensa.c), which provides these. */
#ifndef MSF_LIBRARY_BOARD_QEMU_H
#define MSF_LIBRARY_BOARD_QEMU_H

#include <stddef.h>
#include <stdint.h>

/* Exit status of a firmware stopped by a CPU fault (after its "MSF fault=..." line). */
#define MSF_QEMU_FAULT_STATUS 99

/* Per architecture. */
void msf_qemu_arch_init(void);                       /* console, counter, trap vector */
void msf_qemu_console_write(const char *s, size_t n);
uint64_t msf_qemu_counter(void);                     /* raw, 64-bit, monotonic */
void msf_qemu_exit(int status) __attribute__((noreturn));  /* semihosting: QEMU exits */

/* Common: trap handlers end here; prints what and where, then ends the run. */
void msf_qemu_fault(const char *what, uint32_t cause, uint32_t pc) __attribute__((noreturn));

#endif /* MSF_LIBRARY_BOARD_QEMU_H */

/* msf-qemu boards built with picolibc (Cortex-M, RISC-V): stdio on the console, and exit(n) or
 * returning n from main ends the run as msf_board_end_of_run(n) does. Firmware need not use
 * stdio (msf/board.h is enough); this keeps printf working for code that does. */
#if defined(MSF_QEMU) && (defined(__arm__) || defined(__riscv))
#include <stdio.h>
#include <unistd.h>

#include "msf/board.h"
#include "qemu.h"

static int console_put(char c, FILE *f)
{
    (void)f;
    msf_qemu_console_write(&c, 1);
    return (unsigned char)c;
}

static FILE console = FDEV_SETUP_STREAM(console_put, NULL, NULL, _FDEV_SETUP_WRITE);
FILE *const stdout = &console;
FILE *const stderr = &console;
FILE *const stdin = &console;  /* no input: reads fail */

/* picolibc's exit() ends here (after atexit handlers); crt0 passes main's return value. */
void _exit(int status)
{
    msf_board_end_of_run(status);
    for (;;) {
    }
}
#endif /* MSF_QEMU && (__arm__ || __riscv) */

/* msf-qemu Xtensa board (qemu-system-xtensa -M sim -cpu lx106, a stand-in for the ESP32-S3's
 * instruction-set family): console and exit through the sim machine's semihosting (the simcall
 * instruction, the calls of Tensilica's instruction-set simulator), CCOUNT, exception report. */
#if defined(MSF_QEMU) && defined(__XTENSA__)
#include "msf/board.h"
#include "qemu.h"

#define SYS_EXIT 1
#define SYS_WRITE 4
#define STDOUT_FD 1

/* Instructions per CCOUNT tick under -icount (the board manifest: QEMU clocks the lx106's
 * CCOUNT at 40 MHz of virtual time, and -icount shift=0 makes an instruction 1 ns). */
#ifndef MSF_CCOUNT_DIV
#define MSF_CCOUNT_DIV 1u
#endif

void msf_qemu_xtensa_exception(uint32_t cause, uint32_t pc, uint32_t vector)
    __attribute__((used, noreturn));

static uint32_t ccount_last, ccount_high;

/* a2 = call, a3..a5 = arguments; the result comes back in a2 (errno in a3). */
static int32_t simcall(int32_t call, int32_t arg1, int32_t arg2, int32_t arg3)
{
    register int32_t a2 __asm__("a2") = call;
    register int32_t a3 __asm__("a3") = arg1;
    register int32_t a4 __asm__("a4") = arg2;
    register int32_t a5 __asm__("a5") = arg3;
    __asm__ volatile("simcall" : "+r"(a2), "+r"(a3) : "r"(a4), "r"(a5) : "memory");
    return a2;
}

/* The vectors of qemu_xtensa_crt.c end here: EXCCAUSE and EPC1, EXCCAUSE and DEPC (double
 * exception), or DEBUGCAUSE and EPC2 (debug exception: BREAK). */
void msf_qemu_xtensa_exception(uint32_t cause, uint32_t pc, uint32_t vector)
{
    static const char *const what[] = {"exception", "double-exception", "debug"};
    msf_qemu_fault(what[vector], cause, pc);
}

void msf_qemu_arch_init(void)
{
    /* The reset code set VECBASE and PS; the semihosting console and CCOUNT need nothing. */
}

void msf_qemu_console_write(const char *s, size_t n)
{
    while (n > 0) {
        int32_t done = simcall(SYS_WRITE, STDOUT_FD, (int32_t)(uintptr_t)s, (int32_t)n);
        if (done <= 0) {
            return;
        }
        s += done;
        n -= (size_t)done;
    }
}

uint64_t msf_qemu_counter(void)
{
    uint32_t now;
    __asm__ volatile("rsr %0, ccount" : "=a"(now));
    ccount_high += now < ccount_last;  /* 32 bits: read at least once per wrap */
    ccount_last = now;
    return (((uint64_t)ccount_high << 32) | now) * MSF_CCOUNT_DIV;
}

const char *msf_board_cycles_source(void)
{
    return "ccount";
}

void msf_qemu_exit(int status)
{
    for (;;) {
        (void)simcall(SYS_EXIT, status, 0, 0);
    }
}
#endif /* MSF_QEMU && __XTENSA__ */

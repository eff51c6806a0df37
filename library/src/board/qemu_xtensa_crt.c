/* Start-up of the msf-qemu Xtensa stand-in (qemu-system-xtensa -M sim -cpu lx106), whose
 * toolchain (Debian's gcc-xtensa-lx106) comes without a C library: reset and exception vectors,
 * .data and .bss, constructors (.init_array, and the .ctors this GCC emits), main, and the mem*
 * functions the runtime and GCC call. Addresses and vector offsets are those of QEMU's lx106
 * core; the platform's linker script (msf_pio/pio/platform/xtensa/msf_xtensa.ld) defines the
 * symbols used here. */
#if defined(MSF_QEMU) && defined(__XTENSA__)
#include <stdint.h>
#include <string.h>

#include "msf/board.h"

int main(void);
void msf_qemu_xtensa_start(void) __attribute__((used, noreturn));

/* QEMU starts the lx106 at its reset vector, 0x50000000, the first byte of sysrom and of the
 * linker script's flash. Stack pointer, then PS = INTLEVEL 1 with EXCM clear (level-1
 * interrupts masked, exceptions to the kernel vector, and BREAK, which __builtin_trap emits,
 * below the debug level 2 so that it traps), VECBASE, then C. l32r reads only backwards, so
 * the literals sit behind a jump. */
__asm__("    .section .msf_reset, \"ax\"\n"
        "    .global msf_qemu_xtensa_reset\n"
        "msf_qemu_xtensa_reset:\n"
        "    j 1f\n"
        "    .align 4\n"
        "2:  .word __stack\n"
        "3:  .word msf_qemu_xtensa_vectors\n"
        "4:  .word msf_qemu_xtensa_start\n"
        "1:  l32r a1, 2b\n"
        "    l32r a2, 3b\n"
        "    wsr a2, vecbase\n"
        "    movi a2, 0x01\n"
        "    wsr a2, ps\n"
        "    rsync\n"
        "    movi a0, 0\n"
        "    l32r a2, 4b\n"
        "    callx0 a2\n");

/* lx106 vector offsets from VECBASE: debug 0x10, kernel 0x30, user 0x50, double 0x70. Each
 * passes the cause, the faulting PC and which vector it was to qemu_xtensa.c; nothing here
 * returns from an exception. */
__asm__("    .section .msf_vectors, \"ax\"\n"
        "    .balign 1024\n"
        "    .global msf_qemu_xtensa_vectors\n"
        "msf_qemu_xtensa_vectors:\n"
        "    .org 0x10\n"
        "    j 3f\n"
        "    .org 0x30\n"
        "    j 1f\n"
        "    .org 0x50\n"
        "    j 1f\n"
        "    .org 0x70\n"
        "    rsr a2, exccause\n"
        "    rsr a3, depc\n"
        "    movi a4, 1\n"
        "    j 9f\n"
        "1:  rsr a2, exccause\n"
        "    rsr a3, epc1\n"
        "    movi a4, 0\n"
        "    j 9f\n"
        "3:  rsr a2, debugcause\n"
        "    rsr a3, epc2\n"
        "    movi a4, 2\n"
        "9:  call0 msf_qemu_xtensa_exception\n");

typedef void (*msf_ctor_t)(void);
extern char __data_source[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern msf_ctor_t __init_array_start[], __init_array_end[], __ctors_start[], __ctors_end[];

void msf_qemu_xtensa_start(void)
{
    memcpy(__data_start, __data_source, (uintptr_t)__data_end - (uintptr_t)__data_start);
    memset(__bss_start, 0, (uintptr_t)__bss_end - (uintptr_t)__bss_start);
    for (uintptr_t p = (uintptr_t)__init_array_start; p < (uintptr_t)__init_array_end;
         p += sizeof(msf_ctor_t)) {
        (*(const msf_ctor_t *)p)();
    }
    for (uintptr_t p = (uintptr_t)__ctors_end; p > (uintptr_t)__ctors_start;) {
        p -= sizeof(msf_ctor_t);
        (*(const msf_ctor_t *)p)();
    }
    msf_board_end_of_run(main());
    for (;;) {
    }
}

/* Byte loops: small, and only start-up and a few 4-byte loads of unaligned data use them (the
 * lx106 faults on unaligned words). GCC 12 does not turn them into calls to themselves (their
 * code has no calls at -Os, -O2 or -O3). */
void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    while (n--) {
        *d++ = *s++;
    }
    return dst;
}

void *memmove(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if ((uintptr_t)d < (uintptr_t)s) {
        while (n--) {
            *d++ = *s++;
        }
    } else {
        while (n--) {
            d[n] = s[n];
        }
    }
    return dst;
}

void *memset(void *dst, int c, size_t n)
{
    unsigned char *d = dst;
    while (n--) {
        *d++ = (unsigned char)c;
    }
    return dst;
}
#endif /* MSF_QEMU && __XTENSA__ */

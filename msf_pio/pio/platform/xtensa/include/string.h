/* string.h of the msf-qemu Xtensa stand-in, whose toolchain (Debian's gcc-xtensa-lx106) comes
 * without a C library: the functions the runtime calls and GCC may emit calls to, defined by
 * the msf-pio library (library/src/board/qemu_xtensa_crt.c). */
#ifndef MSF_QEMU_XTENSA_STRING_H
#define MSF_QEMU_XTENSA_STRING_H

#include <stddef.h>

void *memcpy(void *__restrict dst, const void *__restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);

#endif /* MSF_QEMU_XTENSA_STRING_H */

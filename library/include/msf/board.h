/* The probe interface: what an msf-pio firmware needs from a board, whatever its framework.
 *
 * One small file per framework implements it (library/src/board/<framework>.c: stm32cube,
 * espidf, freedom-e-sdk, and the msf-qemu emulated platform); each compiles to nothing under the
 * other frameworks. The application includes only this header and calls msf_board_init() first.
 */
#ifndef MSF_BOARD_H
#define MSF_BOARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Clocks at the part's nominal rate, the console, the cycle counter, and the stack paint
 * (everything below the caller's frame, so call it first thing in main). */
void msf_board_init(void);

/* Console: the board's serial port (the ST-LINK / J-Link / USB-serial port a monitor opens),
 * or the emulator's UART. ASCII only. */
void msf_board_puts(const char *s);

/* `key` then v in decimal, or then v as 0x%08x: result-line fields without printf (the
 * Xtensa stand-in has no C library, and printf would add stack to a firmware whose RAM is
 * measured). Defined below, on msf_board_puts. */
static inline void msf_board_put_dec(const char *key, uint64_t v);
static inline void msf_board_put_hex(const char *key, uint32_t v);

/* Monotonic 64-bit cycle count since msf_board_init. Under an emulator with -icount it counts
 * executed instructions. */
uint64_t msf_board_cycles(void);

/* Which counter msf_board_cycles reads: "dwt", "systick", "mcycle", "ccount" or "esp". */
const char *msf_board_cycles_source(void);

/* The rate the core runs at now, as the part's clock tree is configured (not a manifest
 * figure); under an emulator, the nominal rate of the part it stands in for. */
uint32_t msf_board_cpu_hz(void);

/* Stack bytes used at the deepest point since msf_board_init, and the stack's size. */
size_t msf_board_stack_used(void);
size_t msf_board_stack_size(void);

/* End of a run. An emulator exits with `status` (never returns); a real board waits a couple of
 * seconds and returns, so the caller reports again for a monitor opened after the upload. */
void msf_board_end_of_run(int status);

static inline void msf_board_put_dec(const char *key, uint64_t v)
{
    char text[21];  /* 2^64 - 1 has 20 digits */
    char *p = text + sizeof text;
    *--p = '\0';
    do {
        *--p = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    msf_board_puts(key);
    msf_board_puts(p);
}

static inline void msf_board_put_hex(const char *key, uint32_t v)
{
    char text[11] = "0x";
    for (int i = 0; i < 8; i++) {
        text[2 + i] = "0123456789abcdef"[(v >> (28 - 4 * i)) & 0xFu];
    }
    text[10] = '\0';
    msf_board_puts(key);
    msf_board_puts(text);
}

#ifdef __cplusplus
}
#endif

#endif /* MSF_BOARD_H */

/* Board services for real boards (the msf-qemu platform brings its own msf_board.h): a cycle
 * counter and a stack high-water probe with the same API. printf goes to the framework's
 * console (ESP-IDF and Freedom E SDK retarget it to the USB serial port). */
#ifndef BOARD_REAL_H
#define BOARD_REAL_H

#include <stddef.h>
#include <stdint.h>

uint64_t msf_board_cycles(void);
const char *msf_board_cycles_source(void);
size_t msf_board_stack_used(void);

#endif /* BOARD_REAL_H */

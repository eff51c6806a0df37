/* The RV32 cycle counter as 64 bits (mcycleh:mcycle), shared by the RISC-V board files. */
#ifndef MSF_LIBRARY_BOARD_RV32_MCYCLE_H
#define MSF_LIBRARY_BOARD_RV32_MCYCLE_H

#include <stdint.h>

static inline uint64_t msf_rv32_mcycle(void)
{
    uint32_t hi, lo, hi2;
    do {  /* re-read if the low half carried into the high half between the reads */
        __asm__ volatile("csrr %0, mcycleh" : "=r"(hi));
        __asm__ volatile("csrr %0, mcycle" : "=r"(lo));
        __asm__ volatile("csrr %0, mcycleh" : "=r"(hi2));
    } while (hi != hi2);
    return ((uint64_t)hi << 32) | lo;
}

#endif /* MSF_LIBRARY_BOARD_RV32_MCYCLE_H */

/* A stand-in for the <arm_acle.h> of GCC 7 (PlatformIO's toolchain-gccarmnoneeabi 1.70201.0,
 * which platform-ststm32 gives stm32cube builds): put first on the include path, it hides the
 * newer compiler's header. GCC 7's header declares only the coprocessor intrinsics and, where
 * __ARM_FEATURE_CRC32 is set, the CRC32 ones; the SIMD32 and saturation intrinsics (int16x2_t,
 * int8x4_t, __sxtab16, __sxtb16, __smlad, __smlabb, __ssat, ...) arrived in GCC 10. Written for
 * msf-pio's tests from that list, not taken from GCC: only the names a test could trip over. */
#ifndef MSF_TEST_GCC7_ARM_ACLE_H
#define MSF_TEST_GCC7_ARM_ACLE_H

#include <stdint.h>

void __arm_cdp(unsigned coproc, unsigned opc1, unsigned crd, unsigned crn, unsigned crm,
               unsigned opc2);
void __arm_mcr(unsigned coproc, unsigned opc1, uint32_t value, unsigned crn, unsigned crm,
               unsigned opc2);
uint32_t __arm_mrc(unsigned coproc, unsigned opc1, unsigned crn, unsigned crm, unsigned opc2);

#if defined(__ARM_FEATURE_CRC32)
uint32_t __crc32b(uint32_t crc, uint8_t data);
uint32_t __crc32h(uint32_t crc, uint16_t data);
uint32_t __crc32w(uint32_t crc, uint32_t data);
uint32_t __crc32cb(uint32_t crc, uint8_t data);
uint32_t __crc32ch(uint32_t crc, uint16_t data);
uint32_t __crc32cw(uint32_t crc, uint32_t data);
#endif

#endif /* MSF_TEST_GCC7_ARM_ACLE_H */

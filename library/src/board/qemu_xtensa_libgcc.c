/* Integer helpers GCC calls on the lx106 (no divide instruction, no high multiply) that Debian's
 * libgcc for xtensa-lx106-elf (gcc-xtensa-lx106 12.2) lacks: it has __mulsi3, __modsi3,
 * __moddi3 and __udivmoddi4, but not these, which the last three themselves call. Plain
 * shift-and-subtract and 16-bit partial products: nothing here may compile into a call to
 * itself, so no / or % and no 64-bit multiply below. */
#if defined(MSF_QEMU) && defined(__XTENSA__)
#include <stdint.h>

uint32_t __udivsi3(uint32_t n, uint32_t d);
uint32_t __umodsi3(uint32_t n, uint32_t d);
int32_t __divsi3(int32_t n, int32_t d);
uint64_t __umulsidi3(uint32_t a, uint32_t b);
uint64_t __muldi3(uint64_t a, uint64_t b);
uint64_t __udivdi3(uint64_t n, uint64_t d);
uint64_t __umoddi3(uint64_t n, uint64_t d);
int64_t __divdi3(int64_t n, int64_t d);

/* Quotient of n / d, remainder in *r; d == 0 gives all ones (as the hardware dividers do). */
static uint32_t udivmod32(uint32_t n, uint32_t d, uint32_t *r)
{
    uint32_t q = 0, rem = 0;
    for (int bit = 31; bit >= 0; bit--) {
        rem = (rem << 1) | ((n >> bit) & 1u);
        if (rem >= d) {
            rem -= d;
            q |= 1u << bit;
        }
    }
    *r = rem;
    return q;
}

static uint64_t udivmod64(uint64_t n, uint64_t d, uint64_t *r)
{
    uint64_t q = 0, rem = 0;
    for (int bit = 63; bit >= 0; bit--) {
        rem = (rem << 1) | ((n >> bit) & 1u);
        if (rem >= d) {
            rem -= d;
            q |= (uint64_t)1 << bit;
        }
    }
    *r = rem;
    return q;
}

uint32_t __udivsi3(uint32_t n, uint32_t d)
{
    uint32_t r;
    return udivmod32(n, d, &r);
}

uint32_t __umodsi3(uint32_t n, uint32_t d)
{
    uint32_t r;
    (void)udivmod32(n, d, &r);
    return r;
}

/* C division truncates toward zero: divide magnitudes, then apply the sign. */
int32_t __divsi3(int32_t n, int32_t d)
{
    uint32_t un = n < 0 ? 0u - (uint32_t)n : (uint32_t)n;
    uint32_t ud = d < 0 ? 0u - (uint32_t)d : (uint32_t)d;
    uint32_t r, q = udivmod32(un, ud, &r);
    return (int32_t)((n < 0) != (d < 0) ? 0u - q : q);
}

uint64_t __umulsidi3(uint32_t a, uint32_t b)
{
    uint32_t al = a & 0xFFFFu, ah = a >> 16, bl = b & 0xFFFFu, bh = b >> 16;
    uint32_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    uint32_t mid = (ll >> 16) + (lh & 0xFFFFu) + (hl & 0xFFFFu);
    uint32_t lo = (ll & 0xFFFFu) | (mid << 16);
    uint32_t hi = hh + (lh >> 16) + (hl >> 16) + (mid >> 16);
    return ((uint64_t)hi << 32) | lo;
}

/* The low 64 bits: the high x high product only reaches bits 64 and up. */
uint64_t __muldi3(uint64_t a, uint64_t b)
{
    uint32_t al = (uint32_t)a, ah = (uint32_t)(a >> 32);
    uint32_t bl = (uint32_t)b, bh = (uint32_t)(b >> 32);
    return __umulsidi3(al, bl) + ((uint64_t)(al * bh + ah * bl) << 32);
}

uint64_t __udivdi3(uint64_t n, uint64_t d)
{
    uint64_t r;
    return udivmod64(n, d, &r);
}

uint64_t __umoddi3(uint64_t n, uint64_t d)
{
    uint64_t r;
    (void)udivmod64(n, d, &r);
    return r;
}

int64_t __divdi3(int64_t n, int64_t d)
{
    uint64_t un = n < 0 ? 0u - (uint64_t)n : (uint64_t)n;
    uint64_t ud = d < 0 ? 0u - (uint64_t)d : (uint64_t)d;
    uint64_t r, q = udivmod64(un, ud, &r);
    return (int64_t)((n < 0) != (d < 0) ? 0u - q : q);
}
#endif /* MSF_QEMU && __XTENSA__ */

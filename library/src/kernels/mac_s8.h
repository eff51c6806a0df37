/* Multiply-accumulate blocks of the dense convolutions (conv2d_s8.h, dense_s8.c). Input taps
 * are first expanded to int16 with the input offset added (msf_expand: a pixel's channels, a
 * row of kernel columns) into a stack buffer, in their own order; a filter's taps (kernel rows,
 * each of kw * cin taps padded to an even count, one after the other) are grouped four at a
 * time and the output channels go in pairs, the pair's filters interleaved group by group
 * (msf_pio/codegen/kernel_data.py). The inner loop runs a pair of output channels over the
 * windows of two pixels (or one): each filter word serves both pixels and each input word both
 * channels. With the DSP extension a group is two words of int16 taps (0, 1) and (2, 3) and one
 * filter word whose bytes are taps 0, 2, 1, 3, so that SXTB16 splits it into the same pairs: a
 * group costs one load of the pair's filter words, four extensions and four SMLAD per pixel. */
#ifndef MSF_MAC_S8_H
#define MSF_MAC_S8_H

#include "msf/runtime.h"
#include "output.h"

#if defined(__GNUC__)
typedef uint32_t __attribute__((may_alias)) msf_word_t;   /* words of int8 or int16 arrays */
#define MSF_NOINLINE __attribute__((noinline))
#else
typedef uint32_t msf_word_t;
#define MSF_NOINLINE
#endif

/* Between two groups of taps: no load is hoisted above it, so that a group's words are loaded
 * into the registers they use at once (GCC otherwise loads a whole unrolled block's filter words
 * early, runs out of registers and reloads them, 0.97 -> 1.2 instructions per MAC) */
#if defined(__GNUC__)
#define MSF_GROUP_BARRIER() __asm__ volatile("" ::: "memory")
#else
#define MSF_GROUP_BARRIER() ((void)0)
#endif

/* int16 taps of the stack buffer of one conv call (2 KB), 4 of them slack for the last group */
#define MSF_CONV_BUFFER 1024
#define MSF_CHANNEL_CHUNK 16   /* channels whose partial sums a window split in parts keeps */

/* Taps of a filter's kernel row: kw * cin, and a zero when a stride of sh rows would start a
 * window on an odd tap (windows are read a word at a time; kernel_data.conv_row) */
MSF_INLINE int32_t msf_conv_row(int32_t kw, int32_t cin, int32_t sh)
{
    return kw * cin + (kw * cin * sh) % 2;
}

/* The n taps at x (contiguous int8) plus the input offset, into dst as int16, doubled with
 * `twice` (a compile-time constant once inlined: MSF_RQ_FAST2's doubled accumulators) */
MSF_INLINE void msf_expand(const int twice, const int8_t *x, int32_t n, int32_t offset,
                           int16_t *dst)
{
    int32_t e = 0;
#if MSF_DSP
    const msf_x2_t off2 = msf_lanes(offset);
    for (; e + 4 <= n; e += 4) {
        const uint32_t u = msf_read4(x + e);
        msf_x2_t even = msf_even(u, off2), odd = msf_odd(u, off2);
        if (twice) {
            even = msf_sadd16(even, even);
            odd = msf_sadd16(odd, odd);
        }
        const uint32_t lo = msf_pkhbt(even, odd), hi = msf_pkhtb(odd, even);
        memcpy(dst + e, &lo, 4);
        memcpy(dst + e + 2, &hi, 4);
    }
#endif
    for (; e < n; e++) {
        dst[e] = (int16_t)((x[e] + offset) * (1 + twice));
    }
}

/* a[P q + p] += the window of pixel p (p < P: x + p d) . filter q (q = 0, 1: the pair at w)
 * over `groups` groups of four, for P = `pixels` (1 to 3). pixels, groups and d are compile-time
 * constants in specialised kernels: three pixels keep 6 accumulators, 4 filter halves, 2 input
 * words and the pointers in the 14 registers. */
MSF_INLINE void msf_mac_block(const int pixels, const int16_t *x, const int32_t d,
                              const int8_t *w, const int32_t groups, int32_t *a)
{
    int32_t a0 = a[0], a1 = pixels > 1 ? a[1] : 0, a2 = pixels > 2 ? a[2] : 0;   /* channel 0 */
    int32_t b0 = a[pixels], b1 = pixels > 1 ? a[pixels + 1] : 0;                 /* channel 1 */
    int32_t b2 = pixels > 2 ? a[pixels + 2] : 0;
#if MSF_DSP
    const msf_word_t *f = (const msf_word_t *)(const void *)w, *end = f + 2 * groups;
    const msf_word_t *p = (const msf_word_t *)(const void *)x;
    const int32_t dw = d / 2;                          /* d taps: d / 2 words (d is even) */
#define MSF_MAC_GROUP(k)                                                                       \
    do {                                                                                       \
        MSF_GROUP_BARRIER();                                                                   \
        const uint32_t wa = f[2 * (k)], wb = f[2 * (k) + 1];                                   \
        const msf_x2_t wa01 = msf_even0(wa), wa23 = msf_odd0(wa);                              \
        const msf_x2_t wb01 = msf_even0(wb), wb23 = msf_odd0(wb);                              \
        msf_x2_t lo = p[2 * (k)], hi = p[2 * (k) + 1];                                         \
        a0 = msf_smlad(lo, wa01, msf_smlad(hi, wa23, a0));                                     \
        b0 = msf_smlad(lo, wb01, msf_smlad(hi, wb23, b0));                                     \
        if (pixels > 1) {                                                                      \
            lo = p[dw + 2 * (k)];                                                              \
            hi = p[dw + 2 * (k) + 1];                                                          \
            a1 = msf_smlad(lo, wa01, msf_smlad(hi, wa23, a1));                                 \
            b1 = msf_smlad(lo, wb01, msf_smlad(hi, wb23, b1));                                 \
        }                                                                                      \
        if (pixels > 2) {                                                                      \
            lo = p[2 * dw + 2 * (k)];                                                          \
            hi = p[2 * dw + 2 * (k) + 1];                                                      \
            a2 = msf_smlad(lo, wa01, msf_smlad(hi, wa23, a2));                                 \
            b2 = msf_smlad(lo, wb01, msf_smlad(hi, wb23, b2));                                 \
        }                                                                                      \
    } while (0)
    for (int32_t r = groups % 8; r > 0; r--, f += 2, p += 2) {     /* then eight at a time */
        MSF_MAC_GROUP(0);
    }
    for (; f != end; f += 16, p += 16) {
        MSF_MAC_GROUP(0);
        MSF_MAC_GROUP(1);
        MSF_MAC_GROUP(2);
        MSF_MAC_GROUP(3);
        MSF_MAC_GROUP(4);
        MSF_MAC_GROUP(5);
        MSF_MAC_GROUP(6);
        MSF_MAC_GROUP(7);
    }
#undef MSF_MAC_GROUP
#else
    for (int32_t g = 0; g < groups; g++, w += 8, x += 4) {
        static const uint8_t byte[4] = {0, 2, 1, 3};      /* tap k's filter byte */
        for (int32_t k = 0; k < 4; k++) {
            const int32_t wa = w[byte[k]], wb = w[4 + byte[k]], u = x[k];
            a0 += u * wa;
            b0 += u * wb;
            if (pixels > 1) {
                a1 += x[d + k] * wa;
                b1 += x[d + k] * wb;
            }
            if (pixels > 2) {
                a2 += x[2 * d + k] * wa;
                b2 += x[2 * d + k] * wb;
            }
        }
    }
#endif
    a[0] = a0;
    a[pixels] = b0;
    if (pixels > 1) {
        a[1] = a1;
        a[pixels + 1] = b1;
    }
    if (pixels > 2) {
        a[2] = a2;
        a[pixels + 2] = b2;
    }
}

/* The output channels [0, cout) of `pixels` pixels (1 to 3; pixel p's window d p taps after
 * x, its outputs ors p bytes after o) from windows of `groups` groups: each pair's accumulators
 * start at the bias and end requantized into o (mode and full as msf_channel_output). Every
 * argument but the pointers is a compile-time constant in specialised kernels. */
MSF_INLINE void msf_conv_channels(const int pixels, const int mode, const int full,
                                  const msf_layer_t *l, const int16_t *x, const int32_t d,
                                  const int32_t groups, const int32_t cout, int8_t *o,
                                  int32_t ors)
{
    const msf_out_t oq = {l->out_offset, l->act_min, l->act_max};
    const msf_channel_t *ch = l->channels;
    const int8_t *w = l->weights;
    for (int32_t c = 0; c < cout; c += 2, ch += 2, w += 8 * groups, o += 2) {
        int32_t a[6];
        for (int32_t p = 0; p < pixels; p++) {
            a[p] = ch[0].bias;
            a[pixels + p] = ch[1].bias;
        }
        msf_mac_block(pixels, x, d, w, groups, a);
        /* one channel at a time: its constants, its pixels' outputs, then their stores (a
         * store may alias the records: no constant is loaded after one) */
        for (int32_t q = 0; q < 2 && c + q < cout; q++) {
            const msf_channel_t k = ch[q];
            int8_t v[3];
            for (int32_t p = 0; p < pixels; p++) {
                v[p] = msf_channel_output(mode, full, a[q * pixels + p], &k, oq);
            }
            int8_t *t = o + q;
            for (int32_t p = 0; p < pixels; p++, t += ors) {
                *t = v[p];
            }
        }
    }
}

/* msf_conv_channels of a layer whose shape is not compiled in (conv2d_s8.c): one to three
 * pixels, the filter `groups` groups long */
void msf_conv_channels_any(const msf_layer_t *l, int32_t pixels, const int16_t *x, int32_t d,
                           int32_t groups, int8_t *o, int32_t ors);

/* ... from windows gathered in parts: the part of taps [s0, s1) (s0 a multiple of four, taps
 * in filter order) at x added to the accumulators of channels [c0, c0 + count)
 * (count <= MSF_CHANNEL_CHUNK, c0 even) of one pixel or two (the second d taps further),
 * part[2 c + p] for channel c0 + c and pixel p, started at the bias when s0 is 0; requantized
 * into o + c0 (o + ors + c0) once s1 is the filter's end, `taps` (conv2d_s8.c). */
void msf_channels_part_s8(const msf_layer_t *l, int32_t pixels, const int16_t *x, int32_t d,
                          int32_t taps, int32_t s0, int32_t s1, int32_t c0, int32_t count,
                          int32_t *part, int8_t *o, int32_t ors);

#endif /* MSF_MAC_S8_H */

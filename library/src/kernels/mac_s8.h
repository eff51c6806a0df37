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

#if MSF_DSP
/* Taps x[0..3] plus the offset (both lanes of off2), doubled with `twice`, into dst[0..3] */
MSF_INLINE void msf_expand4(const int twice, const int8_t *x, msf_x2_t off2, int16_t *dst)
{
    const uint32_t u = msf_read4(x);
    msf_x2_t even = msf_even(u, off2), odd = msf_odd(u, off2);
    if (twice) {
        even = msf_sadd16(even, even);
        odd = msf_sadd16(odd, odd);
    }
    const uint32_t lo = msf_pkhbt(even, odd), hi = msf_pkhtb(odd, even);
    memcpy(dst, &lo, 4);
    memcpy(dst + 2, &hi, 4);
}
#endif

/* The n taps at x (contiguous int8) plus the input offset, into dst as int16, doubled with
 * `twice` (a compile-time constant once inlined: MSF_RQ_FAST2's doubled accumulators); eight
 * taps per pass of the loop */
MSF_INLINE void msf_expand(const int twice, const int8_t *x, int32_t n, int32_t offset,
                           int16_t *dst)
{
    int32_t e = 0;
#if MSF_DSP
    const msf_x2_t off2 = msf_lanes(offset);
    for (; e + 8 <= n; e += 8) {
        msf_expand4(twice, x + e, off2, dst + e);
        msf_expand4(twice, x + e + 4, off2, dst + e + 4);
    }
    if (e + 4 <= n) {
        msf_expand4(twice, x + e, off2, dst + e);
        e += 4;
    }
#endif
    for (; e < n; e++) {
        dst[e] = (int16_t)((x[e] + offset) * (1 + twice));
    }
}

/* Byte i (< 4) of the filter word at w (word-aligned: kernel_data's groups of eight bytes in
 * word-aligned arrays): a load of its own, or on Xtensa, which has no sign-extending byte load,
 * shifted out of one load of the word that the group's four taps share */
MSF_INLINE int32_t msf_w8(const int8_t *w, int32_t i)
{
#if defined(__XTENSA__)
    return (int32_t)(*(const msf_word_t *)(const void *)w << (24 - 8 * i)) >> 24;
#else
    return w[i];
#endif
}

/* a[P q + p] += the window of pixel p (p < P: x + p d) . filter q (q = 0, 1: the pair at w)
 * over `groups` groups of four, for P = `pixels` (1 to 3); with one pixel, `pairs` pairs (1 to
 * 3, pair j's filters pstride bytes after w, into a[2 j], a[2 j + 1]) share each input load (a
 * dense layer's one pixel). pixels, pairs, groups and d are compile-time constants in
 * specialised kernels: three pixels keep 6 accumulators, 4 filter halves, 2 input words and
 * the pointers in the 14 registers. */
MSF_INLINE void msf_mac_block(const int pixels, const int pairs, const int16_t *x,
                              const int32_t d, const int8_t *w, const int32_t pstride,
                              const int32_t groups, int32_t *a)
{
    /* channel 0 of pixel p (or of pair p), channel 1 of it */
    const int more = pixels > 1 ? pixels : pairs, step = pixels > 1 ? 1 : 2;
    int32_t a0 = a[0], a1 = more > 1 ? a[step] : 0, a2 = more > 2 ? a[2 * step] : 0;
    int32_t b0 = a[pixels], b1 = more > 1 ? a[pixels + step] : 0;
    int32_t b2 = more > 2 ? a[pixels + 2 * step] : 0;
#if MSF_DSP
    const msf_word_t *f = (const msf_word_t *)(const void *)w, *end = f + 2 * groups;
    const msf_word_t *g = (const msf_word_t *)(const void *)(pairs > 1 ? w + pstride : w);
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
        if (pairs > 1) {                          /* one pixel: the next pair, same input */   \
            const uint32_t wc = g[2 * (k)], wd = g[2 * (k) + 1];                               \
            a1 = msf_smlad(lo, msf_even0(wc), msf_smlad(hi, msf_odd0(wc), a1));                \
            b1 = msf_smlad(lo, msf_even0(wd), msf_smlad(hi, msf_odd0(wd), b1));                \
        }                                                                                      \
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
    /* a filter of a compile-time multiple of 16 groups: 16 at a time (the loop's end spills:
     * its test costs a load) */
    const int sixteen = __builtin_constant_p(groups) && groups % 16 == 0;
    for (int32_t r = sixteen ? 0 : groups % 8; r > 0; r--, f += 2, g += 2, p += 2) {  /* 8 */
        MSF_MAC_GROUP(0);
    }
    for (; f != end; f += sixteen ? 32 : 16, g += sixteen ? 32 : 16, p += sixteen ? 32 : 16) {
        MSF_MAC_GROUP(0);
        MSF_MAC_GROUP(1);
        MSF_MAC_GROUP(2);
        MSF_MAC_GROUP(3);
        MSF_MAC_GROUP(4);
        MSF_MAC_GROUP(5);
        MSF_MAC_GROUP(6);
        MSF_MAC_GROUP(7);
        if (sixteen) {
            MSF_MAC_GROUP(8);
            MSF_MAC_GROUP(9);
            MSF_MAC_GROUP(10);
            MSF_MAC_GROUP(11);
            MSF_MAC_GROUP(12);
            MSF_MAC_GROUP(13);
            MSF_MAC_GROUP(14);
            MSF_MAC_GROUP(15);
        }
    }
#undef MSF_MAC_GROUP
#else
    const int8_t *u = pairs > 1 ? w + pstride : w, *v = pairs > 2 ? w + 2 * pstride : w;
    for (int32_t g = 0; g < groups; g++, w += 8, u += 8, v += 8, x += 4) {
        static const uint8_t byte[4] = {0, 2, 1, 3};      /* tap k's filter byte */
        for (int32_t k = 0; k < 4; k++) {
            const int32_t wa = msf_w8(w, byte[k]), wb = msf_w8(w + 4, byte[k]), t = x[k];
            a0 += t * wa;
            b0 += t * wb;
            if (pairs > 1) {
                a1 += t * msf_w8(u, byte[k]);
                b1 += t * msf_w8(u + 4, byte[k]);
            }
            if (pairs > 2) {
                a2 += t * msf_w8(v, byte[k]);
                b2 += t * msf_w8(v + 4, byte[k]);
            }
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
    if (more > 1) {
        a[step] = a1;
        a[pixels + step] = b1;
    }
    if (more > 2) {
        a[2 * step] = a2;
        a[pixels + 2 * step] = b2;
    }
}

/* Pairs of channels a one-pixel block takes per input load (msf_mac_block): two with the DSP
 * extension (its 14 registers) and on Xtensa (16), three on RV32 (32) */
#if MSF_DSP || defined(__XTENSA__)
#define MSF_WIDE_PAIRS 2
#else
#define MSF_WIDE_PAIRS 3
#endif

/* The output channels [0, cout) of `pixels` pixels (1 to 3; pixel p's window d p taps after
 * x, its outputs ors p bytes after o) from windows of `groups` groups: each pair's accumulators
 * start at the bias and end requantized into o (mode and full as msf_channel_output); one
 * pixel's channels MSF_WIDE_PAIRS pairs at a time while they last. `even`: cout is even (both
 * channels of every pair stored unchecked). Every argument but the pointers is a compile-time
 * constant in specialised kernels (cout: its parity). */
MSF_INLINE void msf_conv_channels(const int pixels, const int mode, const int full,
                                  const int even, const msf_layer_t *l, const int16_t *x,
                                  const int32_t d, const int32_t groups, const int32_t cout,
                                  int8_t *o, int32_t ors)
{
    const msf_out_t oq = {l->out_offset, l->act_min, l->act_max};
    const msf_channel_t *ch = l->channels;
    const int8_t *w = l->weights;
    const int32_t wide = 2 * MSF_WIDE_PAIRS;               /* channels of a one-pixel block */
    int8_t *const end = o + cout;
    for (; pixels == 1 && end - o >= wide; ch += wide, w += wide * 4 * groups, o += wide) {
        int32_t a[6];
        int8_t v[6];
        for (int32_t c = 0; c < wide; c++) {
            a[c] = ch[c].bias;
        }
        msf_mac_block(1, MSF_WIDE_PAIRS, x, 0, w, 8 * groups, groups, a);
        for (int32_t c = 0; c < wide; c++) {         /* every constant before the stores */
            const msf_channel_t k = ch[c];
            v[c] = msf_channel_output(mode, full, a[c], &k, oq);
        }
        for (int32_t c = 0; c < wide; c++) {
            o[c] = v[c];
        }
    }
    /* pairs: the outputs' pointer is the loop's only counter (the pair's other state spills
     * while its accumulators take the registers) */
    for (; o < end; ch += 2, w += 8 * groups, o += 2) {
        int32_t a[6];
        for (int32_t p = 0; p < pixels; p++) {
            a[p] = ch[0].bias;
            a[pixels + p] = ch[1].bias;
        }
        msf_mac_block(pixels, 1, x, d, w, 8 * groups, groups, a);
        /* one channel at a time: its constants, its pixels' outputs, then their stores (a
         * store may alias the records: no constant is loaded after one) */
        for (int32_t q = 0; q < 2 && (even || o + q < end); q++) {
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

/* msf_conv_channels of a layer whose shape is not compiled in (conv2d_s8.c): one or two
 * pixels, the filter `groups` groups long */
void msf_conv_channels_any(const msf_layer_t *l, int32_t pixels, const int16_t *x, int32_t d,
                           int32_t groups, int8_t *o, int32_t ors);
/* ... of one pixel (dense: without the two-pixel code) */
void msf_conv_channels1(const msf_layer_t *l, const int16_t *x, int32_t d, int32_t groups,
                        int8_t *o, int32_t ors);

/* ... from windows gathered in parts, one pixel: the part of taps [s0, s1) (s0 a multiple of
 * four, taps in filter order) at x added to the accumulators of channels [c0, c0 + count)
 * (count <= MSF_CHANNEL_CHUNK, c0 even), part[2 c] for channel c0 + c, started at the bias when
 * s0 is 0; requantized into o + c0 once s1 is the filter's end, `taps` (conv2d_s8.c; dense) */
void msf_channels_part1_s8(const msf_layer_t *l, const int16_t *x, int32_t taps, int32_t s0,
                           int32_t s1, int32_t c0, int32_t count, int32_t *part, int8_t *o);

#endif /* MSF_MAC_S8_H */

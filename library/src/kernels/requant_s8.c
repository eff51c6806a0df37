/* Requantization of a run of output channels, shared by the kernels that first accumulate a
 * block of channels: one small loop, so that its registers hold only the run's pointers and
 * the output's clamp. An output whose activation clamp is the whole int8 range saturates in one
 * instruction with the DSP extension (SSAT). */
#include "output.h"

MSF_KERNEL_SPEED

MSF_INLINE void requant_run(const int pair, const int mode, const int full, const int32_t *acc,
                            int32_t n, const msf_channel_t *ch, const msf_out_t out, int8_t *o0,
                            int32_t d)
{
    for (int32_t c = 0; c < n; c++) {
        o0[c] = msf_channel_output(mode, full, acc[2 * c], &ch[c], out);
        if (pair) {
            o0[d + c] = msf_channel_output(mode, full, acc[2 * c + 1], &ch[c], out);
        }
    }
}

/* one loop per (pixels, mode, full): each a compile-time constant inside it */
#define MSF_REQUANT_CASE(pair, mode, full) \
    requant_run(pair, mode, full, acc, n, ch, o, o0, d)

void msf_requant_s8(const int32_t *acc, int32_t pixels, int32_t n, const msf_channel_t *ch,
                    const msf_out_t *out, int mode, int8_t *o0, int32_t d)
{
    const msf_out_t o = *out;
    const int full = o.min == -128 && o.max == 127;
    switch ((pixels == 2) * 8 + mode * 2 + full) {
    case 15: MSF_REQUANT_CASE(1, MSF_RQ_FAST2, 1); break;
    case 14: MSF_REQUANT_CASE(1, MSF_RQ_FAST2, 0); break;
    case 13: MSF_REQUANT_CASE(1, MSF_RQ_FAST, 1); break;
    case 12: MSF_REQUANT_CASE(1, MSF_RQ_FAST, 0); break;
    case 11: MSF_REQUANT_CASE(1, MSF_RQ_NARROW, 1); break;
    case 10: MSF_REQUANT_CASE(1, MSF_RQ_NARROW, 0); break;
    case 9: MSF_REQUANT_CASE(1, MSF_RQ_EXACT, 1); break;
    case 8: MSF_REQUANT_CASE(1, MSF_RQ_EXACT, 0); break;
    case 7: MSF_REQUANT_CASE(0, MSF_RQ_FAST2, 1); break;
    case 6: MSF_REQUANT_CASE(0, MSF_RQ_FAST2, 0); break;
    case 5: MSF_REQUANT_CASE(0, MSF_RQ_FAST, 1); break;
    case 4: MSF_REQUANT_CASE(0, MSF_RQ_FAST, 0); break;
    case 3: MSF_REQUANT_CASE(0, MSF_RQ_NARROW, 1); break;
    case 2: MSF_REQUANT_CASE(0, MSF_RQ_NARROW, 0); break;
    case 1: MSF_REQUANT_CASE(0, MSF_RQ_EXACT, 1); break;
    default: MSF_REQUANT_CASE(0, MSF_RQ_EXACT, 0); break;
    }
}

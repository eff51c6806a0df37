/* The model on this board: fill its input, run it, read its output.
 *
 * msf_model.h is generated at build time from platformio.ini's custom_msf_* options: the input
 * and output sizes and quantization, msf_model_run(). msf_golden.h holds a test input (and the
 * host's output for it); put your own data in its place. The measuring harness (RAM, latency,
 * bit-exactness) is under test/: `pio test -e <env>`. */
#include <stdint.h>

#include "msf/board.h"
#include "msf/runtime.h"
#include "msf_golden.h"
#include "msf_model.h"

#if MSF_MODEL_STREAM_INPUT || MSF_MODEL_STREAM_OUTPUT
#error "this main.c passes whole buffers: with custom_msf_input/output = stream call msf_model_run_streamed / msf_model_run_stream (msf_model.h)"
#endif

static int8_t input[MSF_MODEL_INPUT_BYTES];    /* HWC int8: q = x / SCALE + ZERO_POINT */
static int8_t output[MSF_MODEL_OUTPUT_BYTES];  /* int8: x = (q - ZERO_POINT) * SCALE */

int main(void)
{
    msf_board_init();
    for (;;) {
        for (int32_t i = 0; i < MSF_MODEL_INPUT_BYTES; i++) {
            input[i] = msf_golden_input[i];    /* your camera frame or sensor window here */
        }
        msf_model_run(input, output);
        msf_profile_print();                   /* custom_msf_profile = yes: cycles per edge */

        int32_t best = 0;                      /* a classifier's answer: the largest output */
        for (int32_t i = 1; i < MSF_MODEL_OUTPUT_BYTES; i++) {
            if (output[i] > output[best]) {
                best = i;
            }
        }
        msf_board_put_dec("class ", (uint64_t)best);
        msf_board_put_dec(" of ", MSF_MODEL_OUTPUT_BYTES);
        msf_board_put_dec(" score ", (uint64_t)(output[best] + 128));   /* 0..255 */
        msf_board_puts("\n");
        msf_board_end_of_run(0);               /* an emulator stops here; a board waits, again */
    }
}

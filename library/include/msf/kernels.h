/* The kernels the generated code specialises to a layer's shape (msf_pio/codegen/specialise.py):
 * inline templates whose shape arguments the generated functions give as constants, so that
 * the compiler unrolls the loops of known counts and folds strides into the addressing. */
#ifndef MSF_KERNELS_H
#define MSF_KERNELS_H

#include "../../src/kernels/conv2d_s8.h"
#include "../../src/kernels/depthwise_conv2d_s8.h"

#endif /* MSF_KERNELS_H */

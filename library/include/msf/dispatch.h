/* The runtime's two dispatches, a layer's output column by its op's kernel (msf_layer_column)
 * and an edge by its executor (msf_run_edge), as templates over the ops and schemes a model
 * uses: `ops` (enum msf_op), `schemes` (enum msf_scheme) and `heads` (the ops of single head
 * layers) are constant sets of MSF_BIT()s, so the calls of the others fold away. The generated
 * model defines both functions over its own (msf_pio/codegen/generate.py): a firmware links
 * only the kernels and executors its plan runs. The runtime's own definitions (edge.c,
 * executor.c) cover every op and scheme and are weak, so the model's replace them at link
 * time; they are the call graph the stack predictor is calibrated on, every call a model can
 * make (msf_pio/codegen/stack.py). */
#ifndef MSF_DISPATCH_H
#define MSF_DISPATCH_H

#include "../../src/edge.h"        /* msf_layer_column_of */
#include "../../src/executor.h"    /* msf_run_edge_of */

#endif /* MSF_DISPATCH_H */

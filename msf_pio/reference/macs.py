"""MAC counter of the project's definition, counted from the taps the reference really visits.

conv2d: C_in MACs per valid kernel tap per output element; depthwise and pools: 1 per valid tap;
global_avgpool: H*W per channel; dense: in*out; add: 0. Padding taps are skipped as in TFLite's
reference kernels (their input equals the zero point and contributes nothing).
"""
from __future__ import annotations

import numpy as np

from ..model import ir
from ..model.ir import Layer, Model
from .windows import valid_taps


def layer_macs(layer: Layer) -> int:
    if layer.has_window:
        per_tap = layer.cin * layer.cout if layer.op == ir.CONV else layer.cout
        return int(np.count_nonzero(valid_taps(layer))) * per_tap
    if layer.op == ir.GLOBAL_AVGPOOL:
        return int(np.prod(layer.in_shape))
    if layer.op == ir.DENSE:
        return int(np.prod(layer.in_shape)) * layer.cout
    return 0


def model_macs(model: Model) -> int:
    return sum(layer_macs(layer) for layer in model.layers)

"""MAC counter of the project's definition, counted from the taps the reference really visits.

conv2d: C_in MACs per valid kernel tap per output element; depthwise and pools: 1 per valid tap;
global_avgpool: H*W per channel; dense: in*out; transposed conv: C_in per tap landing inside
its output per output channel; add, resize: 0. Padding taps are skipped as in TFLite's
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
    if layer.op == ir.TRANSPOSE_CONV:   # every (input pixel, tap) landing inside the output
        return _transposed_landings(layer) * layer.cin * layer.cout
    return 0


def _transposed_landings(layer: Layer) -> int:
    """Taps of a transposed convolution that land inside its output, scattered one by one."""
    (h, w, _), (oh, ow, _) = layer.in_shape, layer.out_shape
    (kh, kw), (sh, sw), (top, left) = layer.kernel, layer.stride, layer.pad[:2]
    rows = np.add.outer(np.arange(h) * sh - top, np.arange(kh))    # output row of (i, ky)
    cols = np.add.outer(np.arange(w) * sw - left, np.arange(kw))
    return int(((rows >= 0) & (rows < oh)).sum() * ((cols >= 0) & (cols < ow)).sum())


def model_macs(model: Model) -> int:
    return sum(layer_macs(layer) for layer in model.layers)

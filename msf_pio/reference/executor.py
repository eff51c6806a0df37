"""Unfused layer-by-layer int8 execution of the IR with TFLite's integer math (msf_pio.numerics).

Accumulations are exact: int64, or float64 matrix products whose int8 x int9 sums stay far below
2**53, which keeps whole zoo models fast enough to serve as the oracle in tests.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .. import numerics as nm
from ..model import ir
from ..model.ir import Model
from .activations import ELEMENTWISE, prelu, softmax
from .windows import padded, valid_taps, windows

Tensors = Mapping[int, np.ndarray] | Sequence[np.ndarray]


def initial_state(model: Model) -> dict[int, np.ndarray]:
    """The state of a streaming model before its first run (msf_model_reset): per stream
    layer, its rows kept across runs."""
    return {l: np.array(model.layers[l].state_init, np.int8) for l in model.state_layers()}


def run_model(model: Model, x: np.ndarray, state: dict | None = None) -> np.ndarray:
    """Run every layer in order on the int8 HWC input; returns the int8 output tensor (with
    several outputs: all of them flattened one after another, as msf_model_run packs them).
    A streaming model runs from `state` (initial_state's dict, updated in place: pass the
    same dict frame after frame), by default from its initial state."""
    x = np.asarray(x)
    if x.shape != tuple(model.input_shape) or x.dtype != np.int8:
        raise ValueError(f"input must be int8 {model.input_shape}, got {x.dtype} {x.shape}")
    tensors = {0: x}
    last_use = model.last_reader()
    state = initial_state(model) if state is None else state
    for i in range(model.n_layers):
        tensors[i + 1] = run_layer(model, i, tensors, state)
        for t in [t for t in tensors if last_use.get(t, -1) == i]:
            del tensors[t]
    if model.outputs:
        return np.concatenate([tensors[t].reshape(-1) for t in model.output_tensors])
    return tensors[model.n_layers]


def run_layer(model: Model, index: int, tensors: Tensors,
              state: dict | None = None) -> np.ndarray:
    """Output tensor index+1 of layer `index`, from the tensors it reads (model.inputs); a
    stream layer reads and updates its rows in `state` (initial_state)."""
    layer = model.layers[index]
    x = np.asarray(tensors[model.input_of(index)])
    if x.shape != tuple(layer.in_shape):
        raise ValueError(f"layer {index} ({layer.name}): input shape {x.shape}, "
                         f"expected {layer.in_shape}")
    rq = nm.requantization(model, index)
    if layer.op in (ir.CONV, ir.DEPTHWISE, ir.DENSE):
        acc = _accumulate(layer, x.astype(np.int64) + rq.input_offset)
        acc = acc + layer.weights.bias.astype(np.int64)
        out = nm.multiply_by_quantized_multiplier(acc, rq.multiplier, rq.shift) + rq.output_offset
    elif layer.op == ir.TRANSPOSE_CONV:     # TFLite's scatter of every input pixel's taps
        xs = (x.astype(np.int64) + rq.input_offset).astype(np.float64)[None]
        acc = nm.transposed_scatter(xs, layer.weights.w, layer.stride, layer.pad[:2],
                                    layer.out_shape[:2])[0].astype(np.int64)
        acc = acc + layer.weights.bias.astype(np.int64)
        out = nm.multiply_by_quantized_multiplier(acc, rq.multiplier, rq.shift) + rq.output_offset
    elif layer.op == ir.RESIZE_NEAREST:     # bytes copied from the nearest input pixel
        (h, w, _), (oh, ow, _) = layer.in_shape, layer.out_shape
        out = x[nm.nearest_index(h, oh, layer.align_corners, layer.half_pixel)][
            :, nm.nearest_index(w, ow, layer.align_corners, layer.half_pixel)]
    elif layer.op == ir.ADD:
        out = _add(rq, x, np.asarray(tensors[layer.skip]))
    elif layer.op == ir.CONCAT:      # one quantization for all (numerics): the bytes, joined
        out = np.concatenate([x, np.asarray(tensors[layer.skip])], axis=-1)
    elif layer.op == ir.MAX_POOL:
        out = windows(padded(x, layer, nm.INT8_MIN - 1), layer).max(axis=(2, 3))
    elif layer.op == ir.AVG_POOL and layer.count_pad:   # padding taps: the zero point, counted
        zero = model.tensor_q(model.input_of(index)).zero_point
        total = windows(padded(x, layer, zero), layer).sum(axis=(2, 3))
        out = nm.rounded_average(total, layer.kernel_h * layer.kernel_w)
    elif layer.op == ir.AVG_POOL:
        total = windows(padded(x, layer, 0), layer).sum(axis=(2, 3))
        count = valid_taps(layer).sum(axis=(2, 3))[..., None]
        out = nm.rounded_average(total, count)
    elif layer.op == ir.MUL:         # TFLite int8 MUL; a 1 x 1 x C operand broadcasts
        y = np.asarray(tensors[layer.skip]).astype(np.int64) + rq.input2_offset
        out = nm.multiply_by_quantized_multiplier((x.astype(np.int64) + rq.input1_offset) * y,
                                                  rq.multiplier, rq.shift) + rq.output_offset
    elif layer.op == ir.SLICE:
        out = x[..., layer.begin:layer.begin + layer.cout]
    elif layer.op == ir.CROP:
        out = x[layer.begin:layer.begin + layer.out_shape[0]]
    elif layer.op == ir.STREAM:      # the kept rows, then the new; the last rows kept
        state = initial_state(model) if state is None else state
        out = np.concatenate([state[index], x], axis=0)
        state[index] = out[-layer.state_rows:].copy()
    elif layer.op == ir.GLOBAL_AVGPOOL and layer.requantize:
        h, w, _ = x.shape
        total = x.astype(np.int64).sum(axis=(0, 1)) + h * w * rq.input_offset
        out = (nm.multiply_by_quantized_multiplier(total, rq.multiplier, rq.shift)
               + rq.output_offset).reshape(1, 1, -1)
    elif layer.op == ir.SOFTMAX:
        out = softmax(rq, x)
    elif layer.op == ir.PRELU:
        out = prelu(rq, x, layer.weights.w)
    elif layer.op in ir.ELEMENTWISE_OPS:
        out = ELEMENTWISE[layer.op](rq, x)
    elif layer.op == ir.GLOBAL_AVGPOOL:
        h, w, _ = x.shape
        out = nm.rounded_average(x.astype(np.int64).sum(axis=(0, 1)), h * w).reshape(1, 1, -1)
    else:
        raise ValueError(f"layer {index}: unsupported op {layer.op!r}")
    return np.clip(out, rq.act_min, rq.act_max).astype(np.int8).reshape(layer.out_shape)


def _accumulate(layer: ir.Layer, xs: np.ndarray) -> np.ndarray:
    """int64 sums of weight x offset input; padding taps hold 0 (the zero point): add nothing."""
    w = layer.weights.w.astype(np.float64)
    if layer.op == ir.DENSE:
        return (w @ xs.reshape(-1).astype(np.float64)).astype(np.int64)
    win = windows(padded(xs, layer, 0).astype(np.float64), layer)      # (OH, OW, kh, kw, C)
    if layer.op == ir.CONV:
        return np.tensordot(win, w, axes=([2, 3, 4], [1, 2, 3])).astype(np.int64)
    return np.einsum("hwyxc,yxc->hwc", win, w[0]).astype(np.int64)


def _add(rq: nm.AddRequant, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TFLite int8 ADD: offset, shift up, rescale both to a common scale, sum, rescale."""
    def scaled(x, offset, multiplier, shift):
        shifted = (x.astype(np.int64) + offset) << rq.left_shift
        return nm.multiply_by_quantized_multiplier_smaller_than_one(shifted, multiplier, shift)

    total = (scaled(a, rq.input1_offset, rq.input1_multiplier, rq.input1_shift)
             + scaled(b, rq.input2_offset, rq.input2_multiplier, rq.input2_shift))
    return nm.multiply_by_quantized_multiplier_smaller_than_one(
        total, rq.output_multiplier, rq.output_shift) + rq.output_offset

"""TFLite-style post-training int8 quantization of a float IR model (docs/design.md, numerics).

Weights: symmetric int8 in [-127, 127], per output channel for conv2d and depthwise, per tensor
for dense (TFLM's FULLY_CONNECTED is per-tensor) and prelu slopes (TFLM's PRELU takes one alpha
scale); int32 bias at scale s_in * s_w. Activations:
per-tensor asymmetric int8 from the calibrated range widened to include 0. Pools keep their
input's quantization, as TFLite requires. Scales are float32-representable, so packing them
into a .tflite (float32 fields) loses nothing.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import ir
from .floatnet import PARAM_OPS, FloatWeights, forward
from .ir import Layer, Model, QParams, Weights

SAME_AS_INPUT = (ir.MAX_POOL, ir.AVG_POOL, ir.GLOBAL_AVGPOOL, ir.SLICE, ir.RESIZE_NEAREST)
_INT32 = np.iinfo(np.int32)


def quantize(model: Model, params: list[FloatWeights | None], calibration: np.ndarray) -> Model:
    """A quantized copy of `model`; `calibration` is a batch (N, H, W, C) of float inputs."""
    lo = np.full(model.n_layers + 1, np.inf)
    hi = np.full(model.n_layers + 1, -np.inf)

    def observe(t: int, a: np.ndarray) -> np.ndarray:
        lo[t], hi[t] = min(lo[t], float(a.min())), max(hi[t], float(a.max()))
        return a

    forward(model, params, calibration, hook=observe)
    shared = shared_quantization(model)
    for t, root in enumerate(shared):           # a concatenation's tensors: the hull of ranges
        lo[root], hi[root] = min(lo[root], lo[t]), max(hi[root], hi[t])
    q = [activation_qparams(lo[shared[0]], hi[shared[0]])]
    layers = []
    for i, layer in enumerate(model.layers):
        root = shared[i + 1]
        if layer.op in SAME_AS_INPUT:
            q_out = q[model.input_of(i)]
        elif layer.op in ir.FIXED_OUTPUT_Q:        # softmax, logistic: TFLite's fixed 1/256
            q_out = ir.FIXED_OUTPUT_Q[layer.op]
        elif root < i + 1:                         # shares an earlier tensor's parameters
            q_out = q[root]
        else:
            q_out = activation_qparams(lo[root], hi[root])
            if layer.op == ir.HARD_SWISH:
                q_out = _hard_swish_output(q[model.input_of(i)], q_out, lo[root])
        weights = (quantize_weights(layer, params[i], q[model.input_of(i)].scale)
                   if layer.op in PARAM_OPS else None)
        layers.append(replace(layer, weights=weights, q_out=q_out))
        q.append(q_out)
    return replace(model, layers=layers, q_input=q[0])


def shared_quantization(model: Model) -> list[int]:
    """Per tensor, the first tensor it must share quantization with: TFLite's int8
    CONCATENATION copies bytes, so its inputs and output are quantized alike (as the TFLite
    converter makes them). A pool's output keeps its input's, which chains such groups."""
    root = list(range(model.n_layers + 1))

    def find(t: int) -> int:
        while root[t] != t:
            t = root[t]
        return t

    for i, layer in enumerate(model.layers):
        if layer.op == ir.CONCAT or layer.op in SAME_AS_INPUT:
            for t in model.inputs(i):
                a, b = sorted((find(t), find(i + 1)))
                root[b] = a
    return [find(t) for t in range(model.n_layers + 1)]


def _hard_swish_output(q_in: QParams, q_out: QParams, lo: float) -> QParams:
    """TFLite's int16 hard-swish needs s_out >= s_in / 128: an input range far wider than the
    output's (mostly below -3, where hard-swish is 0) widens the output range upwards until
    it does, rather than give a model TFLite cannot run."""
    least = float(f32(q_in.scale)) / 128.0
    if q_out.scale >= least:
        return q_out
    lo = min(lo, 0.0)      # 1e-6 above the bound: float32 rounding cannot fall below it
    return activation_qparams(lo, lo + 255.0 * least * (1 + 1e-6))


def activation_qparams(lo: float, hi: float) -> QParams:
    """Asymmetric int8 parameters for the range [lo, hi] widened to include 0 (real 0 exact)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = f32((hi - lo) / 255.0)
    if scale < np.finfo(np.float32).tiny:      # a constant-0 tensor: any scale represents it
        scale = 1.0
    return QParams(scale, int(np.clip(round_away(-128 - lo / scale), -128, 127)))


def quantize_weights(layer: Layer, p: FloatWeights, input_scale: float) -> Weights:
    """Symmetric int8 weights (per channel, dense per tensor) and the int32 bias they imply."""
    w = p.w.astype(np.float64)
    axis = 3 if layer.op == ir.DEPTHWISE else 0
    if layer.op == ir.PRELU:                     # slopes: per tensor, no bias
        scales = weight_scales(np.abs(w).max(keepdims=True).reshape(1))
        q = np.clip(round_away(w / scales[0]), -127, 127).astype(np.int8)
        return Weights(w=q, bias=np.zeros(0, np.int32), scales=scales)
    if layer.op == ir.DENSE:
        scales = weight_scales(np.abs(w).max(keepdims=True).reshape(1))
    else:
        scales = weight_scales(np.abs(np.moveaxis(w, axis, 0)).reshape(w.shape[axis], -1).max(1))
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(round_away(w / scales.reshape(shape)), -127, 127).astype(np.int8)
    return Weights(w=q, bias=quantize_bias(p.b, input_scale, scales), scales=scales)


def weight_scales(absmax: np.ndarray) -> np.ndarray:
    """absmax / 127 per channel; an all-zero channel borrows the largest scale of the layer
    (any scale represents it; this one keeps its requantization multiplier ordinary)."""
    scales = f32(absmax / 127.0)
    guard = scales.max() if scales.max() > 0 else 1.0
    return np.where(scales > 0, scales, guard)


def quantize_bias(b: np.ndarray, input_scale: float, scales: np.ndarray) -> np.ndarray:
    """int32 bias at scale input_scale * weight scale (broadcast for per-tensor weights)."""
    q = round_away(np.asarray(b, np.float64) / (input_scale * scales))
    return np.clip(q, _INT32.min, _INT32.max).astype(np.int32)


def dequantized_params(model: Model) -> list[FloatWeights | None]:
    """The float weights a quantized model stands for (w * s_w, bias * s_in * s_w)."""
    params: list[FloatWeights | None] = []
    for i, layer in enumerate(model.layers):
        if layer.weights is None:
            params.append(None)
            continue
        wt = layer.weights
        if layer.op == ir.PRELU:
            params.append(FloatWeights((wt.w - wt.zero_point) * wt.scales[0], np.zeros(0)))
            continue
        shape = [1] * wt.w.ndim
        shape[3 if layer.op == ir.DEPTHWISE else 0] = -1
        s_in = model.tensor_q(model.input_of(i)).scale
        params.append(FloatWeights(wt.w * wt.scales.reshape(shape), wt.bias * s_in * wt.scales))
    return params


def simulate(model: Model, x: np.ndarray) -> np.ndarray:
    """Fake-quantized forward of a quantized model: float math on dequantized weights, every
    tensor rounded to its int8 grid. A cheap sanity check of the chosen scales, not bit-exact."""
    def round_trip(t: int, a: np.ndarray) -> np.ndarray:
        qp = model.tensor_q(t)
        return dequantize(quantize_tensor(a, qp), qp)

    return forward(model, dequantized_params(model), x, hook=round_trip)


def quantize_tensor(a: np.ndarray, qp: QParams) -> np.ndarray:
    return np.clip(round_away(a / qp.scale) + qp.zero_point, -128, 127).astype(np.int8)


def dequantize(q: np.ndarray, qp: QParams) -> np.ndarray:
    return ((q.astype(np.float32) - qp.zero_point) * qp.scale).astype(np.float32)


def round_away(x):
    """Round half away from zero, like TFLite's std::round (numpy rounds half to even)."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def f32(x):
    """Round to the nearest float32 (the precision TFLite stores scales in), as float64."""
    return np.asarray(x, np.float32).astype(np.float64) if np.ndim(x) else float(np.float32(x))

"""Float forward pass over the IR (numpy, batched HWC).

It is the calibration engine of post-training quantization and the float reference an imported
ONNX model is checked against; the int8 executors are checked elsewhere. Weights are given
separately (`FloatWeights` per layer, IR layouts) because the IR itself only stores int8 ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import numerics as nm
from . import ir
from .ir import Layer, Model

WEIGHTED_OPS = (ir.CONV, ir.DEPTHWISE, ir.DENSE, ir.TRANSPOSE_CONV)
PARAM_OPS = WEIGHTED_OPS + (ir.PRELU,)      # layers with float parameters (prelu: its slopes)

Hook = Callable[[int, np.ndarray], np.ndarray]


@dataclass
class FloatWeights:
    """Float parameters of one layer: `w` in the IR layout of `ir.Weights`, `b` per channel
    (prelu: `w` the slopes per channel, `b` empty)."""
    w: np.ndarray
    b: np.ndarray

    def __post_init__(self):
        self.w = np.asarray(self.w, np.float32)
        self.b = np.asarray(self.b, np.float32)


def weight_shape(layer: Layer) -> tuple[int, ...]:
    """The IR weight layout: conv and transposed conv OHWI, depthwise (1, kh, kw, C), dense
    (out, in), prelu (C,) or, one slope per element, (H, W, C)."""
    kh, kw = layer.kernel
    if layer.op == ir.PRELU:
        return tuple(layer.in_shape) if layer.slope_per_pixel else (layer.cin,)
    if layer.op in (ir.CONV, ir.TRANSPOSE_CONV):
        return (layer.cout, kh, kw, layer.cin)
    if layer.op == ir.DEPTHWISE:
        return (1, kh, kw, layer.cin)
    h, w, c = layer.in_shape
    return (layer.cout, h * w * c)


def forward(model: Model, params: list[FloatWeights | None], x: np.ndarray,
            hook: Hook | None = None) -> np.ndarray:
    """Run the model on `x` ((H, W, C) or a batch (N, H, W, C)); returns the output tensor.

    `hook(t, tensor)` sees every tensor t (0 = input) and returns the tensor to carry on with:
    calibration observes ranges through it, fake quantization rounds through it.
    """
    single = x.ndim == 3
    cur = np.asarray(x, np.float32)[None] if single else np.asarray(x, np.float32)
    hook = hook or (lambda t, a: a)
    last_reader = model.last_reader()
    saved = {0: hook(0, cur)}
    for i, layer in enumerate(model.layers):
        a, *b = (saved[t] for t in model.inputs(i))
        saved[i + 1] = hook(i + 1, _activate(_layer(layer, params[i], a, b), layer.act))
        for t in [t for t in saved if last_reader.get(t, -1) == i]:
            del saved[t]
    cur = saved[model.n_layers]
    return cur[0] if single else cur


def _layer(layer: Layer, p: FloatWeights | None, x: np.ndarray,
           second: list[np.ndarray]) -> np.ndarray:
    if layer.op == ir.CONV:
        return _window(layer, x, 0.0, lambda acc, xs, i, j: acc + xs @ p.w[:, i, j, :].T,
                       layer.cout) + p.b
    if layer.op == ir.DEPTHWISE:
        return _window(layer, x, 0.0, lambda acc, xs, i, j: acc + xs * p.w[0, i, j, :],
                       layer.cout) + p.b
    if layer.op == ir.TRANSPOSE_CONV:
        return nm.transposed_scatter(x, p.w, layer.stride, layer.pad[:2],
                                     layer.out_shape[:2]) + p.b
    if layer.op == ir.RESIZE_NEAREST:
        (h, w, _), (oh, ow, _) = layer.in_shape, layer.out_shape
        return x[:, nm.nearest_index(h, oh, layer.align_corners, layer.half_pixel)][
            :, :, nm.nearest_index(w, ow, layer.align_corners, layer.half_pixel)]
    if layer.op == ir.MAX_POOL:
        return _window(layer, x, -np.inf, lambda acc, xs, i, j: np.maximum(acc, xs),
                       layer.cout, start=-np.inf)
    if layer.op == ir.AVG_POOL and layer.count_pad:   # padding taps are zeros, counted
        total = _window(layer, x, 0.0, lambda acc, xs, i, j: acc + xs, layer.cout)
        return total / np.float32(layer.kernel_h * layer.kernel_w)
    if layer.op == ir.AVG_POOL:
        total = _window(layer, x, 0.0, lambda acc, xs, i, j: acc + xs, layer.cout)
        ones = np.ones((1,) + layer.in_shape[:2] + (1,), np.float32)
        count = _window(layer, ones, 0.0, lambda acc, xs, i, j: acc + xs, 1)
        return total / count           # TFLite divides by the valid taps only
    if layer.op == ir.GLOBAL_AVGPOOL:
        return x.mean(axis=(1, 2), keepdims=True)
    if layer.op == ir.DENSE:
        return (x.reshape(len(x), -1) @ p.w.T + p.b).reshape(len(x), 1, 1, -1)
    if layer.op == ir.SOFTMAX:
        e = np.exp(layer.beta * (x - x.max(axis=-1, keepdims=True)))
        return e / e.sum(axis=-1, keepdims=True)
    if layer.op == ir.HARD_SWISH:
        return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0
    if layer.op == ir.LEAKY_RELU:
        return np.where(x >= 0, x, np.float32(layer.alpha) * x)
    if layer.op == ir.PRELU:
        return np.where(x >= 0, x, p.w * x)
    if layer.op == ir.LOGISTIC:
        return 1.0 / (1.0 + np.exp(-x))
    if layer.op == ir.CONCAT:
        return np.concatenate([x, second[0]], axis=-1)
    if layer.op == ir.MUL:
        return x * second[0]
    if layer.op == ir.SLICE:
        return x[..., layer.begin:layer.begin + layer.cout]
    return x + second[0]   # add


def _window(layer: Layer, x: np.ndarray, pad_value: float, tap, channels: int,
            start: float = 0.0) -> np.ndarray:
    """Accumulate `tap(acc, shifted input, i, j)` over the kh x kw window, one strided view a
    tap."""
    top, left, bottom, right = layer.pad
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=pad_value)
    oh, ow = layer.out_shape[:2]
    sh, sw = layer.stride
    acc = np.full((len(x), oh, ow, channels), start, np.float32)
    for i in range(layer.kernel_h):
        for j in range(layer.kernel_w):
            acc = tap(acc, xp[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw, :], i, j)
    return acc


def _activate(x: np.ndarray, act: str) -> np.ndarray:
    if act == "relu":
        return np.maximum(x, 0)
    if act == "relu6":
        return np.clip(x, 0, 6)
    if act == "relu_0_to_1":
        return np.clip(x, 0, 1)
    if act == "relu_n1_to_1":
        return np.clip(x, -1, 1)
    return x

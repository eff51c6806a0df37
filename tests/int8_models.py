"""Quantized IR models with adversarial random int8 parameters, for the bit-exactness tests.

Unlike msf_pio.model.weights (calibrated, realistic), every zero point, scale and bias here is
drawn at random so that the tests reach saturation, extreme offsets and left shifts.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from msf_pio.model import ir
from msf_pio.model.floatnet import weight_shape
from msf_pio.model.ir import Model, QParams, Weights
from msf_pio.model.quantize import shared_quantization
from msf_pio.model.spec import spec_to_model


def f32(x: float) -> float:
    return float(np.float32(x))


def random_qparams(rng, scale_lo=0.005, scale_hi=0.05) -> QParams:
    return QParams(f32(rng.uniform(scale_lo, scale_hi)), int(rng.integers(-128, 128)))


def quantize_random(model: Model, seed: int, gain: float = 1.0) -> Model:
    """`model` with random int8 weights, int32 biases and quantization; `gain` > 1 shrinks the
    output scales so requantization multipliers exceed one (positive shifts)."""
    rng = np.random.default_rng(seed)
    q = [random_qparams(rng)]
    shared = shared_quantization(model)      # a concatenation's tensors: one quantization
    layers = []
    for i, layer in enumerate(model.layers):
        q_in = q[model.input_of(i)]
        weights = None
        if layer.op in (ir.MAX_POOL, ir.AVG_POOL, ir.GLOBAL_AVGPOOL, ir.CONCAT):
            q_out = q_in
        elif layer.op in ir.PIXEL_OPS:      # hard_swish: TFLite needs s_out >= s_in / 128
            q_out = ir.FIXED_OUTPUT_Q.get(layer.op) or QParams(
                f32(q_in.scale * rng.uniform(0.3, 2.0)), int(rng.integers(-128, 128)))
            if layer.op == ir.PRELU:        # slopes of both signs, an asymmetric alpha tensor
                weights = Weights(w=rng.integers(-128, 128, weight_shape(layer)).astype(np.int8),
                                  bias=np.zeros(0, np.int32),
                                  scales=np.array([f32(rng.uniform(0.002, 0.02))]),
                                  zero_point=int(rng.integers(-20, 21)))
        elif layer.op == ir.ADD:
            top = max(q_in.scale, q[layer.skip].scale)
            q_out = QParams(f32(top * rng.uniform(0.5, 2.5)), int(rng.integers(-128, 128)))
        else:
            shape = weight_shape(layer)
            w = rng.integers(-127, 128, shape).astype(np.int8)
            n_scales = 1 if layer.op == ir.DENSE else layer.cout
            scales = np.float32(rng.uniform(0.002, 0.02, n_scales)).astype(np.float64)
            fan_in = int(np.prod(shape[1:] if layer.op != ir.DEPTHWISE else shape[1:3]))
            acc_std = np.sqrt(fan_in) * 73.0 * 74.0
            bias = rng.integers(-acc_std, acc_std, layer.cout).astype(np.int32)
            weights = Weights(w=w, bias=bias, scales=scales)
            s_out = q_in.scale * float(np.median(scales)) * acc_std / rng.uniform(20, 80) / gain
            q_out = QParams(f32(s_out), int(rng.integers(-128, 128)))
        if shared[i + 1] != i + 1:
            q_out = q[shared[i + 1]]
        layers.append(replace(layer, weights=weights, q_out=q_out))
        q.append(q_out)
    return replace(model, layers=layers, q_input=q[0])


def single_op_model(shape, layers: list[dict], seed: int, gain: float = 1.0) -> Model:
    """A spec (input shape + layer dicts) expanded to the IR and quantized at random."""
    return quantize_random(spec_to_model({"input": {"shape": list(shape)}, "layers": layers}),
                           seed, gain)


def random_input(model: Model, seed: int) -> np.ndarray:
    return np.random.default_rng([seed, 99]).integers(-128, 128, model.input_shape).astype(np.int8)


# Single-op models covering every op kind and padding form: name -> (input shape, spec layers).
WEIGHTED = {   # the tests apply each activation to the last layer
    "conv3x3_s1_same": ((9, 9, 3), [{"op": "conv2d", "out": 5, "kernel": 3}]),
    "conv3x3_s2_same": ((10, 9, 4), [{"op": "conv2d", "out": 6, "kernel": 3, "stride": 2}]),
    "conv3x3_s1_valid": ((8, 7, 3), [{"op": "conv2d", "out": 4, "kernel": 3, "padding": "valid"}]),
    "conv3x3_s2_valid": ((9, 9, 3), [{"op": "conv2d", "out": 4, "kernel": 3, "stride": 2,
                                      "padding": "valid"}]),
    "conv3x3_s2_pad1": ((10, 10, 3), [{"op": "conv2d", "out": 5, "kernel": 3, "stride": 2,
                                       "padding": 1}]),
    "conv5x5_s1_pad1": ((9, 9, 2), [{"op": "conv2d", "out": 3, "kernel": 5, "padding": 1}]),
    "conv5x5_s2_same": ((11, 10, 8), [{"op": "conv2d", "out": 7, "kernel": 5, "stride": 2}]),
    "conv3x3_cin13": ((6, 6, 13), [{"op": "conv2d", "out": 5, "kernel": 3}]),
    # window rows too long for the conv's column buffer: pixels gathered in parts
    "conv3x3_cin120": ((4, 5, 120), [{"op": "conv2d", "out": 5, "kernel": 3, "stride": 2}]),
    "conv1x1": ((7, 7, 8), [{"op": "pointwise", "out": 6}]),
    "conv1x1_cin13": ((5, 6, 13), [{"op": "pointwise", "out": 9}]),
    "conv1x1_cin11": ((5, 4, 11), [{"op": "pointwise", "out": 7}]),    # taps % 4: 1, 3, 2
    "conv1x1_cin6": ((4, 5, 6), [{"op": "pointwise", "out": 4}]),
    "conv1x1_s2": ((7, 7, 8), [{"op": "pointwise", "out": 6, "stride": 2}]),
    "dw3x3_s1_same": ((8, 8, 6), [{"op": "depthwise_conv2d", "kernel": 3}]),
    "dw3x3_s2_same": ((9, 8, 5), [{"op": "depthwise_conv2d", "kernel": 3, "stride": 2}]),
    "dw5x5_s2_pad1": ((11, 11, 4), [{"op": "depthwise_conv2d", "kernel": 5, "stride": 2,
                                     "padding": 1}]),
    "dw7x7_s2_same": ((13, 12, 5), [{"op": "depthwise_conv2d", "kernel": 7, "stride": 2}]),
    "dw3x3_valid": ((7, 7, 3), [{"op": "depthwise_conv2d", "kernel": 3, "padding": "valid"}]),
    # 19 channels: four groups of four, then 3 one by one
    "dw3x3_c19": ((6, 5, 19), [{"op": "depthwise_conv2d", "kernel": 3}]),
    # whole groups of four channels: the folded 3x3 path (kernel_data.folds), windows read
    # where they lie inside, copied where clipped
    "dw3x3_c8": ((7, 6, 8), [{"op": "depthwise_conv2d", "kernel": 3}]),
    "dw3x3_c12_s2": ((9, 8, 12), [{"op": "depthwise_conv2d", "kernel": 3, "stride": 2}]),
    "dw3x3_c4_valid": ((6, 7, 4), [{"op": "depthwise_conv2d", "kernel": 3,
                                    "padding": "valid"}]),
    # rectangular windows: each axis its own kernel, stride and padding (the first: the stem of
    # MLPerf Tiny's keyword spotting DS-CNN, 10x4 stride 2 on one channel)
    "conv10x4_s2_same": ((15, 9, 1), [{"op": "conv2d", "out": 6, "kernel": [10, 4],
                                       "stride": 2}]),
    "conv3x1_s21_same": ((9, 7, 5), [{"op": "conv2d", "out": 4, "kernel": [3, 1],
                                      "stride": [2, 1]}]),
    "conv1x3_s12_valid": ((7, 9, 4), [{"op": "conv2d", "out": 5, "kernel": [1, 3],
                                       "stride": [1, 2], "padding": "valid"}]),
    "conv5x3_s12_pad1": ((10, 9, 3), [{"op": "conv2d", "out": 3, "kernel": [5, 3],
                                       "stride": [1, 2], "padding": 1}]),
    "dw3x1_s12_same": ((8, 9, 6), [{"op": "depthwise_conv2d", "kernel": [3, 1],
                                    "stride": [1, 2]}]),
    "dw1x5_s21_same": ((9, 8, 5), [{"op": "depthwise_conv2d", "kernel": [1, 5],
                                    "stride": [2, 1]}]),
    "dw3x5_s2_pad1": ((11, 10, 4), [{"op": "depthwise_conv2d", "kernel": [3, 5], "stride": 2,
                                     "padding": 1}]),
    "dense_after_gap": ((5, 5, 7), [{"op": "global_avgpool"}, {"op": "dense", "out": 4}]),
    "dense_flatten": ((3, 2, 5), [{"op": "dense", "out": 6}]),
    "dense_long": ((1, 1, 1101), [{"op": "dense", "out": 19}]),    # in parts, chunks of 16
    "dense_dense": ((1, 1, 9), [{"op": "dense", "out": 8, "act": "relu"},
                                {"op": "dense", "out": 3}]),
    "add": ((6, 6, 4), [{"op": "pointwise", "out": 4}, {"op": "add", "from": "input"}]),
}

POOLS = {
    "maxpool_k2": ((8, 8, 3), [{"op": "max_pool", "kernel": 2}]),
    "maxpool_k3_s2_same": ((9, 9, 3), [{"op": "max_pool", "kernel": 3, "stride": 2,
                                        "padding": "same"}]),
    "maxpool_k3_s2_pad1": ((10, 10, 3), [{"op": "max_pool", "kernel": 3, "stride": 2,
                                          "padding": 1}]),
    "avgpool_k2": ((8, 8, 3), [{"op": "avg_pool", "kernel": 2}]),
    "avgpool_k3_s1_same": ((7, 7, 3), [{"op": "avg_pool", "kernel": 3, "stride": 1,
                                        "padding": "same"}]),
    "avgpool_k3_s2_same": ((8, 8, 3), [{"op": "avg_pool", "kernel": 3, "stride": 2,
                                        "padding": "same"}]),
    "maxpool_k3x2_s21": ((9, 8, 3), [{"op": "max_pool", "kernel": [3, 2], "stride": [2, 1]}]),
    "maxpool_k2x3_s12_same": ((7, 9, 3), [{"op": "max_pool", "kernel": [2, 3], "stride": [1, 2],
                                           "padding": "same"}]),
    "avgpool_k1x3_s12_same": ((7, 9, 3), [{"op": "avg_pool", "kernel": [1, 3],
                                           "stride": [1, 2], "padding": "same"}]),
    "avgpool_k3x2_s2_same": ((8, 7, 3), [{"op": "avg_pool", "kernel": [3, 2], "stride": 2,
                                          "padding": "same"}]),
    # channel groups of four and a remainder (the kernels' word-at-a-time path on DSP cores)
    "maxpool_k3_s2_c19": ((9, 7, 19), [{"op": "max_pool", "kernel": 3, "stride": 2}]),
    "avgpool_k2_same_c13": ((7, 5, 13), [{"op": "avg_pool", "kernel": 2, "stride": 1,
                                          "padding": "same"}]),
    "avgpool_k24x5_c8": ((25, 5, 8), [{"op": "avg_pool", "kernel": [24, 5]}]),   # KWS's
    "gap": ((6, 5, 4), [{"op": "global_avgpool"}]),
    "gap_large": ((16, 16, 3), [{"op": "global_avgpool"}]),
}


PIXEL = {   # softmax and element-wise activations, alone and inside fusable chains
    "softmax_logits": ((1, 1, 9), [{"op": "dense", "out": 10}, {"op": "softmax"}]),
    "softmax_map": ((4, 5, 7), [{"op": "softmax", "beta": 0.37}]),
    "softmax_head": ((6, 6, 4), [{"op": "conv2d", "out": 6, "kernel": 3}, {"op": "global_avgpool"},
                                 {"op": "dense", "out": 5}, {"op": "softmax"}]),
    "hard_swish": ((5, 6, 7), [{"op": "hard_swish"}]),
    "leaky_relu": ((5, 6, 7), [{"op": "leaky_relu", "alpha": 0.1}]),
    "logistic": ((5, 6, 7), [{"op": "logistic"}]),
    "prelu": ((5, 6, 7), [{"op": "prelu"}]),
    "prelu_pixel": ((5, 6, 7), [{"op": "prelu", "slopes": "pixel"}]),
    "prelu_logits": ((1, 1, 9), [{"op": "dense", "out": 6}, {"op": "prelu"}]),
    "conv_hswish_dw": ((9, 8, 3), [{"op": "conv2d", "out": 6, "kernel": 3, "stride": 2},
                                   {"op": "hard_swish"},
                                   {"op": "depthwise_conv2d", "kernel": 3},
                                   {"op": "leaky_relu", "alpha": 0.3},
                                   {"op": "prelu"},
                                   {"op": "pointwise", "out": 4}, {"op": "logistic"},
                                   {"op": "max_pool", "kernel": 2}]),
    "prelu_pixel_chain": ((9, 8, 3), [{"op": "conv2d", "out": 6, "kernel": 3, "stride": 2},
                                      {"op": "prelu", "slopes": "pixel"},
                                      {"op": "depthwise_conv2d", "kernel": 3},
                                      {"op": "pointwise", "out": 4}]),
    "act_residual": ((7, 7, 4), [{"op": "pointwise", "out": 4}, {"op": "hard_swish"},
                                 {"op": "add", "from": "input"}, {"op": "softmax"},
                                 {"op": "global_avgpool"}, {"op": "dense", "out": 3}]),
}


def requantizing_head(model: Model, seed: int, ratio: float) -> Model:
    """`model` with every global average pool requantizing (TFLite MEAN) to a random output
    quantization `ratio` times finer than its input's (ratio < 1: coarser), and every dense layer
    per channel (the file's own scales, as a TFLite converter or onnxruntime writes them)."""
    rng = np.random.default_rng([seed, 7])
    layers = list(model.layers)
    for i, layer in enumerate(layers):
        q_in = layers[i - 1].q_out if i else model.q_input
        if layer.op == ir.GLOBAL_AVGPOOL:
            scale = f32(q_in.scale / ratio * rng.uniform(0.8, 1.25))
            layers[i] = replace(layer, requantize=True,
                                q_out=QParams(scale, int(rng.integers(-128, 128))))
        elif layer.op == ir.DENSE:
            scales = np.float32(rng.uniform(0.002, 0.02, layer.cout)).astype(np.float64)
            layers[i] = replace(layer, weights=replace(layer.weights, scales=scales))
    return replace(model, layers=layers)


HEADS = {   # requantizing GAP (+ per-channel dense) heads: name -> (shape, spec layers)
    "gap_1x1": ((1, 1, 5), [{"op": "global_avgpool"}]),
    "gap_odd": ((7, 5, 6), [{"op": "global_avgpool"}]),
    "gap_large": ((24, 24, 4), [{"op": "global_avgpool"}]),
    "gap_dense": ((6, 6, 8), [{"op": "global_avgpool"}, {"op": "dense", "out": 5}]),
    "conv_gap_dense": ((9, 9, 3), [{"op": "conv2d", "out": 8, "kernel": 3, "act": "relu6"},
                                   {"op": "global_avgpool"}, {"op": "dense", "out": 4}]),
}

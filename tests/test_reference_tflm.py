"""The numpy reference is bit-exact with the TFLM reference kernels (the project's oracle check).

Every op kind, activation and padding form, on adversarial random quantization, several seeds;
a residual model tensor by tensor; the zoo models end to end with calibrated weights.
"""
from dataclasses import replace

import numpy as np
import pytest

from msf_pio.export.tflite import export_tflite, tflite_bytes
from msf_pio.fusion.exact_cost import layer_macs as exact_layer_macs
from msf_pio.model import load_model
from msf_pio.model.weights import materialize
from msf_pio.model.zoo import zoo_names
from msf_pio.numerics import requantization
from msf_pio.reference import layer_macs, model_macs, run_layer, run_model

from msf_pio.model import ir
from msf_pio.model.ir import QParams

from .int8_models import (HEADS, PIXEL, POOLS, WEIGHTED, random_input, requantizing_head,
                          single_op_model)

runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
schema = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated")

SEEDS = (0, 1, 2)
ACTS = ("none", "relu", "relu6")

RESIDUAL = [
    {"op": "conv2d", "out": 8, "kernel": 3, "stride": 2, "act": "relu6"},
    {"op": "inverted_residual", "out": 8, "expand": 2, "kernel": 3, "stride": 1},
    {"op": "max_pool", "kernel": 2},
    {"op": "inverted_residual", "out": 12, "expand": 2, "kernel": 5, "stride": 1},
    {"op": "pointwise", "out": 12, "act": "relu"},
    {"op": "add", "from": 3, "act": "relu6"},
    {"op": "avg_pool", "kernel": 3, "stride": 1, "padding": "same"},
    {"op": "global_avgpool"},
    {"op": "dense", "out": 4, "act": "relu"},
    {"op": "dense", "out": 3},
]


def tflm_run(model_bytes: bytes, x: np.ndarray) -> np.ndarray:
    interpreter = runtime.Interpreter.from_bytes(model_bytes, arena_size=1 << 22)
    interpreter.set_input(x[None], 0)
    interpreter.invoke()
    return interpreter.get_output(0)


def assert_matches_tflm(model, x):
    ours = run_model(model, x)
    theirs = tflm_run(tflite_bytes(model), x)
    assert ours.dtype == theirs.dtype == np.int8
    assert ours.size == theirs.size
    diff = np.flatnonzero(ours.reshape(-1) != theirs.reshape(-1))
    assert diff.size == 0, f"{diff.size}/{ours.size} outputs differ, first at {diff[:5]}"
    return ours


def with_act(layers, act):
    return layers[:-1] + [{**layers[-1], "act": act}]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("case", sorted(WEIGHTED))
def test_weighted_op_matches_tflm(case, act, seed):
    shape, layers = WEIGHTED[case]
    model = single_op_model(shape, with_act(layers, act), seed)
    assert_matches_tflm(model, random_input(model, seed))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", sorted(POOLS))
def test_pool_matches_tflm(case, seed):
    shape, layers = POOLS[case]
    model = single_op_model(shape, layers, seed)
    assert_matches_tflm(model, random_input(model, seed))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("op", ["pointwise", "depthwise_conv2d", "dense"])
def test_left_shift_requantization_matches_tflm(op, seed):
    """Output scales below input x weight scale: multipliers > 1, positive shifts."""
    layer = {"op": op, "act": "relu"} | ({"kernel": 3} if op == "depthwise_conv2d" else {"out": 3})
    model = single_op_model((5, 5, 2), [layer], seed, gain=2000.0)
    assert np.all(requantization(model, 0).shift > 0)
    assert_matches_tflm(model, random_input(model, seed))


BRANCHED = [   # a ResNet stage with a strided 1x1 shortcut conv, two branches joined by concat
    {"op": "conv2d", "out": 6, "kernel": 3, "stride": 1, "act": "relu", "name": "stem"},
    {"op": "conv2d", "out": 8, "kernel": 3, "stride": 2, "act": "relu"},
    {"op": "conv2d", "out": 8, "kernel": 3, "name": "main"},
    {"op": "pointwise", "out": 8, "stride": 2, "input": "stem"},
    {"op": "add", "from": "main", "act": "relu", "name": "stage"},
    {"op": "depthwise_conv2d", "kernel": 3, "act": "relu6", "name": "left"},
    {"op": "pointwise", "out": 5, "input": "stage"},
    {"op": "concat", "from": "left"},
    {"op": "max_pool", "kernel": 2},
]


@pytest.mark.parametrize("seed", SEEDS)
def test_concat_matches_tflm(seed):
    """CONCATENATION along channels of two computed tensors, and of the network input."""
    model = single_op_model((7, 9, 3), [
        {"op": "conv2d", "out": 4, "kernel": 3, "name": "a"},
        {"op": "depthwise_conv2d", "kernel": 3, "input": "input"},
        {"op": "concat", "from": "a"},
        {"op": "concat", "from": "input"}], seed)
    assert model.output_shape == (7, 9, 10)
    assert_matches_tflm(model, random_input(model, seed))


GRAPHS = {"residual": ((20, 20, 3), RESIDUAL), "branched": ((12, 12, 3), BRANCHED)}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_every_tensor_matches_tflm(graph, seed):
    """Tensor by tensor against TFLite Micro's (every tensor kept): a residual chain, and a
    branched model (shortcut conv, concat)."""
    shape, layers = GRAPHS[graph]
    model = single_op_model(shape, layers, seed)
    x = random_input(model, seed)
    data = tflite_bytes(model)
    interpreter = runtime.Interpreter.from_bytes(
        data, arena_size=1 << 22, intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors)
    interpreter.set_input(x[None], 0)
    interpreter.invoke()
    graph_tensors = runtime.convert_bytearray_to_object(data).subgraphs[0].tensors
    names = [t.name.decode() for t in graph_tensors]
    tensors = {0: x}
    for i, layer in enumerate(model.layers):
        tensors[i + 1] = run_layer(model, i, tensors)
        theirs = interpreter.GetTensor(names.index(layer.name), 0)["tensor_data"]
        np.testing.assert_array_equal(tensors[i + 1].reshape(-1), theirs.reshape(-1),
                                      err_msg=f"tensor {i + 1} ({layer.name})")
    np.testing.assert_array_equal(run_model(model, x), tensors[model.n_layers])


@pytest.mark.parametrize("name", sorted(zoo_names(scale=False)))
def test_zoo_model_matches_tflm(name, tmp_path):
    model = materialize(load_model(name))
    path = tmp_path / f"{name}.tflite"
    export_tflite(model, path)
    for seed in (0, 1):
        x = random_input(model, seed)
        ours = run_model(model, x)
        np.testing.assert_array_equal(ours.reshape(-1), tflm_run(path.read_bytes(), x).reshape(-1))


def test_exported_constant_buffers_are_aligned():
    model = single_op_model((6, 6, 3), [{"op": "conv2d", "out": 5, "kernel": 3}], 0)
    data = tflite_bytes(model)
    bias = model.layers[0].weights.bias.astype("<i4").tobytes()
    weights = model.layers[0].weights.w.tobytes()
    assert data.index(bias) % 16 == 0 and data.index(weights) % 16 == 0


def test_avg_pool_padding_tflite_cannot_express_is_refused():
    model = single_op_model((8, 8, 3), [{"op": "avg_pool", "kernel": 3, "stride": 2,
                                         "padding": 1}], 0)
    with pytest.raises(ValueError, match="avg_pool"):
        tflite_bytes(model)


# -- MAC counter --------------------------------------------------------------------------
def test_macs_by_hand():
    """3x3 same conv on 3x3: rows see 2, 3, 2 taps (7), columns too: 49 taps x cin x cout."""
    model = single_op_model((3, 3, 2), [{"op": "conv2d", "out": 4, "kernel": 3},
                                        {"op": "depthwise_conv2d", "kernel": 3},
                                        {"op": "add", "from": 0},
                                        {"op": "max_pool", "kernel": 2, "stride": 1},
                                        {"op": "global_avgpool"}, {"op": "dense", "out": 5}], 0)
    assert [layer_macs(l) for l in model.layers] == [49 * 2 * 4, 49 * 4, 0, 4 * 4 * 4, 4 * 4, 4 * 5]
    assert model_macs(model) == sum(layer_macs(l) for l in model.layers)


@pytest.mark.parametrize("name", sorted(zoo_names()))
def test_macs_agree_with_exact_cost_model(name):
    model = load_model(name)
    assert [layer_macs(l) for l in model.layers] == [exact_layer_macs(l) for l in model.layers]


@pytest.mark.parametrize("seed", SEEDS)
def test_per_channel_dense_matches_tflm(seed):
    """Imported models may carry per-channel dense scales; TFLM's FULLY_CONNECTED accepts them."""
    model = single_op_model((2, 2, 5), [{"op": "dense", "out": 6, "act": "relu6"}], seed)
    layer = model.layers[0]
    scales = np.float32(np.random.default_rng(seed).uniform(0.002, 0.02, 6)).astype(np.float64)
    layer = replace(layer, weights=replace(layer.weights, scales=scales))
    model = replace(model, layers=[layer])
    assert_matches_tflm(model, random_input(model, seed))


# -- global average pooling that requantizes (TFLite MEAN), per-channel dense ------------------
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ratio", [0.3, 1.0, 4.0])
@pytest.mark.parametrize("case", sorted(HEADS))
def test_requantizing_gap_matches_tflm_mean(case, ratio, seed):
    """The numpy reference of a requantizing GAP is TFLM's MEAN (exported as MEAN), for output
    scales coarser, equal-ish and finer than the input's, and pixel counts 1 to 576."""
    shape, layers = HEADS[case]
    model = requantizing_head(single_op_model(shape, layers, seed), seed, ratio)
    data = tflite_bytes(model)
    codes = runtime.convert_bytearray_to_object(data).operatorCodes
    assert {c.builtinCode for c in codes} >= {schema.BuiltinOperator.MEAN}
    for s in range(4):
        assert_matches_tflm(model, random_input(model, 10 * seed + s))


def test_mean_with_equal_quantization_is_still_mean():
    """A requantizing GAP whose output quantization equals its input's is TFLM's MEAN (double
    rounding), not AVERAGE_POOL_2D's rounded average: the flag, not the scales, decides."""
    model = single_op_model((2, 2, 64), [{"op": "global_avgpool"}], 0)
    model = replace(model, layers=[replace(model.layers[0], requantize=True)])
    x = np.random.default_rng(0).integers(-128, 128, model.input_shape).astype(np.int8)
    mean = assert_matches_tflm(model, x)
    average = run_model(replace(model, layers=[replace(model.layers[0], requantize=False)]), x)
    assert not np.array_equal(mean, average)


# -- softmax and element-wise activations ----------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", sorted(PIXEL))
def test_pixel_op_matches_tflm(case, seed):
    shape, layers = PIXEL[case]
    model = single_op_model(shape, layers, seed)
    assert_matches_tflm(model, random_input(model, seed))


ALL_INT8 = np.arange(-128, 128, dtype=np.int8).reshape(1, 1, 256)


def _activation(op, s_in, zp_in, s_out, zp_out, alpha=0.2):
    model = single_op_model((1, 1, 256), [{"op": op}], 0)
    q_out = ir.FIXED_OUTPUT_Q.get(op, QParams(float(np.float32(s_out)), zp_out))
    layer = replace(model.layers[0], q_out=q_out, alpha=float(np.float32(alpha)))
    return replace(model, q_input=QParams(float(np.float32(s_in)), zp_in), layers=[layer])


@pytest.mark.parametrize("op", [op for op in ir.PIXEL_OPS if op != ir.SLICE])  # (no arithmetic)
def test_pixel_op_scale_sweep_matches_tflm(op):
    """Every int8 input under 60 quantizations: input scales over three decades, output scales
    0.1x to 30x the input's, often a simple ratio away (ties in the rescale), leaky slopes in
    [0, 1.5] (softmax: the 256 values are one pixel's channels, shifted and rescaled)."""
    rng = np.random.default_rng(ir.PIXEL_OPS.index(op))
    values = set()
    for _ in range(60):
        s_in = 10 ** rng.uniform(-3, 0)
        ratio = rng.choice([0.25, 0.5, 2.0, 0.75, 10 ** rng.uniform(-1, 1.5)])
        model = _activation(op, s_in, int(rng.integers(-128, 128)), s_in / ratio,
                            int(rng.integers(-128, 128)), rng.choice([0.15, rng.uniform(0, 1.5)]))
        x = ALL_INT8 if op != ir.SOFTMAX else np.clip(
            ALL_INT8.astype(int) // int(rng.integers(1, 9)) + int(rng.integers(-60, 60)),
            -128, 127).astype(np.int8)
        values |= set(assert_matches_tflm(model, x).reshape(-1).tolist())
    assert len(values) > 30          # not a saturated corner


@pytest.mark.parametrize("op", [ir.LEAKY_RELU, ir.HARD_SWISH])
def test_activation_multipliers_are_derived_in_double(op):
    """TFLM widens the float32 scales to double before dividing: on this file alpha * s_in / s_out
    is 0.25 in float32 but 0.2500000035 in double, which rounds -31.25 to -32 (a tie)."""
    model = _activation(op, 0.38631388545036316, -3, 0.23178833723068237, -70, 0.15)
    assert_matches_tflm(model, ALL_INT8)


def test_pixel_ops_count_no_macs():
    model = single_op_model((1, 1, 9), PIXEL["softmax_logits"][1], 0)
    assert [layer_macs(l) for l in model.layers] == [90, 0]
    assert [exact_layer_macs(l) for l in model.layers] == [90, 0]

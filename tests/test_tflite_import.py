""".tflite import: zoo models exported and read back (same quantization; the generated C under
the vanilla and least-RAM plans gives TFLite Micro's bytes on the file), a file built with the
flatbuffers schema directly (not by our exporter), and one-line errors for what msf-pio cannot
run."""
import json
import subprocess
import sys

import numpy as np
import pytest

from msf_pio.codegen.generate import generate
from msf_pio.codegen.host import HostBuild
from msf_pio.errors import MsfError
from msf_pio.export.tflite import export_tflite
from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.model import ir, load_model
from msf_pio.reference import run_model
from msf_pio.verify import quantized_model, seeded_input

from .int8_models import random_input, requantizing_head
from .test_reference_tflm import runtime, tflm_run
from .tflite_builder import (OP, OPT, TT, TfliteBuilder, activation_net, conv_options,
                             foreign_net, pool_options, rect_net)

fb = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated")
A = fb.ActivationFunctionType
SAME, VALID = fb.Padding.SAME, fb.Padding.VALID
LAYER_FIELDS = ("op", "in_shape", "out_shape", "kernel", "stride", "pad", "act", "skip", "input",
                "q_out", "requantize", "slope_per_pixel")


def assert_same_quantized_model(a, b):
    assert (a.input_shape, a.q_input, a.n_layers) == (b.input_shape, b.q_input, b.n_layers)
    for i, (x, y) in enumerate(zip(a.layers, b.layers)):
        for f in LAYER_FIELDS:
            assert getattr(x, f) == getattr(y, f), f"layer {i}.{f}"
        assert (x.weights is None) == (y.weights is None), f"layer {i}"
        if x.weights is not None:
            for f in ("w", "bias", "scales"):
                np.testing.assert_array_equal(getattr(x.weights, f), getattr(y.weights, f),
                                              err_msg=f"layer {i}.weights.{f}")


def c_outputs(model, inputs):
    """The generated C's outputs under the vanilla and the least-RAM plans."""
    graph = build_graph(model, "exact")
    outputs = {}
    for plan in (solvers.vanilla(graph), solvers.p1_min_ram(graph)):
        build = HostBuild(generate(model, plan))
        try:
            outputs[plan.label] = [build.run(x).output for x in inputs]
        finally:
            build.close()
    return outputs


def assert_tflm_bytes(path, model, inputs, in_c=True):
    """The reference (and with `in_c` the generated C under the vanilla and the least-RAM
    plans) give TFLite Micro's bytes for the file at `path` on every input; returns TFLM's."""
    expected = [tflm_run(path.read_bytes(), x).reshape(-1) for x in inputs]
    for x, ref in zip(inputs, expected):
        assert np.array_equal(run_model(model, x).reshape(-1), ref)
    if in_c:
        for label, outs in c_outputs(model, inputs).items():
            for out, ref in zip(outs, expected):
                assert np.array_equal(out, ref), label
    return expected


# -- zoo models, exported and imported back -------------------------------------------------------
@pytest.mark.parametrize("name,requantize", [("tiny", False), ("tiny", True),
                                             ("mcunet-vww-5fps", False),
                                             ("mbv2-w0.35-r144", False)])
def test_zoo_model_round_trip_gives_tflm_bytes(name, requantize, tmp_path):
    original = quantized_model(name)
    if requantize:                 # a MEAN head (and a per-channel dense), as converters write
        original = requantizing_head(original, 3, 3.0)
    assert any(l.op == ir.ADD for l in original.layers)
    path = tmp_path / f"{name}.tflite"
    export_tflite(original, path)
    model = load_model(str(path))
    assert model.quantized and model.source == str(path)
    assert_same_quantized_model(original, model)
    inputs = [seeded_input(model, s) for s in (0, 1)]
    data = path.read_bytes()
    expected = [tflm_run(data, x).reshape(-1) for x in inputs]
    for label, outs in c_outputs(model, inputs).items():
        for seed, (out, ref) in enumerate(zip(outs, expected)):
            assert np.array_equal(out, ref), f"plan {label}, input {seed}"


def test_reshape_of_a_map_before_fully_connected_keeps_hwc_order(tmp_path):
    """RESHAPE (1, H, W, C) -> (1, H*W*C) flattens NHWC in the IR's own H, W, C order: the
    FULLY_CONNECTED weights are taken as written, and the bytes are TFLM's."""
    from .int8_models import WEIGHTED, single_op_model
    shape, layers = WEIGHTED["dense_flatten"]
    original = single_op_model(shape, [{"op": "pointwise", "out": 4}] + layers, 5)
    path = tmp_path / "flatten.tflite"
    export_tflite(original, path)
    model = load_model(str(path))
    assert_same_quantized_model(original, model)
    assert model.layers[-1].in_shape == (3, 2, 4)
    assert_tflm_bytes(path, model, [random_input(model, seed) for seed in range(3)], in_c=False)


@pytest.mark.parametrize("case", ["prelu", "prelu_pixel", "prelu_logits"])
def test_prelu_round_trip_keeps_the_slopes_and_gives_tflm_bytes(case, tmp_path):
    from .int8_models import PIXEL, single_op_model
    shape, layers = PIXEL[case]
    original = single_op_model(shape, layers, 7)     # a seed drawing nonzero alpha zero points
    path = tmp_path / f"{case}.tflite"
    export_tflite(original, path)
    model = load_model(str(path))
    assert_same_quantized_model(original, model)
    assert model.layers[-1].weights.zero_point == original.layers[-1].weights.zero_point != 0
    assert_tflm_bytes(path, model, [random_input(model, seed) for seed in range(3)], in_c=False)


# -- a file our exporter did not write ------------------------------------------------------------
def _tflm_float(data, model, x):
    """TFLM on a float-edged file, fed the dequantized int8 input, its output requantized."""
    interp = runtime.Interpreter.from_bytes(data, arena_size=1 << 22)
    qi, qo = model.q_input, model.layers[-1].q_out
    interp.set_input(((x.astype(np.float32) - qi.zero_point) * np.float32(qi.scale))[None], 0)
    interp.invoke()
    y = interp.get_output(0).reshape(-1)
    return np.clip(np.round(y / np.float32(qo.scale)) + qo.zero_point, -128, 127).astype(np.int8)


@pytest.mark.parametrize("seed", [0, 1])
def test_foreign_file_matches_tflm(seed, tmp_path):
    path = tmp_path / "foreign.tflite"
    path.write_bytes(foreign_net(seed))
    model = load_model(str(path))
    assert [l.op for l in model.layers] == ["conv2d", "depthwise_conv2d", "conv2d", "add",
                                            "max_pool", "global_avgpool", "dense"]
    stem, add, gap, dense = (model.layers[i] for i in (0, 3, 5, 6))
    assert stem.pad == (1, 1, 1, 1) and stem.act == "relu6"       # PAD folded into VALID conv
    assert add.skip == 1 and gap.requantize and gap.q_out != add.q_out
    assert dense.weights.scales.shape == (5,)                        # per channel, as written
    inputs = [random_input(model, 10 * seed + s) for s in range(3)]
    expected = [_tflm_float(path.read_bytes(), model, x) for x in inputs]
    for x, ref in zip(inputs, expected):
        assert np.array_equal(run_model(model, x).reshape(-1), ref)
    for label, outs in c_outputs(model, inputs).items():
        for out, ref in zip(outs, expected):
            assert np.array_equal(out, ref), label


@pytest.mark.parametrize("seed", [0, 1])
def test_rectangular_windows_match_tflm(seed, tmp_path):
    """Kernels kh x kw and strides (sh, sw) of every window op, from a file written by another
    writer: each axis reads its own kernel, stride and padding, and the reference and the
    generated C (vanilla and least RAM) give TFLM's bytes."""
    path = tmp_path / "rect.tflite"
    path.write_bytes(rect_net(seed))
    model = load_model(str(path))
    assert [(l.op, l.kernel, l.stride, l.pad, l.out_shape) for l in model.layers] == [
        ("conv2d", (3, 1), (2, 1), (1, 0, 1, 0), (7, 9, 8)),
        ("depthwise_conv2d", (1, 3), (1, 2), (0, 1, 0, 1), (7, 5, 8)),
        ("conv2d", (2, 3), (1, 2), (0, 0, 0, 0), (6, 2, 6)),
        ("max_pool", (3, 2), (2, 1), (0, 0, 0, 0), (2, 1, 6)),
        ("avg_pool", (1, 2), (1, 1), (0, 0, 0, 1), (2, 1, 6))]
    expected = assert_tflm_bytes(path, model, [random_input(model, 10 * seed + s)
                                               for s in range(3)])
    assert len({tuple(e) for e in expected}) > 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_activations_softmax_and_pad_before_same_match_tflm(seed, tmp_path):
    """HARD_SWISH, LEAKY_RELU, LOGISTIC and a final SOFTMAX on (1, n), a PAD folded into a
    SAME conv: the reference and the generated C (vanilla and least RAM) give TFLM's bytes."""
    path = tmp_path / "activations.tflite"
    path.write_bytes(activation_net(seed))
    model = load_model(str(path))
    assert [l.op for l in model.layers] == ["conv2d", "hard_swish", "depthwise_conv2d",
                                            "leaky_relu", "conv2d", "logistic",
                                            "global_avgpool", "dense", "softmax"]
    assert model.layers[0].pad == (2, 2, 2, 2) and model.layers[0].out_shape == (6, 6, 6)
    assert model.layers[3].alpha == float(np.float32(0.15))
    assert model.layers[8].beta == float(np.float32(0.8))
    expected = assert_tflm_bytes(path, model, [random_input(model, 10 * seed + s)
                                               for s in range(3)])
    assert len({tuple(e) for e in expected}) > 1


# -- errors ---------------------------------------------------------------------------------------
def _stem(b: TfliteBuilder, kernel=(3, 3), dilation=1, filter_type=TT.INT8, act=A.RELU):
    """int8 input (1, 8, 8, 3) -> CONV_2D: returns (input, conv output)."""
    x = b.activation("x", (1, 8, 8, 3), 0.02, 0)
    w = b.rng.integers(-127, 128, (4, *kernel, 3)).astype(np.int8)
    w = b.tensor("w", w.shape, filter_type, np.float32([0.01] * 4), [0] * 4, 0,
                 w if filter_type == TT.INT8 else w.astype(np.float32))
    c = b.activation("c", (1, 8, 8, 4), 0.05, -5)
    b.op(OP.CONV_2D, [x, w, b.bias("c", 4, 100)], [c], OPT.Conv2DOptions,
         conv_options(SAME, 1, act, dilation=dilation))
    return x, c


def _unary(code, options_type=OPT.NONE, options=None):
    def build(b, x, c):
        y = b.activation("y", (1, 8, 8, 4), 0.05, -5)
        b.op(code, [c], [y], options_type, options)
        return y
    return build


def _leaky(alpha):
    options = fb.LeakyReluOptionsT()
    options.alpha = alpha
    return options


def _concat(axis):
    def tail(b, x, c):
        opts = fb.ConcatenationOptionsT()
        opts.axis = axis
        shape = (1, 8, 8, 8) if axis == 3 else (1, 16, 8, 4)
        y = b.activation("y", shape, 0.05, -5)
        b.op(OP.CONCATENATION, [c, c], [y], OPT.ConcatenationOptions, opts)
        return y
    return tail


def _dangling(b, x, c):        # a conv of the input nobody reads: a second graph output
    w = b.tensor("w2", (4, 1, 1, 3), TT.INT8, np.float32([0.01] * 4), [0] * 4, 0,
                 np.ones((4, 1, 1, 3), np.int8))
    d = b.activation("d", (1, 8, 8, 4), 0.05, -5)
    b.op(OP.CONV_2D, [x, w, -1], [d], OPT.Conv2DOptions, conv_options(SAME, 1, A.NONE))
    y = b.activation("y", (1, 8, 8, 4), 0.05, -5)
    b.op(OP.MAX_POOL_2D, [c], [y], OPT.Pool2DOptions, pool_options(SAME, 1, 3, 3))
    return y


def _branch(b, x, c):          # a second conv on the input, added to the first: a branch
    w = b.tensor("w2", (4, 1, 1, 3), TT.INT8, np.float32([0.01] * 4), [0] * 4, 0,
                 np.ones((4, 1, 1, 3), np.int8))
    d = b.activation("d", (1, 8, 8, 4), 0.05, -5)
    b.op(OP.CONV_2D, [x, w, -1], [d], OPT.Conv2DOptions, conv_options(SAME, 1, A.NONE))
    y = b.activation("y", (1, 8, 8, 4), 0.1, 0)
    b.op(OP.ADD, [c, d], [y], OPT.AddOptions, fb.AddOptionsT())
    return y


def _pad_maxpool(b, x, c):
    """PAD with the zero point (the stem's ReLU output's) -> MAX_POOL_2D VALID 3x3 stride 2."""
    p = b.tensor("p", (4, 2), TT.INT32, data=np.array([[0, 0], [1, 0], [0, 1], [0, 0]], "<i4"))
    cp = b.activation("cp", (1, 9, 9, 4), 0.05, -5)
    b.op(OP.PAD, [c, p], [cp], OPT.PadOptions, fb.PadOptionsT())
    y = b.activation("y", (1, 4, 4, 4), 0.05, -5)
    b.op(OP.MAX_POOL_2D, [cp], [y], OPT.Pool2DOptions, pool_options(VALID, 2, 3, 3))
    return y


def _prelu_per_row(b, x, c):
    alpha = b.tensor("alpha", (8, 1, 4), TT.INT8, np.float32(0.01), 3,
                     data=np.ones((8, 1, 4), np.int8))
    y = b.activation("y", (1, 8, 8, 4), 0.05, -5)
    b.op(OP.PRELU, [c, alpha], [y])
    return y


def _requantize(b, x, c):
    y = b.activation("y", (1, 8, 8, 4), 0.07, 2)
    b.op(OP.QUANTIZE, [c], [y])
    return y


ERRORS = {   # name -> (stem kwargs, tail, expected fragment of the message)
    "softmax": ({}, _unary(OP.SOFTMAX, OPT.SoftmaxOptions, fb.SoftmaxOptionsT()),
                "operator 1 (SOFTMAX): tensor 4 'y': int8 output must have scale 1/256"),
    "logistic": ({}, _unary(OP.LOGISTIC), "operator 1 (LOGISTIC): tensor 4 'y': int8 output "
                                          "must have scale 1/256 and zero point -128"),
    "leaky_negative": ({}, _unary(OP.LEAKY_RELU, OPT.LeakyReluOptions, _leaky(-0.5)),
                       "operator 1 (LEAKY_RELU): alpha -0.5: only slopes >= 0"),
    "tanh": ({}, _unary(OP.TANH), "operator 1 (TANH): unsupported op (supported activations"),
    "concatenation": ({}, _concat(0), "operator 1 (CONCATENATION): concatenates along axis 0"),
    "pad_maxpool_no_relu": ({"act": A.NONE}, _pad_maxpool,
                            "operator 2 (MAX_POOL_2D): a max pool after PAD needs PADV2 with "
                            "-128 (or a ReLU before the PAD)"),
    "prelu_per_row": ({}, _prelu_per_row,
                      "operator 1 (PRELU): tensor 4 'alpha': alpha of shape [8, 1, 4]: only "
                      "one slope per channel"),
    "dilation": ({"dilation": 2}, None, "operator 0 (CONV_2D): dilation 2x2 is not supported"),
    "float_filter": ({"filter_type": TT.FLOAT32}, None,
                     "operator 0 (CONV_2D): tensor 1 'w': has type FLOAT32, expected INT8"),
    "tanh_act": ({"act": A.TANH}, None, "fused activation TANH is not supported"),
    "concat_axis": ({}, _concat(1), "operator 1 (CONCATENATION): concatenates along axis 1"),
    "dangling": ({}, _dangling, "operator 1 (CONV_2D): the output of layer 1 is read by no "
                                "layer"),
    "int8_requantize": ({}, _requantize, "operator 1 (QUANTIZE): QUANTIZE is supported only"),
}


def _small_file(tmp_path, name, stem=None, tail=None, edit=None):
    b = TfliteBuilder(1)
    x, c = _stem(b, **(stem or {}))
    y = tail(b, x, c) if tail else c
    if edit:
        edit(b)
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(b.finish([x], [y], shuffle=False))
    return path


def _one_line_error(path, fragment):
    with pytest.raises(MsfError) as exc:
        load_model(str(path))
    message = str(exc.value)
    assert "\n" not in message and message.startswith(str(path)), message
    assert fragment in message, message
    return message


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_unsupported_graphs_are_one_line_errors(case, tmp_path):
    stem, tail, fragment = ERRORS[case]
    _one_line_error(_small_file(tmp_path, case, stem, tail), fragment)


def test_branch_and_concat_give_tflm_bytes(tmp_path):
    """An op reading the graph input after another op (a branch), the ADD joining them, and a
    CONCATENATION along the channels: TFLM's bytes in the reference and in C."""
    for name, tail, ops in (("branch", _branch, [("conv2d", [0]), ("conv2d", [0]),
                                                  ("add", [2, 1])]),
                            ("concat", _concat(3), [("conv2d", [0]), ("concat", [1, 1])])):
        path = _small_file(tmp_path, name, None, tail)
        model = load_model(str(path))
        assert [(l.op, model.inputs(i)) for i, l in enumerate(model.layers)] == ops
        assert_tflm_bytes(path, model, [seeded_input(model, s) for s in (0, 1)])


def test_pad_with_the_zero_point_before_a_max_pool_after_relu_folds(tmp_path):
    """After a ReLU nothing lies below the zero point, so padding with it never wins the max:
    the PAD folds into the pool's padding and the bytes are TFLM's."""
    path = _small_file(tmp_path, "pad_maxpool", None, _pad_maxpool)
    model = load_model(str(path))
    assert [(l.op, l.pad, l.out_shape) for l in model.layers] == [
        ("conv2d", (1, 1, 1, 1), (8, 8, 4)), ("max_pool", (1, 0, 0, 1), (4, 4, 4))]
    assert_tflm_bytes(path, model, [random_input(model, seed) for seed in range(3)], in_c=False)


def test_the_plain_stem_imports(tmp_path):
    model = load_model(str(_small_file(tmp_path, "ok")))
    assert [l.op for l in model.layers] == ["conv2d"] and model.layers[0].act == "relu"


def _bad_buffer(b):
    b.tensors[1].buffer = 99


def _huge_shape(b):
    b.tensors[2].shape = [1, 2 ** 31 - 1, 8, 4]


def _bias_int8(b):
    b.tensors[3].type = TT.INT8


def _zero_scale(b):
    b.tensors[2].quantization.scale = [0.0]


@pytest.mark.parametrize("edit,fragment", [
    (_bad_buffer, "tensor 1 'w': buffer index 99 out of range"),
    (_huge_shape, "tensor 2 'c': shape [1, 2147483647, 8, 4] has a dimension outside"),
    (_bias_int8, "tensor 3 'c/b': has type INT8, expected INT32"),
    (_zero_scale, "tensor 2 'c': bad int8 quantization: scale 0.0"),
], ids=["buffer_index", "shape_overflow", "bias_type", "zero_scale"])
def test_malformed_tensors_are_one_line_errors(edit, fragment, tmp_path):
    _one_line_error(_small_file(tmp_path, edit.__name__, edit=edit), fragment)


def test_truncated_and_foreign_files_are_one_line_errors(tmp_path):
    data = foreign_net(0)
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(data[:len(data) // 2])
    _one_line_error(truncated, "corrupt .tflite")
    text = tmp_path / "text.tflite"
    text.write_bytes(b"this is not a model\n")
    _one_line_error(text, "not a TFLite flatbuffer")


def test_cli_accepts_tflite_and_prints_errors_in_one_line(tmp_path):
    path = tmp_path / "foreign.tflite"
    path.write_bytes(foreign_net(0))
    run = [sys.executable, "-m", "msf_pio.cli"]
    proc = subprocess.run([*run, "solve", str(path), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["feasible"]
    bad = _small_file(tmp_path, "softmax", None, ERRORS["softmax"][1])
    proc = subprocess.run([*run, "verify", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "operator 1 (SOFTMAX)" in proc.stderr

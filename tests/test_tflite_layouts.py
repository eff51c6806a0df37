"""Input layouts real .tflite files use besides NHWC maps, built with the flatbuffers schema
directly: a PyTorch export's NCHW input behind a TRANSPOSE to NHWC, a [1, N] input of a dense
model, TFLM's person_detect opening with a depthwise filter of multiplier 8 over one channel,
and a PAD of the channels (with the zero point) before a conv. The generated C (vanilla and least RAM) gives TFLite Micro's bytes on the same file."""
import numpy as np
import pytest

from msf_pio.model import ir, load_model
from msf_pio.reference import run_model

from .int8_models import random_input
from .test_reference_tflm import runtime
from .test_tflite_import import _one_line_error, c_outputs
from .tflite_builder import OP, OPT, TT, TfliteBuilder, conv_options, pool_options

fb = pytest.importorskip("tflite_micro.tensorflow.lite.micro.python.schema_py_generated")
A = fb.ActivationFunctionType
SAME, VALID = fb.Padding.SAME, fb.Padding.VALID


def _head(b: TfliteBuilder, c, hw: int, ch: int, s_c) -> int:
    """MEAN over H, W -> RESHAPE [1, ch] -> FULLY_CONNECTED 5: the usual classifier head."""
    axes = b.tensor("axes", (2,), TT.INT32, data=np.array([1, 2], "<i4"))
    g = b.activation("mean", (1, ch), np.float32(s_c / 2), 3)
    reducer = fb.ReducerOptionsT()
    reducer.keepDims = False
    b.op(OP.MEAN, [c, axes], [g], OPT.ReducerOptions, reducer)
    w, sw = b.weights("fc", (5, ch), 0)
    y = b.activation("logits", (1, 5), b.out_scale(s_c / 2, sw, ch), -4)
    b.op(OP.FULLY_CONNECTED, [g, w, b.bias("fc", 5, 2000)], [y], OPT.FullyConnectedOptions,
         fb.FullyConnectedOptionsT())
    return y


def _conv_head(b: TfliteBuilder, x, s_x, filter_shape, out_hw, stride, padding) -> int:
    """CONV_2D (8 filters, RELU) on x -> the head."""
    w, sw = b.weights("conv", filter_shape, 0)
    fan_in = int(np.prod(filter_shape[1:]))
    s_c = b.out_scale(s_x, sw, fan_in)
    c = b.activation("conv", (1, *out_hw, 8), s_c, -128)
    b.op(OP.CONV_2D, [x, w, b.bias("conv", 8, 3000)], [c], OPT.Conv2DOptions,
         conv_options(padding, stride, A.RELU))
    return _head(b, c, out_hw[0] * out_hw[1], 8, s_c)


def nchw_net(seed: int, perm=(0, 2, 3, 1)) -> bytes:
    """int8 NCHW input (1, 3, 10, 12) -> TRANSPOSE perm -> CONV 3x3/2 SAME -> head."""
    b = TfliteBuilder(seed)
    s_x = np.float32(0.02)
    x = b.activation("x_nchw", (1, 3, 10, 12), s_x, -1)
    perm_t = b.tensor("perm", (4,), TT.INT32, data=np.array(perm, "<i4"))
    shape = tuple(np.array((1, 3, 10, 12))[list(perm)])
    xt = b.activation("x_nhwc", shape, s_x, -1)
    b.op(OP.TRANSPOSE, [x, perm_t], [xt], OPT.TransposeOptions, fb.TransposeOptionsT())
    return b.finish([x], [_conv_head(b, xt, s_x, (8, 3, 3, 3), (5, 6), 2, SAME)])


def one_channel_multiplier_net(seed: int) -> bytes:
    """int8 (1, 9, 9, 1) -> DEPTHWISE 3x3/2 SAME, multiplier 8, RELU6 -> head."""
    b = TfliteBuilder(seed)
    s_x = np.float32(0.03)
    x = b.activation("x", (1, 9, 9, 1), s_x, 5)
    w, sw = b.weights("dw", (1, 3, 3, 8), 3)
    s_c = b.out_scale(s_x, sw, 9)
    c = b.activation("dw", (1, 5, 5, 8), s_c, -128)
    options = conv_options(SAME, 2, A.RELU6, depthwise=True)
    options.depthMultiplier = 8
    b.op(OP.DEPTHWISE_CONV_2D, [x, w, b.bias("dw", 8, 3000)], [c],
         OPT.DepthwiseConv2DOptions, options)
    return b.finish([x], [_head(b, c, 25, 8, s_c)])


def channel_pad_net(seed: int, reader=OP.CONV_2D) -> bytes:
    """int8 (1, 7, 6, 3) -> PAD H (1, 1), W (0, 1), C (2, 1) with the zero point -> CONV 3x3
    VALID over the 6 channels -> head (a channel padding as converters write for a widening
    shortcut, here feeding a conv)."""
    b = TfliteBuilder(seed)
    s_x = np.float32(0.04)
    x = b.activation("x", (1, 7, 6, 3), s_x, -7)
    p = b.tensor("p", (4, 2), TT.INT32, data=np.array([[0, 0], [1, 1], [0, 1], [2, 1]], "<i4"))
    xp = b.activation("xp", (1, 9, 7, 6), s_x, -7)
    b.op(OP.PAD, [x, p], [xp], OPT.PadOptions, fb.PadOptionsT())
    if reader == OP.MAX_POOL_2D:
        y = b.activation("pool", (1, 4, 3, 6), s_x, -7)
        b.op(OP.MAX_POOL_2D, [xp], [y], OPT.Pool2DOptions, pool_options(VALID, 2, 2, 2))
        return b.finish([x], [y])
    return b.finish([x], [_conv_head(b, xp, s_x, (8, 3, 3, 6), (7, 5), 1, VALID)])


def dense_net(seed: int) -> bytes:
    """int8 [1, 16] input -> FULLY_CONNECTED 12 RELU -> FULLY_CONNECTED 3 (hello_world's shape
    of model: no map at all)."""
    b = TfliteBuilder(seed)
    s_x = np.float32(0.05)
    x = b.activation("x", (1, 16), s_x, 2)
    w, sw = b.weights("fc1", (12, 16), 0)
    s_h = b.out_scale(s_x, sw, 16)
    h = b.activation("fc1", (1, 12), s_h, -128)
    fc = fb.FullyConnectedOptionsT()
    fc.fusedActivationFunction = A.RELU
    b.op(OP.FULLY_CONNECTED, [x, w, b.bias("fc1", 12, 2000)], [h], OPT.FullyConnectedOptions,
         fc)
    w, sw = b.weights("fc2", (3, 12), 0)
    y = b.activation("fc2", (1, 3), b.out_scale(s_h, sw, 12), 6)
    b.op(OP.FULLY_CONNECTED, [h, w, b.bias("fc2", 3, 2000)], [y], OPT.FullyConnectedOptions,
         fb.FullyConnectedOptionsT())
    return b.finish([x], [y])


CASES = {   # name -> (file, IR input shape, IR ops, the file's input layout from the IR's HWC)
    "nchw_transpose": (nchw_net, (10, 12, 3), [ir.CONV, ir.GLOBAL_AVGPOOL, ir.DENSE],
                       lambda x: x.transpose(2, 0, 1)[None]),
    "one_channel_multiplier": (one_channel_multiplier_net, (9, 9, 1),
                               [ir.CONV, ir.GLOBAL_AVGPOOL, ir.DENSE], lambda x: x[None]),
    "dense_input": (dense_net, (1, 1, 16), [ir.DENSE, ir.DENSE], lambda x: x.reshape(1, 16)),
    "channel_pad": (channel_pad_net, (7, 6, 3), [ir.CONV, ir.GLOBAL_AVGPOOL, ir.DENSE],
                    lambda x: x[None]),
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("case", sorted(CASES))
def test_input_layouts_match_tflm(case, seed, tmp_path):
    make, shape, ops, layout = CASES[case]
    path = tmp_path / f"{case}.tflite"
    path.write_bytes(make(seed))
    model = load_model(str(path))
    assert model.input_shape == shape and [l.op for l in model.layers] == ops
    data = path.read_bytes()
    inputs = [random_input(model, 10 * seed + s) for s in range(3)]
    expected = []
    for x in inputs:
        interp = runtime.Interpreter.from_bytes(data, arena_size=1 << 20)
        interp.set_input(layout(x), 0)
        interp.invoke()
        expected.append(interp.get_output(0).reshape(-1))
    assert len({tuple(e) for e in expected}) > 1
    for x, ref in zip(inputs, expected):
        assert np.array_equal(run_model(model, x).reshape(-1), ref)
    for label, outs in c_outputs(model, inputs).items():
        for out, ref in zip(outs, expected):
            assert np.array_equal(out.reshape(-1), ref), label


def test_a_transpose_other_than_nchw_to_nhwc_is_a_one_line_error(tmp_path):
    path = tmp_path / "perm.tflite"
    path.write_bytes(nchw_net(0, perm=(0, 3, 2, 1)))
    _one_line_error(path, "operator 0 (TRANSPOSE): TRANSPOSE [0, 3, 2, 1]: only NCHW -> NHWC")


def test_a_channel_padding_before_anything_but_a_conv_is_a_one_line_error(tmp_path):
    path = tmp_path / "pad_pool.tflite"
    path.write_bytes(channel_pad_net(0, reader=OP.MAX_POOL_2D))
    message = _one_line_error(path, "'xp': reads the output of PAD (operator 0) of the "
                                    "channels: a channel padding may only feed a CONV_2D")
    assert "operator 1 (MAX_POOL_2D)" in message

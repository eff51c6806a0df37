"""Upsampling (issue 21 item 5): TRANSPOSE_CONV and RESIZE_NEAREST_NEIGHBOR from .tflite files
built with the flatbuffers schema directly, ONNX ConvTranspose and Resize (mode nearest) through
the same lowering, and the YAML spec's transpose_conv and resize_nearest. The numpy reference and
the generated C under the vanilla and the least-RAM plans give TFLite Micro's bytes, the C counts
the predicted MACs and the arena painted is the predicted one. An upsampling layer is a single-
layer edge (its RAM its input and output whole plus what is alive across it) or inside a
line-buffer block: an output row needs input rows by the op's rule (r // 2, or
(r + pad - k + 1) / stride .. (r + pad) / stride: geometry.input_span), which the line buffer's
row sweep, reference and C follow; the H-cache's schemes refuse such blocks."""
import numpy as np
import pytest

from msf_pio.fusion import solvers
from msf_pio.fusion.geometry import alive_before, arena_tensor_bytes
from msf_pio.fusion.graph import build_graph
from msf_pio.fusion.reuse import DETAIL
from msf_pio.model import ir, load_model
from msf_pio.numerics import nearest_index
from msf_pio.reference.macs import model_macs

from .host_checks import check_plan_in_c
from .int8_models import random_input
from .test_line_buffer import check_blocks
from .test_reference_tflm import tflm_run
from .tflite_builder import OP, OPT, TT, TfliteBuilder, conv_options, fb

A = fb.ActivationFunctionType
SAME, VALID = fb.Padding.SAME, fb.Padding.VALID


def _tconv_options(padding, stride, act=A.NONE):
    o = fb.TransposeConvOptionsT()
    o.padding, o.fusedActivationFunction = padding, act
    o.strideH, o.strideW = stride
    return o


def _resize_options(align_corners=False, half_pixel=False):
    o = fb.ResizeNearestNeighborOptionsT()
    o.alignCorners, o.halfPixelCenters = align_corners, half_pixel
    return o


def fpn_net(seed: int = 0) -> bytes:
    """An FPN / U-Net-like int8 net: (1, 10, 9, 3) -> CONV 3x3 (8, RELU) = lateral -> CONV 3x3/2
    (12, RELU) -> TRANSPOSE_CONV 3x3/2 SAME (8, RELU) -> ADD lateral -> RESIZE_NEAREST x2
    (half-pixel centres) -> CONV 1x1 (5) -> TRANSPOSE_CONV 2x3 stride (2, 1) VALID without bias
    -> RESIZE_NEAREST to 27 x 19 (align corners: a factor that is no integer) -> CONV 3x3 (2)."""
    b = TfliteBuilder(seed)
    s_in = np.float32(1 / 50)
    x = b.activation("image", (1, 10, 9, 3), s_in, 3)

    def conv(src, s_src, cin, cout, hw, name, k, stride=1, act=A.NONE, zp=-3, gain=1.0):
        w, sw = b.weights(name, (cout, k, k, cin), 0)
        s = np.float32(b.out_scale(s_src, sw, k * k * cin) / gain)
        y = b.activation(name, (1, *hw, cout), s, -128 if act != A.NONE else zp)
        b.op(OP.CONV_2D, [src, w, b.bias(name, cout, 2000)], [y], OPT.Conv2DOptions,
             conv_options(SAME, stride, act))
        return y, s

    def tconv(src, s_src, cin, cout, hw, name, k, stride, padding, act=A.NONE, bias=True,
              gain=1.0):
        w, sw = b.weights(name, (cout, *k, cin), 0)
        s = np.float32(b.out_scale(s_src, sw, k[0] * k[1] * cin / (stride[0] * stride[1]))
                       / gain)
        y = b.activation(name, (1, *hw, cout), s, -128 if act != A.NONE else 6)
        shape = b.tensor(f"{name}/shape", (4,), TT.INT32, data=np.array([1, *hw, cout], "<i4"))
        b.op(OP.TRANSPOSE_CONV, [shape, w, src, b.bias(name, cout, 3000) if bias else -1], [y],
             OPT.TransposeConvOptions, _tconv_options(padding, stride, act))
        return y, s

    def resize(src, s_src, zp, c, hw, name, **flags):
        size = b.tensor(f"{name}/size", (2,), TT.INT32, data=np.array(hw, "<i4"))
        y = b.activation(name, (1, *hw, c), s_src, zp)
        b.op(OP.RESIZE_NEAREST_NEIGHBOR, [src, size], [y], OPT.ResizeNearestNeighborOptions,
             _resize_options(**flags))
        return y

    lateral, s1 = conv(x, s_in, 3, 8, (10, 9), "lateral", 3, act=A.RELU)
    down, s2 = conv(lateral, s1, 8, 12, (5, 5), "down", 3, 2, A.RELU, gain=2)
    up, s3 = tconv(down, s2, 12, 8, (10, 9), "up", (3, 3), (2, 2), SAME, A.RELU, gain=2)
    s4 = np.float32(max(s1, s3) * 0.9)
    merged = b.activation("merge", (1, 10, 9, 8), s4, -30)
    b.op(OP.ADD, [up, lateral], [merged], OPT.AddOptions, fb.AddOptionsT())
    big = resize(merged, s4, -30, 8, (20, 18), "x2", half_pixel=True)
    p, s5 = conv(big, s4, 8, 5, (20, 18), "project", 1, gain=1.5)
    t2, s6 = tconv(p, s5, 5, 3, (41, 20), "up2", (2, 3), (2, 1), VALID, bias=False, gain=1.5)
    odd = resize(t2, s6, 6, 3, (27, 19), "odd", align_corners=True)
    y, _ = conv(odd, s6, 3, 2, (27, 19), "head", 3, gain=1.5)
    return b.finish([x], [y])


def test_fpn_tflite_file_gives_tflm_bytes_with_upsampling_single_and_fused(tmp_path):
    path = tmp_path / "fpn.tflite"
    path.write_bytes(fpn_net())
    model = load_model(str(path))
    ops = [l.op for l in model.layers]
    assert ops == ["conv2d", "conv2d", "transpose_conv", "add", "resize_nearest", "conv2d",
                   "transpose_conv", "resize_nearest", "conv2d"]
    up, up2, odd = model.layers[2], model.layers[6], model.layers[7]
    assert (up.out_shape, up.pad, up.stride) == ((10, 9, 8), (0, 1, 1, 1), (2, 2))
    # (20 - 1) 2 + 2 = 40 rows the taps reach: row 40 is the bias alone
    assert (up2.out_shape, up2.pad, up2.kernel) == ((41, 20, 3), (0, 0, -1, 0), (2, 3))
    assert odd.align_corners and model.layers[4].half_pixel and not odd.half_pixel
    graph = build_graph(model, "exact")
    ups = [l for l, layer in enumerate(model.layers) if layer.op in ir.UPSAMPLE_OPS]
    fused = [e for e in graph.edges if e.fused and any(e.first <= l <= e.last for l in ups)]
    assert {e.scheme for e in fused} == {"line-buffer"}       # the H-cache's refuse them
    assert all(any(e.first < l < e.last for e in fused) for l in ups)  # inside, not only ends
    for l in ups:       # input and output whole, the output over the input rows read (the
        e = graph.single_edge(l)        # rows only move down), and the tensors alive across
        layer, alive = model.layers[l], sum(arena_tensor_bytes(model, t)
                                            for t in alive_before(model, l))
        (h, w, c), (oh, ow, oc) = layer.in_shape, layer.out_shape
        a, b = arena_tensor_bytes(model, l), arena_tensor_bytes(model, l + 1)
        if not (a and b):
            assert e.ram == a + b + alive and DETAIL not in e.detail
            continue
        k, s, pad = layer.window(0)     # the input rows output row r reads (tap by tap)
        reads = [{i for i in range(h) if 0 <= r + pad - i * s < k} for r in range(oh)] \
            if layer.op == ir.TRANSPOSE_CONV else [{int(i)} for i in nearest_index(
                h, oh, layer.align_corners, layer.half_pixel)]
        live = [min([min(x) for x in reads[r:] if x] or [h]) for r in range(oh)]
        shift = min(live[r] * w * c - (r + 1) * ow * oc for r in range(oh))
        assert e.detail[DETAIL] == shift and e.ram == max(a - min(shift, 0), b) + alive
    inputs = [random_input(model, seed) for seed in range(2)]
    expected = [tflm_run(path.read_bytes(), x).reshape(-1) for x in inputs]
    assert np.unique(expected[0]).size > 100           # not saturated: the values carry
    from msf_pio.reference import run_model
    for x, ref in zip(inputs, expected):
        np.testing.assert_array_equal(run_model(model, x).reshape(-1), ref)
    # every line-buffer block through rings of exactly its rows (one row fewer raises), its
    # MACs counted tap by tap, its output over its input as far as the edge says
    check_blocks(model, inputs[0])
    lines = solvers.p1_min_ram(build_graph(model, "exact", schemes=("line-buffer",)), 1.0)
    assert any(e.fused and e.first <= l <= e.last for e in lines.blocks for l in ups)
    plans = [solvers.vanilla(graph), solvers.p1_min_ram(graph), lines]
    assert plans[1].peak_ram <= plans[0].peak_ram and plans[0].macs == model_macs(model)
    for plan in plans:         # bytes, MACs counted, arena painted, ASan/UBSan
        check_plan_in_c(model, plan, inputs[1], expected[1], sanitize=plan is lines)


# -- ONNX: ConvTranspose and Resize through the same lowering ----------------------------------
def _onnx_unet(tmp_path, tconv_pads, extra, resize):
    """float (1, 3, 7, 6) -> Conv 3x3/2 (pads 1) -> Relu -> ConvTranspose 4x4 or 3x3 /2 ->
    Relu -> Resize (nearest) -> Conv 1x1: PyTorch's decoder as it exports."""
    from onnx import TensorProto, helper
    from .test_onnx_import import _init, _save
    k = 4 if tconv_pads == [1, 1, 1, 1] and not any(extra) else 3
    inits = [_init("w1", (6, 3, 3, 3)), _init("b1", (6,), scale=0.1),
             _init("wt", (6, 5, k, k)), _init("bt", (5,), scale=0.1), _init("w2", (4, 5, 1, 1))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("ConvTranspose", ["r1", "wt", "bt"], ["t"], strides=[2, 2],
                              pads=tconv_pads, output_padding=extra),
             helper.make_node("Relu", ["t"], ["r2"])]
    mode, values = resize[:2]
    if mode == "upsample":           # opset 9's Upsample: asymmetric, floor
        inits.append(_init("scales", value=np.array([1, 1, 2, 2], np.float32)))
        nodes.append(helper.make_node("Upsample", ["r2", "scales"], ["u"], mode="nearest"))
    else:
        inits.append(_init("scales", value=np.array(values, np.float32)) if mode == "scales"
                     else helper.make_tensor("sizes", TensorProto.INT64, [4], values))
        args = ["r2", "", "scales", ""] if mode == "scales" else ["r2", "", "", "sizes"]
        nodes.append(helper.make_node("Resize", args, ["u"], mode="nearest",
                                      coordinate_transformation_mode=resize[2],
                                      nearest_mode=resize[3]))
    nodes.append(helper.make_node("Conv", ["u", "w2"], ["y"]))
    return _save(tmp_path, nodes, inits, in_shape=(1, 3, 7, 6),
                 opset=9 if mode == "upsample" else 13)


@pytest.mark.parametrize("case", ["k4p1-sizes-asymmetric", "k3p1op1-scales-halfpixel",
                                  "k4p1-upsample", "k4p1-scales-alignc"])
def test_onnx_conv_transpose_and_resize_match_onnxruntime_and_tflm(tmp_path, case):
    """The float graph is onnxruntime's; quantized, the reference is TFLite Micro's on the
    exported file (a ConvTranspose whose padding TFLite cannot express, PyTorch's k3 p1
    output_padding 1, is checked against the float graph and the C alone)."""
    from msf_pio.export.tflite import tflite_bytes
    from msf_pio.model.floatnet import forward
    from msf_pio.model.onnx_import import read_onnx
    from msf_pio.model.weights import materialize
    from msf_pio.reference import run_model
    from msf_pio.verify import seeded_input
    from .test_onnx_import import _input, _ort
    pads, extra = ([1, 1, 1, 1], [1, 1]) if "op1" in case else ([1, 1, 1, 1], [0, 0])
    resize = {"sizes": ("sizes", [1, 5, 16, 13], "asymmetric", "floor"),
              "scales": ("scales", [1, 1, 2, 2], "half_pixel", "round_prefer_floor"),
              "upsample": ("upsample", None),
              "alignc": ("scales", [1, 1, 2, 3], "align_corners", "round_prefer_ceil")}[
        next(k for k in ("sizes", "upsample", "alignc", "scales") if k in case)]
    path = _onnx_unet(tmp_path, pads, extra, resize)
    model, params = read_onnx(path)
    assert [l.op for l in model.layers] == ["conv2d", "transpose_conv", "resize_nearest",
                                            "conv2d"]
    for seed in range(2):
        x = _input((7, 6, 3), seed)
        np.testing.assert_allclose(forward(model, params, x), _ort(path, x), atol=1e-5)
    quantized = materialize(model)
    x = seeded_input(quantized, 0)
    ref = run_model(quantized, x).reshape(-1)
    if "op1" in case:
        with pytest.raises(ValueError, match="neither SAME nor VALID"):
            tflite_bytes(quantized)
    else:
        np.testing.assert_array_equal(ref, tflm_run(tflite_bytes(quantized), x).reshape(-1))
    graph = build_graph(quantized, "exact")
    check_plan_in_c(quantized, solvers.p1_min_ram(graph), x, ref, sanitize=False)


@pytest.mark.parametrize("case", ["linear", "group", "pixel_rule"])
def test_what_upsampling_cannot_do_is_one_line(tmp_path, case):
    from onnx import helper
    from .test_onnx_import import _init, _save
    from .test_tflite_import import _one_line_error
    if case == "group":
        inits = [_init("w", (4, 2, 2, 2))]
        node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], group=2,
                                name="up")
        fragment = "node 'up' (ConvTranspose): group=2: only one group is supported"
    else:
        inits = [_init("scales", value=np.array([1, 1, 2, 1.5] if case == "pixel_rule"
                                                else [1, 1, 2, 2], np.float32))]
        node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up",
                                mode="linear" if case == "linear" else "nearest",
                                coordinate_transformation_mode="tf_half_pixel_for_nn",
                                nearest_mode="ceil")
        fragment = ("mode 'linear': only nearest is supported" if case == "linear" else
                    "its nearest-neighbour rule picks input pixels that no TFLite "
                    "RESIZE_NEAREST_NEIGHBOR does (6x6 -> 12x9)")
    _one_line_error(_save(tmp_path, [node], inits, in_shape=(1, 4, 6, 6)), fragment)


def test_a_streamed_input_cannot_feed_an_upsampling_layer():
    from msf_pio.errors import MsfError
    from msf_pio.model.spec import spec_to_model
    model = spec_to_model({"input": {"shape": [4, 4, 2]},
                           "layers": [{"op": "resize_nearest"}, {"op": "pointwise", "out": 2}]})
    model.stream_input = True
    with pytest.raises(MsfError, match="a streamed input cannot feed an upsampling layer"):
        build_graph(model, "exact")


def test_unet_zoo_model_gives_tflm_bytes_with_upsampling_fused():
    """unet-tiny-64 (zoo/large): the reference is TFLite Micro's on the exported file, the C of
    the least-RAM plan gives its bytes with the arena painted == predicted, and that plan fuses
    its upsampling layers into line-buffer blocks, below the least RAM of the same graph
    without them (whose peak is the nearest x2 resize alone: its 16 kB output written over its
    4 kB input but for one input row, 256 B, and the 8 kB encoder map alive across it)."""
    from msf_pio.export.tflite import tflite_bytes
    from msf_pio.fusion.graph import FusionGraph
    from msf_pio.reference import run_model
    from msf_pio.verify import quantized_model, seeded_input
    model = quantized_model("unet-tiny-64")
    x = seeded_input(model, 0)
    ref = run_model(model, x).reshape(-1)
    np.testing.assert_array_equal(ref, tflm_run(tflite_bytes(model), x).reshape(-1))
    graph = build_graph(model, "exact")
    ups = [l for l, layer in enumerate(model.layers) if layer.op in ir.UPSAMPLE_OPS]
    apart = FusionGraph(model, "exact", [e for e in graph.edges if not (
        e.fused and any(e.first <= l <= e.last for l in ups))], graph.unfused_macs)
    before = solvers.p1_min_ram(apart)
    peak = max(before.blocks, key=lambda e: e.ram)
    assert model.layers[peak.first].op == ir.RESIZE_NEAREST and not peak.fused
    assert before.peak_ram == 16384 + 256 + 8192
    least = solvers.p1_min_ram(graph)
    assert {e.scheme for e in least.blocks if e.fused and
            any(e.first <= l <= e.last for l in ups)} == {"line-buffer"}
    assert least.peak_ram < before.peak_ram
    check_plan_in_c(model, least, x, ref, sanitize=False)


@pytest.mark.parametrize("last", [{"op": "resize_nearest", "size": [13, 10]},
                                  {"op": "transpose_conv", "out": 3, "kernel": 3, "stride": 2}])
def test_a_streamed_output_from_an_upsampling_layer_goes_pixel_by_pixel(last):
    """The network output made by an upsampling layer is handed to the sink a pixel at a time:
    the arena holds one output pixel of staging, the C gives the reference's bytes."""
    from msf_pio.model.spec import spec_to_model
    from msf_pio.reference import run_model
    from msf_pio.verify import quantized_model, seeded_input
    from dataclasses import replace
    model = replace(quantized_model(spec_to_model({
        "name": "up-stream", "input": {"shape": [6, 5, 3]}, "weights": {"random": 2},
        "layers": [{"op": "conv2d", "out": 4, "kernel": 3, "act": "relu"}, last]})),
        stream_output=True)
    x = seeded_input(model, 1)
    graph = build_graph(model, "exact")
    edge = graph.single_edge(1)
    assert edge.ram == 6 * 5 * 4 + model.output_shape[2]        # its input, one output pixel
    plans = [solvers.vanilla(graph), solvers.p1_min_ram(graph)]
    for plan in plans:
        check_plan_in_c(model, plan, x, run_model(model, x).reshape(-1),
                        sanitize=plan is plans[1])


def test_onnxruntime_qdq_decoder_within_one_lsb(tmp_path):
    """The same decoder quantized by onnxruntime (QDQ, per-channel weights: ConvTranspose's
    along its axis 1): the int8 reference within one output LSB of onnxruntime's QDQ graph."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from msf_pio.model.quantize import dequantize, quantize_tensor
    from msf_pio.model.weights import materialize
    from msf_pio.reference import run_model
    from .test_onnx_import import _input, _ort

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.inputs = iter({"x": _input((1, 3, 7, 6), 10 + i)} for i in range(4))

        def get_next(self):
            return next(self.inputs, None)

    path = _onnx_unet(tmp_path, [1, 1, 1, 1], [1, 1],
                      ("scales", [1, 1, 2, 2], "half_pixel", "round_prefer_floor"))
    qpath = tmp_path / "qdq.onnx"
    quantize_static(str(path), str(qpath), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8)
    model = materialize(load_model(str(qpath)))
    assert [l.op for l in model.layers] == ["conv2d", "transpose_conv", "resize_nearest",
                                            "conv2d"]
    q_out = model.layers[-1].q_out
    for seed in range(3):
        x = _input((7, 6, 3), seed)
        ours = dequantize(run_model(model, quantize_tensor(x, model.q_input)), q_out)
        assert np.abs(ours - _ort(qpath, x)).max() <= q_out.scale * 1.001



def test_float_tflite_decoder_matches_tflm_float_and_quantizes(tmp_path):
    """A float .tflite (as the converter writes it by default): CONV_2D (RELU) ->
    TRANSPOSE_CONV 3x3/2 SAME -> RESIZE_NEAREST x2 (half-pixel). The float pass that calibrates
    post-training quantization is TFLite Micro's float output, and the file quantizes."""
    from tflite_micro.python.tflite_micro import runtime
    from msf_pio.model.floatnet import forward
    from msf_pio.model.lowering import lower
    from msf_pio.model.tflite_import import read_tflite
    from msf_pio.model.weights import materialize
    b, F = TfliteBuilder(0), TT.FLOAT32

    def const(name, shape, std):
        return b.tensor(name, shape, F, data=b.rng.normal(0, std, shape).astype("<f4"))

    x = b.tensor("x", (1, 5, 4, 3), F)
    c = b.tensor("c", (1, 5, 4, 6), F)
    b.op(OP.CONV_2D, [x, const("w1", (6, 3, 3, 3), 0.3), const("b1", (6,), 0.1)], [c],
         OPT.Conv2DOptions, conv_options(SAME, 1, A.RELU))
    shape = b.tensor("shape", (4,), TT.INT32, data=np.array([1, 10, 8, 4], "<i4"))
    t = b.tensor("t", (1, 10, 8, 4), F)
    b.op(OP.TRANSPOSE_CONV, [shape, const("wt", (4, 3, 3, 6), 0.3), c, const("bt", (4,), 0.1)],
         [t], OPT.TransposeConvOptions, _tconv_options(SAME, (2, 2)))
    size = b.tensor("size", (2,), TT.INT32, data=np.array([20, 16], "<i4"))
    y = b.tensor("y", (1, 20, 16, 4), F)
    b.op(OP.RESIZE_NEAREST_NEIGHBOR, [t, size], [y], OPT.ResizeNearestNeighborOptions,
         _resize_options(half_pixel=True))
    data = b.finish([x], [y])
    path = tmp_path / "float_up.tflite"
    path.write_bytes(data)
    model, params = lower(read_tflite(path))
    assert [l.op for l in model.layers] == ["conv2d", "transpose_conv", "resize_nearest"]
    xin = np.random.default_rng(0).uniform(-1, 1, (5, 4, 3)).astype(np.float32)
    interpreter = runtime.Interpreter.from_bytes(data, arena_size=1 << 20)
    interpreter.set_input(xin[None], 0)
    interpreter.invoke()
    np.testing.assert_allclose(forward(model, params, xin), interpreter.get_output(0)[0],
                               atol=1e-5)
    assert materialize(load_model(str(path)), xin[None]).quantized

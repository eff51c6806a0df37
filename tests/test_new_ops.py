"""The ops of the CNNs people deploy next, from .tflite files built with the flatbuffers schema
directly: squeeze-and-excite (MEAN keep_dims -> 1x1 convs -> LOGISTIC -> MUL of the map by one
value per channel), channel parts (SPLIT, SPLIT_V, STRIDED_SLICE, SLICE), an AVERAGE_POOL_2D
after a PAD (its divisor counts the padded taps), a MUL of two maps, SQUEEZE and RESHAPE
no-ops. The numpy reference and the generated C under the vanilla and the least-RAM plans
give TFLite Micro's bytes on the same file, and the least-RAM plan fuses the per-channel
product with what follows it."""
import numpy as np
import pytest

from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.model import ir, load_model

from .int8_models import random_input
from .test_tflite_import import assert_tflm_bytes
from .tflite_builder import OP, OPT, TT, TfliteBuilder, conv_options, fb, pool_options

A = fb.ActivationFunctionType
SAME, VALID = fb.Padding.SAME, fb.Padding.VALID


def _conv(b, x, s_x, cin, cout, hw, name, kernel=1, act=A.NONE, zp=-3):
    w, sw = b.weights(name, (cout, kernel, kernel, cin), 0)
    s = b.out_scale(s_x, sw, kernel * kernel * cin)
    y = b.activation(name, (1, *hw, cout), s, -128 if act != A.NONE else zp)
    b.op(OP.CONV_2D, [x, w, b.bias(name, cout, 2000)], [y], OPT.Conv2DOptions,
         conv_options(SAME, 1, act))
    return y, s


def se_net(seed: int = 0) -> bytes:
    """int8 (1, 8, 8, 3) -> CONV 3x3 (16, RELU) = x -> MEAN keep_dims -> CONV 1x1 4 (RELU) ->
    CONV 1x1 16 -> LOGISTIC -> MUL(x, gate) -> CONV 1x1 8 -> SPLIT in two -> the first half
    DEPTHWISE 3x3, CONCATENATION with the second -> STRIDED_SLICE channels 2..7 -> PAD 1 ->
    AVERAGE_POOL 3x3 VALID -> MUL by itself through a 1x1 conv -> MEAN -> SQUEEZE ->
    FULLY_CONNECTED 5."""
    b = TfliteBuilder(seed)
    s_in = np.float32(1 / 60)
    inp = b.activation("input", (1, 8, 8, 3), s_in, 4)
    x, s_x = _conv(b, inp, s_in, 3, 16, (8, 8), "stem", 3, A.RELU)
    axes = b.tensor("axes", (2,), TT.INT32, data=np.array([1, 2], "<i4"))
    reducer = fb.ReducerOptionsT()
    reducer.keepDims = True
    s_m = np.float32(s_x / 2)
    m = b.activation("squeeze", (1, 1, 1, 16), s_m, -100)
    b.op(OP.MEAN, [x, axes], [m], OPT.ReducerOptions, reducer)
    r, s_r = _conv(b, m, s_m, 16, 4, (1, 1), "reduce", act=A.RELU)
    e, s_e = _conv(b, r, s_r, 4, 16, (1, 1), "expand")
    gate = b.activation("gate", (1, 1, 1, 16), np.float32(1 / 256), -128)
    b.op(OP.LOGISTIC, [e], [gate])
    s_g = np.float32(s_x * 0.6)
    g = b.activation("excite", (1, 8, 8, 16), s_g, -120)
    b.op(OP.MUL, [x, gate], [g], OPT.MulOptions, fb.MulOptionsT())
    p, s_p = _conv(b, g, s_g, 16, 8, (8, 8), "project", zp=5)
    halves = [b.activation(f"half{i}", (1, 8, 8, 4), s_p, 5) for i in (0, 1)]
    axis = b.tensor("split_axis", (), TT.INT32, data=np.array(3, "<i4"))
    split = fb.SplitOptionsT()
    split.numSplits = 2
    b.op(OP.SPLIT, [axis, p], halves, OPT.SplitOptions, split)
    w, sw = b.weights("dw", (1, 3, 3, 4), 3)
    d = b.activation("dw", (1, 8, 8, 4), s_p, 5)
    b.op(OP.DEPTHWISE_CONV_2D, [halves[0], w, b.bias("dw", 4, 500)], [d],
         OPT.DepthwiseConv2DOptions, conv_options(SAME, 1, A.NONE, depthwise=True))
    cat = b.activation("cat", (1, 8, 8, 8), s_p, 5)
    concat = fb.ConcatenationOptionsT()
    concat.axis = 3
    b.op(OP.CONCATENATION, [d, halves[1]], [cat], OPT.ConcatenationOptions, concat)
    begin, end, ones = ([0, 0, 0, 2], [1, 8, 8, 7], [1, 1, 1, 1])
    args = [b.tensor(n, (4,), TT.INT32, data=np.array(v, "<i4"))
            for n, v in (("begin", begin), ("end", end), ("strides", ones))]
    sl = b.activation("slice", (1, 8, 8, 5), s_p, 5)
    b.op(OP.STRIDED_SLICE, [cat, *args], [sl], OPT.StridedSliceOptions,
         fb.StridedSliceOptionsT())
    paddings = b.tensor("paddings", (4, 2), TT.INT32,
                        data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]], "<i4"))
    padded = b.activation("padded", (1, 10, 10, 5), s_p, 5)
    b.op(OP.PAD, [sl, paddings], [padded], OPT.PadOptions, fb.PadOptionsT())
    avg = b.activation("avg", (1, 8, 8, 5), s_p, 5)
    b.op(OP.AVERAGE_POOL_2D, [padded], [avg], OPT.Pool2DOptions,
         pool_options(VALID, 1, 3, 3))
    c2, s_c2 = _conv(b, avg, s_p, 5, 5, (8, 8), "square")
    s_sq = np.float32(s_p * s_c2 * 40)
    sq = b.activation("product", (1, 8, 8, 5), s_sq, -7)
    b.op(OP.MUL, [c2, avg], [sq], OPT.MulOptions, fb.MulOptionsT())
    s_mean = np.float32(s_sq / 3)
    mean = b.activation("mean", (1, 1, 1, 5), s_mean, 2)
    b.op(OP.MEAN, [sq, axes], [mean], OPT.ReducerOptions, reducer)
    flat = b.activation("flat", (1, 5), s_mean, 2)
    squeeze = fb.SqueezeOptionsT()
    squeeze.squeezeDims = [1, 2]
    b.op(OP.SQUEEZE, [mean], [flat], OPT.SqueezeOptions, squeeze)
    w, sw = b.weights("fc", (5, 5), 0)
    y = b.activation("logits", (1, 5), b.out_scale(s_mean, sw, 5), -2)
    b.op(OP.FULLY_CONNECTED, [flat, w, b.bias("fc", 5, 2000)], [y],
         OPT.FullyConnectedOptions, fb.FullyConnectedOptionsT())
    return b.finish([inp], [y])


def test_squeeze_excite_slices_and_padded_pool_give_tflm_bytes(tmp_path):
    path = tmp_path / "se_net.tflite"
    path.write_bytes(se_net())
    model = load_model(str(path))
    ops = [l.op for l in model.layers]
    assert ops == ["conv2d", "global_avgpool", "conv2d", "conv2d", "logistic", "mul", "conv2d",
                   "slice", "slice", "depthwise_conv2d", "concat", "slice", "avg_pool",
                   "conv2d", "mul", "global_avgpool", "dense"]
    excite = model.layers[5]
    assert model.broadcasts(5) and excite.input == 1 and excite.skip == 5
    assert [(l.begin, l.cout) for l in model.layers if l.op == ir.SLICE] == [(0, 4), (4, 4),
                                                                           (2, 5)]
    pool = model.layers[12]
    assert pool.count_pad and pool.pad == (1, 1, 1, 1)
    assert_tflm_bytes(path, model, [random_input(model, seed) for seed in range(3)])
    plan = solvers.p1_min_ram(build_graph(model, "exact"))
    blocks = [(e.first, e.last) for e in plan.blocks]
    assert any(first == 5 < last for first, last in blocks), blocks   # the excite, fused


def test_mid_graph_mean_without_keep_dims_and_split_v(tmp_path):
    """MEAN (keep_dims false) into a FULLY_CONNECTED whose 1 x 1 output gates the map (MUL by
    the reshaped vector), and SPLIT_V into unequal parts."""
    b = TfliteBuilder(3)
    s_in = np.float32(1 / 50)
    inp = b.activation("input", (1, 6, 6, 2), s_in, -2)
    x, s_x = _conv(b, inp, s_in, 2, 6, (6, 6), "stem", 3, A.RELU)
    axes = b.tensor("axes", (2,), TT.INT32, data=np.array([1, 2], "<i4"))
    reducer = fb.ReducerOptionsT()
    reducer.keepDims = False
    s_m = np.float32(s_x / 2)
    m = b.activation("squeeze", (1, 6), s_m, -90)
    b.op(OP.MEAN, [x, axes], [m], OPT.ReducerOptions, reducer)
    w, sw = b.weights("fc", (6, 6), 0)
    fc = b.activation("fc", (1, 6), b.out_scale(s_m, sw, 6), 1)
    b.op(OP.FULLY_CONNECTED, [m, w, b.bias("fc", 6, 2000)], [fc], OPT.FullyConnectedOptions,
         fb.FullyConnectedOptionsT())
    gate = b.activation("gate", (1, 6), np.float32(1 / 256), -128)
    b.op(OP.LOGISTIC, [fc], [gate])
    shape = b.tensor("shape", (4,), TT.INT32, data=np.array([1, 1, 1, 6], "<i4"))
    g4 = b.activation("gate4", (1, 1, 1, 6), np.float32(1 / 256), -128)
    b.op(OP.RESHAPE, [gate, shape], [g4], OPT.ReshapeOptions, fb.ReshapeOptionsT())
    y0 = b.activation("excite", (1, 6, 6, 6), np.float32(s_x * 0.7), -110)
    b.op(OP.MUL, [g4, x], [y0], OPT.MulOptions, fb.MulOptionsT())
    parts = [b.activation(f"part{i}", (1, 6, 6, n), np.float32(s_x * 0.7), -110)
             for i, n in enumerate((2, 4))]
    sizes = b.tensor("sizes", (2,), TT.INT32, data=np.array([2, -1], "<i4"))
    axis = b.tensor("axis", (), TT.INT32, data=np.array(-1, "<i4"))
    options = fb.SplitVOptionsT()
    options.numSplits = 2
    b.op(OP.SPLIT_V, [y0, sizes, axis], parts, OPT.SplitVOptions, options)
    y, _ = _conv(b, parts[1], np.float32(s_x * 0.7), 4, 3, (6, 6), "head")
    path = tmp_path / "split_v.tflite"
    path.write_bytes(b.finish([inp], [y]))
    model = load_model(str(path))
    assert [l.op for l in model.layers] == ["conv2d", "global_avgpool", "dense", "logistic",
                                            "mul", "slice", "conv2d"]
    assert model.layers[5].begin == 2 and model.layers[5].cout == 4   # part 0: never computed
    assert_tflm_bytes(path, model, [random_input(model, seed) for seed in range(3)])


@pytest.mark.parametrize("case", ["same_pool_after_pad", "slice_of_rows_and_channels"])
def test_what_the_new_ops_cannot_do_is_one_line(tmp_path, case):
    from .test_tflite_import import _one_line_error
    b = TfliteBuilder(1)
    s = np.float32(0.05)
    x = b.activation("x", (1, 6, 6, 4), s, 0)
    if case == "same_pool_after_pad":
        paddings = b.tensor("paddings", (4, 2), TT.INT32,
                            data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]], "<i4"))
        p = b.activation("p", (1, 8, 8, 4), s, 0)
        b.op(OP.PAD, [x, paddings], [p], OPT.PadOptions, fb.PadOptionsT())
        y = b.activation("y", (1, 8, 8, 4), s, 0)
        b.op(OP.AVERAGE_POOL_2D, [p], [y], OPT.Pool2DOptions, pool_options(SAME, 1, 3, 3))
        fragment = "operator 1 (AVERAGE_POOL_2D): an average pool with padding of its own"
    else:
        args = [b.tensor(n, (4,), TT.INT32, data=np.array(v, "<i4"))
                for n, v in (("begin", [0, 1, 0, 0]), ("end", [1, 5, 6, 2]),
                             ("strides", [1, 1, 1, 1]))]
        y = b.activation("y", (1, 4, 6, 2), s, 0)
        b.op(OP.STRIDED_SLICE, [x, *args], [y], OPT.StridedSliceOptions,
             fb.StridedSliceOptionsT())
        fragment = ("operator 0 (STRIDED_SLICE): STRIDED_SLICE [0:1, 1:5, 0:6, 0:2] of "
                    "[1, 6, 6, 4]: only a part of the channels or of the rows is supported")
    path = tmp_path / f"{case}.tflite"
    path.write_bytes(b.finish([x], [y], shuffle=False))
    _one_line_error(path, fragment)


def test_onnx_average_pools_counting_padding_match_onnxruntime_and_tflm(tmp_path):
    """A Pad(0) before an AveragePool, and an AveragePool with count_include_pad=1, both divide
    by every tap of the window: the float graph is onnxruntime's, the int8 one TFLM's."""
    from onnx import helper
    from msf_pio.export.tflite import tflite_bytes
    from msf_pio.model.floatnet import forward
    from msf_pio.model.onnx_import import read_onnx
    from msf_pio.model.weights import materialize
    from msf_pio.reference import run_model
    from msf_pio.verify import seeded_input
    from .test_onnx_import import _init, _input, _ort, _pad, _save
    from .test_reference_tflm import tflm_run
    pad, inits = _pad("pad", "c", "p", [0, 0, 1, 1, 0, 0, 1, 1])
    inits.append(_init("w", (4, 3, 3, 3)))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"), pad,
             helper.make_node("AveragePool", ["p"], ["a"], kernel_shape=[3, 3], name="ap"),
             helper.make_node("AveragePool", ["a"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1], count_include_pad=1, name="ap2")]
    path = _save(tmp_path, nodes, inits, in_shape=(1, 3, 9, 9))
    model, params = read_onnx(path)
    assert [(l.op, l.pad, l.count_pad) for l in model.layers] == [
        ("conv2d", (1, 1, 1, 1), False), ("avg_pool", (1, 1, 1, 1), True),
        ("avg_pool", (1, 1, 1, 1), True)]
    for seed in range(2):
        x = _input((9, 9, 3), seed)
        np.testing.assert_allclose(forward(model, params, x), _ort(path, x), atol=1e-5)
    quantized = materialize(model)
    x = seeded_input(quantized, 0)
    np.testing.assert_array_equal(run_model(quantized, x).reshape(-1),
                                  tflm_run(tflite_bytes(quantized), x).reshape(-1))


def detection_net(seed: int = 0, heads: int = 2) -> bytes:
    """int8 (1, 16, 16, 3) -> CONV 3x3/2 (RELU) -> CONV 3x3/2 (RELU) = f1 -> per scale a boxes
    head (CONV 1x1, 4 values per anchor) and a scores head (CONV 1x1 -> LOGISTIC), then
    CONV 3x3/2 (RELU) from f1 = f2 and its heads: an SSD-style detector with 2 x `heads`
    graph outputs (boxes, scores per scale)."""
    b = TfliteBuilder(seed)
    s_in = np.float32(1 / 64)
    x = b.activation("image", (1, 16, 16, 3), s_in, -2)

    def conv(src, s_src, cin, cout, hw, name, k, stride, act):
        w, sw = b.weights(name, (cout, k, k, cin), 0)
        s = b.out_scale(s_src, sw, k * k * cin)
        y = b.activation(name, (1, hw, hw, cout), s, -128 if act == A.RELU else 4)
        b.op(OP.CONV_2D, [src, w, b.bias(name, cout, 2000)], [y], OPT.Conv2DOptions,
             conv_options(SAME, stride, act))
        return y, s

    c1, s1 = conv(x, s_in, 3, 8, 8, "stem", 3, 2, A.RELU)
    f, s_f = conv(c1, s1, 8, 8, 4, "f1", 3, 2, A.RELU)
    outputs, hw = [], 4
    for k in range(heads):
        if k:
            hw //= 2
            f, s_f = conv(f, s_f, 8, 8, hw, f"f{k + 1}", 3, 2, A.RELU)
        boxes, _ = conv(f, s_f, 8, 8, hw, f"boxes{k}", 1, 1, A.NONE)
        logits, _ = conv(f, s_f, 8, 2, hw, f"logits{k}", 1, 1, A.NONE)
        scores = b.activation(f"scores{k}", (1, hw, hw, 2), np.float32(1 / 256), -128)
        b.op(OP.LOGISTIC, [logits], [scores])
        outputs += [boxes, scores]
    return b.finish([x], outputs)


@pytest.mark.parametrize("heads", [1, 3])
def test_detection_heads_are_graph_outputs_with_tflm_bytes(tmp_path, heads):
    """Two to six graph outputs: each head's output goes to its own caller buffer (packed one
    after another by msf_model_run, in the file's order), bit-exact with TFLite Micro's."""
    path = tmp_path / f"detect{heads}.tflite"
    path.write_bytes(detection_net(heads=heads))
    model = load_model(str(path))
    assert len(model.output_tensors) == 2 * heads
    graph = build_graph(model, "exact")
    plans = [solvers.vanilla(graph), solvers.p1_min_ram(graph)]
    assert plans[1].peak_ram < plans[0].peak_ram
    plans_give_tflm_bytes(path, model, plans)


def plans_give_tflm_bytes(path, model, plans) -> None:
    """The reference and the C of each plan give TFLite Micro's bytes on two random inputs
    (every graph output, in the file's order), and the arena painted is the predicted one."""
    from msf_pio.codegen.generate import generate
    from msf_pio.codegen.host import HostBuild
    from msf_pio.reference import run_model
    from .test_reference_tflm import runtime
    interp = runtime.Interpreter.from_bytes(path.read_bytes())
    outputs = len(model.output_tensors)
    for plan in plans:
        build = HostBuild(generate(model, plan))
        try:
            for seed in range(2):
                x = random_input(model, seed)
                interp.set_input(x[None], 0)
                interp.invoke()
                ref = np.concatenate([interp.get_output(k).reshape(-1) for k in range(outputs)])
                np.testing.assert_array_equal(run_model(model, x).reshape(-1), ref)
                run = build.run(x, "measure")
                np.testing.assert_array_equal(run.output, ref)
                assert run.figures["arena_measured"] == plan.peak_ram
        finally:
            build.close()


SE_SPEC = {"name": "se-blocks", "input": {"shape": [12, 12, 3]}, "weights": {"random": 3},
           "layers": [{"op": "conv2d", "out": 8, "kernel": 3, "stride": 2, "act": "relu6"},
                      {"op": "inverted_residual", "out": 8, "expanded": 16, "kernel": 3,
                       "se": 8, "act": "hard_swish"},
                      {"op": "inverted_residual", "out": 12, "expand": 2, "kernel": 5,
                       "stride": 2, "se": 8},
                      {"op": "slice", "begin": 2, "out": 8},
                      {"op": "avg_pool", "kernel": 3, "stride": 1, "padding": 1,
                       "count_pad": True},
                      {"op": "global_avgpool"}, {"op": "dense", "out": 4}]}


def test_squeeze_excite_blocks_in_every_least_ram_plan_match_the_unfused_model():
    """The gate vector of a per-channel product is read for every output pixel: a block that
    takes it as its input never writes its output over it (MobileNetV3-Small's p1 plans did
    until that was known), and the C of the least-RAM plan gives the reference's bytes."""
    from msf_pio.codegen.generate import generate
    from msf_pio.codegen.host import HostBuild
    from msf_pio.model.spec import spec_to_model
    from msf_pio.reference import run_model
    from msf_pio.reference.plan import run_plan
    from msf_pio.verify import quantized_model, seeded_input
    from msf_pio.fusion.reuse import DETAIL
    model = quantized_model(spec_to_model(SE_SPEC))
    graph = build_graph(model, "exact")
    gated = [e for e in graph.edges if any(model.broadcasts(l) and model.layers[l].skip ==
                                           e.first for l in range(e.first, e.last + 1))]
    assert gated and not any(DETAIL in e.detail for e in gated)
    x = seeded_input(model, 0)
    ref = run_model(model, x).reshape(-1)
    plans = [solvers.p1_min_ram(graph, f) for f in (1.0, 1.1, 1.3, float("inf"))]
    for plan in plans:
        assert np.array_equal(run_plan(model, plan.blocks, x).reshape(-1), ref), plan.label
    build = HostBuild(generate(model, plans[-1]))
    try:
        run = build.run(x, "measure")
        assert np.array_equal(run.output, ref)
        assert run.figures["arena_measured"] == plans[-1].peak_ram
    finally:
        build.close()


S_VECTOR = np.float32(2.0)


def embedding_net(seed: int = 0) -> bytes:
    """The shape of TFLite Micro's id_model example (a face-ID embedding): int8 (1, 12, 12, 2)
    -> PAD 1 read by two convs: CONV 3x3/2 VALID (LEAKY_RELU) -> AVERAGE_POOL 2x2 -> RESHAPE
    -> FULLY_CONNECTED 6 = e1, and CONV 3x3 VALID (4) -> CONV 1x1 (4) = lateral -> CONV 3x3/2
    SAME (4) = f -> RESHAPE -> FULLY_CONNECTED 6 = e3; f -> CONV 1x1 (4) -> RESIZE_NEAREST x2
    -> ADD lateral -> RESHAPE -> FULLY_CONNECTED 6 = e2 -> CONCATENATION of e1, e2, e3 ->
    FULLY_CONNECTED 5 -> EXPAND_DIMS to (1, 1, 5)."""
    b = TfliteBuilder(seed)
    s_in = np.float32(1 / 40)
    x = b.activation("image", (1, 12, 12, 2), s_in, -5)
    pads = b.tensor("pads", (4, 2), TT.INT32, data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]],
                                                             "<i4"))
    xp = b.activation("padded", (1, 14, 14, 2), s_in, -5)
    b.op(OP.PAD, [x, pads], [xp], OPT.PadOptions, fb.PadOptionsT())

    def conv(src, s_src, cin, cout, hw, name, k, stride, padding=VALID, zp=2):
        w, sw = b.weights(name, (cout, k, k, cin), 0)
        s = b.out_scale(s_src, sw, k * k * cin)
        y = b.activation(name, (1, *hw, cout), s, zp)
        b.op(OP.CONV_2D, [src, w, b.bias(name, cout, 2000)], [y], OPT.Conv2DOptions,
             conv_options(padding, stride, A.NONE))
        return y, s

    s_vec = S_VECTOR        # the three vectors concatenated: one quantization

    def dense(src, s_src, n, name, out=6, s_out=s_vec, zp=-4):
        """RESHAPE to (1, n) -> FULLY_CONNECTED `out` (output scale s_out, else a fitting one)."""
        shape = b.tensor(f"{name}/shape", (2,), TT.INT32, data=np.array([1, n], "<i4"))
        flat = b.activation(f"{name}/flat", (1, n), s_src, b.tensors[src].quantization
                            .zeroPoint[0])
        b.op(OP.RESHAPE, [src, shape], [flat], OPT.ReshapeOptions, fb.ReshapeOptionsT())
        w, sw = b.weights(name, (out, n), 0)
        s_out = b.out_scale(s_src, sw, n) if s_out is None else s_out
        y = b.activation(name, (1, out), s_out, zp)
        b.op(OP.FULLY_CONNECTED, [flat, w, b.bias(name, out, 2000)], [y],
             OPT.FullyConnectedOptions, fb.FullyConnectedOptionsT())
        return y, s_out

    c1, s1 = conv(xp, s_in, 2, 3, (6, 6), "side", 3, 2)
    leaky = fb.LeakyReluOptionsT()
    leaky.alpha = 0.1
    r1 = b.activation("side/leaky", (1, 6, 6, 3), s1, 2)
    b.op(OP.LEAKY_RELU, [c1], [r1], OPT.LeakyReluOptions, leaky)
    p1 = b.activation("side/pool", (1, 3, 3, 3), s1, 2)
    b.op(OP.AVERAGE_POOL_2D, [r1], [p1], OPT.Pool2DOptions, pool_options(VALID, 2, 2, 2))
    e1, _ = dense(p1, s1, 27, "e1")
    t1, s2 = conv(xp, s_in, 2, 4, (12, 12), "trunk", 3, 1)
    lateral, s4 = conv(t1, s2, 4, 4, (12, 12), "lateral", 1, 1)
    f, s3 = conv(lateral, s4, 4, 4, (6, 6), "f", 3, 2, SAME)
    e3, _ = dense(f, s3, 144, "e3")
    g, s5 = conv(f, s3, 4, 4, (6, 6), "top", 1, 1)
    size = b.tensor("up/size", (2,), TT.INT32, data=np.array([12, 12], "<i4"))
    up = b.activation("up", (1, 12, 12, 4), s5, 2)
    b.op(OP.RESIZE_NEAREST_NEIGHBOR, [g, size], [up], OPT.ResizeNearestNeighborOptions,
         fb.ResizeNearestNeighborOptionsT())
    s6 = np.float32(max(s4, s5) * 1.2)
    merged = b.activation("merge", (1, 12, 12, 4), s6, 1)
    b.op(OP.ADD, [lateral, up], [merged], OPT.AddOptions, fb.AddOptionsT())
    e2, _ = dense(merged, s6, 576, "e2")
    cat = b.activation("concat", (1, 18), s_vec, -4)
    concat = fb.ConcatenationOptionsT()
    concat.axis = 1
    b.op(OP.CONCATENATION, [e1, e2, e3], [cat], OPT.ConcatenationOptions, concat)
    emb, s_emb = dense(cat, s_vec, 18, "embedding", 5, None, 1)
    axis = b.tensor("axis", (), TT.INT32, data=np.array([-2], "<i4"))
    y = b.activation("embedding/3d", (1, 1, 5), s_emb, 1)
    b.op(OP.EXPAND_DIMS, [emb, axis], [y])
    return b.finish([x], [y])


def test_shared_pad_vector_concat_and_expand_dims_give_tflm_bytes(tmp_path):
    """A PAD read by two convs folds into both; a branch's first layer (the trunk's conv reads
    the PAD, not the side branch's vector before it) starts no fusion block; three dense
    vectors concatenate; EXPAND_DIMS is a no-op. Reference and C under the vanilla and the
    least-RAM plans == TFLite Micro, the arena painted == predicted."""
    path = tmp_path / "embedding.tflite"
    path.write_bytes(embedding_net())
    model = load_model(str(path))
    assert [l.op for l in model.layers].count(ir.CONCAT) == 2
    assert {model.layers[l].pad for l in (0, 4)} == {(1, 1, 1, 1)}
    graph = build_graph(model, "exact")
    assert 4 not in {e.first for e in graph.edges if e.fused}     # it reads the input, not 4
    plans_give_tflm_bytes(path, model, [solvers.vanilla(graph), solvers.p1_min_ram(graph)])

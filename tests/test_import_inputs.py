"""Model files as users bring them before they fit: a float .tflite (quantized post-training as
a float ONNX file is), inputs left dynamic (fixed with --input-shape), and files msf-pio cannot
run refused in one line naming the cause (several subgraphs of a streaming model). Files are
built with the flatbuffers schema and onnx.helper directly; TFLite Micro's float interpreter
is the oracle of the float graph."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from msf_pio.cli import main
from msf_pio.errors import MsfError
from msf_pio.export.tflite import tflite_bytes
from msf_pio.model import load_model, read_model
from msf_pio.model.floatnet import forward
from msf_pio.model.weights import materialize
from msf_pio.reference import run_model

from .test_reference_tflm import runtime, tflm_run
from .tflite_builder import OP, OPT, TT, TfliteBuilder, conv_options, fb

A = fb.ActivationFunctionType


def float_net(seed: int = 0, dynamic: bool = False) -> bytes:
    """float32 (1, 12, 12, 3) -> CONV 3x3/2 SAME (RELU6) -> DEPTHWISE 3x3 (RELU) -> PAD 1 ->
    CONV 3x3 VALID -> MEAN over H, W -> FULLY_CONNECTED 5, every weight float32 (the TFLite
    converter's default output); `dynamic`: batch, H and W are -1 in the shape signatures."""
    b = TfliteBuilder(seed)
    r = b.rng

    def const(name, a):
        return b.tensor(name, a.shape, TT.FLOAT32, data=a.astype("<f4"))

    def act(name, shape):
        t = b.tensor(name, shape, TT.FLOAT32)
        if dynamic and len(shape) == 4:
            b.tensors[t].shapeSignature = [-1, -1, -1, shape[3]]
        return t

    x = act("x", (1, 12, 12, 3))
    c1 = act("c1", (1, 6, 6, 8))
    b.op(OP.CONV_2D, [x, const("w1", r.normal(0, 0.4, (8, 3, 3, 3))),
                      const("b1", r.normal(0, 0.1, 8))], [c1], OPT.Conv2DOptions,
         conv_options(fb.Padding.SAME, 2, A.RELU6))
    d1 = act("d1", (1, 6, 6, 8))
    b.op(OP.DEPTHWISE_CONV_2D, [c1, const("w2", r.normal(0, 0.4, (1, 3, 3, 8))),
                                const("b2", r.normal(0, 0.1, 8))], [d1],
         OPT.DepthwiseConv2DOptions, conv_options(fb.Padding.SAME, 1, A.RELU, depthwise=True))
    paddings = b.tensor("paddings", (4, 2), TT.INT32,
                        data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]], "<i4"))
    p1 = act("p1", (1, 8, 8, 8))
    b.op(OP.PAD, [d1, paddings], [p1], OPT.PadOptions, fb.PadOptionsT())
    c2 = act("c2", (1, 6, 6, 6))
    b.op(OP.CONV_2D, [p1, const("w3", r.normal(0, 0.2, (6, 3, 3, 8))),
                      const("b3", r.normal(0, 0.1, 6))], [c2], OPT.Conv2DOptions,
         conv_options(fb.Padding.VALID, 1, A.NONE))
    axes = b.tensor("axes", (2,), TT.INT32, data=np.array([1, 2], "<i4"))
    g = b.tensor("g", (1, 6), TT.FLOAT32)
    reducer = fb.ReducerOptionsT()
    reducer.keepDims = False
    b.op(OP.MEAN, [c2, axes], [g], OPT.ReducerOptions, reducer)
    y = b.tensor("y", (1, 5), TT.FLOAT32)
    b.op(OP.FULLY_CONNECTED, [g, const("w4", r.normal(0, 0.5, (5, 6))),
                              const("b4", r.normal(0, 0.1, 5))], [y],
         OPT.FullyConnectedOptions, fb.FullyConnectedOptionsT())
    return b.finish([x], [y])


def images(n: int, seed: int = 0) -> np.ndarray:
    """Smooth random images in [-1, 1] (blobs plus grain), as calibration data would be."""
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(-1, 1, (n, 4, 4, 3)).repeat(3, axis=1).repeat(3, axis=2)
    return (0.7 * coarse + 0.3 * rng.uniform(-1, 1, (n, 12, 12, 3))).astype(np.float32)


def test_float_tflite_is_the_float_graph_and_quantizes_post_training(tmp_path):
    path = tmp_path / "float_net.tflite"
    path.write_bytes(float_net())
    model, params = read_model(path)
    assert not model.quantized and model.weights_spec == {"tflite": str(path)}
    assert [(l.op, l.out_shape, l.act, l.pad) for l in model.layers] == [
        ("conv2d", (6, 6, 8), "relu6", (0, 0, 1, 1)),
        ("depthwise_conv2d", (6, 6, 8), "relu", (1, 1, 1, 1)),
        ("conv2d", (6, 6, 6), "none", (1, 1, 1, 1)),          # the PAD, folded
        ("global_avgpool", (1, 1, 6), "none", (0, 0, 0, 0)),
        ("dense", (1, 1, 5), "none", (0, 0, 0, 0))]
    xs = images(64)
    interp = runtime.Interpreter.from_bytes(path.read_bytes())
    for x in xs[:4]:                       # the float graph is the file's, to float precision
        interp.set_input(x[None], 0)
        interp.invoke()
        np.testing.assert_allclose(forward(model, params, x).reshape(-1),
                                   interp.get_output(0).reshape(-1), rtol=1e-4, atol=1e-5)
    quantized = materialize(model, xs[:32])
    assert quantized.quantized
    floats = forward(model, params, xs[32:])
    agree = 0
    for x, f in zip(xs[32:], floats):      # the int8 model (TFLM's bytes) keeps the answers
        q = quantized.q_input
        xq = np.clip(np.round(x / q.scale) + q.zero_point, -128, 127).astype(np.int8)
        out = run_model(quantized, xq).reshape(-1)
        np.testing.assert_array_equal(out, tflm_run(tflite_bytes(quantized), xq).reshape(-1))
        agree += int(np.argmax(out) == np.argmax(f))
    assert agree >= 31, agree


def test_float_tflite_through_the_cli_with_calibration_data(tmp_path, capsys):
    path = tmp_path / "float_net.tflite"
    path.write_bytes(float_net())
    np.save(tmp_path / "cal.npy", images(8))
    out = tmp_path / "q.tflite"
    assert main(["export", str(path), "--calibration", str(tmp_path / "cal.npy"),
                 "--out", str(out)]) == 0
    exported = load_model(str(out))
    assert exported.quantized and exported.n_layers == 5


def test_dynamic_tflite_input_is_fixed_by_input_shape(tmp_path):
    static, dynamic = tmp_path / "static.tflite", tmp_path / "dynamic.tflite"
    static.write_bytes(float_net())
    dynamic.write_bytes(float_net(dynamic=True))
    with pytest.raises(MsfError, match=r"dynamic shape \[1, '\?', '\?', 3\] \(dimensions "
                                       r"H, W\): give the input's size with --input-shape"):
        load_model(str(dynamic))
    a, b = read_model(static), read_model(dynamic, (12, 12, 3))
    assert [(l.op, l.in_shape, l.out_shape, l.pad) for l in a[0].layers] == \
        [(l.op, l.in_shape, l.out_shape, l.pad) for l in b[0].layers]
    assert b[0].weights_spec == {"tflite": str(dynamic), "input_shape": [12, 12, 3]}
    x = images(4)
    np.testing.assert_array_equal(forward(a[0], a[1], x), forward(b[0], b[1], x))
    # the materialized model re-reads the file at the same size
    assert materialize(b[0], x).input_shape == (12, 12, 3)
    with pytest.raises(MsfError, match=r"--input-shape 12,12,4 \(NHWC \[1, 12, 12, 4\]\) does "
                                       "not fit it"):
        load_model(str(dynamic), (12, 12, 4))


def dynamic_onnx(tmp_path) -> str:
    """Conv 3x3 (4 filters, pads 1) -> Relu -> GlobalAveragePool on [N, 3, H, W]."""
    w = helper.make_tensor("w", TensorProto.FLOAT, (4, 3, 3, 3),
                           np.random.default_rng(0).normal(0, 0.3, 108).tolist())
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["y"], name="gap")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    path = tmp_path / "dynamic.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return str(path)


def test_dynamic_onnx_input_is_fixed_by_input_shape(tmp_path, capsys):
    path = dynamic_onnx(tmp_path)
    with pytest.raises(MsfError) as exc:
        load_model(path)
    assert str(exc.value) == (f"{path}: input 'x': has a dynamic shape [-1, 3, 'H', 'W'] "
                              "(dimensions N, H, W): give the input's size with --input-shape "
                              "H,W,C (custom_msf_input_shape)")
    model = load_model(path, (20, 16, 3))
    assert [(l.op, l.in_shape, l.out_shape) for l in model.layers] == [
        ("conv2d", (20, 16, 3), (20, 16, 4)), ("global_avgpool", (20, 16, 4), (1, 1, 4))]
    assert materialize(model).input_shape == (20, 16, 3)
    assert main(["solve", path, "--input-shape", "20,16,3", "--json"]) == 0
    assert '"feasible": true' in capsys.readouterr().out
    assert main(["solve", path, "--input-shape", "20,16"]) == 2
    assert "--input-shape: must be H,W,C" in capsys.readouterr().err


def test_a_streaming_model_with_state_subgraphs_names_the_cause(tmp_path):
    """microWakeWord's files keep their ring buffers in resource variables a second subgraph
    initializes (CALL_ONCE, VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE)."""
    b = TfliteBuilder(0)
    x = b.activation("x", (1, 3, 1, 8), 0.1, 0)
    handle = b.tensor("state", (), TT.INT32)
    b.op(OP.CALL_ONCE, [], [])
    b.op(OP.VAR_HANDLE, [], [handle])
    y = b.activation("y", (1, 3, 1, 8), 0.1, 0)
    b.op(OP.READ_VARIABLE, [handle], [y])
    data = b.finish([x], [y], shuffle=False)
    model = fb.ModelT.InitFromObj(fb.Model.GetRootAs(data, 0))
    model.subgraphs.append(fb.SubGraphT())
    builder = __import__("flatbuffers").Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    path = tmp_path / "stateful.tflite"
    path.write_bytes(bytes(builder.Output()))
    with pytest.raises(MsfError) as exc:
        load_model(str(path))
    assert str(exc.value) == (f"{path}: has 2 subgraphs: a stateful streaming model (state "
                              "variables: CALL_ONCE, READ_VARIABLE, VAR_HANDLE) whose initial "
                              "state is not one CALL_ONCE of subgraph 1, which msf-pio needs")


def uint8_net(seed: int = 0) -> bytes:
    """uint8 (1, 8, 8, 3) camera bytes -> QUANTIZE to int8 -> CONV 3x3/2 (RELU) -> CONV 1x1 ->
    QUANTIZE to uint8 (a map output, as detection heads return them)."""
    b = TfliteBuilder(seed)
    x_u8 = b.tensor("image", (1, 8, 8, 3), TT.UINT8, np.float32(1 / 255), 0)
    s_x = np.float32(1 / 255)
    x = b.activation("image_int8", (1, 8, 8, 3), s_x, -128)
    b.op(OP.QUANTIZE, [x_u8], [x])
    w, sw = b.weights("stem", (6, 3, 3, 3), 0)
    s1 = b.out_scale(s_x, sw, 27)
    c1 = b.activation("stem", (1, 4, 4, 6), s1, -128)
    b.op(OP.CONV_2D, [x, w, b.bias("stem", 6, 3000)], [c1], OPT.Conv2DOptions,
         conv_options(fb.Padding.SAME, 2, A.RELU))
    w, sw = b.weights("head", (4, 1, 1, 6), 0)
    s2 = b.out_scale(s1, sw, 6)
    c2 = b.activation("head", (1, 4, 4, 4), s2, 3)
    b.op(OP.CONV_2D, [c1, w, b.bias("head", 4, 3000)], [c2], OPT.Conv2DOptions,
         conv_options(fb.Padding.VALID, 1, A.NONE))
    y = b.tensor("scores", (1, 4, 4, 4), TT.UINT8, np.float32(s2 * 1.5), 131)
    b.op(OP.QUANTIZE, [c2], [y])
    return b.finish([x_u8], [y])


@pytest.mark.parametrize("case", ["float_edges", "uint8_edges", "nchw_input"])
def test_the_c_api_takes_and_returns_the_files_own_types_and_shapes(tmp_path, case, capsys):
    """msf_model_run_io (and `msf-pio run`) on the file's own input gives TFLite Micro's
    output on the same file, in the file's type and shape."""
    from .test_tflite_layouts import nchw_net
    from .tflite_builder import foreign_net
    data = {"float_edges": foreign_net, "uint8_edges": uint8_net, "nchw_input": nchw_net}[case](0)
    path = tmp_path / f"{case}.tflite"
    path.write_bytes(data)
    model = load_model(str(path))
    dtype = {"float_edges": np.float32, "uint8_edges": np.uint8, "nchw_input": np.int8}[case]
    rng = np.random.default_rng(1)
    dims = model.input_io.dims
    xs = [(rng.uniform(-1.5, 1.5, dims) if dtype == np.float32 else
           rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1, dims)).astype(dtype)
          for _ in range(2)]
    interp = runtime.Interpreter.from_bytes(data)
    expected = []
    for x in xs:
        interp.set_input(x, 0)
        interp.invoke()
        expected.append(interp.get_output(0))
    assert expected[0].dtype == model.output_io.dtype
    from msf_pio.codegen.io import from_file, to_file
    for x, ref in zip(xs, expected):    # the numpy twin of the conversions, around the reference
        np.testing.assert_array_equal(to_file(model, run_model(model, from_file(model, x))), ref)
    # the generated C's msf_model_run_io, through `msf-pio run` (one host build)
    np.save(tmp_path / "x.npy", xs[0])
    assert main(["run", str(path), "--input", str(tmp_path / "x.npy"),
                 "--out", str(tmp_path / "y.npy")]) == 0
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == expected[0].dtype and y.shape == expected[0].shape
    np.testing.assert_array_equal(y, expected[0])

"""YAML spec loader: shape inference, macros and errors that name the file, layer and field."""
import numpy as np
import pytest

from msf_pio.errors import MsfError
from msf_pio.model import ir, load_model
from msf_pio.model.spec import load_spec


def write(tmp_path, text, name="net.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(path):
    with pytest.raises(MsfError) as info:
        load_spec(path)
    return str(info.value)


def test_shapes_and_macro_expansion(tmp_path):
    path = write(tmp_path, """
name: t
input: {shape: [32, 30, 3]}
layers:
  - {op: conv2d, out: 8, kernel: 3, stride: 2, act: relu6}
  - {op: inverted_residual, out: 8, expand: 3, kernel: 5, stride: 1, repeat: 2}
  - {op: inverted_residual, out: 16, expand: 1, kernel: 3, stride: 2}
  - {op: max_pool, kernel: 2}
  - {op: global_avgpool}
  - {op: dense, out: 10}
""")
    m = load_spec(path)
    ops = [l.op for l in m.layers]
    assert ops == ["conv2d"] + ["conv2d", "depthwise_conv2d", "conv2d", "add"] * 2 + \
        ["depthwise_conv2d", "conv2d", "max_pool", "global_avgpool", "dense"]
    assert m.layers[0].out_shape == (16, 15, 8)          # SAME: ceil(32/2), ceil(30/2)
    assert m.layers[0].pad == (0, 0, 1, 1)               # TFLite puts the odd pixel after
    assert m.residuals() == {4: 1, 8: 5}                 # adds read the block inputs
    assert m.layers[9].out_shape == (8, 8, 8)
    assert m.layers[12].out_shape == (1, 1, 16) and m.output_shape == (1, 1, 10)


def test_rectangular_windows(tmp_path):
    """kernel and stride take [rows, columns]; each axis gets its own SAME padding."""
    path = write(tmp_path, """
input: {shape: [49, 10, 1]}
layers:
  - {op: conv2d, out: 8, kernel: [10, 4], stride: 2}
  - {op: depthwise_conv2d, kernel: [3, 1], stride: [2, 1]}
  - {op: inverted_residual, out: 8, expand: 2, kernel: [1, 3], stride: [1, 2]}
  - {op: max_pool, kernel: [3, 2]}
  - {op: avg_pool, kernel: [2, 1], stride: 1, padding: valid}
""")
    m = load_spec(path)
    got = [(l.kernel, l.stride, l.pad, l.out_shape) for l in m.layers]
    assert got == [((10, 4), (2, 2), (4, 1, 5, 1), (25, 5, 8)),
                   ((3, 1), (2, 1), (1, 0, 1, 0), (13, 5, 8)),
                   ((1, 1), (1, 1), (0, 0, 0, 0), (13, 5, 16)),          # expand
                   ((1, 3), (1, 2), (0, 1, 0, 1), (13, 3, 16)),          # depthwise
                   ((1, 1), (1, 1), (0, 0, 0, 0), (13, 3, 8)),           # project
                   ((3, 2), (3, 2), (0, 0, 0, 0), (4, 1, 8)),            # stride = kernel
                   ((2, 1), (1, 1), (0, 0, 0, 0), (3, 1, 8))]
    assert (m.layers[0].kernel_h, m.layers[0].kernel_w) == (10, 4)
    assert (m.layers[1].stride_h, m.layers[1].stride_w) == (2, 1)


@pytest.mark.parametrize("layer,where,words", [
    ("{op: conv3d, out: 4}", "layers[1].op", "unknown op 'conv3d'"),
    ("{op: conv2d, out: 4}", "layers[1].kernel", "is required"),
    ("{op: conv2d, out: -4, kernel: 3}", "layers[1].out", "integer >= 1"),
    ("{op: conv2d, out: 4, kernel: 3, colour: red}", "layers[1].colour", "unknown field"),
    ("{op: conv2d, out: 4, kernel: 3, padding: wide}", "layers[1].padding", "'same', 'valid'"),
    ("{op: conv2d, out: 4, kernel: 3, act: gelu}", "layers[1].act", "must be one of"),
    ("{op: conv2d, out: 4, kernel: 9, padding: valid}", "layers[1].kernel", "does not fit"),
    ("{op: depthwise_conv2d, out: 5, kernel: 3}", "layers[1].out", "keeps the channels"),
    ("{op: add, from: input}", "layers[1].from", "differs from the current shape"),
    ("{op: add, from: 0}", "layers[1].from", "to itself"),
    ("{op: add, from: 7}", "layers[1].from", "earlier layer"),
    ("{op: inverted_residual, out: 6, stride: 2, residual: true}", "layers[1].residual",
     "stride 1"),
    ("[1, 2]", "layers[1]", "mapping"),
    ("{op: leaky_relu, alpha: -0.1}", "layers[1].alpha", "finite number >= 0"),
    ("{op: leaky_relu, alpha: fast}", "layers[1].alpha", "finite number"),
    ("{op: softmax, beta: 0}", "layers[1].beta", "finite number > 0"),
    ("{op: hard_swish, act: relu}", "layers[1].act", "unknown field"),
    # windows: a kernel and a stride are an integer or [rows, columns]
    ("{op: conv2d, out: 4, kernel: [3]}", "layers[1].kernel", "[rows, columns]"),
    ("{op: conv2d, out: 4, kernel: [3, 1, 1]}", "layers[1].kernel", "[rows, columns]"),
    ("{op: conv2d, out: 4, kernel: [0, 3]}", "layers[1].kernel", "integer >= 1"),
    ("{op: conv2d, out: 4, kernel: [3, true]}", "layers[1].kernel", "integer >= 1"),
    ("{op: conv2d, out: 4, kernel: 3, stride: [1, x]}", "layers[1].stride", "[rows, columns]"),
    ("{op: max_pool, kernel: 2, stride: 2.5}", "layers[1].stride", "integer >= 1"),
    ("{op: conv2d, out: 4, kernel: [3, 1], padding: 1}", "layers[1].padding", "[0, kernel)"),
    ("{op: conv2d, out: 4, kernel: [5, 1], padding: valid}", "layers[1].kernel",
     "kernel 5x1 does not fit the 4x4 input"),
    ("{op: inverted_residual, out: 3, kernel: [3, 0]}", "layers[1].kernel", "integer >= 1"),
])
def test_layer_errors_name_file_layer_and_field(tmp_path, layer, where, words):
    path = write(tmp_path, f"""
input: {{shape: [8, 8, 3]}}
layers:
  - {{op: conv2d, out: 4, kernel: 3, stride: 2}}
  - {layer}
""")
    msg = error_of(path)
    assert str(path) in msg and where in msg and words in msg and "\n" not in msg


@pytest.mark.parametrize("text,words", [
    ("input: {shape: [8, 8]}\nlayers: [{op: global_avgpool}]", "input.shape"),
    ("input: {shape: [8, 8, 3]}\nlayers: []", "layers"),
    ("input: {shape: [8, 8, 3]}\nlayers: [{op: global_avgpool}]\nweights: {random: x}",
     "weights.random"),
    ("input: {shape: [8, 8, 3]}\nlayer: []", "unknown top-level field"),
    ("input: {shape: [8, 8, 3]\nlayers: [", "malformed YAML"),
    ("- just\n- a list", "mapping"),
])
def test_top_level_errors(tmp_path, text, words):
    path = write(tmp_path, text)
    msg = error_of(path)
    assert str(path) in msg and words in msg


def test_missing_file_and_unknown_zoo_name():
    with pytest.raises(MsfError, match="no such model file"):
        load_model("no-such-model")
    with pytest.raises(MsfError, match="cannot read"):
        load_spec("/nonexistent/net.yaml")


def test_add_by_name_and_input(tmp_path):
    path = write(tmp_path, """
input: {shape: [8, 8, 4]}
layers:
  - {op: conv2d, out: 4, kernel: 3, name: a}
  - {op: conv2d, out: 4, kernel: 3}
  - {op: add, from: a}
  - {op: add, from: input}
""")
    m = load_spec(path)
    assert m.residuals() == {2: 1, 3: 0}
    assert all(l.op != ir.ADD or l.out_shape == (8, 8, 4) for l in m.layers)


def test_pixel_ops_keep_the_shape_and_store_float32_parameters(tmp_path):
    path = write(tmp_path, """
input: {shape: [6, 6, 3]}
layers:
  - {op: conv2d, out: 4, kernel: 3}
  - {op: hard_swish}
  - {op: leaky_relu, alpha: 0.1}
  - {op: logistic}
  - {op: global_avgpool}
  - {op: dense, out: 5}
  - {op: softmax, beta: 0.5}
""")
    m = load_spec(path)
    assert [l.op for l in m.layers[1:4]] == ["hard_swish", "leaky_relu", "logistic"]
    assert all(l.out_shape == (6, 6, 4) for l in m.layers[:4])
    assert m.layers[2].alpha == float(np.float32(0.1)) and m.layers[6].beta == 0.5
    assert m.output_shape == (1, 1, 5)


def test_prelu_gets_one_int8_slope_per_channel(tmp_path):
    from msf_pio.fusion.exact_cost import layer_macs
    from msf_pio.model.weights import materialize
    path = write(tmp_path, """
input: {shape: [6, 6, 3]}
weights: {random: 3}
layers:
  - {op: conv2d, out: 4, kernel: 3}
  - {op: prelu}
""")
    m = materialize(load_spec(path))
    prelu = m.layers[1]
    assert prelu.out_shape == (6, 6, 4) and layer_macs(prelu) == 0
    assert prelu.weights.w.shape == (4,) and prelu.weights.w.dtype == np.int8
    assert prelu.weights.bias.size == 0 and prelu.weights.scales.shape == (1,)

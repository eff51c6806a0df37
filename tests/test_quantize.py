"""Post-training quantization, the float forward and weight materialization (random, npz)."""
import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from msf_pio.errors import MsfError
from msf_pio.model import load_model
from msf_pio.model.floatnet import FloatWeights, forward, weight_shape
from msf_pio.model.ir import Layer
from msf_pio.model.quantize import (activation_qparams, dequantize, quantize_tensor,
                                    quantize_weights, simulate)
from msf_pio.model.spec import spec_to_model
from msf_pio.model.weights import calibration_inputs, materialize, random_weights
from msf_pio.model.zoo import zoo_names, zoo_path

from .random_models import small_specs


@given(st.floats(-100, 100), st.floats(0, 100))
def test_activation_range_includes_zero_exactly(lo, width):
    qp = activation_qparams(lo, lo + width)
    assert -128 <= qp.zero_point <= 127 and qp.scale > 0
    assert dequantize(np.int8(qp.zero_point), qp) == 0          # real 0 is exact (padding)
    for v in (min(lo, 0), max(lo + width, 0)):
        assert abs(dequantize(quantize_tensor(np.float32(v), qp), qp) - v) <= qp.scale * 1.0001


def test_activation_qparams_examples():
    assert activation_qparams(0.0, 6.0) == activation_qparams(2.0, 6.0)
    assert activation_qparams(0.0, 6.0).zero_point == -128        # relu6: all 256 steps >= 0
    assert activation_qparams(-1.0, 1.0).zero_point == -1          # -0.5 rounds away from 0
    assert activation_qparams(0.0, 0.0).zero_point == -128


def _layer(op, cin=3, cout=4, k=3):
    shape = (1, 1, cin) if op == "dense" else (5, 5, cin)
    return Layer(op=op, in_shape=shape, out_shape=shape[:2] + (cout,), kernel=1 if op == "dense" else k)


@pytest.mark.parametrize("op, axis", [("conv2d", 0), ("depthwise_conv2d", 3), ("dense", None)])
def test_weight_quantization(op, axis):
    layer = _layer(op, cout=3 if op == "depthwise_conv2d" else 4)
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.2, weight_shape(layer))
    zero = [slice(None)] * w.ndim
    zero[axis or 0] = 1
    w[tuple(zero)] = 0                                            # a dead channel (or row)
    b = rng.normal(0, 0.1, layer.cout)
    q = quantize_weights(layer, FloatWeights(w, b), input_scale=0.02)
    assert q.w.dtype == np.int8 and q.bias.dtype == np.int32 and q.w.shape == w.shape
    assert q.w.min() >= -127 and np.all(q.scales > 0)
    if axis is None:                                              # dense: per tensor
        assert q.scales.shape == (1,)
        assert np.abs(q.w).max() == 127
        np.testing.assert_allclose(q.scales[0], np.abs(w).max() / 127, rtol=1e-6)
    else:
        per_channel = np.abs(np.moveaxis(q.w, axis, 0).reshape(layer.cout, -1)).max(1)
        assert q.scales.shape == (layer.cout,)
        assert list(per_channel) == [127 if c != 1 else 0 for c in range(layer.cout)]
        expected = np.abs(np.moveaxis(w, axis, 0).reshape(layer.cout, -1)).max(1) / 127
        np.testing.assert_allclose(q.scales[[0, 2]], expected[[0, 2]], rtol=1e-6)
    shape = [1] * w.ndim
    shape[axis or 0] = -1
    scales = q.scales.reshape(shape) if axis is not None else q.scales[0]
    assert np.abs(q.w * scales - w).max() <= q.scales.max() / 2 + 1e-9
    np.testing.assert_array_equal(q.bias, np.round(b / (0.02 * q.scales)).astype(np.int32))


def test_avg_pool_counts_only_valid_taps():
    model = spec_to_model({"input": {"shape": [4, 4, 1]},
                           "layers": [{"op": "avg_pool", "kernel": 3, "stride": 1, "padding": 1}]})
    x = np.arange(16, dtype=np.float32).reshape(4, 4, 1)
    y = forward(model, [None], x)
    assert y[0, 0, 0] == np.mean([0, 1, 4, 5])
    assert y[1, 1, 0] == np.mean([0, 1, 2, 4, 5, 6, 8, 9, 10])


def test_pools_keep_input_quantization_and_relu6_range():
    model = materialize(load_model("tiny"))
    for i, layer in enumerate(model.layers):
        if layer.op in ("max_pool", "avg_pool", "global_avgpool"):
            assert layer.q_out == model.tensor_q(i)
        if layer.act in ("relu", "relu6"):
            assert layer.q_out.zero_point == -128               # range [0, max]
        if layer.act == "relu6":
            assert layer.q_out.scale * 255 <= 6 * 1.0001


def _fingerprint(model):
    parts = [repr((model.q_input, [l.q_out for l in model.layers]))]
    for layer in model.layers:
        if layer.weights is not None:
            parts += [layer.weights.w.tobytes(), layer.weights.bias.tobytes(),
                      layer.weights.scales.tobytes()]
    return parts


@pytest.mark.parametrize("name", zoo_names(scale=False))
def test_zoo_materializes_deterministically_and_unsaturated(name):
    model = load_model(name)
    first, second = materialize(model), materialize(model)
    assert first.quantized and _fingerprint(first) == _fingerprint(second)
    assert all(l.weights is not None for l in first.layers
               if l.op in ("conv2d", "depthwise_conv2d", "dense"))
    seed = model.weights_spec["random"]
    x = calibration_inputs(model.input_shape, seed + 1, n=2)    # inputs not seen in calibration
    y = forward(model, random_weights(model, seed), x)
    q = quantize_tensor(y, first.layers[-1].q_out)
    assert np.mean((q == -128) | (q == 127)) < 0.5 and len(np.unique(q)) > 1
    assert np.corrcoef(simulate(first, x).ravel(), y.ravel())[0, 1] > 0.95   # PTQ noise, 50 layers


def test_random_weights_depend_on_the_seed():
    model = load_model("tiny")
    other = model.with_layers(model.layers)
    other.weights_spec = {"random": 8}
    assert _fingerprint(materialize(model)) != _fingerprint(materialize(other))


@settings(max_examples=15, deadline=None)
@given(small_specs(max_layers=8))
def test_random_models_materialize(spec):
    model = materialize(spec_to_model(spec))
    assert model.quantized
    x = calibration_inputs(model.input_shape, 5, n=1)[0]
    assert simulate(model, x).shape == model.output_shape


def _npz_spec(tmp_path, arrays):
    np.savez(tmp_path / "w.npz", **arrays)
    spec = {"name": "tiny-npz", "input": {"shape": [16, 16, 3]}, "weights": {"npz": "w.npz"},
            "layers": _tiny_layers()}
    return spec_to_model(spec, source=str(tmp_path / "net.yaml"))


def _tiny_layers():
    return yaml.safe_load(zoo_path("tiny").read_text())["layers"]


def _tiny_arrays():
    model = load_model("tiny")
    arrays = {}
    for layer, p in zip(model.layers, random_weights(model, 7)):
        if p is not None:
            arrays[f"{layer.name}/w"], arrays[f"{layer.name}/b"] = p.w, p.b
    return model, arrays


def test_npz_weights_load_by_layer_name(tmp_path):
    model, arrays = _tiny_arrays()
    calibration = calibration_inputs(model.input_shape, 3)
    from_npz = materialize(_npz_spec(tmp_path, arrays), calibration)
    assert _fingerprint(from_npz) == _fingerprint(materialize(model, calibration))


@pytest.mark.parametrize("change, where, message", [
    (lambda a: a.pop("ir1.dw/w"), "ir1.dw/w", "missing array"),
    (lambda a: a.update({"ir1.dw/w": np.zeros((3, 3, 8))}), "ir1.dw/w", "shape"),
    (lambda a: a.update({"ir1.dw/b": np.zeros(7)}), "ir1.dw/b", "shape"),
    (lambda a: a.update({"nosuch/w": np.zeros(1)}), "nosuch/w", "no weighted layer"),
])
def test_npz_errors_name_file_and_key(tmp_path, change, where, message):
    _, arrays = _tiny_arrays()
    change(arrays)
    with pytest.raises(MsfError, match=f"w.npz: {where}: .*{message}"):
        materialize(_npz_spec(tmp_path, arrays))


def test_hard_swish_after_a_wide_input_range_keeps_tflites_scale_bound():
    """A conv whose outputs reach -100 feeds hard-swish (output in [-0.375, 0]): the calibrated
    output range alone gives s_out < s_in / 128, which TFLite's int16 kernel cannot run; the
    quantizer widens it, and the model quantizes and runs."""
    from msf_pio.model.quantize import quantize
    from msf_pio import numerics
    from msf_pio.reference import run_model
    model = spec_to_model({"name": "hs", "input": {"shape": [4, 4, 2]}, "layers": [
        {"op": "pointwise", "out": 3}, {"op": "hard_swish"}]})
    params = [FloatWeights(np.full((3, 1, 1, 2), -50.0), np.zeros(3)), None]
    calib = np.random.default_rng(0).uniform(0, 1, (4, 4, 4, 2)).astype(np.float32)
    q = quantize(model, params, calib)
    s_in, s_out = q.layers[0].q_out.scale, q.layers[1].q_out.scale
    assert s_out >= s_in / 128 > activation_qparams(-0.375, 0).scale
    numerics.requantization(q, 1)                      # TFLite's parameters exist
    x = quantize_tensor(calib[0], q.q_input)
    y = dequantize(run_model(q, x), q.layers[1].q_out)
    assert np.abs(y).max() <= 0.375 + s_out

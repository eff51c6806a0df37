"""Weights for a model: `materialize` turns an IR model plus its `weights_spec` into int8.

Sources (the spec's `weights:` field):
- `{random: SEED}`: seeded float weights with realistic scales, quantized from seeded inputs;
  for architecture studies, benchmarks and tests (deterministic for a seed).
- `{npz: FILE}`: float weights per layer name, keys `<layer name>/w` (IR layout: conv OHWI
  (C_out, k, k, C_in), depthwise (1, k, k, C), dense (out, in), prelu slopes (C,)) and optional
  `<layer name>/b` (C_out, default 0; prelu has none); quantized post-training.
- `{onnx: FILE}`: the weights of an ONNX model whose layers match the spec's one by one; a
  float file is quantized post-training, a QDQ file keeps its own quantization.
- `{tflite: FILE}`: a float .tflite file's own weights (how a float .tflite comes back from
  the importer), quantized post-training; `input_shape` next to it: the H, W, C its dynamic
  input was fixed at.
Calibration inputs are a float batch (N, H, W, C) (calibration.py reads them from .npy/.npz);
unless given, seeded random images in an input range, with a one-line warning for real weights.
"""
from __future__ import annotations

import copy
import zipfile
from dataclasses import replace

import numpy as np

from ..errors import MsfError
from .calibration import DEFAULT_RANGE, warn_random_calibration
from .floatnet import PARAM_OPS, FloatWeights, weight_shape
from . import ir
from .ir import Model
from .quantize import quantize

CALIBRATION_IMAGES = 4


def materialize(model: Model, calibration: np.ndarray | None = None,
                input_range: tuple[float, float] | None = None) -> Model:
    """A quantized copy of `model` with int8 weights (an already quantized model is copied).

    `calibration` is a float batch (N, H, W, C) of real inputs; without it seeded random images
    in `input_range` (default [-1, 1]) stand in, with a warning when the weights are real."""
    if model.quantized and all(l.weights is not None for l in model.layers if l.op in PARAM_OPS):
        return copy.deepcopy(model)
    kind, arg = next(iter(model.weights_spec.items())) if model.weights_spec else ("random", 0)
    seed = arg if kind == "random" else 0
    if calibration is None:
        lo, hi = input_range or DEFAULT_RANGE
        calibration = calibration_inputs(model.input_shape, seed)
        if (lo, hi) != DEFAULT_RANGE:
            calibration = lo + (calibration + 1.0) * ((hi - lo) / 2.0)
        if kind != "random":
            warn_random_calibration(model.source or str(arg), (lo, hi))
    calibration = np.asarray(calibration, np.float32)
    if calibration.ndim != 4 or tuple(calibration.shape[1:]) != model.input_shape:
        h, w, c = model.input_shape
        raise MsfError(f"calibration inputs must be a batch (N, {h}, {w}, {c}), got shape "
                       f"{tuple(calibration.shape)}", source=model.source)
    if kind == "random":
        return quantize(model, random_weights(model, seed), calibration)
    if kind == "npz":
        return quantize(model, npz_weights(model, arg), calibration)
    from . import read_model              # {onnx: FILE} or {tflite: FILE}: a float file's own
    shape = model.weights_spec.get("input_shape")
    imported, params = read_model(arg, None if shape is None else tuple(shape))
    _check_same_layers(model, imported, arg, compare_act=params is not None)
    if params is not None:
        return quantize(model, params, calibration)
    layers = [replace(l, weights=o.weights, q_out=o.q_out, requantize=o.requantize)
              for l, o in zip(model.layers, imported.layers)]
    return replace(model, layers=layers, q_input=imported.q_input)


def random_weights(model: Model, seed: int) -> list[FloatWeights | None]:
    """He-style float weights (gain 2 before a ReLU, else 1), a BN-like log-normal scale per
    output channel and small biases: activations keep a realistic spread through the depth."""
    rng = np.random.default_rng(seed)
    params: list[FloatWeights | None] = []
    for layer in model.layers:
        if layer.op == ir.PRELU:              # slopes as a trained PReLU has them
            params.append(FloatWeights(rng.uniform(0.05, 0.4, weight_shape(layer)), np.zeros(0)))
            continue
        if layer.op not in PARAM_OPS:
            params.append(None)
            continue
        shape = weight_shape(layer)
        fan_in = int(np.prod(shape[1:3] if layer.op == ir.DEPTHWISE else shape[1:]))
        gain = 1.0 if layer.act == "none" else 2.0
        w = rng.standard_normal(shape) * np.sqrt(gain / fan_in)
        channel = rng.lognormal(0.0, 0.25, layer.cout)
        w *= channel if layer.op == ir.DEPTHWISE else channel.reshape((-1,) + (1,) * (w.ndim - 1))
        params.append(FloatWeights(w, rng.normal(0.0, 0.05, layer.cout)))
    return params


def calibration_inputs(shape: tuple[int, int, int], seed: int,
                       n: int = CALIBRATION_IMAGES) -> np.ndarray:
    """Seeded smooth-noise images in [-1, 1]: coarse blobs plus fine grain, like real pictures
    more than white noise is (deep features then vary between images)."""
    rng = np.random.default_rng([seed, 1])
    h, w, c = shape
    cell = max(1, min(h, w) // 8)
    coarse = rng.uniform(-1, 1, (n, -(-h // cell), -(-w // cell), c))
    coarse = coarse.repeat(cell, axis=1).repeat(cell, axis=2)[:, :h, :w]
    return (0.7 * coarse + 0.3 * rng.uniform(-1, 1, (n, h, w, c))).astype(np.float32)


def npz_weights(model: Model, path: str) -> list[FloatWeights | None]:
    """Float weights from an .npz keyed `<layer name>/w` and `<layer name>/b` (bias optional)."""
    try:
        with np.load(path) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise MsfError(f"cannot read weights ({exc})", source=path) from None
    params: list[FloatWeights | None] = []
    used = set()
    for layer in model.layers:
        if layer.op not in PARAM_OPS:
            params.append(None)
            continue
        w = _array(arrays, f"{layer.name}/w", weight_shape(layer), path)
        if layer.op == ir.PRELU:
            used.add(f"{layer.name}/w")
            params.append(FloatWeights(w, np.zeros(0)))
            continue
        b_key = f"{layer.name}/b"
        b = _array(arrays, b_key, (layer.cout,), path) if b_key in arrays else np.zeros(layer.cout)
        used |= {f"{layer.name}/w", b_key}
        params.append(FloatWeights(w, b))
    unknown = sorted(set(arrays) - used)
    if unknown:
        raise MsfError("no weighted layer of the model has this name (keys are "
                       "'<layer name>/w' and '<layer name>/b')", source=path, where=unknown[0])
    return params


def _array(arrays: dict, key: str, shape: tuple[int, ...], path: str) -> np.ndarray:
    if key not in arrays:
        raise MsfError(f"missing array (expected shape {list(shape)})", source=path, where=key)
    a = arrays[key]
    if a.shape != shape or not np.issubdtype(a.dtype, np.number):
        raise MsfError(f"expected a numeric array of shape {list(shape)}, got {a.dtype} "
                       f"{list(a.shape)}", source=path, where=key)
    if not np.isfinite(a).all():
        raise MsfError("contains NaN or infinity", source=path, where=key)
    return a


def _check_same_layers(model: Model, imported: Model, path: str, compare_act: bool) -> None:
    """The spec and the ONNX file must describe the same layers in the same order."""
    fields = ("op", "in_shape", "out_shape", "kernel", "stride", "pad", "skip", "input")
    fields += ("act",) if compare_act else ()   # QDQ files fold activations into output ranges
    if model.n_layers != imported.n_layers:
        raise MsfError(f"has {imported.n_layers} layers, the spec {model.n_layers}", source=path)
    for i, (a, b) in enumerate(zip(model.layers, imported.layers)):
        for f in fields:
            if getattr(a, f) != getattr(b, f):
                raise MsfError(f"{f} is {getattr(b, f)!r} in the ONNX file ({b.name}) but "
                               f"{getattr(a, f)!r} in the spec ({a.name})", source=path,
                               where=f"layers[{i}]")

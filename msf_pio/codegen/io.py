"""msf_model_run_io: the model as its file takes and returns it (DESIGN.md section 3's C API at
the file's edges): a uint8 or float input, an NCHW or (1, N) one, converted into the int8 H x W
x C the plan runs on by the file's own QUANTIZE arithmetic; the output converted back by its
DEQUANTIZE (or QUANTIZE to uint8). A model from a YAML spec, or a file already int8 NHWC at
both edges, gets the same entry point with int8 types (a copy-free call of msf_model_run)."""
from __future__ import annotations

import numpy as np

from .. import numerics as nm
from ..model.ir import Model, TensorIO

C_TYPES = {"int8": "int8_t", "uint8": "uint8_t", "float32": "float"}


def io_of(model: Model) -> tuple[TensorIO, TensorIO]:
    """The file's input and output (int8, the IR's own shape, where the model has none;
    several outputs: int8, packed one after another as msf_model_run packs them)."""
    h, w, c = model.input_shape
    oh, ow, oc = model.output_shape
    if len(model.output_tensors) > 1:
        return (model.input_io or TensorIO("int8", (1, h, w, c)),
                TensorIO("int8", (1, model.output_bytes())))
    return (model.input_io or TensorIO("int8", (1, h, w, c)),
            model.output_io or TensorIO("int8", (1, oh, ow, oc)))


def _plain(io: TensorIO) -> bool:
    """Bytes laid out and typed as the IR's: no conversion needed."""
    return io.dtype == "int8" and not io.channels_first


def header_lines(model: Model) -> list[str]:
    i, o = io_of(model)
    return [
        "/* The graph's input and output as the model file has them (its types, its layout:",
        " * NHWC, NCHW or (1, N)), converted by the file's own QUANTIZE / DEQUANTIZE. */",
        f"typedef {C_TYPES[i.dtype]} msf_input_t;",
        f"typedef {C_TYPES[o.dtype]} msf_output_t;",
        f"#define MSF_MODEL_IO_INPUT_SIZE {int(np.prod(i.dims))}",
        f"#define MSF_MODEL_IO_OUTPUT_SIZE {int(np.prod(o.dims))}",
        "int msf_model_run_io(const msf_input_t *input, msf_output_t *output);",
        "",
    ]


def _index(io: TensorIO, hwc: tuple[int, int, int]) -> str:
    """C expression of the IR (HWC) index of the file's element `i` (loop variable)."""
    if not io.channels_first:
        return "i"
    h, w, c = hwc
    return f"(i % {h * w}) * {c} + i / {h * w}"


def source_lines(model: Model) -> list[str]:
    i, o = io_of(model)
    if _plain(i) and _plain(o):
        return ["int msf_model_run_io(const msf_input_t *input, msf_output_t *output)", "{",
                "    return msf_model_run(input, output);", "}", ""]
    h, w, c = model.input_shape
    n_in, n_out = h * w * c, model.output_bytes()
    out = []
    if not _plain(i):
        out.append(f"static int8_t msf_io_input[{n_in}];")
    if not _plain(o):
        out.append(f"static int8_t msf_io_output[{n_out}];")
    out += ["int msf_model_run_io(const msf_input_t *input, msf_output_t *output)", "{"]
    if not _plain(i):
        out += ["    for (int32_t i = 0; i < MSF_MODEL_IO_INPUT_SIZE; i++) {",
                f"        msf_io_input[{_index(i, model.input_shape)}] = "
                f"{_to_int8(i, model.q_input)};", "    }"]
    src = "msf_io_input" if not _plain(i) else "input"
    dst = "msf_io_output" if not _plain(o) else "output"
    out.append(f"    msf_model_run({src}, {dst});")
    if not _plain(o):
        out += ["    for (int32_t i = 0; i < MSF_MODEL_IO_OUTPUT_SIZE; i++) {",
                f"        output[i] = {_from_int8(o, model.layers[-1].q_out, model.output_shape)};",
                "    }"]
    out += ["    return 0;", "}", ""]
    if i.dtype == "float32":
        out = _ROUND + out
    if o.dtype == "uint8":
        out = ["static uint8_t msf_to_uint8(int32_t v)", "{",
               "    return (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));", "}", ""] + out
    return out


_ROUND = [
    "/* round(x / scale) + zero point, clamped: TFLite's AffineQuantize (the quotient in float,",
    " * rounded half away from zero; exact in double, where x + 0.5f in float is not). */",
    "static int8_t msf_quantize_float(float x, float scale, int32_t zero_point)",
    "{",
    "    double t = (double)(x / scale);",
    "    t = t > 1e6 ? 1e6 : (t > -1e6 ? t : -1e6);",
    "    const int32_t v = (t >= 0 ? (int32_t)(t + 0.5) : -(int32_t)(0.5 - t)) + zero_point;",
    "    return (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));",
    "}",
    "",
]


def _to_int8(io: TensorIO, q) -> str:
    x = "input[i]"
    if io.dtype == "int8":
        return x
    if io.dtype == "float32":
        return f"msf_quantize_float({x}, {float(np.float32(q.scale))!r}f, {q.zero_point})"
    m, s = nm.quantize_multiplier(nm.f32(io.q.scale) / nm.f32(q.scale))   # TFLite's Requantize
    return (f"msf_clamp(msf_requantize((int32_t){x} - {io.q.zero_point}, {int(m)}, {int(s)}) + "
            f"{q.zero_point}, -128, 127)")


def _from_int8(io: TensorIO, q, hwc) -> str:
    x = f"msf_io_output[{_index(io, hwc)}]"
    if io.dtype == "int8":
        return x
    if io.dtype == "float32":        # TFLite's Dequantize: the scale as double
        return f"(float)({float(np.float32(q.scale))!r} * ({x} - {q.zero_point}))"
    m, s = nm.quantize_multiplier(nm.f32(q.scale) / nm.f32(io.q.scale))
    return (f"msf_to_uint8(msf_requantize((int32_t){x} - {q.zero_point}, {int(m)}, {int(s)}) + "
            f"{io.q.zero_point})")


def to_file(model: Model, y_int8: np.ndarray) -> np.ndarray:
    """The int8 HWC output as the file returns it (the numpy twin of msf_model_run_io's
    output conversion)."""
    _, o = io_of(model)
    q = model.layers[-1].q_out
    if len(model.output_tensors) > 1:
        return np.asarray(y_int8).reshape(o.dims)
    y = o.file(np.asarray(y_int8).reshape(model.output_shape))
    if o.dtype == "float32":
        return (np.float64(np.float32(q.scale)) * (y.astype(np.int64) - q.zero_point)).astype(
            np.float32)
    if o.dtype == "uint8":
        m, s = nm.quantize_multiplier(nm.f32(q.scale) / nm.f32(o.q.scale))
        v = nm.multiply_by_quantized_multiplier(y.astype(np.int64) - q.zero_point, m, s)
        return np.clip(v + o.q.zero_point, 0, 255).astype(np.uint8)
    return y.astype(np.int8)


def from_file(model: Model, x: np.ndarray) -> np.ndarray:
    """The file's input as the int8 HWC the plan runs on (msf_model_run_io's conversion)."""
    i, _ = io_of(model)
    q = model.q_input
    x = i.hwc(x)
    if i.dtype == "float32":
        t = (x.astype(np.float32) / np.float32(q.scale)).astype(np.float64)
        t = np.clip(t, -1e6, 1e6)
        v = np.where(t >= 0, np.floor(t + 0.5), -np.floor(0.5 - t)) + q.zero_point
        return np.clip(v, -128, 127).astype(np.int8)
    if i.dtype == "uint8":
        m, s = nm.quantize_multiplier(nm.f32(i.q.scale) / nm.f32(q.scale))
        v = nm.multiply_by_quantized_multiplier(x.astype(np.int64) - i.q.zero_point, m, s)
        return np.clip(v + q.zero_point, -128, 127).astype(np.int8)
    return x.astype(np.int8)

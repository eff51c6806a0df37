""".tflite (int8, from the TFLite converter or any other writer) -> IR (a graph of layers: an op
may read any tensor computed before it, e.g. a ResNet shortcut conv of a stage input).

Supported operators: CONV_2D, DEPTHWISE_CONV_2D (multiplier 1; any over one channel), ADD (of
any two computed tensors of one shape), CONCATENATION (two tensors along the channels), MAX_POOL_2D,
AVERAGE_POOL_2D (over the whole map: global average pooling), MEAN over H
and W (global average pooling that requantizes to its own output scale), FULLY_CONNECTED, SOFTMAX
(over the channels), HARD_SWISH, LEAKY_RELU, PRELU (one int8 slope per channel or per element),
LOGISTIC, RESHAPE (a flatten before a dense layer, or its inverse), PAD/PADV2 folded into the
window op that alone reads it (a channel padding with the zero point into the CONV_2D after it: the
padded channels add nothing), QUANTIZE (float input) and DEQUANTIZE (float output) at the edges, a
TRANSPOSE NCHW -> NHWC of the graph input (the model then reads H x W x C); fused NONE/RELU/RELU6.
A [1, N] graph input (a dense model's) is the 1 x 1 x N map. Windows may be rectangular (kh x kw,
strides and padding per axis).
The file's scales, zero points, int8 weights and int32 biases are kept exactly, so the IR
computes TFLite Micro's bytes. Anything else is a one-line MsfError naming the file, the
operator index and its op.

Decoding the flatbuffer (the only place a corrupt file can surprise Python) happens in `_decode`
and turns every failure into an MsfError; the graph is then mapped from plain Python values.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import numerics as nm
from ..errors import MsfError
from . import ir
from .ir import Layer, Model, QParams, Weights, conv_out, same_padding

MAX_DIM = 65535          # msf_layer_t stores shapes as uint16
MAX_WINDOW = 255         # and kernel, stride and padding as uint8
MAX_ELEMENTS = 1 << 28   # per tensor: far above any microcontroller model, far below overflow


def _schema():
    """The .tflite schema module (ships with the `tflite-micro` package: msf-pio[tflite])."""
    try:
        from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as fb
    except ImportError:
        raise MsfError("reading .tflite files needs the tflite-micro package "
                       "(pip install 'msf-pio[tflite]')") from None
    return fb


# -- plain values decoded from the flatbuffer -----------------------------------------------------
@dataclass
class _Tensor:
    index: int
    name: str
    shape: tuple[int, ...]
    type: int
    buffer: int
    scale: np.ndarray                 # float32 values widened to float64 (may be empty)
    zero_point: np.ndarray            # int64 (may be empty)
    axis: int
    data: np.ndarray | None = None    # raw bytes of a constant (uint8), None for activations


@dataclass
class _Op:
    index: int
    code: int
    name: str
    inputs: list[int]
    outputs: list[int]
    options_type: int
    options: dict = field(default_factory=dict)


_OPTION_FIELDS = {   # options table class -> accessor names read into _Op.options
    "Conv2DOptions": ("Padding", "StrideW", "StrideH", "FusedActivationFunction",
                      "DilationWFactor", "DilationHFactor"),
    "DepthwiseConv2DOptions": ("Padding", "StrideW", "StrideH", "DepthMultiplier",
                               "FusedActivationFunction", "DilationWFactor", "DilationHFactor"),
    "Pool2DOptions": ("Padding", "StrideW", "StrideH", "FilterWidth", "FilterHeight",
                      "FusedActivationFunction"),
    "FullyConnectedOptions": ("FusedActivationFunction", "WeightsFormat", "KeepNumDims"),
    "AddOptions": ("FusedActivationFunction",),
    "ConcatenationOptions": ("Axis", "FusedActivationFunction"),
    "ReducerOptions": ("KeepDims",),
}
_FLOAT_OPTION_FIELDS = {"SoftmaxOptions": ("Beta",), "LeakyReluOptions": ("Alpha",)}


def load_tflite(path: str | Path) -> Model:
    """A .tflite file -> quantized IR model."""
    path = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise MsfError(f"cannot read model file ({exc.strerror})", source=path) from None
    tensors, ops, inputs, outputs, name = _decode(data, path)
    return _Importer(path, name, tensors, ops, inputs, outputs).run()


def _decode(data: bytes, path: str):
    """(tensors, operators, graph inputs, graph outputs, name) of the single subgraph."""
    fb = _schema()
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise MsfError("not a TFLite flatbuffer (no 'TFL3' file identifier)", source=path)
    names = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}
    option_names = {v: k for k, v in vars(fb.BuiltinOptions).items() if not k.startswith("_")}
    size = len(data)

    def count(n: int, what: str) -> int:
        if not 0 <= n <= size // 4:          # every element takes at least 4 bytes
            raise MsfError(f"corrupt .tflite: {what} claims {n} entries in a {size}-byte file",
                           source=path)
        return n

    try:
        model = fb.Model.GetRootAs(data, 0)
        if count(model.SubgraphsLength(), "subgraphs") != 1:
            raise MsfError(f"needs exactly one subgraph, has {model.SubgraphsLength()}",
                           source=path)
        sub = model.Subgraphs(0)
        n_buffers = count(model.BuffersLength(), "buffers")
        codes = []
        for i in range(count(model.OperatorCodesLength(), "operator codes")):
            oc = model.OperatorCodes(i)
            code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
            custom = oc.CustomCode()
            codes.append((code, f"custom op '{custom.decode(errors='replace')}'" if custom
                          and code == fb.BuiltinOperator.CUSTOM else names.get(code, f"op {code}")))
        tensors = []
        for i in range(count(sub.TensorsLength(), "tensors")):
            t = sub.Tensors(i)
            shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
            q = t.Quantization()
            scale, zp, axis = np.zeros(0), np.zeros(0, np.int64), 0
            if q is not None:
                scale = q.ScaleAsNumpy().astype(np.float64) if q.ScaleLength() else scale
                zp = q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength() else zp
                axis = q.QuantizedDimension()
            raw = t.Name()
            tensor = _Tensor(i, raw.decode(errors="replace") if raw else f"tensor{i}", shape,
                             t.Type(), t.Buffer(), scale, zp, axis)
            if not 0 <= tensor.buffer < max(n_buffers, 1):
                raise MsfError(f"buffer index {tensor.buffer} out of range (the file has "
                               f"{n_buffers} buffers)", source=path,
                               where=f"tensor {i} '{tensor.name}'")
            if tensor.buffer > 0:
                tensor.data = _buffer_data(model.Buffers(tensor.buffer), data, path, tensor)
            tensors.append(tensor)
        ops = []
        for i in range(count(sub.OperatorsLength(), "operators")):
            o = sub.Operators(i)
            if not 0 <= o.OpcodeIndex() < len(codes):
                raise MsfError(f"opcode index {o.OpcodeIndex()} out of range", source=path,
                               where=f"operator {i}")
            code, name = codes[o.OpcodeIndex()]
            op = _Op(i, code, name,
                     [int(x) for x in o.InputsAsNumpy()] if o.InputsLength() else [],
                     [int(x) for x in o.OutputsAsNumpy()] if o.OutputsLength() else [],
                     o.BuiltinOptionsType())
            kind = option_names.get(op.options_type)
            table = o.BuiltinOptions()
            if kind in _OPTION_FIELDS and table is not None:
                opts = getattr(fb, kind)()
                opts.Init(table.Bytes, table.Pos)
                op.options = {f: int(getattr(opts, f)()) for f in _OPTION_FIELDS[kind]}
            elif kind in _FLOAT_OPTION_FIELDS and table is not None:
                opts = getattr(fb, kind)()
                opts.Init(table.Bytes, table.Pos)
                op.options = {f: float(np.float32(getattr(opts, f)()))
                              for f in _FLOAT_OPTION_FIELDS[kind]}
            elif kind == "ReshapeOptions" and table is not None:
                opts = fb.ReshapeOptions()
                opts.Init(table.Bytes, table.Pos)
                op.options = {"NewShape": tuple(int(d) for d in opts.NewShapeAsNumpy())
                              if opts.NewShapeLength() else None}
            for t in op.inputs + op.outputs:
                if not -1 <= t < len(tensors):
                    raise MsfError(f"tensor index {t} out of range (the subgraph has "
                                   f"{len(tensors)} tensors)", source=path,
                                   where=f"operator {i} ({name})")
            ops.append(op)
        inputs = [int(x) for x in sub.InputsAsNumpy()] if sub.InputsLength() else []
        outputs = [int(x) for x in sub.OutputsAsNumpy()] if sub.OutputsLength() else []
        raw = sub.Name()
        name = raw.decode(errors="replace") if raw else ""
    except MsfError:
        raise
    except Exception as exc:     # a corrupt flatbuffer fails anywhere inside the accessors
        raise MsfError(f"corrupt .tflite flatbuffer ({type(exc).__name__}: {exc})",
                       source=path) from None
    for t in inputs + outputs:
        if not 0 <= t < len(tensors):
            raise MsfError(f"graph input/output tensor index {t} out of range", source=path)
    return tensors, ops, inputs, outputs, name


def _buffer_data(buffer, data: bytes, path: str, tensor: _Tensor) -> np.ndarray | None:
    """The constant bytes of a tensor: inside the flatbuffer, or after it (offset/size)."""
    if buffer is None:
        return None
    if buffer.Offset() > 1:       # large models keep buffers outside the flatbuffer
        start, n = buffer.Offset(), buffer.Size()
        if start + n > len(data):
            raise MsfError(f"constant data [{start}, {start + n}) lies beyond the "
                           f"{len(data)}-byte file", source=path,
                           where=f"tensor {tensor.index} '{tensor.name}'")
        return np.frombuffer(data, np.uint8, n, start)
    return buffer.DataAsNumpy() if buffer.DataLength() else None


# -- graph mapping --------------------------------------------------------------------------------
_INT8, _INT32, _FLOAT32 = 9, 2, 0
_TYPES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 7: "INT16", 9: "INT8"}
_SAME, _VALID = 0, 1
_ACT = {0: "none", 1: "relu", 3: "relu6"}
_ACT_NAMES = {2: "RELU_N1_TO_1", 4: "TANH", 5: "SIGN_BIT"}
_HINTS = {"TANH": " (supported activations: HARD_SWISH, LEAKY_RELU, PRELU, LOGISTIC, RELU, "
                  "RELU6)"}


@dataclass
class _View:
    """What a .tflite tensor is in the IR: IR tensor `t`, possibly flattened to (1, N), or
    padded by a PAD op (pads top, left, bottom, right; channels before, after) waiting for the
    window op that reads it."""
    t: int
    flat: bool = False
    pad: tuple[int, int, int, int] | None = None
    pad_value: str = ""           # "zero_point" (PAD) or "min" (PADV2 with -128)
    pad_op: int = -1
    channel_pad: tuple[int, int] = (0, 0)


class _Importer:
    def __init__(self, path, name, tensors, ops, inputs, outputs):
        self.path, self.name = path, name
        self.tensors: list[_Tensor] = tensors
        self.ops: list[_Op] = ops
        self.inputs, self.outputs = inputs, outputs
        self.views: dict[int, _View] = {}          # .tflite tensor index -> IR view
        self.layers: list[Layer] = []
        self.q: list[QParams] = []                 # IR tensor -> quantization
        self.input_shape: ir.Shape = (0, 0, 0)
        self.float_input: int | None = None
        self.reading: int | None = None            # IR tensor the op being mapped reads
        self.layer_ops: list[_Op] = []             # IR layer -> the operator it came from
        self.readers: dict[int, int] = {}
        for op in ops:
            for t in op.inputs:
                self.readers[t] = self.readers.get(t, 0) + 1
        for t in outputs:
            self.readers[t] = self.readers.get(t, 0) + 1

    # -- errors and tensor facts ------------------------------------------------------------------
    def error(self, message: str, op: _Op | None = None, tensor: _Tensor | None = None) -> MsfError:
        where = None
        if op is not None:
            where = f"operator {op.index} ({op.name})"
        if tensor is not None:
            t = f"tensor {tensor.index} '{tensor.name}'"
            where = f"{where}: {t}" if where else t
        return MsfError(message, source=self.path, where=where)

    def tensor(self, op: _Op, i: int, required: bool = True) -> _Tensor | None:
        if i >= len(op.inputs) or op.inputs[i] < 0:
            if required:
                raise self.error(f"input {i} is missing", op)
            return None
        t = self.tensors[op.inputs[i]]
        self.check_shape(op, t)
        return t

    def out(self, op: _Op) -> _Tensor:
        if len(op.outputs) != 1 or op.outputs[0] < 0:
            raise self.error(f"must have exactly one output, has {len(op.outputs)}", op)
        t = self.tensors[op.outputs[0]]
        self.check_shape(op, t)
        return t

    def check_type(self, op: _Op, t: _Tensor, expected: int) -> None:
        if t.type != expected:
            raise self.error(f"has type {_TYPES.get(t.type, t.type)}, expected "
                             f"{_TYPES[expected]}", op, t)

    def check_shape(self, op: _Op | None, t: _Tensor) -> None:
        if any(d < 1 or d > MAX_DIM for d in t.shape) or int(np.prod(
                [float(d) for d in t.shape])) > MAX_ELEMENTS:
            raise self.error(f"shape {list(t.shape)} has a dimension outside [1, {MAX_DIM}] "
                             f"or more than {MAX_ELEMENTS} elements", op, t)

    def qparams(self, op: _Op | None, t: _Tensor) -> QParams:
        """Per-tensor int8 activation quantization."""
        self.check_type(op, t, _INT8) if op is not None else None
        if t.scale.size != 1 or t.zero_point.size != 1:
            raise self.error(f"activations must be quantized per tensor (has {t.scale.size} "
                             f"scales, {t.zero_point.size} zero points)", op, t)
        scale, zp = float(np.float32(t.scale[0])), int(t.zero_point[0])
        if not (np.isfinite(scale) and scale > 0) or not -128 <= zp <= 127:
            raise self.error(f"bad int8 quantization: scale {scale}, zero point {zp}", op, t)
        return QParams(scale, zp)

    def const(self, op: _Op, t: _Tensor, dtype: str) -> np.ndarray:
        """The constant values of tensor t, shaped."""
        self.check_shape(op, t)
        if t.data is None:
            raise self.error("must be a constant (it has no data buffer)", op, t)
        n = int(np.prod(t.shape)) if t.shape else 1
        itemsize = np.dtype(dtype).itemsize
        if t.data.size != n * itemsize:
            raise self.error(f"holds {t.data.size} bytes, its shape {list(t.shape)} needs "
                             f"{n * itemsize}", op, t)
        return np.frombuffer(t.data.tobytes(), dtype).reshape(t.shape)

    def option(self, op: _Op, key: str, default=None):
        if key not in op.options:
            if default is None:
                raise self.error(f"has no builtin options (needs {key})", op)
            return default
        return op.options[key]

    def act(self, op: _Op) -> str:
        code = self.option(op, "FusedActivationFunction", 0)
        if code not in _ACT:
            raise self.error(f"fused activation {_ACT_NAMES.get(code, code)} is not supported "
                             "(NONE, RELU, RELU6)", op)
        return _ACT[code]

    # -- walk -------------------------------------------------------------------------------------
    def run(self) -> Model:
        if len(self.inputs) != 1 or len(self.outputs) != 1:
            raise MsfError(f"needs exactly one graph input and one output, has "
                           f"{len(self.inputs)} and {len(self.outputs)}", source=self.path)
        self.graph_input()
        handlers = {
            "CONV_2D": self.conv, "DEPTHWISE_CONV_2D": self.conv, "ADD": self.add,
            "MAX_POOL_2D": self.pool, "AVERAGE_POOL_2D": self.pool, "MEAN": self.mean,
            "FULLY_CONNECTED": self.dense, "RESHAPE": self.reshape, "PAD": self.pad,
            "PADV2": self.pad, "QUANTIZE": self.quantize, "DEQUANTIZE": self.dequantize,
            "SOFTMAX": self.pixel_op, "HARD_SWISH": self.pixel_op, "LEAKY_RELU": self.pixel_op,
            "LOGISTIC": self.pixel_op, "PRELU": self.prelu, "TRANSPOSE": self.transpose,
            "CONCATENATION": self.concat,
        }
        for op in self.ops:
            if op.name not in handlers:
                raise self.error(f"unsupported op{_HINTS.get(op.name, '')}", op)
            handlers[op.name](op)
        return self.graph_output()

    def graph_input(self) -> None:
        t = self.tensors[self.inputs[0]]
        self.check_shape(None, t)
        if t.shape[:1] != (1,) or len(t.shape) not in (2, 4):
            raise self.error(f"the graph input must be NHWC with batch 1 (or [1, N] before a "
                             f"dense layer), got {list(t.shape)}", tensor=t)
        # [1, N] (a dense model's input) is the 1 x 1 x N map a dense layer reads flattened
        self.input_shape = tuple(t.shape[1:]) if len(t.shape) == 4 else (1, 1, t.shape[1])
        if t.type == _FLOAT32:
            self.float_input = t.index        # a QUANTIZE must come first
            return
        if t.type != _INT8:
            raise self.error(f"the graph input has type {_TYPES.get(t.type, t.type)}: int8 "
                             "or float32 (quantized by a QUANTIZE op) only", tensor=t)
        self.views[t.index] = _View(0, flat=len(t.shape) == 2)
        self.q.append(self.qparams(None, t))

    def graph_output(self) -> Model:
        t = self.tensors[self.outputs[0]]
        view = self.views.get(t.index)
        if not self.layers or view is None or view.t != len(self.layers) or view.pad:
            raise self.error("the graph output must be the output of the last layer", tensor=t)
        model = Model(name=Path(self.path).stem, input_shape=self.input_shape,
                      layers=self.layers, source=self.path, q_input=self.q[0], weights_spec={})
        bad = ir.graph_error(model)
        if bad:
            raise self.error(bad[1], self.layer_ops[bad[0]])
        return model

    def latest(self, op: _Op, i: int = 0, flat_ok: bool = False, pad_ok: bool = False) -> _View:
        """The view op's input i: any IR tensor computed before (the layer it becomes reads
        it: the latest one, or an earlier one for a branch)."""
        t = self.tensor(op, i)
        if t.index not in self.views:
            raise self.error("is not computed by any earlier supported operator", op, t)
        view = self.views[t.index]
        self.reading = view.t
        if view.flat and not flat_ok and self.shape(view.t)[:2] != (1, 1):
            raise self.error("reads a flattened tensor (only FULLY_CONNECTED may)", op, t)
        if view.pad and not pad_ok:
            # AVERAGE_POOL_2D averages over the taps inside its input, and the PAD's zero points
            # are inside: its divisor counts them, while a padded avg_pool of the IR (TFLite's
            # SAME) divides by the taps of the unpadded tensor. No IR layer computes the former.
            why = (" (AVERAGE_POOL_2D counts the padded taps in its divisor; no pool padding "
                   "computes that)" if op.name == "AVERAGE_POOL_2D" else "")
            raise self.error(f"reads the output of PAD (operator {view.pad_op}): a PAD may only "
                             f"feed a convolution or a max pool{why}", op, t)
        if any(view.channel_pad) and op.name != "CONV_2D":
            raise self.error(f"reads the output of PAD (operator {view.pad_op}) of the channels: "
                             "a channel padding may only feed a CONV_2D", op, t)
        return view

    def shape(self, t: int) -> ir.Shape:
        return self.input_shape if t == 0 else self.layers[t - 1].out_shape

    def emit(self, op: _Op, layer: Layer, q_out: QParams, flat: bool = False) -> None:
        """Append `layer`; its output .tflite tensor must have the computed shape."""
        out = self.out(op)
        self.check_shape(op, out)
        h, w, c = layer.out_shape
        expected = [(1, h, w, c)] + ([(1, h * w * c)] if flat else [])
        if out.shape not in expected:
            raise self.error(f"declared shape {list(out.shape)} differs from the computed "
                             f"{list(expected[0 if not flat else -1])}", op, out)
        layer.name = out.name
        layer.q_out = q_out
        if self.reading is not None and self.reading != len(self.layers) and layer.input is None:
            layer.input = self.reading
        self.reading = None
        self.layer_ops.append(op)
        self.layers.append(layer)
        self.q.append(q_out)
        self.views[out.index] = _View(len(self.layers), flat=len(out.shape) == 2)

    # -- ops --------------------------------------------------------------------------------------
    def window(self, op: _Op, view: _View, op_kind: str, kh: int, kw: int, cout: int) -> Layer:
        """A window layer (kh x kw) from TFLite padding, strides and dilation."""
        sh, sw = self.option(op, "StrideH"), self.option(op, "StrideW")
        dh, dw = op.options.get("DilationHFactor", 1), op.options.get("DilationWFactor", 1)
        if (dh, dw) != (1, 1):
            raise self.error(f"dilation {dh}x{dw} is not supported", op)
        if not (1 <= sh <= MAX_WINDOW and 1 <= sw <= MAX_WINDOW):
            raise self.error(f"stride {sh}x{sw} must be in [1, {MAX_WINDOW}]", op)
        if not (1 <= kh <= MAX_WINDOW and 1 <= kw <= MAX_WINDOW):
            raise self.error(f"kernel {kh}x{kw} must be in [1, {MAX_WINDOW}]", op)
        h, w, c = self.shape(view.t)
        padding = self.option(op, "Padding")
        if padding == _SAME:         # a PAD before it adds to SAME's padding of its output
            top, left, bottom, right = view.pad or (0, 0, 0, 0)
            (st, sb), (sl, sr) = (same_padding(h + top + bottom, kh, sh),
                                  same_padding(w + left + right, kw, sw))
            top, left, bottom, right = top + st, left + sl, bottom + sb, right + sr
        elif padding == _VALID:
            top, left, bottom, right = view.pad or (0, 0, 0, 0)
        else:
            raise self.error(f"unknown padding {padding}", op)
        if max(top, bottom) >= kh or max(left, right) >= kw:
            raise self.error(f"padding {[top, left, bottom, right]} must be smaller than the "
                             f"kernel {kh}x{kw}", op)
        oh, ow = conv_out(h, kh, sh, top, bottom), conv_out(w, kw, sw, left, right)
        if oh < 1 or ow < 1:
            raise self.error(f"kernel {kh}x{kw} does not fit the {h}x{w} input", op)
        return Layer(op=op_kind, in_shape=(h, w, c), out_shape=(oh, ow, cout), kernel=(kh, kw),
                     stride=(sh, sw), pad=(top, left, bottom, right), act=self.act(op))

    def filter_scales(self, op: _Op, f: _Tensor, axis: int, n: int) -> np.ndarray:
        """Per-channel (along `axis`) or per-tensor symmetric int8 weight scales, as n values."""
        self.check_type(op, f, _INT8)
        if f.scale.size not in (1, n) or f.zero_point.size not in (1, f.scale.size):
            raise self.error(f"weights need 1 or {n} scales and zero points, have "
                             f"{f.scale.size} and {f.zero_point.size}", op, f)
        if f.scale.size == n and n > 1 and f.axis != axis:
            raise self.error(f"weights are quantized along dimension {f.axis}, expected the "
                             f"output channels (dimension {axis})", op, f)
        if np.any(f.zero_point != 0):
            raise self.error("weights must be symmetric (zero point 0)", op, f)
        scales = np.float32(f.scale).astype(np.float64)
        if not np.all(np.isfinite(scales) & (scales > 0)):
            raise self.error("weight scales must be positive and finite", op, f)
        return np.broadcast_to(scales, (n,)).copy()

    def bias(self, op: _Op, i: int, n: int) -> np.ndarray:
        b = self.tensor(op, i, required=False)
        if b is None:
            return np.zeros(n, np.int32)
        self.check_type(op, b, _INT32)
        if b.shape != (n,):
            raise self.error(f"bias shape {list(b.shape)} != [{n}]", op, b)
        return self.const(op, b, "<i4").astype(np.int32)

    def conv(self, op: _Op) -> None:
        depthwise = op.name == "DEPTHWISE_CONV_2D"
        view = self.latest(op, pad_ok=True)
        if view.pad and view.pad_value != "zero_point":
            raise self.error("a PADV2 may only feed a max pool", op)
        f = self.tensor(op, 1)
        if len(f.shape) != 4:
            raise self.error(f"filter shape {list(f.shape)} is not 4-D", op, f)
        c = self.shape(view.t)[2]
        # a depthwise filter with multiplier M over one input channel is a conv with M outputs
        # (person_detect's first layer): the same sums and per-channel requantization
        as_conv = depthwise and c == 1 and f.shape[0] == 1 and f.shape[3] == self.option(
            op, "DepthMultiplier", 1)
        if as_conv:
            cout, axis = f.shape[3], 3
        elif depthwise:
            if f.shape[0] != 1 or f.shape[3] != c or self.option(op, "DepthMultiplier", 1) != 1:
                raise self.error(f"filter {list(f.shape)} on {c} channels: only depth "
                                 "multiplier 1 is supported (or any over one channel)", op, f)
            cout, axis = c, 3
        else:
            before, after = view.channel_pad
            if f.shape[3] != before + c + after:
                raise self.error(f"filter {list(f.shape)} takes {f.shape[3]} input channels, "
                                 f"the input has {before + c + after} (grouped convolution is "
                                 "not supported)", op, f)
            cout, axis = f.shape[0], 0
        layer = self.window(op, view, ir.DEPTHWISE if depthwise and not as_conv else ir.CONV,
                            f.shape[1], f.shape[2], cout)
        scales = self.filter_scales(op, f, axis, cout)
        w = self.const(op, f, "i1").astype(np.int8)
        if any(view.channel_pad):        # padded channels hold the zero point: they add nothing
            w = w[..., view.channel_pad[0]:view.channel_pad[0] + c]
        layer.weights = Weights(w=w.transpose(3, 1, 2, 0).copy() if as_conv else w,
                                bias=self.bias(op, 2, cout), scales=scales)
        self.qparams(op, self.tensor(op, 0))
        self.emit(op, layer, self.qparams(op, self.out(op)))

    def add(self, op: _Op) -> None:
        if len(op.inputs) != 2:
            raise self.error(f"needs two inputs, has {len(op.inputs)}", op)
        a, b = self.tensor(op, 0), self.tensor(op, 1)
        for t in (a, b):
            if t.index not in self.views:
                raise self.error("is not computed by any earlier supported operator "
                                 "(constant operands are not supported)", op, t)
        va, vb = self.views[a.index], self.views[b.index]
        if va.t == vb.t:
            raise self.error("adds a tensor to itself", op)
        # the latest tensor first when it is one of the two (the chain's residual form)
        main, skip = (vb, va) if vb.t == len(self.layers) else (va, vb)
        if main.pad or skip.pad or main.flat or skip.flat:
            raise self.error("adds a padded or flattened tensor", op)
        shape = self.shape(main.t)
        if self.shape(skip.t) != shape:
            raise self.error(f"adds shapes {list(self.shape(skip.t))} and {list(shape)} (no "
                             "broadcasting)", op)
        for t in (a, b):
            self.qparams(op, t)
        self.reading = main.t
        self.emit(op, Layer(op=ir.ADD, in_shape=shape, out_shape=shape, skip=skip.t,
                            act=self.act(op)), self.qparams(op, self.out(op)))

    def concat(self, op: _Op) -> None:
        """CONCATENATION of two tensors along the channels; TFLite's int8 kernel copies bytes,
        so both inputs must be quantized as the output."""
        if len(op.inputs) != 2:
            raise self.error(f"concatenates {len(op.inputs)} tensors (two are supported)", op)
        if self.option(op, "Axis", 0) not in (3, -1):
            raise self.error(f"concatenates along axis {self.option(op, 'Axis', 0)}: only the "
                             "channels (axis 3) are supported", op)
        if self.act(op) != "none":
            raise self.error("a fused activation on CONCATENATION is not supported", op)
        first, second = self.latest(op, 0), self.latest(op, 1)
        if first.flat or second.flat:
            raise self.error("concatenates a flattened tensor", op)
        (h, w, c1), (h2, w2, c2) = self.shape(first.t), self.shape(second.t)
        if (h, w) != (h2, w2):
            raise self.error(f"concatenates shapes {[h, w, c1]} and {[h2, w2, c2]} (only the "
                             "channels may differ)", op)
        q_out = self.qparams(op, self.out(op))
        for i in (0, 1):
            q_in = self.qparams(op, self.tensor(op, i))
            if q_in != q_out:
                raise self.error(f"input quantization {q_in} differs from the output's {q_out} "
                                 "(TFLite Micro's int8 kernel requires them equal)", op,
                                 self.tensor(op, i))
        self.reading = first.t
        self.emit(op, Layer(op=ir.CONCAT, in_shape=(h, w, c1), out_shape=(h, w, c1 + c2),
                            skip=second.t), q_out)

    def same_q(self, op: _Op, q_in: QParams) -> QParams:
        """Pools and reshapes keep their input's quantization (TFLite's kernels ignore the
        output's): a file that says otherwise is refused rather than computed differently."""
        q_out = self.qparams(op, self.out(op))
        if q_out != q_in:
            raise self.error(f"output quantization {q_out} differs from the input's {q_in} "
                             "(TFLite's kernel keeps the input's)", op, self.out(op))
        return q_out

    def pool(self, op: _Op) -> None:
        maximum = op.name == "MAX_POOL_2D"
        view = self.latest(op, pad_ok=maximum)
        # padding taps of a max pool never win: a PAD is equivalent with -128, or with the zero
        # point after a fused ReLU/ReLU6 (no value below it)
        after_relu = view.t > 0 and self.layers[view.t - 1].act != "none"
        if view.pad and not (view.pad_value == "min" or after_relu):
            raise self.error("a max pool after PAD needs PADV2 with -128 (or a ReLU before "
                             "the PAD)", op)
        self.qparams(op, self.tensor(op, 0))
        q = self.same_q(op, self.q[view.t])
        h, w, c = self.shape(view.t)
        kh, kw = self.option(op, "FilterHeight"), self.option(op, "FilterWidth")
        out = self.out(op)
        sh, sw = self.option(op, "StrideH"), self.option(op, "StrideW")
        whole = (kh, kw) == (h, w) and out.shape[1:3] == (1, 1) and min(sh, sw) >= 1
        if not maximum and whole and (self.option(op, "Padding") == _VALID or
                                      (sh >= h and sw >= w)):
            self.emit(op, Layer(op=ir.GLOBAL_AVGPOOL, in_shape=(h, w, c), out_shape=(1, 1, c),
                                act=self.act(op)), q)
            return
        layer = self.window(op, view, ir.MAX_POOL if maximum else ir.AVG_POOL, kh, kw, c)
        self.emit(op, layer, q)

    def mean(self, op: _Op) -> None:
        view = self.latest(op)
        axis = self.tensor(op, 1)
        self.check_type(op, axis, _INT32)
        axes = {int(a) % 4 for a in self.const(op, axis, "<i4").reshape(-1)}
        if axes != {1, 2}:
            raise self.error(f"MEAN over axes {sorted(axes)}: only over H and W (1, 2)", op)
        self.qparams(op, self.tensor(op, 0))
        h, w, c = self.shape(view.t)
        self.emit(op, Layer(op=ir.GLOBAL_AVGPOOL, in_shape=(h, w, c), out_shape=(1, 1, c),
                            requantize=True), self.qparams(op, self.out(op)),
                  flat=not self.option(op, "KeepDims", 0))

    def dense(self, op: _Op) -> None:
        view = self.latest(op, flat_ok=True)
        h, w, c = self.shape(view.t)
        f = self.tensor(op, 1)
        if self.option(op, "WeightsFormat", 0) != 0:
            raise self.error("only the DEFAULT weights format is supported", op)
        if len(f.shape) != 2 or f.shape[1] != h * w * c:
            raise self.error(f"filter {list(f.shape)} does not take the {h * w * c} inputs", op, f)
        self.qparams(op, self.tensor(op, 0))
        cout = f.shape[0]
        scales = self.filter_scales(op, f, 0, cout)
        if np.unique(scales).size == 1:
            scales = scales[:1]             # per tensor, as TFLite's FULLY_CONNECTED stores it
        layer = Layer(op=ir.DENSE, in_shape=(h, w, c), out_shape=(1, 1, cout), act=self.act(op))
        layer.weights = Weights(w=self.const(op, f, "i1").astype(np.int8),
                                bias=self.bias(op, 2, cout), scales=scales)
        self.emit(op, layer, self.qparams(op, self.out(op)), flat=True)

    def reshape(self, op: _Op) -> None:
        """A flatten (1, H, W, C) -> (1, H*W*C), or (1, N) -> (1, 1, 1, N): a view, no layer."""
        view = self.latest(op, flat_ok=True)
        h, w, c = self.shape(view.t)
        self.qparams(op, self.tensor(op, 0))
        self.same_q(op, self.q[view.t])
        out = self.out(op)
        if out.shape not in ((1, h * w * c), (1, h, w, c)) or (len(out.shape) == 4 and
                                                               view.flat and (h, w) != (1, 1)):
            raise self.error(f"RESHAPE to {list(out.shape)}: only a flatten of the "
                             f"{h}x{w}x{c} tensor to [1, {h * w * c}] (or back) is supported", op)
        self.views[out.index] = _View(view.t, flat=len(out.shape) == 2)

    def pad(self, op: _Op) -> None:
        view = self.latest(op)
        q = self.q[view.t]
        self.qparams(op, self.tensor(op, 0))
        self.same_q(op, q)
        p = self.tensor(op, 1)
        if p.type not in (_INT32, 4) or p.shape != (4, 2):
            raise self.error("paddings must be a constant int32 [4, 2] tensor", op, p)
        pads = self.const(op, p, "<i4" if p.type == _INT32 else "<i8").astype(np.int64)
        if np.any(pads[0] != 0) or np.any(pads < 0):
            raise self.error(f"pads {pads.tolist()}: only non-negative H, W and channel "
                             "padding", op)
        value = "zero_point"
        if op.name == "PADV2":
            v = self.tensor(op, 2)
            self.check_type(op, v, _INT8)
            value = "min" if self.const(op, v, "i1").reshape(-1).tolist() == [-128] else "other"
            if value == "other":
                raise self.error("PADV2 pads with a value other than -128", op, v)
        if self.readers.get(self.out(op).index, 0) != 1:
            raise self.error("a PAD must feed exactly one window op", op)
        top, bottom, left, right = (int(x) for x in pads[1:3].reshape(-1))
        channels = (int(pads[3][0]), int(pads[3][1]))
        if any(channels) and value != "zero_point":
            raise self.error("a channel padding must pad with the zero point", op)
        self.views[self.out(op).index] = _View(view.t, pad=(top, left, bottom, right),
                                               pad_value=value, pad_op=op.index,
                                               channel_pad=channels)

    def pixel_op(self, op: _Op) -> None:
        """SOFTMAX (over the channels) and the element-wise activations: a layer of their own,
        on a map or on a dense layer's (1, n) output."""
        kind = {"SOFTMAX": ir.SOFTMAX, "HARD_SWISH": ir.HARD_SWISH, "LEAKY_RELU": ir.LEAKY_RELU,
                "LOGISTIC": ir.LOGISTIC}[op.name]
        view = self.latest(op)
        self.qparams(op, self.tensor(op, 0))
        q_out = self.qparams(op, self.out(op))
        fixed = ir.FIXED_OUTPUT_Q.get(kind)
        if fixed is not None and q_out != fixed:
            raise self.error(f"int8 output must have scale 1/256 and zero point -128 (TFLite's "
                             f"kernel assumes them), has {q_out.scale} and {q_out.zero_point}",
                             op, self.out(op))
        shape = self.shape(view.t)
        layer = Layer(op=kind, in_shape=shape, out_shape=shape)
        if kind == ir.SOFTMAX:
            layer.beta = self.option(op, "Beta", 1.0)
            if not (np.isfinite(layer.beta) and layer.beta > 0):
                raise self.error(f"beta {layer.beta} must be positive", op)
        elif kind == ir.LEAKY_RELU:
            layer.alpha = self.option(op, "Alpha", 0.2)
            if not (np.isfinite(layer.alpha) and layer.alpha >= 0):
                raise self.error(f"alpha {layer.alpha}: only slopes >= 0 are supported", op)
        self.emit(op, layer, q_out, flat=True)
        try:
            nm.requantization(Model("", self.input_shape, self.layers, q_input=self.q[0]),
                              len(self.layers) - 1)
        except ValueError as exc:
            raise self.error(str(exc).split(": ", 1)[-1], op) from None

    def prelu(self, op: _Op) -> None:
        """PRELU with one slope per channel (alpha shared over H and W, as Keras' PReLU with
        shared_axes=[1, 2] and the converters write it) or one per element (Keras' default):
        an element-wise layer that keeps the int8 slopes, their scale and zero point as
        written."""
        view = self.latest(op)
        self.qparams(op, self.tensor(op, 0))
        q_out = self.qparams(op, self.out(op))
        shape = self.shape(view.t)
        c = shape[2]
        a = self.tensor(op, 1)
        self.check_type(op, a, _INT8)
        per_pixel = a.shape in (shape, (1,) + shape) and shape[:2] != (1, 1)
        if not per_pixel and (any(d != 1 for d in a.shape[:-1]) or
                              (a.shape and a.shape[-1] not in (1, c))):
            raise self.error(f"alpha of shape {list(a.shape)}: only one slope per channel "
                             f"(shape [1, 1, {c}]) or per element ({list(shape)}) is "
                             "supported", op, a)
        q_alpha = self.qparams(op, a)
        values = self.const(op, a, "i1")
        slopes = (values.reshape(shape) if per_pixel else
                  np.broadcast_to(values.reshape(-1), (c,))).astype(np.int8)
        layer = Layer(op=ir.PRELU, in_shape=shape, out_shape=shape, slope_per_pixel=per_pixel)
        layer.weights = Weights(w=slopes, bias=np.zeros(0, np.int32),
                                scales=np.array([q_alpha.scale]), zero_point=q_alpha.zero_point)
        self.emit(op, layer, q_out, flat=True)

    def transpose(self, op: _Op) -> None:
        """NCHW -> NHWC of the graph input (PyTorch exports open with it): the caller hands the
        input over as H x W x C, the layout every layer reads, so the TRANSPOSE is dropped."""
        src = self.tensor(op, 0)
        perm = self.tensor(op, 1)
        if perm.type not in (_INT32, 4) or perm.shape != (4,):
            raise self.error("perm must be a constant int32 [4] tensor", op, perm)
        axes = self.const(op, perm, "<i4" if perm.type == _INT32 else "<i8").tolist()
        if axes != [0, 2, 3, 1] or src.index != self.inputs[0] or self.layers or \
                self.float_input is not None:
            raise self.error(f"TRANSPOSE {axes}: only NCHW -> NHWC ([0, 2, 3, 1]) of the int8 "
                             "graph input is supported (the model's input then is H x W x C)",
                             op)
        out = self.out(op)
        n, c, h, w = src.shape
        if out.shape != (n, h, w, c):
            raise self.error(f"output shape {list(out.shape)} is not the input's NHWC", op, out)
        self.same_q(op, self.q[0])
        self.input_shape = (h, w, c)
        del self.views[src.index]             # nothing else may read the NCHW tensor
        self.views[out.index] = _View(0)

    def quantize(self, op: _Op) -> None:
        src = self.tensor(op, 0)
        if self.float_input is None or src.index != self.float_input or self.layers or self.q:
            raise self.error("QUANTIZE is supported only on the float graph input "
                             "(int8 requantization inside the graph is not)", op)
        out = self.out(op)
        if out.shape != src.shape:
            raise self.error(f"output shape {list(out.shape)} != input {list(src.shape)}", op)
        self.q.append(self.qparams(op, out))
        self.views[out.index] = _View(0)

    def dequantize(self, op: _Op) -> None:
        view = self.latest(op, flat_ok=True)
        out = self.out(op)
        self.check_type(op, out, _FLOAT32)
        if out.index != self.outputs[0]:
            raise self.error("DEQUANTIZE is supported only as the graph output", op)
        self.views[out.index] = view

"""ONNX (NCHW, float or int8 QDQ) -> the format-neutral graph of `opgraph.py`, which
`lowering.py` turns into the IR.

Nodes read: Conv, BatchNormalization, Relu, Clip, Add, MaxPool, AveragePool, GlobalAveragePool,
Flatten, Reshape, Transpose, Gemm, MatMul, Softmax, HardSwish, LeakyRelu, PRelu, Sigmoid, Pad,
Concat, HardSigmoid (what of each the IR can run, the lowering says). QuantizeLinear/DequantizeLinear pairs
become the tensors' int8 quantization (`onnx_qdq.py`); in a float file, hard-swish spelled out
as exporters write it (x * Clip(x + 3, 0, 6) / 6 with Add/Clip/Mul/Div, in any order of the Mul
and Div, or x * HardSigmoid(x)) is one HardSwish. Weights go to the IR's layouts here (OIHW ->
OHWI, Gemm/MatMul -> (out, in)); shapes and axes stay NCHW for the lowering.

A float file comes back weightless with `weights_spec = {"onnx": path}` and its float weights
(`weights.materialize` quantizes them); a QDQ file comes back quantized with the file's own
scales and zero points.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import NodeProto, helper, numpy_helper

from ..errors import MsfError
from .floatnet import FloatWeights
from .ir import Model
from .lowering import lower
from .onnx_qdq import strip_qdq
from .opgraph import FLOAT, NCHW, QDQ, Const, Graph, Node, Tensor

_QOPERATOR_HINT = "; export int8 models with quant_format=QuantFormat.QDQ"
_DTYPES = {onnx.TensorProto.FLOAT: "FLOAT32", onnx.TensorProto.INT8: "INT8",
           onnx.TensorProto.UINT8: "UINT8", onnx.TensorProto.INT32: "INT32",
           onnx.TensorProto.INT64: "INT64", onnx.TensorProto.FLOAT16: "FLOAT16"}
_OP_NAMES = {"conv": "Conv", "max_pool": "MaxPool", "avg_pool": "AveragePool",
             "dense": "Gemm/MatMul", "reshape": "Flatten/Reshape", "pad": "Pad",
             "transpose": "Transpose", "quantize": "QuantizeLinear"}
_WORDING = {"int8_weights": ("node", "weights are float: a QDQ model needs DequantizeLinear(int8) "
                                     "weights")}


def load_onnx(path: str | Path) -> Model:
    """An ONNX file -> IR model (quantized if the file is QDQ, else weights come lazily)."""
    return read_onnx(path)[0]


def read_onnx(path: str | Path, input_shape: tuple[int, int, int] | None = None
              ) -> tuple[Model, list[FloatWeights | None] | None]:
    """(weightless IR model, float weights) for a float file; (quantized model, None) for QDQ."""
    return lower(onnx_graph(path, input_shape))


def onnx_graph(path: str | Path, input_shape: tuple[int, int, int] | None = None) -> Graph:
    """An ONNX file -> its format-neutral graph (`input_shape`: H, W, C fixing a dynamic
    input)."""
    path = str(path)
    try:
        proto = onnx.load(path)
    except Exception as exc:    # onnx raises DecodeError, OSError, ValueError ... for bad files
        raise MsfError(f"cannot read ONNX model ({exc})", source=path) from None
    reader = None
    try:
        reader = _Reader(path, proto)
        graph = reader.graph()
        graph.input_shape = input_shape
        if input_shape is not None:
            graph.weights_spec["input_shape"] = list(input_shape)
        return graph
    except MsfError:
        raise
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError,
            OverflowError) as exc:
        # The readers check what a valid file can get wrong; a file malformed in a way none
        # of them names (a mutated protobuf) still fails in one line, at the node being read.
        node = getattr(reader, "current", None)
        where = f"node '{node.name}' ({node.op_type})" if node is not None else None
        raise MsfError(f"malformed model ({type(exc).__name__}: {exc})", source=path,
                       where=where) from None


_SIXTH = 1.0 / 6.0


def _fuse_hard_swish(nodes: list[NodeProto], consts: dict[str, np.ndarray],
                     outputs) -> list[NodeProto]:
    """The nodes with every spelled-out hard-swish replaced by one HardSwish node (at the place
    of its last node): x * relu6(x + 3) / 6 as Add(x, 3) -> Clip(0, 6) -> Mul(x, .) -> Div(6)
    (or Mul(1/6), before or after the Mul with x), or Mul(x, HardSigmoid(x) with alpha 1/6 and
    beta 0.5). Intermediate tensors must have no other reader."""
    producer = {o: n for n in nodes for o in n.output}
    readers = Counter(i for n in nodes for i in n.input if i)
    readers.update(o.name for o in outputs)

    def scalar(name: str) -> float | None:
        value = consts.get(name)
        return float(value.reshape(())) if value is not None and value.size == 1 else None

    def attr(node: NodeProto, name: str, default: float) -> float:
        for a in node.attribute:
            if a.name == name and a.type == onnx.AttributeProto.FLOAT:
                return a.f
        return default

    def near(value: float | None, target: float) -> bool:
        return value is not None and abs(value - target) <= 1e-6 * max(1.0, target)

    def only(name: str) -> NodeProto | None:
        """The node making `name`, if nothing else reads it."""
        return producer.get(name) if readers[name] == 1 else None

    def other(node: NodeProto, known: str) -> str | None:
        """The other operand of a two-input node one of whose inputs is `known`."""
        if len(node.input) != 2 or known not in node.input:
            return None
        return node.input[1] if node.input[0] == known else node.input[0]

    def sixth(node: NodeProto | None) -> str | None:
        """a, if `node` is a / 6 or a * (1/6) with a constant 6 or 1/6."""
        if node is None or len(node.input) != 2:
            return None
        if node.op_type == "Div" and near(scalar(node.input[1]), 6.0):
            return node.input[0]
        if node.op_type == "Mul":
            for i in (0, 1):
                if near(scalar(node.input[i]), _SIXTH) and scalar(node.input[1 - i]) is None:
                    return node.input[1 - i]
        return None

    def relu6_plus_3(name: str) -> tuple[str, list[NodeProto]] | None:
        """(x, [Add, Clip]) if `name` is Clip(x + 3, 0, 6), read only here."""
        clip = only(name)
        if clip is None or clip.op_type != "Clip":
            return None
        lo = scalar(clip.input[1]) if len(clip.input) > 1 and clip.input[1] else attr(
            clip, "min", -np.inf)
        hi = scalar(clip.input[2]) if len(clip.input) > 2 and clip.input[2] else attr(
            clip, "max", np.inf)
        add = only(clip.input[0])
        if lo != 0.0 or hi != 6.0 or add is None or add.op_type != "Add" or len(add.input) != 2:
            return None
        for i in (0, 1):
            if scalar(add.input[i]) == 3.0 and scalar(add.input[1 - i]) is None:
                return add.input[1 - i], [add, clip]
        return None

    def gate(name: str) -> tuple[str, list[NodeProto]] | None:
        """(x, nodes) if `name` is relu6(x + 3) / 6 or HardSigmoid(x; 1/6, 0.5)."""
        node = only(name)
        if node is not None and node.op_type == "HardSigmoid":
            if near(attr(node, "alpha", 0.2), _SIXTH) and attr(node, "beta", 0.5) == 0.5:
                return node.input[0], [node]
            return None
        inner = sixth(node)
        found = relu6_plus_3(inner) if inner is not None else None
        return (found[0], found[1] + [node]) if found else None

    def match(node: NodeProto) -> tuple[str, list[NodeProto]] | None:
        """(x, the nodes to replace) if `node` ends a spelled-out hard-swish of x."""
        if node.op_type == "Mul" and len(node.input) == 2:        # x * gate(x)
            for i in (0, 1):
                found = gate(node.input[i])
                if found and found[0] == node.input[1 - i]:
                    return found[0], found[1] + [node]
        inner = sixth(node)                                         # (x * relu6(x + 3)) / 6
        mul = only(inner) if inner is not None else None
        if mul is not None and mul.op_type == "Mul" and len(mul.input) == 2:
            for i in (0, 1):
                found = relu6_plus_3(mul.input[i])
                if found and found[0] == mul.input[1 - i]:
                    return found[0], found[1] + [mul, node]
        return None

    replaced: dict[int, NodeProto | None] = {}        # id(node) -> its replacement (None: drop)
    for node in nodes:
        found = match(node) if id(node) not in replaced else None
        if found is None or any(id(n) in replaced for n in found[1]):
            continue
        x, group = found
        for n in group:
            replaced[id(n)] = None
        replaced[id(node)] = helper.make_node("HardSwish", [x], [node.output[0]],
                                              name=node.name or node.output[0])
    return [replaced.get(id(n), n) for n in nodes if replaced.get(id(n), n) is not None]


class _Refused(Exception):
    """What the file says that this reader refuses (raised by the lowering in graph order)."""


class _Reader:
    """Reads the graph under its Q/DQ pairs into neutral nodes, one per ONNX node."""

    def __init__(self, path: str, proto: onnx.ModelProto):
        self.path = path
        self.proto = proto.graph
        self.consts = {i.name: self._decode(i, f"initializer '{i.name}'")
                       for i in self.proto.initializer}
        self.current: NodeProto | None = None        # the node being read (for errors)
        for node in self.proto.node:
            if node.op_type == "Constant":
                self.current = node
                if len(node.attribute) != 1 or len(node.output) != 1:
                    raise self._error(node, "needs one value attribute and one output")
                value = helper.get_attribute_value(node.attribute[0])
                is_tensor = isinstance(value, onnx.TensorProto)
                self.consts[node.output[0]] = (self._decode(value, f"node '{node.name}'")
                                               if is_tensor else np.asarray(value))
        self.current = None
        nodes = [n for n in self.proto.node if n.op_type != "Constant" and
                 not self._fold_reshape(n)]
        self.view = strip_qdq(nodes, self.consts, path)
        if not self.view.quantized:          # QDQ: each op has its own quantized output
            self.view.nodes = _fuse_hard_swish(self.view.nodes, self.consts, self.proto.output)
        self.opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")),
                          13)
        self.tensors: dict[str, Tensor] = {}
        self.derived = 0

    def _fold_reshape(self, node: NodeProto) -> bool:
        """A Reshape of a constant by a constant shape (an exporter's bias, [C] -> [1, C, 1,
        1]) is a constant: True once its output is one."""
        if node.op_type != "Reshape" or len(node.input) != 2 or \
                not all(i in self.consts for i in node.input):
            return False
        self.current = node
        data, shape = self.consts[node.input[0]], self.consts[node.input[1]].astype(np.int64)
        shape = [data.shape[i] if d == 0 and not self.attr(node, "allowzero", 0) else int(d)
                 for i, d in enumerate(shape.reshape(-1))]
        self.consts[node.output[0]] = data.reshape(shape)
        self.current = None
        return True

    def _decode(self, tensor: onnx.TensorProto, where: str) -> np.ndarray:
        try:
            return numpy_helper.to_array(tensor)
        except Exception as exc:    # data that does not fit its declared type and dims
            raise MsfError(f"cannot decode tensor data ({exc})", source=self.path,
                           where=where) from None

    def _error(self, node: NodeProto, message: str) -> MsfError:
        return MsfError(message, source=self.path,
                        where=f"node '{node.name or node.output[0]}' ({node.op_type})")

    def _name(self, name: str) -> str:
        while name in self.view.alias:
            name = self.view.alias[name]
        return name

    def tensor(self, name: str) -> str:
        """The neutral tensor for an ONNX name (under its Q/DQ pair), made on first use."""
        name = self._name(name)
        if name and name not in self.tensors:
            t = Tensor(name, None, q=self.view.qparams.get(name))
            if name in self.view.consts:
                qc = self.view.consts[name]
                t.const = Const(qc.q, qc.scale, qc.zero_point, qc.axis)
                t.shape, t.dtype = qc.q.shape, str(qc.q.dtype).upper()
            elif name in self.consts:
                value = np.asarray(self.consts[name])
                t.const, t.shape = Const(value), value.shape
                t.dtype = "FLOAT32" if np.issubdtype(value.dtype, np.floating) else \
                    str(value.dtype).upper()
            self.tensors[name] = t
        return name

    def derive(self, base: str, const: Const, dtype: str | None = None) -> str:
        """A constant made from another one (scaled, broadcast): a tensor of its own."""
        self.derived += 1
        name = f"{base}#{self.derived}"
        source = self.tensors[self.tensor(base)]
        self.tensors[name] = Tensor(name, source.shape, dtype or source.dtype, const=const)
        return name

    # -- graph ----------------------------------------------------------------------------------
    def graph(self) -> Graph:
        inputs = [i for i in self.proto.input if i.name not in self.consts]
        for value in inputs:
            t = self.tensors[self.tensor(value.name)]
            tensor_type = value.type.tensor_type
            t.dtype = _DTYPES.get(tensor_type.elem_type, f"type {tensor_type.elem_type}")
            t.shape = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or "?"
                            for d in tensor_type.shape.dim)
            t.label = f"input '{value.name}'"
        outputs = []
        for value in self.proto.output:
            t = self.tensors[self.tensor(value.name)]
            dims = tuple(d.dim_value for d in value.type.tensor_type.shape.dim)
            t.shape = dims if dims and all(d > 0 for d in dims) else None   # -1: dynamic
            t.label = f"output '{value.name}'"
            outputs.append(t.name)
        nodes = [self.node(n) for n in self.view.nodes]
        return Graph(source=self.path, name=Path(self.path).stem,
                     kind=QDQ if self.view.quantized else FLOAT, layout=NCHW,
                     tensors=self.tensors, nodes=nodes, inputs=[self.tensor(i.name) for i in inputs],
                     outputs=outputs, op_names=_OP_NAMES, wording=_WORDING,
                     weights_spec={"onnx": self.path})

    def node(self, proto: NodeProto) -> Node:
        self.current = proto
        name = proto.name or proto.output[0]
        node = Node("", [self.tensor(i) for i in proto.input], [self.tensor(proto.output[0])],
                    where=f"node '{name}' ({proto.op_type})", op_name=proto.op_type, name=name,
                    ref=f"{proto.op_type} '{name}'")
        try:
            read = _READERS.get(proto.op_type)
            if read is None:
                qoperator = str(proto.op_type).startswith(("QLinear", "ConvInteger"))
                raise _Refused(f"unsupported op {proto.op_type}"
                               f"{_QOPERATOR_HINT if qoperator else ''}")
            read(self, proto, node)
        except _Refused as refusal:
            node.op, node.attrs = "error", {"message": str(refusal)}
        self.current = None
        return node

    # -- helpers --------------------------------------------------------------------------------
    def attr(self, node: NodeProto, name: str, default=None):
        """Attribute `name`, of the default's type (a list of ints when the default is None)."""
        for a in node.attribute:
            if a.name == name:
                value = helper.get_attribute_value(a)
                value = value.decode(errors="replace") if isinstance(value, bytes) else value
                kind = list if default is None else type(default)
                ok = (isinstance(value, kind) or (kind is float and isinstance(value, int))) \
                    and not (kind is list and not all(isinstance(v, int) for v in value))
                if not ok:
                    raise _Refused(f"attribute {name} must be "
                                   f"{'a list of ints' if kind is list else kind.__name__}")
                return value
        return default

    def const(self, node: NodeProto, i: int) -> np.ndarray | None:
        """Real value of constant input i (None if absent), dequantized if behind a DQ."""
        if len(node.input) <= i or not node.input[i]:
            return None
        t = self.tensors[self.tensor(node.input[i])]
        if t.const is None:
            raise _Refused(f"input '{node.input[i]}' must be a constant (initializer)")
        return t.const.real()

    def window(self, proto: NodeProto, kernel: list[int]) -> dict:
        """Strides, dilation and padding of a Conv or pool."""
        strides = self.attr(proto, "strides", [1, 1])
        if len(kernel) != 2 or len(strides) != 2 or min(*kernel, *strides) < 1:
            raise _Refused(f"needs a 2-D kernel and stride, got {kernel} / {strides}")
        dilations = self.attr(proto, "dilations", [1, 1])
        auto = self.attr(proto, "auto_pad", "NOTSET")
        padding = {"SAME_UPPER": "same", "SAME_LOWER": "same_lower", "VALID": "valid"}.get(auto)
        if padding is None:
            pads = tuple(self.attr(proto, "pads", [0, 0, 0, 0]))
            if len(pads) != 4 or min(pads) < 0:
                raise _Refused(f"pads {list(pads)} must be 4 non-negative values")
            padding = pads
        return {"stride": tuple(strides), "padding": padding,
                "dilation": (1, 1) if all(d == 1 for d in dilations) else tuple(dilations)[:2],
                "ceil_mode": bool(self.attr(proto, "ceil_mode", 0)), "kernel": tuple(kernel)}


# -- ONNX nodes -> neutral nodes ---------------------------------------------------------------------
def _conv(r: _Reader, proto: NodeProto, node: Node) -> None:
    w = r.const(proto, 1)
    if w is None or w.ndim != 4:
        raise _Refused("needs a 4-D weight initializer (O, I, kH, kW)")
    if r.attr(proto, "kernel_shape", list(w.shape[2:])) != list(w.shape[2:]):
        raise _Refused(f"kernel_shape differs from the weight {list(w.shape)}")
    node.op, node.roles = "conv", ("X", "weight", "bias")
    node.attrs = r.window(proto, list(w.shape[2:]))
    node.attrs.update(group=r.attr(proto, "group", 1), to_ir={1: (0, 2, 3, 1)})


def _conv_transpose(r: _Reader, proto: NodeProto, node: Node) -> None:
    """ConvTranspose of one group, weights (I, O, kH, kW), explicit pads (or VALID) and
    output_padding: the output is (in - 1) stride + k - pads + output_padding."""
    w = r.const(proto, 1)
    if w is None or w.ndim != 4:
        raise _Refused("needs a 4-D weight initializer (I, O, kH, kW)")
    if r.attr(proto, "group", 1) != 1:
        raise _Refused(f"group={r.attr(proto, 'group', 1)}: only one group is supported")
    kernel = list(w.shape[2:])
    if r.attr(proto, "kernel_shape", kernel) != kernel:
        raise _Refused(f"kernel_shape differs from the weight {list(w.shape)}")
    if r.attr(proto, "output_shape") is not None or \
            r.attr(proto, "auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        raise _Refused("output_shape and auto_pad SAME are not supported: give pads (and "
                       "output_padding), as PyTorch exports them")
    window = r.window(proto, kernel)
    pads = window["padding"] if window["padding"] != "valid" else (0, 0, 0, 0)
    extra = r.attr(proto, "output_padding", [0, 0])
    if len(extra) != 2 or min(extra) < 0:
        raise _Refused(f"output_padding {extra} must be 2 non-negative values")
    node.op, node.roles = "transpose_conv", ("X", "weight", "bias")
    node.attrs = {"stride": window["stride"], "dilation": window["dilation"], "pads": pads,
                  "output_padding": tuple(extra), "to_ir": {1: (1, 2, 3, 0)}}


def _nearest_rule(coordinate: str, rounding: str):
    """ONNX Resize's nearest input position of every output position along one axis (of
    `scale` = output / input, as given or from the sizes), clipped to the input."""
    origin = {
        "half_pixel": lambda x, s, n, m: (x + 0.5) / s - 0.5,
        "pytorch_half_pixel": lambda x, s, n, m: (x + 0.5) / s - 0.5 if m > 1 else 0 * x,
        "align_corners": lambda x, s, n, m: x * (n - 1) / (m - 1) if m > 1 else 0 * x,
        "asymmetric": lambda x, s, n, m: x / s,
        "tf_half_pixel_for_nn": lambda x, s, n, m: (x + 0.5) / s,
    }
    nearest = {"round_prefer_floor": lambda v: np.ceil(v - 0.5),
               "round_prefer_ceil": lambda v: np.floor(v + 0.5),
               "floor": np.floor, "ceil": np.ceil}
    if coordinate not in origin or rounding not in nearest:
        raise _Refused(f"coordinate_transformation_mode {coordinate!r} with nearest_mode "
                       f"{rounding!r} is not supported")

    def index(n: int, m: int, scale: float) -> np.ndarray:
        v = nearest[rounding](origin[coordinate](np.arange(m, dtype=np.float64), scale, n, m))
        return np.clip(v, 0, n - 1).astype(np.int64)
    return index


def _resize(r: _Reader, proto: NodeProto, node: Node) -> None:
    """Resize (mode nearest) and Upsample: the output's H and W from `sizes` or the `scales` of
    N, C, H, W (N and C kept), the input position of every output position by ONNX's rule."""
    mode = r.attr(proto, "mode", "nearest")
    if mode != "nearest":
        raise _Refused(f"mode {mode!r}: only nearest is supported")
    if proto.op_type == "Upsample":
        scales, sizes, rule = r.const(proto, 1), None, _nearest_rule("asymmetric", "floor")
    else:
        inputs = [r.const(proto, i) for i in (1, 2, 3)] if r.opset >= 11 else \
            [None, r.const(proto, 1), None]
        scales, sizes = (v if v is not None and v.size else None for v in inputs[1:])
        rule = _nearest_rule(r.attr(proto, "coordinate_transformation_mode", "half_pixel"),
                             r.attr(proto, "nearest_mode", "round_prefer_floor"))
    given = sizes if sizes is not None else scales
    if given is None or given.size != 4 or (sizes is None and not np.all(given[:2] == 1)):
        raise _Refused("needs scales or sizes of N, C, H, W, N and C unchanged")
    node.op, node.inputs = "resize_nearest", node.inputs[:1]
    node.attrs = {"nearest": rule}
    if sizes is not None:
        node.attrs["sizes"] = tuple(int(v) for v in sizes.reshape(-1))
    else:
        node.attrs["scales"] = tuple(float(v) for v in scales.reshape(-1)[2:])


def _batchnorm(r: _Reader, proto: NodeProto, node: Node) -> None:
    if r.view.quantized:
        node.op = "batchnorm"                # the lowering refuses it in a quantized graph
        return
    if r.attr(proto, "training_mode", 0) or any(o for o in proto.output[1:]):
        raise _Refused("only inference-mode BatchNormalization is supported")
    node.op, node.attrs = "batchnorm", {"epsilon": r.attr(proto, "epsilon", 1e-5)}


def _act(r: _Reader, proto: NodeProto, node: Node) -> None:
    lo, hi = 0.0, None
    if proto.op_type == "Clip":
        lo = r.const(proto, 1) if len(proto.input) > 1 else r.attr(proto, "min", -np.inf)
        hi = r.const(proto, 2) if len(proto.input) > 2 else r.attr(proto, "max", np.inf)
        lo, hi = (None if v is None else float(np.asarray(v).reshape(())) for v in (lo, hi))
    node.op, node.attrs, node.inputs = "clip", {"min": lo, "max": hi}, node.inputs[:1]


def _hard_sigmoid(r: _Reader, proto: NodeProto, node: Node) -> None:
    node.op = "hard_sigmoid"
    node.attrs = {"alpha": float(r.attr(proto, "alpha", 0.2)),
                  "beta": float(r.attr(proto, "beta", 0.5))}


def _pool(r: _Reader, proto: NodeProto, node: Node) -> None:
    if len(proto.output) > 1 and proto.output[1]:
        raise _Refused("the Indices output is not supported")
    node.op = "max_pool" if proto.op_type == "MaxPool" else "avg_pool"
    node.attrs = r.window(proto, r.attr(proto, "kernel_shape"))
    node.attrs["count_pad"] = bool(r.attr(proto, "count_include_pad", 0))


def _global_avgpool(r: _Reader, proto: NodeProto, node: Node) -> None:
    node.op, node.attrs = "mean", {"axes": [2, 3], "keep_dims": True}


def _flatten(r: _Reader, proto: NodeProto, node: Node) -> None:
    node.op, node.inputs = "reshape", node.inputs[:1]
    if proto.op_type == "Flatten":
        axis = r.attr(proto, "axis", 1)
        node.attrs = {"flatten_axis": axis + 4 if axis < 0 else axis}
    else:
        target = r.const(proto, 1)
        node.attrs = {"target": [] if target is None else [int(v) for v in target.reshape(-1)]}


def _dense(r: _Reader, proto: NodeProto, node: Node) -> None:
    b_mat = r.const(proto, 1)
    if b_mat is None or b_mat.ndim != 2:
        raise _Refused("needs a 2-D weight initializer")
    trans_b, alpha, bias = 0, 1.0, None
    if proto.op_type == "Gemm":
        if r.attr(proto, "transA", 0):
            raise _Refused("transA=1 is not supported")
        trans_b, alpha = r.attr(proto, "transB", 0), r.attr(proto, "alpha", 1.0)
        beta = r.attr(proto, "beta", 1.0)
        bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
        if bias is not None and beta != 1.0:
            bias = r.derive(bias, Const(beta * r.const(proto, 2)), "FLOAT32")
    cout = b_mat.shape[0 if trans_b else 1]
    if alpha != 1.0:
        if r.view.quantized:
            raise _Refused("alpha != 1 would rescale the int8 weights")
        node.inputs[1] = r.derive(node.inputs[1], Const(alpha * b_mat))
    if bias is not None:
        b = r.tensors[bias].const
        if b is None or b.values.size not in (1, cout):
            raise _Refused(f"bias {list(r.tensors[bias].shape or [])} does not match {cout} "
                           "outputs")
        bias = r.derive(bias, Const(np.broadcast_to(b.values.reshape(-1), (cout,)).copy(),
                                    b.scale, b.zero_point, 0))
    node.op, node.roles = "dense", ("A", "weight", "bias")
    node.inputs = node.inputs[:2] + ([bias] if bias is not None else [])
    node.attrs = {"to_ir": {} if trans_b else {1: (1, 0)}}


def _pixel_op(r: _Reader, proto: NodeProto, node: Node) -> None:
    node.op = {"Softmax": "softmax", "HardSwish": "hard_swish", "LeakyRelu": "leaky_relu",
               "Sigmoid": "logistic"}[proto.op_type]
    if node.op == "softmax":
        node.attrs = {"axis": r.attr(proto, "axis", -1 if r.opset >= 13 else 1),
                      "coerced": r.opset < 13}
    elif node.op == "leaky_relu":
        node.attrs = {"alpha": float(np.float32(r.attr(proto, "alpha", 0.01)))}


def _prelu(r: _Reader, proto: NodeProto, node: Node) -> None:
    if r.const(proto, 1) is None:
        raise _Refused("needs a constant slope")
    node.op, node.roles = "prelu", ("X", "slope")


def _pad(r: _Reader, proto: NodeProto, node: Node) -> None:
    mode = r.attr(proto, "mode", "constant")
    if mode != "constant":
        raise _Refused(f"mode {mode}: only constant padding is supported")
    if r.opset < 11:
        pads = np.asarray(r.attr(proto, "pads", []), np.int64)
        value = float(r.attr(proto, "value", 0.0))
    else:
        pads = r.const(proto, 1)
        value = r.const(proto, 2)
        if pads is None:
            raise _Refused("needs its pads input")
        if value is not None and value.size != 1:
            raise _Refused("constant_value must be a scalar")
        value = 0.0 if value is None else float(value.reshape(()))
        axes = r.const(proto, 3)
        if axes is not None:            # opset 18: pads for the listed axes only
            axes = [int(a) % 4 for a in axes.reshape(-1)]
            if len(set(axes)) != len(axes) or pads.size != 2 * len(axes):
                raise _Refused(f"axes {axes} do not match the {pads.size} pads")
            full = np.zeros(8, np.int64)
            for i, a in enumerate(axes):
                full[a], full[a + 4] = pads.reshape(-1)[i], pads.reshape(-1)[i + len(axes)]
            pads = full
    pads = np.asarray(pads).reshape(-1)
    if pads.size != 8 or pads[[0, 1, 4, 5]].any() or (pads < 0).any():
        raise _Refused(f"pads {pads.astype(np.int64).tolist()}: only non-negative padding of H "
                       "and W of an NCHW tensor is supported")
    node.op, node.inputs = "pad", node.inputs[:1]
    node.attrs = {"pads": tuple(int(pads[i]) for i in (2, 3, 6, 7)), "value": value}


def _transpose(r: _Reader, proto: NodeProto, node: Node) -> None:
    node.op, node.attrs = "transpose", {"perm": r.attr(proto, "perm", [])}


def _concat(r: _Reader, proto: NodeProto, node: Node) -> None:
    node.op, node.attrs = "concat", {"axis": r.attr(proto, "axis", 0)}


def _ints_input(r: _Reader, proto: NodeProto, i: int, attr: str) -> list[int] | None:
    """An int list given as input i (newer opsets) or as attribute `attr` (older ones)."""
    if len(proto.input) > i and proto.input[i]:
        return [int(v) for v in r.const(proto, i).reshape(-1)]
    return r.attr(proto, attr)


def _split(r: _Reader, proto: NodeProto, node: Node) -> None:
    """Split into the given sizes (or equal parts) along an axis: channel parts."""
    sizes = _ints_input(r, proto, 1, "split")
    node.outputs = [r.tensor(o) for o in proto.output]
    node.op, node.inputs = "slice", node.inputs[:1]
    node.attrs = {"axis": r.attr(proto, "axis", 0), "sizes": sizes}


def _slice(r: _Reader, proto: NodeProto, node: Node) -> None:
    starts, ends = _ints_input(r, proto, 1, "starts"), _ints_input(r, proto, 2, "ends")
    axes = _ints_input(r, proto, 3, "axes") or list(range(len(starts or [])))
    steps = _ints_input(r, proto, 4, "steps") or [1] * len(axes)
    if not starts or len(axes) != 1 or steps != [1]:
        raise _Refused("only a Slice of one axis with step 1 is supported")
    node.op, node.inputs = "slice", node.inputs[:1]
    node.attrs = {"axis": axes[0], "bounds": [(starts[0], ends[0])]}


def _squeeze(r: _Reader, proto: NodeProto, node: Node) -> None:
    axes = _ints_input(r, proto, 1, "axes")
    key = "squeeze" if proto.op_type == "Squeeze" else "unsqueeze"
    node.op, node.inputs, node.attrs = "reshape", node.inputs[:1], {key: axes or []}


def _reduce_mean(r: _Reader, proto: NodeProto, node: Node) -> None:
    axes = _ints_input(r, proto, 1, "axes")
    node.op, node.inputs = "mean", node.inputs[:1]
    node.attrs = {"axes": axes or [0, 1, 2, 3], "keep_dims": bool(r.attr(proto, "keepdims", 1))}


_READERS = {"Conv": _conv, "BatchNormalization": _batchnorm, "Relu": _act, "Clip": _act,
            "Add": lambda r, p, n: setattr(n, "op", "add"), "MaxPool": _pool,
            "AveragePool": _pool, "GlobalAveragePool": _global_avgpool, "Flatten": _flatten,
            "Reshape": _flatten, "Gemm": _dense, "MatMul": _dense, "Softmax": _pixel_op,
            "HardSwish": _pixel_op, "LeakyRelu": _pixel_op, "Sigmoid": _pixel_op,
            "PRelu": _prelu, "Pad": _pad, "Transpose": _transpose, "Concat": _concat,
            "Mul": lambda r, p, n: setattr(n, "op", "mul"), "Split": _split, "Slice": _slice,
            "Squeeze": _squeeze, "Unsqueeze": _squeeze, "ReduceMean": _reduce_mean,
            "ConvTranspose": _conv_transpose, "Resize": _resize, "Upsample": _resize,
            "HardSigmoid": _hard_sigmoid}

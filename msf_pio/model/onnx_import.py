"""ONNX (NCHW, float or int8 QDQ) -> IR (HWC layers; a node may read any computed tensor: residual
adds, shortcut convs, Concat along the channels).

Supported: Conv (groups 1 or depthwise), BatchNormalization, Relu and Clip(0, 6) folded into
the layer before, Add (residual, or a bias after a conv/dense), MaxPool, AveragePool,
GlobalAveragePool, a Flatten/Reshape (after a Transpose to NHWC or not) of any C x H x W map in
front of a Gemm/MatMul (dense: its weight columns reordered from the file's flatten order to the
IR's H, W, C order), Softmax over the channels,
HardSwish, LeakyRelu, PRelu (one slope per channel or per element) and Sigmoid (layers of their
own, TFLite's int8 semantics); in a float file, hard-swish spelled out as exporters write it (x * Clip(x + 3, 0,
6) / 6 with Add/Clip/Mul/Div, in any order of the Mul and Div, or x * HardSigmoid(x)) is one
HardSwish. A spatial Pad
(constant 0) folds into the padding of the Conv or MaxPool that alone reads it (see `_pad`). A float file comes back
weightless with `weights_spec = {"onnx": path}` (`weights.materialize` quantizes it); a QDQ file
comes back quantized with the file's own scales and zero points.

The file's own scales are kept everywhere: a GlobalAveragePool requantizes to its output's
QParams (TFLite MEAN), dense weights stay per channel; window pools keep their input's QParams,
as TFLite requires.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import NodeProto, helper, numpy_helper

from ..errors import MsfError
from . import ir
from .floatnet import WEIGHTED_OPS, FloatWeights
from .ir import Layer, Model, QParams, Weights, conv_out, same_padding
from .onnx_qdq import QConst, strip_qdq
from .quantize import SAME_AS_INPUT, f32, quantize_bias, quantize_weights

_ACT_TARGETS = (ir.CONV, ir.DEPTHWISE, ir.ADD, ir.DENSE)
_QOPERATOR_HINT = "; export int8 models with quant_format=QuantFormat.QDQ"


def load_onnx(path: str | Path) -> Model:
    """An ONNX file -> IR model (quantized if the file is QDQ, else weights come lazily)."""
    return read_onnx(path)[0]


def read_onnx(path: str | Path) -> tuple[Model, list[FloatWeights | None] | None]:
    """(weightless IR model, float weights) for a float file; (quantized model, None) for QDQ."""
    path = str(path)
    try:
        proto = onnx.load(path)
    except Exception as exc:    # onnx raises DecodeError, OSError, ValueError ... for bad files
        raise MsfError(f"cannot read ONNX model ({exc})", source=path) from None
    importer = None
    try:
        importer = _Importer(path, proto)
        return importer.run()
    except MsfError:
        raise
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError,
            OverflowError) as exc:
        # The handlers check what a valid file can get wrong; a file malformed in a way none
        # of them names (a mutated protobuf) still fails in one line, at the node being mapped.
        node = getattr(importer, "_current", None)
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


class _Importer:
    """Walks the nodes in graph order, emitting one IR layer per compute node and folding
    BatchNormalization, activations and bias adds into the layer they follow."""

    def __init__(self, path: str, proto: onnx.ModelProto):
        self.path = path
        self.graph = proto.graph
        self.consts = {i.name: self._decode(i, f"initializer '{i.name}'")
                       for i in self.graph.initializer}
        for node in self.graph.node:
            if node.op_type == "Constant":
                if len(node.attribute) != 1 or len(node.output) != 1:
                    raise self._error(node, "needs one value attribute and one output")
                value = helper.get_attribute_value(node.attribute[0])
                is_tensor = isinstance(value, onnx.TensorProto)
                self.consts[node.output[0]] = (self._decode(value, f"node '{node.name}'")
                                               if is_tensor else np.asarray(value))
        self.view = strip_qdq([n for n in self.graph.node if n.op_type != "Constant"],
                              self.consts, path)
        if not self.view.quantized:          # QDQ: each op has its own quantized output
            self.view.nodes = _fuse_hard_swish(self.view.nodes, self.consts, self.graph.output)
        self.consumers = Counter(self._name(i) for n in self.view.nodes for i in n.input if i)
        self.consumers.update(self._name(o.name) for o in self.graph.output)
        self.tensor: dict[str, int] = {}     # float tensor name -> IR tensor index
        self.flat: set[str] = set()          # Flatten/Reshape outputs (dense inputs only)
        self.chw: set[str] = set()           # ... of those, the ones flattened in NCHW order
        self.nhwc: set[str] = set()          # Transpose(0, 2, 3, 1) outputs (flatten inputs only)
        # Pad outputs waiting for the window node that reads them: (top, left, bottom, right),
        # the real pad value and the Pad node (for errors)
        self.padded: dict[str, tuple[tuple[int, int, int, int], float, NodeProto]] = {}
        self.qp: dict[int, QParams] = {}
        self.layers: list[Layer] = []
        self.nodes_of: list[NodeProto] = []           # IR layer -> the node it came from
        self.reading: int | None = None               # IR tensor the node being mapped reads
        self.params: list[FloatWeights | None] = []
        self.wsrc: list[tuple[QConst, int, Callable] | None] = []   # int8 weight, out axis, to IR
        self.bsrc: list[QConst | None] = []
        self.input_shape: ir.Shape = (0, 0, 0)
        self._current: NodeProto | None = None       # the node being mapped (for errors)
        self.opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")),
                          13)

    def _decode(self, tensor: onnx.TensorProto, where: str) -> np.ndarray:
        try:
            return numpy_helper.to_array(tensor)
        except Exception as exc:    # data that does not fit its declared type and dims
            raise MsfError(f"cannot decode tensor data ({exc})", source=self.path,
                           where=where) from None

    # -- walk --------------------------------------------------------------------------------
    def run(self) -> tuple[Model, list[FloatWeights | None] | None]:
        self._graph_input()
        handlers = {"Conv": self._conv, "BatchNormalization": self._batchnorm, "Relu": self._act,
                    "Clip": self._act, "Add": self._add, "MaxPool": self._pool,
                    "AveragePool": self._pool, "GlobalAveragePool": self._global_avgpool,
                    "Flatten": self._flatten, "Reshape": self._flatten, "Gemm": self._dense,
                    "MatMul": self._dense, "Softmax": self._pixel_op,
                    "HardSwish": self._pixel_op, "LeakyRelu": self._pixel_op,
                    "Sigmoid": self._pixel_op, "PRelu": self._prelu, "Pad": self._pad,
                    "Transpose": self._transpose, "Concat": self._concat}
        for node in self.view.nodes:
            self._current = node
            if node.op_type not in handlers:
                qoperator = node.op_type.startswith(("QLinear", "ConvInteger"))
                hint = _QOPERATOR_HINT if qoperator else ""
                raise self._error(node, f"unsupported op {node.op_type}{hint}")
            handlers[node.op_type](node)
        self._current = None
        self._graph_output()
        model = Model(name=Path(self.path).stem, input_shape=self.input_shape, layers=self.layers,
                      source=self.path, weights_spec={"onnx": self.path})
        bad = ir.graph_error(model)
        if bad:
            raise self._error(self.nodes_of[bad[0]], bad[1])
        if not self.view.quantized:
            return model, self.params
        return self._quantized(model), None

    def _graph_input(self) -> None:
        inputs = [i for i in self.graph.input if i.name not in self.consts]
        if len(inputs) != 1:
            raise MsfError(f"needs exactly one graph input, has {len(inputs)}", source=self.path)
        value = inputs[0]
        where = f"input '{value.name}'"
        tensor_type = value.type.tensor_type
        if tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise MsfError("must be a float tensor", source=self.path, where=where)
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?"
                for d in tensor_type.shape.dim]
        if len(dims) != 4:
            raise MsfError(f"must be NCHW (4-D), got shape {dims}", source=self.path, where=where)
        if not all(isinstance(d, int) and d > 0 for d in dims):
            raise MsfError(f"has a dynamic shape {dims}: export with a fixed input size",
                           source=self.path, where=where)
        if dims[0] != 1:
            raise MsfError(f"batch must be 1, got {dims[0]}", source=self.path, where=where)
        self.input_shape = (dims[2], dims[3], dims[1])
        self.tensor[value.name] = 0
        self._set_q(value.name, 0)

    def _graph_output(self) -> None:
        outputs = list(self.graph.output)
        if len(outputs) != 1:
            raise MsfError(f"needs exactly one graph output, has {len(outputs)}", source=self.path)
        name = self._name(outputs[0].name)
        if self.tensor.get(name) != len(self.layers) or not self.layers or name in self.padded:
            raise MsfError("must be the output of the last layer", source=self.path,
                           where=f"output '{outputs[0].name}'")
        dims = [d.dim_value for d in outputs[0].type.tensor_type.shape.dim]
        h, w, c = self.layers[-1].out_shape
        declared = [1, c] if name in self.flat or self._rank() == 2 else [1, c, h, w]
        if dims and all(dims) and dims != declared:
            raise MsfError(f"declared shape {dims} differs from the computed {declared}",
                           source=self.path, where=f"output '{outputs[0].name}'")

    # -- helpers -----------------------------------------------------------------------------
    def _name(self, name: str) -> str:
        while name in self.view.alias:
            name = self.view.alias[name]
        return name

    def _error(self, node: NodeProto, message: str) -> MsfError:
        return MsfError(message, source=self.path,
                        where=f"node '{node.name or node.output[0]}' ({node.op_type})")

    def _input(self, node: NodeProto, flat: bool = False, pad_ok: bool = False) -> int:
        """The IR tensor `node` reads: the latest one, or an earlier one (a branch)."""
        name = self._name(node.input[0])
        if name not in self.tensor:
            raise self._error(node, f"reads '{node.input[0]}', which no supported node produces")
        if name in self.padded and not pad_ok:
            pad = self.padded[name][2]
            why = (" (an AveragePool divides by the taps inside its padded input, the zeros "
                   "included: no pool padding computes that)" if node.op_type == "AveragePool"
                   else "")
            raise self._error(node, f"reads the output of Pad '{pad.name or pad.output[0]}': a "
                                    f"Pad may only feed a Conv or a MaxPool{why}")
        t = self.tensor[name]
        if name in self.nhwc and node.op_type not in ("Flatten", "Reshape"):
            raise self._error(node, f"reads the NHWC Transpose '{node.input[0]}': a Transpose "
                                    "may only feed a Flatten/Reshape in front of a Gemm/MatMul")
        self.reading = t
        if (name in self.flat) != flat:
            raise self._error(node, "a Flatten/Reshape may only feed a Gemm/MatMul" if not flat
                              else "input must be flattened (a Flatten/Reshape to (1, N))")
        return t

    def _shape(self, t: int) -> ir.Shape:
        return self.input_shape if t == 0 else self.layers[t - 1].out_shape

    def _const(self, node: NodeProto, i: int) -> np.ndarray | None:
        """Float value of constant input i (None if absent), dequantized if behind a DQ."""
        if len(node.input) <= i or not node.input[i]:
            return None
        name = node.input[i]
        if name in self.view.consts:
            return self.view.consts[name].dequantized()
        if name in self.consts:
            return self.consts[name].astype(np.float64)
        raise self._error(node, f"input '{name}' must be a constant (initializer)")

    def _attr(self, node: NodeProto, name: str, default=None):
        """Attribute `name`, of the default's type (a list of ints when the default is None)."""
        for a in node.attribute:
            if a.name == name:
                value = helper.get_attribute_value(a)
                value = value.decode(errors="replace") if isinstance(value, bytes) else value
                kind = list if default is None else type(default)
                ok = (isinstance(value, kind) or (kind is float and isinstance(value, int))) \
                    and not (kind is list and not all(isinstance(v, int) for v in value))
                if not ok:
                    raise self._error(node, f"attribute {name} must be "
                                            f"{'a list of ints' if kind is list else kind.__name__}")
                return value
        return default

    def _emit(self, node: NodeProto, layer: Layer, params: FloatWeights | None = None,
              wsrc=None, bsrc: QConst | None = None) -> None:
        layer.name = node.name or node.output[0]
        if self.reading is not None and self.reading != len(self.layers) and layer.input is None:
            layer.input = self.reading
        self.reading = None
        self.nodes_of.append(node)
        self.layers.append(layer)
        self.params.append(params)
        self.wsrc.append(wsrc)
        self.bsrc.append(bsrc)
        self.tensor[node.output[0]] = len(self.layers)
        self._set_q(node.output[0], len(self.layers))

    def _set_q(self, name: str, t: int) -> None:
        if name in self.view.qparams:
            self.qp[t] = self.view.qparams[name]

    def _fold_target(self, node: NodeProto, ops: tuple[str, ...], what: str, i: int = 0) -> Layer:
        """The last layer, if `node` alone reads its output (input i): `node` merges into it."""
        name = self._name(node.input[i])
        layer = self.layers[-1] if self.layers else None
        if (self.tensor.get(name) != len(self.layers) or layer is None or layer.op not in ops
                or self.consumers[name] != 1 or name in self.flat or name in self.padded):
            raise self._error(node, f"must directly follow {what} whose output it alone reads")
        self.tensor[node.output[0]] = len(self.layers)
        self._set_q(node.output[0], len(self.layers))
        return layer

    def _padding(self, node: NodeProto, h: int, w: int, k: list[int], s: list[int],
                 explicit: tuple[int, ...] = (0, 0, 0, 0)) -> tuple[int, ...]:
        """(top, left, bottom, right) of the window: its own padding of the (Pad-)padded
        input, plus the `explicit` padding of a Pad folded into it."""
        h, w = h + explicit[0] + explicit[2], w + explicit[1] + explicit[3]
        auto = self._attr(node, "auto_pad", "NOTSET")
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            (top, bottom), (left, right) = same_padding(h, k[0], s[0]), same_padding(w, k[1], s[1])
            pad = (top, left, bottom, right) if auto == "SAME_UPPER" else (bottom, right, top, left)
        elif auto == "VALID":
            pad = (0, 0, 0, 0)
        else:
            pad = tuple(self._attr(node, "pads", [0, 0, 0, 0]))
            if len(pad) != 4 or min(pad) < 0:
                raise self._error(node, f"pads {list(pad)} must be 4 non-negative values")
        pad = tuple(a + b for a, b in zip(pad, explicit))
        if max(pad[0], pad[2]) >= k[0] or max(pad[1], pad[3]) >= k[1]:
            raise self._error(node, f"padding {list(pad)} must be smaller than the kernel {k}")
        return pad

    def _window(self, node: NodeProto, op: str, shape: ir.Shape, k: list[int], cout: int,
                explicit: tuple[int, ...] = (0, 0, 0, 0)) -> Layer:
        """A window layer (kernel_shape k = [kh, kw]) from the common Conv/Pool attributes,
        with the `explicit` padding of a Pad before it."""
        strides = self._attr(node, "strides", [1, 1])
        if len(k) != 2 or len(strides) != 2 or min(*k, *strides) < 1:
            raise self._error(node, f"needs a 2-D kernel and stride, got {k} / {strides}")
        if any(d != 1 for d in self._attr(node, "dilations", [1, 1])):
            raise self._error(node, "dilated windows are not supported")
        h, w, _ = shape
        pad = self._padding(node, h, w, k, strides, explicit)
        oh = conv_out(h, k[0], strides[0], pad[0], pad[2])
        ow = conv_out(w, k[1], strides[1], pad[1], pad[3])
        if self._attr(node, "ceil_mode", 0) and (oh, ow) != (
                -(-(h + pad[0] + pad[2] - k[0]) // strides[0]) + 1,
                -(-(w + pad[1] + pad[3] - k[1]) // strides[1]) + 1):
            raise self._error(node, "ceil_mode changes the output size (TFLite floors)")
        if oh < 1 or ow < 1:
            raise self._error(node, f"kernel {k[0]}x{k[1]} does not fit the {h}x{w} input")
        return Layer(op=op, in_shape=shape, out_shape=(oh, ow, cout), kernel=tuple(k),
                     stride=tuple(strides), pad=pad)

    # -- ops ---------------------------------------------------------------------------------
    def _conv(self, node: NodeProto) -> None:
        shape = self._shape(self._input(node, pad_ok=True))
        explicit = self._folded_pad(node, "a Conv")
        w = self._const(node, 1)
        c = shape[2]
        group = self._attr(node, "group", 1)
        if w is None or w.ndim != 4:
            raise self._error(node, "needs a 4-D weight initializer (O, I, kH, kW)")
        cout = w.shape[0]
        if group == 1:
            if w.shape[1] != c:
                raise self._error(node, f"weight {list(w.shape)} takes {w.shape[1]} input "
                                        f"channels, the input has {c}")
            op, to_ir = ir.CONV, (lambda a: a.transpose(0, 2, 3, 1))
        elif group == c == cout and w.shape[1] == 1:
            op, to_ir = ir.DEPTHWISE, (lambda a: a.transpose(1, 2, 3, 0))
        else:
            raise self._error(node, f"group={group} on {c} channels: only plain and depthwise "
                                    "(multiplier 1) convolutions are supported")
        if self._attr(node, "kernel_shape", list(w.shape[2:])) != list(w.shape[2:]):
            raise self._error(node, f"kernel_shape differs from the weight {list(w.shape)}")
        layer = self._window(node, op, shape, list(w.shape[2:]), cout, explicit)
        b = self._const(node, 2)
        b = np.zeros(cout) if b is None else b
        if b.shape != (cout,):
            raise self._error(node, f"bias shape {list(b.shape)} != [{cout}]")
        wq = self.view.consts.get(node.input[1])
        self._emit(node, layer, FloatWeights(to_ir(w), b), None if wq is None else (wq, 0, to_ir),
                   self.view.consts.get(node.input[2]) if len(node.input) > 2 else None)

    def _batchnorm(self, node: NodeProto) -> None:
        if self.view.quantized:
            raise self._error(node, "a quantized model must have its BatchNormalization folded "
                                    "before quantization (onnxruntime quant_pre_process)")
        if self._attr(node, "training_mode", 0) or any(o for o in node.output[1:]):
            raise self._error(node, "only inference-mode BatchNormalization is supported")
        layer = self._fold_target(node, (ir.CONV, ir.DEPTHWISE), "a convolution")
        p = self.params[-1]
        if p is None or self.layers[-1].act != "none":
            raise self._error(node, "must follow the convolution before its activation")
        scale, bias, mean, var = (self._const(node, i) for i in range(1, 5))
        g = scale / np.sqrt(var + self._attr(node, "epsilon", 1e-5))
        w = p.w * (g if layer.op == ir.DEPTHWISE else g.reshape(-1, 1, 1, 1))
        self.params[-1] = FloatWeights(w, (p.b - mean) * g + bias)

    def _act(self, node: NodeProto) -> None:
        act = "relu"
        if node.op_type == "Clip":
            lo = (self._const(node, 1) if len(node.input) > 1
                  else self._attr(node, "min", -np.inf))
            hi = (self._const(node, 2) if len(node.input) > 2
                  else self._attr(node, "max", np.inf))
            lo, hi = (None if v is None else float(np.asarray(v).reshape(())) for v in (lo, hi))
            if lo != 0 or hi not in (6.0, None, np.inf):
                raise self._error(node, f"Clip({lo}, {hi}) is neither ReLU nor ReLU6")
            act = "relu6" if hi == 6.0 else "relu"
        layer = self._fold_target(node, _ACT_TARGETS, "a conv, add or dense layer")
        layer.act = "relu6" if "relu6" in (layer.act, act) else act

    def _add(self, node: NodeProto) -> None:
        names = [self._name(i) for i in node.input]
        known = [n for n in names if n in self.tensor]
        if len(known) == 1:            # a bias: fold into the conv/dense before
            main = names.index(known[0])
            const = self._const(node, 1 - main)
            layer = self._fold_target(node, WEIGHTED_OPS, "a conv or dense layer", main)
            axis = -1 if layer.op == ir.DENSE else -3       # channels of (1, N) / (1, C, H, W)
            per_channel = const.size == 1 or (const.ndim >= -axis and
                                              const.shape[axis] == const.size == layer.cout)
            if layer.act != "none" or not per_channel:
                raise self._error(node, f"constant {list(const.shape)} is not a per-channel "
                                        f"bias of the {layer.op} before it")
            p = self.params[-1]
            self.params[-1] = FloatWeights(p.w, p.b + const.reshape(-1))
            self.bsrc[-1] = None
            return
        if len(known) != 2:
            raise self._error(node, "needs two tensors, or a tensor and a constant bias")
        t = [self.tensor[n] for n in known]
        if t[0] == t[1]:
            raise self._error(node, "adds a tensor to itself")
        # the latest tensor first when it is one of the two (the chain's residual form)
        main, skip = (t[1], t[0]) if t[1] == len(self.layers) else (t[0], t[1])
        shape, latest = self._shape(skip), self._shape(main)
        if any(n in self.padded for n in known):
            raise self._error(node, "adds the output of a Pad (a Pad may only feed a Conv or "
                                    "a MaxPool)")
        if shape != latest or any(n in self.flat for n in known):
            raise self._error(node, f"adds shapes {list(shape)} and {list(latest)} "
                                    "(no broadcasting)")
        self.reading = main
        self._emit(node, Layer(op=ir.ADD, in_shape=latest, out_shape=latest, skip=skip))

    def _concat(self, node: NodeProto) -> None:
        """Concat of two computed NCHW tensors along the channels (axis 1)."""
        if len(node.input) != 2:
            raise self._error(node, f"concatenates {len(node.input)} tensors (two are supported)")
        axis = self._attr(node, "axis", 0)
        if axis not in (1, -3):
            raise self._error(node, f"concatenates along axis {axis}: only the channels (axis "
                                    "1 of NCHW) are supported")
        names = [self._name(i) for i in node.input]
        for n, raw in zip(names, node.input):
            if n not in self.tensor:
                raise self._error(node, f"reads '{raw}', which no supported node produces")
            if n in self.padded or n in self.flat or n in self.nhwc:
                raise self._error(node, f"concatenates '{raw}', a padded, flattened or "
                                        "transposed tensor")
        first, second = (self.tensor[n] for n in names)
        (h, w, c1), (h2, w2, c2) = self._shape(first), self._shape(second)
        if (h, w) != (h2, w2):
            raise self._error(node, f"concatenates shapes {[c1, h, w]} and {[c2, h2, w2]} "
                                    "(only the channels may differ)")
        self.reading = first
        self._emit(node, Layer(op=ir.CONCAT, in_shape=(h, w, c1), out_shape=(h, w, c1 + c2),
                               skip=second))

    def _pool(self, node: NodeProto) -> None:
        op = ir.MAX_POOL if node.op_type == "MaxPool" else ir.AVG_POOL
        shape = self._shape(self._input(node, pad_ok=op == ir.MAX_POOL))
        explicit = self._folded_pad(node, "a MaxPool") if op == ir.MAX_POOL else (0, 0, 0, 0)
        if len(node.output) > 1 and node.output[1]:
            raise self._error(node, "the Indices output is not supported")
        layer = self._window(node, op, shape, self._attr(node, "kernel_shape"), shape[2],
                             explicit)
        if op == ir.AVG_POOL and self._attr(node, "count_include_pad", 0) and any(layer.pad):
            raise self._error(node, "count_include_pad=1 with padding (TFLite counts valid taps)")
        self._emit(node, layer)

    def _pad(self, node: NodeProto) -> None:
        """A spatial constant Pad: remembered, and folded into the padding of the Conv or
        MaxPool that alone reads it (`_folded_pad`). Padding taps of a conv hold the zero point
        (real 0), of a max pool they never win: the Pad is equivalent when it pads with 0 before
        a conv, and before a max pool with -inf (or anything at or below the int8 minimum of a
        QDQ file), or with 0 after a ReLU (nothing below 0 to beat). An AveragePool reading a
        Pad is refused in `_input`: the padded taps count in its divisor there (ONNX's and
        TFLite's pools average over every tap inside their input, and the Pad's zeros are
        inside), while a padded window pool divides by the taps inside the unpadded input
        (TFLite's SAME); no avg_pool of the IR computes the former."""
        t = self._input(node)
        mode = self._attr(node, "mode", "constant")
        if mode != "constant":
            raise self._error(node, f"mode {mode}: only constant padding is supported")
        if self.opset < 11:
            pads = np.asarray(self._attr(node, "pads", []), np.int64)
            value = float(self._attr(node, "value", 0.0))
        else:
            pads = self._const(node, 1)
            value = self._const(node, 2)
            if pads is None:
                raise self._error(node, "needs its pads input")
            if value is not None and value.size != 1:
                raise self._error(node, "constant_value must be a scalar")
            value = 0.0 if value is None else float(value.reshape(()))
            axes = self._const(node, 3)
            if axes is not None:            # opset 18: pads for the listed axes only
                axes = [int(a) % 4 for a in axes.reshape(-1)]
                if len(set(axes)) != len(axes) or pads.size != 2 * len(axes):
                    raise self._error(node, f"axes {axes} do not match the {pads.size} pads")
                full = np.zeros(8, np.int64)
                for i, a in enumerate(axes):
                    full[a], full[a + 4] = pads.reshape(-1)[i], pads.reshape(-1)[i + len(axes)]
                pads = full
        pads = np.asarray(pads).reshape(-1)
        if pads.size != 8 or pads[[0, 1, 4, 5]].any() or (pads < 0).any():
            raise self._error(node, f"pads {pads.astype(np.int64).tolist()}: only non-negative "
                                    "padding of H and W of an NCHW tensor is supported")
        name = self._name(node.input[0])
        if name in self.flat or self.consumers[self._name(node.output[0])] != 1:
            raise self._error(node, "a Pad must be read by exactly one Conv or MaxPool")
        q_in, q_out = self.qp.get(t), self.view.qparams.get(node.output[0])
        if q_out is not None and q_out != q_in:
            raise self._error(node, f"output quantization {q_out} differs from its input's "
                                    f"{q_in}: a Pad cannot requantize")
        top, left, bottom, right = (int(pads[i]) for i in (2, 3, 6, 7))
        self.tensor[node.output[0]] = t
        self.padded[node.output[0]] = ((top, left, bottom, right), value, node)

    def _folded_pad(self, node: NodeProto, what: str) -> tuple[int, int, int, int]:
        """The padding of a Pad that `node` reads, if folding it into `node` is exact."""
        entry = self.padded.get(self._name(node.input[0]))
        if entry is None:
            return (0, 0, 0, 0)
        pads, value, pad = entry
        if node.op_type == "MaxPool":
            t = self.tensor[self._name(node.input[0])]
            after_relu = t > 0 and self.layers[t - 1].act != "none" and value == 0.0
            q = self.qp.get(t)
            lowest = value <= np.finfo(np.float32).min or (
                q is not None and value / q.scale + q.zero_point <= -128)
            ok = after_relu or lowest
            need = "-inf (or 0 after a ReLU)"
        else:
            ok, need = value == 0.0, "0"
        if not ok:
            raise self._error(pad, f"pads with {value}: before {what} only {need} folds into "
                                   "its padding")
        return pads

    def _rank(self) -> int:
        """Rank of the latest tensor in the file: 2 after a Gemm/MatMul (and the pixel ops
        that follow it), else 4 (NCHW)."""
        i = len(self.layers) - 1
        while i >= 0 and self.layers[i].op in ir.PIXEL_OPS:
            i -= 1
        return 2 if i >= 0 and self.layers[i].op == ir.DENSE else 4

    def _pixel_op(self, node: NodeProto) -> None:
        """Softmax over the channels and the element-wise HardSwish, LeakyRelu, Sigmoid: a
        layer of their own (TFLite's SOFTMAX, HARD_SWISH, LEAKY_RELU, LOGISTIC)."""
        shape = self._shape(self._input(node))
        op = {"Softmax": ir.SOFTMAX, "HardSwish": ir.HARD_SWISH, "LeakyRelu": ir.LEAKY_RELU,
              "Sigmoid": ir.LOGISTIC}[node.op_type]
        layer = Layer(op=op, in_shape=shape, out_shape=shape)
        if op == ir.SOFTMAX:
            rank = self._rank()
            axis = self._attr(node, "axis", -1 if self.opset >= 13 else 1)
            over_channels = axis % rank == 1 and (self.opset >= 13 or shape[:2] == (1, 1))
            if not over_channels:
                raise self._error(node, f"axis {axis} of a rank-{rank} tensor: only a softmax "
                                        "over the channels is supported")
        elif op == ir.LEAKY_RELU:
            layer.alpha = float(np.float32(self._attr(node, "alpha", 0.01)))
            if not layer.alpha >= 0:
                raise self._error(node, f"alpha {layer.alpha}: only slopes >= 0 are supported")
        self._emit(node, layer)

    def _prelu(self, node: NodeProto) -> None:
        """PRelu with one slope per channel (TFLite's PRELU with alpha [1, 1, C]) or per
        element (a slope [C, H, W]); the slope broadcasts against NCHW (or (1, N) after a Gemm)
        from the right, as ONNX does."""
        shape = self._shape(self._input(node))
        c, rank = shape[2], self._rank()
        slope = self._const(node, 1)
        if slope is None:
            raise self._error(node, "needs a constant slope")
        dims = (1,) * (rank - slope.ndim) + slope.shape
        h, w = shape[:2]
        per_pixel = rank == 4 and dims == (1, c, h, w) and (h, w) != (1, 1)
        if not per_pixel and (len(dims) != rank or dims[1] not in (1, c) or
                              any(d != 1 for i, d in enumerate(dims) if i != 1)):
            raise self._error(node, f"slope of shape {list(slope.shape)}: only one slope per "
                                    f"channel ([{c}, 1, 1]) or per element ([{c}, {h}, {w}]) "
                                    "is supported")
        if per_pixel:                           # CHW -> the IR's HWC
            def to_ir(a):
                return a.reshape(c, h, w).transpose(1, 2, 0).copy()
        else:
            def to_ir(a):
                return np.broadcast_to(a.reshape(-1), (c,)).copy()
        wq = self.view.consts.get(node.input[1])
        self._emit(node, Layer(op=ir.PRELU, in_shape=shape, out_shape=shape,
                               slope_per_pixel=per_pixel),
                   FloatWeights(to_ir(slope), np.zeros(0)), None if wq is None else (wq, 0, to_ir))

    def _global_avgpool(self, node: NodeProto) -> None:
        shape = self._shape(self._input(node))
        self._emit(node, Layer(op=ir.GLOBAL_AVGPOOL, in_shape=shape, out_shape=(1, 1, shape[2])))

    def _transpose(self, node: NodeProto) -> None:
        """NCHW -> NHWC, only as the first half of a flatten (TensorFlow exporters write
        Transpose + Reshape): the Flatten/Reshape after it then flattens in H, W, C order."""
        t = self._input(node)
        perm = self._attr(node, "perm", [])
        if perm != [0, 2, 3, 1]:
            raise self._error(node, f"perm {perm}: only a Transpose to NHWC (0, 2, 3, 1) in "
                                    "front of a Flatten/Reshape is supported")
        q_in, q_out = self.qp.get(t), self.view.qparams.get(node.output[0])
        if q_out is not None and q_out != q_in:
            raise self._error(node, f"output quantization {q_out} differs from its input's "
                                    f"{q_in}: a Transpose cannot requantize")
        self.tensor[node.output[0]] = t
        self.nhwc.add(node.output[0])

    def _flatten(self, node: NodeProto) -> None:
        """A flatten of the latest C x H x W tensor to (1, C*H*W) (or to (1, H*W*C) after an
        NHWC Transpose), read only by a dense layer, which reorders its weights (`_dense`)."""
        t = self._input(node)
        h, w, c = self._shape(t)
        n = h * w * c
        if node.op_type == "Flatten":
            flattens = self._attr(node, "axis", 1) in (1, -3)
        else:
            target = self._const(node, 1)
            target = [] if target is None else [int(v) for v in target.reshape(-1)]
            flattens = (len(target) == 2 and target[0] in (0, 1, -1) and target[1] in (n, -1)
                        and target != [-1, -1])
        if not flattens:
            raise self._error(node, f"only a flatten of the {c}x{h}x{w} tensor to "
                                    f"(1, {n}) in front of a Gemm/MatMul is supported")
        q_in, q_out = self.qp.get(t), self.view.qparams.get(node.output[0])
        if q_out is not None and q_in is not None and q_out != q_in:
            raise self._error(node, f"output quantization {q_out} differs from its input's "
                                    f"{q_in}: a flatten cannot requantize")
        self.tensor[node.output[0]] = t
        self.flat.add(node.output[0])
        if self._name(node.input[0]) not in self.nhwc and (h, w) != (1, 1):
            self.chw.add(node.output[0])
        self._set_q(node.output[0], t)

    def _dense(self, node: NodeProto) -> None:
        shape = self._shape(self._input(node, flat=True))
        b_mat = self._const(node, 1)
        wq = self.view.consts.get(node.input[1])
        if node.op_type == "Gemm":
            if self._attr(node, "transA", 0):
                raise self._error(node, "transA=1 is not supported")
            trans_b, alpha = self._attr(node, "transB", 0), self._attr(node, "alpha", 1.0)
            if alpha != 1.0 and self.view.quantized:
                raise self._error(node, "alpha != 1 would rescale the int8 weights")
            beta = self._attr(node, "beta", 1.0)
            bias = self._const(node, 2)
            bias = None if bias is None else beta * bias
            has_bias = len(node.input) > 2 and beta == 1.0
            bq = self.view.consts.get(node.input[2]) if has_bias else None
        else:
            trans_b, alpha, bias, bq = 0, 1.0, None, None
        if b_mat is None or b_mat.ndim != 2:
            raise self._error(node, "needs a 2-D weight initializer")
        h, w_, c = shape
        oriented = (lambda a: a) if trans_b else (lambda a: a.T)
        if oriented(b_mat).shape[1] != h * w_ * c:
            raise self._error(node, f"weight {list(b_mat.shape)} does not take {h * w_ * c} "
                                    "inputs")
        to_ir = oriented
        if self._name(node.input[0]) in self.chw:      # columns C, H, W -> the IR's H, W, C
            to_ir = (lambda a: oriented(a).reshape(-1, c, h, w_).transpose(0, 2, 3, 1)
                     .reshape(-1, h * w_ * c))
        w = alpha * to_ir(b_mat)
        cout = w.shape[0]
        if bias is None:
            bias = np.zeros(cout)
        if bias.size not in (1, cout):
            raise self._error(node, f"bias {list(bias.shape)} does not match {cout} outputs")
        bias = np.broadcast_to(bias.reshape(-1), (cout,))
        wsrc = None if wq is None else (wq, 0 if trans_b else 1, to_ir)
        self._emit(node, Layer(op=ir.DENSE, in_shape=shape, out_shape=(1, 1, cout)),
                   FloatWeights(w, bias), wsrc, bq)

    # -- QDQ ---------------------------------------------------------------------------------
    def _quantized(self, model: Model) -> Model:
        """Attach the file's int8 weights and QParams (TFLite's rules where they differ)."""
        if 0 not in self.qp:
            raise MsfError("the graph input has no QuantizeLinear", source=self.path)
        q = [self.qp[0]]
        for i, layer in enumerate(self.layers):
            if layer.op == ir.GLOBAL_AVGPOOL and i + 1 in self.qp:
                layer.requantize = True        # to the file's own output scale (TFLite MEAN)
            elif layer.op in SAME_AS_INPUT:
                self.qp[i + 1] = q[i]
            if i + 1 not in self.qp:
                raise MsfError("output has no QuantizeLinear: every activation of a QDQ model "
                               "must be quantized", source=self.path, where=f"node '{layer.name}'")
            layer.q_out = self.qp[i + 1]
            fixed = ir.FIXED_OUTPUT_Q.get(layer.op)
            if fixed is not None and layer.q_out != fixed:
                raise MsfError(f"int8 {layer.op} output must have scale 1/256 and zero point "
                               f"-128 (TFLite's kernel assumes them), has {layer.q_out.scale} "
                               f"and {layer.q_out.zero_point}", source=self.path,
                               where=f"node '{layer.name}'")
            q.append(layer.q_out)
            if layer.op in WEIGHTED_OPS:
                layer.weights = self._int8_weights(i, layer, q[i].scale)
            elif layer.op == ir.PRELU:
                layer.weights = self._int8_slopes(i, layer)
        model.q_input = q[0]
        return model

    def _int8_slopes(self, i: int, layer: Layer) -> Weights:
        """A PRelu's int8 slopes and their per-tensor quantization as written; a float slope
        (onnxruntime leaves PRelu unquantized) is quantized as msf-pio's own quantizer does."""
        if self.wsrc[i] is None:
            return quantize_weights(layer, self.params[i], 1.0)
        qc, _, to_ir = self.wsrc[i]
        if qc.q.dtype != np.int8 or qc.scale.size != 1 or qc.zero_point.size != 1:
            raise MsfError("slopes must be int8 quantized per tensor", source=self.path,
                           where=f"node '{layer.name}'")
        return Weights(w=to_ir(qc.q).astype(np.int8), bias=np.zeros(0, np.int32),
                       scales=f32(qc.scale.astype(np.float64)).reshape(1),
                       zero_point=int(qc.zero_point.reshape(-1)[0]))

    def _int8_weights(self, i: int, layer: Layer, s_in: float) -> Weights:
        if self.wsrc[i] is None:
            raise MsfError("weights are float: a QDQ model needs DequantizeLinear(int8) weights",
                           source=self.path, where=f"node '{layer.name}'")
        qc, out_axis, to_ir = self.wsrc[i]
        if qc.q.dtype != np.int8 or np.any(qc.zero_point != 0):
            raise MsfError("weights must be symmetric int8 (zero point 0)", source=self.path,
                           where=f"node '{layer.name}'")
        if qc.scale.size > 1 and qc.axis != out_axis:
            raise MsfError("weights must be quantized per output channel or per tensor",
                           source=self.path, where=f"node '{layer.name}'")
        n = 1 if layer.op == ir.DENSE and qc.scale.size == 1 else layer.cout
        scales = np.broadcast_to(f32(qc.scale.astype(np.float64)), (n,)).copy()
        bq = self.bsrc[i]
        if (bq is not None and bq.q.dtype == np.int32 and not np.any(bq.zero_point)
                and np.allclose(bq.scale, s_in * scales, rtol=1e-5, atol=0)):
            bias = np.broadcast_to(bq.q.reshape(-1), (layer.cout,)).astype(np.int32)
        else:
            bias = quantize_bias(self.params[i].b, s_in, scales)
        return Weights(w=to_ir(qc.q).astype(np.int8), bias=bias, scales=scales)


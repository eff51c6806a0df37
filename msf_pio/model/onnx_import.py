"""ONNX (NCHW, float or int8 QDQ) -> IR (HWC chain with residual adds).

Supported: Conv (groups 1 or depthwise), BatchNormalization, Relu and Clip(0, 6) folded into
the layer before, Add (residual, or a bias after a conv/dense), MaxPool, AveragePool,
GlobalAveragePool, Flatten/Reshape in front of a Gemm/MatMul (dense), Softmax over the channels,
HardSwish, LeakyRelu and Sigmoid (layers of their own, TFLite's int8 semantics). A float file comes back
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
from .quantize import SAME_AS_INPUT, f32, quantize_bias

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
        self.consumers = Counter(self._name(i) for n in self.view.nodes for i in n.input if i)
        self.consumers.update(self._name(o.name) for o in self.graph.output)
        self.tensor: dict[str, int] = {}     # float tensor name -> IR tensor index
        self.flat: set[str] = set()          # Flatten/Reshape outputs (dense inputs only)
        self.qp: dict[int, QParams] = {}
        self.layers: list[Layer] = []
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
                    "Sigmoid": self._pixel_op}
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
        if self.tensor.get(name) != len(self.layers) or not self.layers:
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

    def _input(self, node: NodeProto, flat: bool = False) -> int:
        """The IR tensor `node` reads: it must be the latest one (the IR is a chain)."""
        name = self._name(node.input[0])
        if name not in self.tensor:
            raise self._error(node, f"reads '{node.input[0]}', which no supported node produces")
        t = self.tensor[name]
        if t != len(self.layers):
            raise self._error(node, f"reads the earlier tensor '{node.input[0]}': only a "
                                    "residual Add may branch off the chain")
        if (name in self.flat) != flat:
            raise self._error(node, "a Flatten/Reshape may only feed a Gemm/MatMul" if not flat
                              else "input must be flattened (Flatten/Reshape of a 1x1 tensor)")
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
                or self.consumers[name] != 1 or name in self.flat):
            raise self._error(node, f"must directly follow {what} whose output it alone reads")
        self.tensor[node.output[0]] = len(self.layers)
        self._set_q(node.output[0], len(self.layers))
        return layer

    def _padding(self, node: NodeProto, h: int, w: int, k: int, s: int) -> tuple[int, ...]:
        auto = self._attr(node, "auto_pad", "NOTSET")
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            (top, bottom), (left, right) = same_padding(h, k, s), same_padding(w, k, s)
            pad = (top, left, bottom, right) if auto == "SAME_UPPER" else (bottom, right, top, left)
        elif auto == "VALID":
            pad = (0, 0, 0, 0)
        else:
            pad = tuple(self._attr(node, "pads", [0, 0, 0, 0]))
        if max(pad) >= k:
            raise self._error(node, f"padding {list(pad)} must be smaller than the kernel {k}")
        return pad

    def _window(self, node: NodeProto, op: str, shape: ir.Shape, k: list[int], cout: int) -> Layer:
        """A window layer from the common Conv/Pool attributes (square kernel and stride)."""
        strides = self._attr(node, "strides", [1, 1])
        if len(k) != 2 or k[0] != k[1] or strides[0] != strides[1]:
            raise self._error(node, f"needs a square 2-D kernel and stride, got {k} / {strides}")
        if any(d != 1 for d in self._attr(node, "dilations", [1, 1])):
            raise self._error(node, "dilated windows are not supported")
        h, w, _ = shape
        pad = self._padding(node, h, w, k[0], strides[0])
        oh = conv_out(h, k[0], strides[0], pad[0], pad[2])
        ow = conv_out(w, k[0], strides[0], pad[1], pad[3])
        if self._attr(node, "ceil_mode", 0) and (oh, ow) != (
                -(-(h + pad[0] + pad[2] - k[0]) // strides[0]) + 1,
                -(-(w + pad[1] + pad[3] - k[0]) // strides[0]) + 1):
            raise self._error(node, "ceil_mode changes the output size (TFLite floors)")
        if oh < 1 or ow < 1:
            raise self._error(node, f"kernel {k[0]} does not fit the {h}x{w} input")
        return Layer(op=op, in_shape=shape, out_shape=(oh, ow, cout), kernel=k[0],
                     stride=strides[0], pad=pad)

    # -- ops ---------------------------------------------------------------------------------
    def _conv(self, node: NodeProto) -> None:
        shape = self._shape(self._input(node))
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
        layer = self._window(node, op, shape, list(w.shape[2:]), cout)
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
        if len(self.layers) not in t or t[0] == t[1]:
            raise self._error(node, "a residual Add must add an earlier tensor to the latest one")
        skip = min(t)
        shape = self._shape(skip)
        latest = self.layers[-1].out_shape
        if shape != latest or any(n in self.flat for n in known):
            raise self._error(node, f"adds shapes {list(shape)} and {list(latest)} "
                                    "(no broadcasting)")
        if skip in {l.skip for l in self.layers}:
            raise self._error(node, "a tensor can be added only once")
        self._emit(node, Layer(op=ir.ADD, in_shape=latest, out_shape=latest, skip=skip))

    def _pool(self, node: NodeProto) -> None:
        shape = self._shape(self._input(node))
        if len(node.output) > 1 and node.output[1]:
            raise self._error(node, "the Indices output is not supported")
        op = ir.MAX_POOL if node.op_type == "MaxPool" else ir.AVG_POOL
        layer = self._window(node, op, shape, self._attr(node, "kernel_shape"), shape[2])
        if op == ir.AVG_POOL and self._attr(node, "count_include_pad", 0) and any(layer.pad):
            raise self._error(node, "count_include_pad=1 with padding (TFLite counts valid taps)")
        self._emit(node, layer)

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

    def _global_avgpool(self, node: NodeProto) -> None:
        shape = self._shape(self._input(node))
        self._emit(node, Layer(op=ir.GLOBAL_AVGPOOL, in_shape=shape, out_shape=(1, 1, shape[2])))

    def _flatten(self, node: NodeProto) -> None:
        t = self._input(node)
        h, w, c = self._shape(t)
        target = self._const(node, 1) if node.op_type == "Reshape" else None
        if target is None:
            to_1xc = self._attr(node, "axis", 1) == 1
        else:
            to_1xc = target.size == 2 and target[0] in (1, -1) and target[1] in (c, -1)
        ok = (h, w) == (1, 1) and to_1xc
        if not ok:
            raise self._error(node, "only a Flatten/Reshape of a 1x1xC tensor to (1, C) in "
                                    "front of a Gemm/MatMul is supported")
        self.tensor[node.output[0]] = t
        self.flat.add(node.output[0])
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
        to_ir = (lambda a: a) if trans_b else (lambda a: a.T)
        w = alpha * to_ir(b_mat)
        cout = w.shape[0]
        if w.shape[1] != shape[2]:
            raise self._error(node, f"weight {list(b_mat.shape)} does not take {shape[2]} inputs")
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
        model.q_input = q[0]
        return model

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


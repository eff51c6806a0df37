"""The one lowering: a format-neutral graph (`opgraph.py`, from any importer) -> the IR.

It walks the nodes in graph order and emits one IR layer per compute node, folding what the
IR keeps inside a layer: a PAD into the padding of the window op that alone reads it, a
standalone ReLU/ReLU6, a BatchNormalization or a constant bias add into the layer before,
a flatten (and a transpose to NHWC before it) into the dense layer that reads it (whose weight
columns it reorders from the file's flatten order to the IR's H, W, C), the TRANSPOSE of an
NCHW graph input into the input's shape. It keeps the quantization TFLite's int8 kernels fix
(pools keep their input's, softmax and logistic output 1/256) and attaches the file's int8
weights, or returns the float weights of a float graph for post-training quantization.

A tensor of the file is seen through a `View`: the IR tensor it holds, and how the file holds
it (flattened to (1, N), in which axis order, padded by a PAD not yet folded).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import numerics as nm
from ..errors import MsfError
from . import ir
from .floatnet import WEIGHTED_OPS, FloatWeights
from .ir import (Layer, Model, QParams, TensorIO, Weights, conv_out, same_padding,
                 transposed_padding)
from .opgraph import FLOAT, INT8, NCHW, NHWC, QDQ, Const, Graph, Node, Tensor
from .quantize import f32, quantize_bias, quantize_weights

MAX_DIM = 65535          # msf_layer_t stores shapes as uint16
MAX_WINDOW = 255         # and kernel, stride and padding as uint8
MAX_ELEMENTS = 1 << 28   # per tensor: far above any microcontroller model, far below overflow

_ACT_TARGETS = (ir.CONV, ir.DEPTHWISE, ir.ADD, ir.DENSE, ir.TRANSPOSE_CONV)
_PIXEL = {"softmax": ir.SOFTMAX, "hard_swish": ir.HARD_SWISH, "leaky_relu": ir.LEAKY_RELU,
          "logistic": ir.LOGISTIC}
_IO_TYPES = {"INT8": "int8", "UINT8": "uint8", "FLOAT32": "float32"}
_OP_NAMES = {   # how messages name neutral ops unless the graph names them its own way
    "conv": "convolution", "max_pool": "max pool", "avg_pool": "average pool",
    "dense": "dense layer", "reshape": "reshape", "pad": "pad", "transpose": "transpose",
    "quantize": "quantize"}
_WORDING = {    # key -> (node blamed: "node" or "pad", message template)
    "pad_max_pool": ("pad", "pads with {value}: before a {reader} only -inf (or 0 after a ReLU) "
                            "folds into its padding"),
    "grouped": ("node", "group={group} on {c} channels: only plain and depthwise (multiplier 1) "
                        "convolutions are supported"),
    "transpose": ("node", "perm {perm}: only a {transpose} to NHWC ([0, 2, 3, 1]) of an NCHW "
                          "map, in front of a {reshape}, or of the graph input is supported"),
    "int8_weights": ("node", "has type {dtype}, expected INT8"),
}


@dataclass
class View:
    """What a tensor of the file is in the IR: IR tensor `t`, as the file holds it."""
    t: int
    flat: bool = False                 # rank 2 in the file: (1, N)
    layout: str = NHWC                 # axis order of the map before it was flattened
    alias: bool = False                # made by a reshape, pad or transpose (no layer's own)
    pad: tuple[int, int, int, int] | None = None     # a PAD's top, left, bottom, right
    pad_value: float = 0.0             # ... its value, real
    pad_node: Node | None = None
    channel_pad: tuple[int, int] = (0, 0)


def lower(graph: Graph) -> tuple[Model, list[FloatWeights | None] | None]:
    """(quantized IR model, None) for an int8 or QDQ graph; (weightless IR model, float weights
    per layer) for a float one. Every refusal is a one-line MsfError naming the file and node."""
    lowering = Lowering(graph)
    try:
        return lowering.run()
    except MsfError:
        raise
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError,
            OverflowError) as exc:
        # The handlers check what a valid file can get wrong; a file malformed in a way none
        # of them names still fails in one line, at the node being lowered.
        node = lowering.current
        raise MsfError(f"malformed model ({type(exc).__name__}: {exc})", source=graph.source,
                       where=node.where if node is not None else None) from None


class Lowering:
    def __init__(self, graph: Graph):
        self.g = graph
        self.views: dict[str, View] = {}
        self.layers: list[Layer] = []
        self.q: list[QParams | None] = []          # IR tensor -> quantization
        self.layer_nodes: list[Node] = []
        self.params: list[FloatWeights | None] = []     # float weights per layer
        self.sources: list[tuple[Const, Const | None] | None] = []   # int8 weights, bias
        self.input_shape: ir.Shape = (0, 0, 0)
        self.float_input: str | None = None         # an int8 graph's float or uint8 input
        self.input_io: TensorIO | None = None       # the graph input and output as the file
        self.output_io: TensorIO | None = None      # has them
        self.reading: int | None = None             # IR tensor the node being lowered reads
        self.current: Node | None = None
        self.readers: dict[str, int] = {}
        for node in graph.nodes:
            for name in node.inputs:
                if name:
                    self.readers[name] = self.readers.get(name, 0) + 1
        for name in graph.outputs:
            self.readers[name] = self.readers.get(name, 0) + 1
        # a stateful streaming model's variables: the values read (file tensor -> the read
        # node) and assigned (file tensor -> the assign node), the stream layer of each
        self.state_reads: dict[str, Node] = {}
        self.assigns = {node.inputs[0]: node for node in graph.nodes
                        if node.op == "assign_state" and node.inputs}
        self.state_updates: dict[str, str] = {}      # file tensor -> variable it updates
        self.streams: dict[str, int] = {}            # variable -> its stream layer
        self.assigned: set[str] = set()

    # -- words ------------------------------------------------------------------------------------
    def name_of(self, op: str) -> str:
        return self.g.op_names.get(op, _OP_NAMES.get(op, op))

    def error(self, message: str, node: Node | None = None, tensor: Tensor | None = None,
              ) -> MsfError:
        where = node.where if node is not None else None
        if tensor is not None and tensor.label:
            where = f"{where}: {tensor.label}" if where else tensor.label
        return MsfError(message, source=self.g.source, where=where)

    def refuse(self, key: str, node: Node, pad: Node | None = None,
               tensor: Tensor | None = None, **facts) -> MsfError:
        """A refusal the graph may word its own way (`Graph.wording`)."""
        blame, template = self.g.wording.get(key, _WORDING[key])
        return self.error(template.format(**facts), pad if blame == "pad" else node, tensor)

    # -- tensors ----------------------------------------------------------------------------------
    def tensor(self, node: Node, i: int, required: bool = True) -> Tensor | None:
        if i >= len(node.inputs) or not node.inputs[i]:
            if required:
                raise self.error(f"input {i} is missing", node)
            return None
        t = self.g.tensors[node.inputs[i]]
        self.check_shape(node, t)
        return t

    def out(self, node: Node) -> Tensor:
        if len(node.outputs) != 1 or not node.outputs[0]:
            raise self.error(f"must have exactly one output, has {len(node.outputs)}", node)
        t = self.g.tensors[node.outputs[0]]
        self.check_shape(node, t)
        return t

    def check_shape(self, node: Node | None, t: Tensor) -> None:
        if t.shape is None or not all(isinstance(d, (int, np.integer)) for d in t.shape):
            return
        if any(d < 1 or d > MAX_DIM for d in t.shape) or int(np.prod(
                [float(d) for d in t.shape])) > MAX_ELEMENTS:
            raise self.error(f"shape {list(t.shape)} has a dimension outside [1, {MAX_DIM}] "
                             f"or more than {MAX_ELEMENTS} elements", node, t)

    def check_type(self, node: Node, t: Tensor, expected: str) -> None:
        if t.dtype != expected:
            raise self.error(f"has type {t.dtype}, expected {expected}", node, t)

    def const(self, node: Node, i: int) -> Const | None:
        """Constant input i in the IR's layout (None if absent)."""
        t = self.tensor(node, i, required=False)
        if t is None:
            return None
        if t.const is None:
            raise self.error(t.problem or ("must be a constant" if t.label else
                                           f"input '{t.name}' must be a constant"), node, t)
        axes = node.attrs.get("to_ir", {}).get(i)
        return t.const.transposed(axes) if axes else t.const

    def activation_q(self, node: Node | None, t: Tensor) -> QParams | None:
        """A tensor's per-tensor int8 quantization (required in an int8 graph)."""
        if self.g.kind != INT8:
            return t.q
        if node is not None:
            self.check_type(node, t, "INT8")
        scale, zp = t.declared_q or (np.zeros(0), np.zeros(0, np.int64))
        if scale.size != 1 or zp.size != 1:
            raise self.error(f"activations must be quantized per tensor (has {scale.size} "
                             f"scales, {zp.size} zero points)", node, t)
        s, z = float(np.float32(scale[0])), int(zp[0])
        if not (np.isfinite(s) and s > 0) or not -128 <= z <= 127:
            raise self.error(f"bad int8 quantization: scale {s}, zero point {z}", node, t)
        return QParams(s, z)

    def shape(self, t: int) -> ir.Shape:
        return self.input_shape if t == 0 else self.layers[t - 1].out_shape

    def file_dims(self, view: View) -> tuple[int, ...]:
        """The shape the file gives the tensor a view stands for (batch 1)."""
        h, w, c = self.shape(view.t)
        if view.flat:
            return (1, h * w * c)
        return (1, c, h, w) if view.layout == NCHW else (1, h, w, c)

    def view(self, node: Node, i: int = 0, flat_ok: bool = False, pad_ok: bool = False,
             layout_ok: bool = False) -> View:
        """The view of input i: an IR tensor computed before (the layer `node` becomes reads
        it: the latest one, or an earlier one for a branch)."""
        t = self.tensor(node, i)
        if t.name not in self.views:
            what = "is" if t.label else f"reads '{t.name}', which is"
            raise self.error(f"{what} not computed by any earlier supported operator"
                             + (" (constant operands are not supported)"
                                if t.const is not None else ""), node, t)
        view = self.views[t.name]
        self.reading = view.t
        if view.flat and not flat_ok and self.shape(view.t)[:2] != (1, 1):
            raise self.error(f"reads a flattened tensor (only a {self.name_of('dense')} may)",
                             node, t)
        if view.layout != self.g.layout and not view.flat and not layout_ok:
            raise self.error(f"reads the NHWC {self.name_of('transpose')} '{t.name}': a "
                             f"{self.name_of('transpose')} may only feed a "
                             f"{self.name_of('reshape')} in front of a {self.name_of('dense')}",
                             node)
        if view.pad and not pad_ok:
            raise self.error(f"reads the output of {view.pad_node.ref}: a "
                             f"{self.name_of('pad')} may only feed a {self.name_of('conv')} or "
                             f"a pool", node, t)
        if any(view.channel_pad) and not (node.op == "conv" and node.attrs.get("group", 1) == 1):
            raise self.error(f"reads the output of {view.pad_node.ref} of the channels: a "
                             f"channel padding may only feed a {self.name_of('conv')}", node, t)
        return view

    def bind(self, node: Node, name: str, view: View, flat_ok: bool = False) -> None:
        """Tensor `name` of the file is `view`; its declared shape must agree."""
        t = self.g.tensors[name]
        if t.shape is not None and all(isinstance(d, (int, np.integer)) for d in t.shape):
            h, w, c = self.shape(view.t)
            expected = [self.file_dims(View(view.t, layout=view.layout))]
            if flat_ok or view.flat:
                expected.append((1, h * w * c))
            if tuple(t.shape) not in expected:
                raise self.error(f"declared shape {list(t.shape)} differs from the computed "
                                 f"{list(expected[-1] if view.flat else expected[0])}", node, t)
            view.flat = len(t.shape) == 2
        self.views[name] = view

    # -- walk -------------------------------------------------------------------------------------
    def run(self) -> tuple[Model, list[FloatWeights | None] | None]:
        if len(self.g.inputs) != 1 or not self.g.outputs:
            raise MsfError(f"needs exactly one graph input and an output, has "
                           f"{len(self.g.inputs)} and {len(self.g.outputs)}", source=self.g.source)
        self.graph_input()
        handlers = {
            "conv": self.conv, "max_pool": self.pool, "avg_pool": self.pool, "mean": self.mean,
            "dense": self.dense, "add": self.add, "concat": self.concat, "pad": self.pad,
            "reshape": self.reshape, "transpose": self.transpose, "clip": self.clip,
            "batchnorm": self.batchnorm, "softmax": self.pixel_op, "hard_swish": self.pixel_op,
            "leaky_relu": self.pixel_op, "logistic": self.pixel_op, "prelu": self.prelu,
            "quantize": self.quantize, "dequantize": self.dequantize, "error": self.refused,
            "mul": self.mul, "slice": self.slice, "read_state": self.read_state,
            "assign_state": self.assign_state,
            "transpose_conv": self.transpose_conv, "resize_nearest": self.resize_nearest,
            "hard_sigmoid": self.hard_sigmoid,
        }
        for node in self.g.nodes:
            self.current = node
            handlers[node.op](node)
        self.current = None
        self.check_states()
        self.graph_output()
        model = Model(name=self.g.name, input_shape=self.input_shape, layers=self.layers,
                      source=self.g.source, weights_spec=dict(self.g.weights_spec),
                      input_io=self.input_io, output_io=self.output_io,
                      outputs=self.outputs if len(self.outputs) > 1 else None)
        bad = ir.graph_error(model)
        if bad:
            raise self.error(bad[1], self.layer_nodes[bad[0]])
        if self.g.kind == FLOAT:
            return model, self.params
        return self.quantized(model), None

    def graph_input(self) -> None:
        t = self.g.tensors[self.g.inputs[0]]
        dims = self.input_dims(t)
        t.shape = tuple(dims)
        self.check_shape(None, t)
        streaming = len(dims) == 3 and any(n.op == "read_state" for n in self.g.nodes)
        if len(dims) not in (2, 4) and not streaming:
            raise self.error(f"must be {self.g.layout} (4-D) or [1, N] before a dense layer, "
                             f"got shape {dims}", tensor=t)
        if dims[0] != 1:
            raise self.error(f"batch must be 1, got {dims[0]}", tensor=t)
        if len(dims) == 2:       # a dense model's input: the 1 x 1 x N map it reads flattened
            self.input_shape = (1, 1, dims[1])
        elif len(dims) == 3:     # a streaming model's frames (1, T, F): T rows of F features
            self.input_shape = (dims[1], 1, dims[2])
        elif self.g.layout == NCHW:
            self.input_shape = (dims[2], dims[3], dims[1])
        else:
            self.input_shape = tuple(dims[1:])
        view = View(0, flat=len(dims) == 2, layout=self.g.layout)
        self.input_io = TensorIO(_IO_TYPES.get(t.dtype, t.dtype), tuple(dims),
                                 channels_first=len(dims) == 4 and self.g.layout == NCHW)
        if self.g.kind == INT8 and t.dtype in ("FLOAT32", "UINT8"):
            self.float_input = t.name         # a QUANTIZE must come first
            return
        if t.dtype != ("INT8" if self.g.kind == INT8 else "FLOAT32"):
            raise self.error(f"the graph input has type {t.dtype}: int8 or float32 (quantized "
                             f"by a {self.name_of('quantize')}) only", tensor=t)
        self.views[t.name] = view
        self.q.append(self.activation_q(None, t))

    def input_dims(self, t: Tensor) -> list[int]:
        """The graph input's shape: as declared, or with the H, W, C the user gives
        (`Graph.input_shape`), which must agree with every dimension the file fixes."""
        dims = list(t.shape or ())
        dynamic = [i for i, d in enumerate(dims) if not (isinstance(d, (int, np.integer))
                                                         and d > 0)]
        fix = self.g.input_shape
        if fix is None:
            if dynamic or not dims:
                names = ", ".join(self.axis_name(len(dims), i) for i in dynamic) or "all"
                raise self.error(f"has a dynamic shape {dims} (dimensions {names}): give the "
                                 "input's size with --input-shape H,W,C (custom_msf_input_shape)",
                                 tensor=t)
            return dims
        h, w, c = fix
        wanted = [1, c, h, w] if self.g.layout == NCHW else [1, h, w, c]
        if len(dims) == 2 and (h, w) == (1, 1):
            wanted = [1, c]
        if len(dims) != len(wanted) or any(i not in dynamic and dims[i] != wanted[i]
                                           for i in range(len(dims))):
            raise self.error(f"has shape {dims}: --input-shape {h},{w},{c} "
                             f"({self.g.layout} {wanted}) does not fit it", tensor=t)
        return wanted

    def axis_name(self, rank: int, i: int) -> str:
        if rank == 4:
            return (NCHW if self.g.layout == NCHW else NHWC)[i]
        return "N" if i == 0 else f"{i}"

    def graph_output(self) -> None:
        """The graph outputs: each a layer's output nothing reads (detection heads), the last
        layer's among them; with one, its type and shape as the file has them."""
        self.outputs = []
        for name in self.g.outputs:
            t = self.g.tensors[name]
            view = self.views.get(t.name)
            if not self.layers or view is None or view.pad or view.t == 0 or \
                    (view.alias and len(self.g.outputs) > 1) or \
                    (len(self.g.outputs) == 1 and view.t != len(self.layers)):
                raise self.error("must be the output of the last layer" if len(self.g.outputs)
                                 == 1 else "must be the output of a layer", tensor=t)
            self.outputs.append(view.t)
        if len(self.outputs) > 1:
            if len(self.outputs) > len(set(self.outputs)) or len(self.layers) not in self.outputs:
                raise MsfError("graph outputs must be distinct layers' outputs, the last "
                               "layer's among them", source=self.g.source)
            self.output_io = None
            return
        t = self.g.tensors[self.g.outputs[0]]
        view = self.views[t.name]
        if self.output_io is None:
            dims = self.file_dims(view)
            self.output_io = TensorIO(_IO_TYPES.get(t.dtype, t.dtype), dims,
                                      channels_first=len(dims) == 4 and view.layout == NCHW)

    def emit(self, node: Node, layer: Layer, flat: bool = False, flat_ok: bool = False,
             params: FloatWeights | None = None,
             sources: tuple[Const, Const | None] | None = None, last: bool = True) -> None:
        """Append `layer`, made by `node`: its output is the node's, flattened (1, N) in the
        file with `flat` (or, with `flat_ok`, as the file declares); not `last`: one of
        several layers the node becomes, whose output the file does not hold."""
        out = self.out(node)
        layer.name = node.name or out.name
        layer.q_out = self.activation_q(node, out)
        if self.reading is not None and self.reading != len(self.layers) and layer.input is None:
            layer.input = self.reading
        self.reading = None
        self.layer_nodes.append(node)
        self.layers.append(layer)
        self.q.append(layer.q_out)
        self.params.append(params)
        self.sources.append(sources)
        if last:
            self.bind(node, out.name, View(len(self.layers), flat=flat, layout=self.g.layout),
                      flat_ok)

    def fold_target(self, node: Node, ops: tuple[str, ...], what: str, i: int = 0) -> Layer:
        """The last layer, if `node` alone reads its output (input i): `node` merges into it,
        and its output (and quantization, if the file gives one) is the layer's."""
        name = node.inputs[i]
        view = self.views.get(name)
        layer = self.layers[-1] if self.layers else None
        if (view is None or view.t != len(self.layers) or layer is None or layer.op not in ops
                or self.readers.get(name, 0) != 1 or view.alias):
            raise self.error(f"must directly follow {what} whose output it alone reads", node)
        out = self.out(node)
        q = self.activation_q(node, out)
        if q is not None:
            self.q[-1] = layer.q_out = q
        self.bind(node, out.name, View(view.t, flat=view.flat, layout=view.layout))
        return layer

    def same_q(self, node: Node, q_in: QParams | None, t: int | None = None) -> QParams | None:
        """A node that moves bytes (pad, reshape, transpose) keeps its input's quantization: a
        file that says otherwise is refused rather than computed differently. Where the input
        has none yet (a QDQ graph), the output's is the tensor's."""
        q_out = self.activation_q(node, self.out(node))
        if q_out is not None and q_in is not None and q_out != q_in:
            raise self.error(f"output quantization {q_out} differs from its input's {q_in}: a "
                             f"{node.op_name} cannot requantize", node, self.out(node))
        if q_in is None and q_out is not None and t is not None:
            self.q[t] = q_out
            if t > 0:
                self.layers[t - 1].q_out = q_out
        return q_out if q_in is None else q_in

    # -- windows ----------------------------------------------------------------------------------
    def window(self, node: Node, view: View, op: str, kernel: tuple[int, int], cout: int,
               folded: tuple[int, int, int, int] = (0, 0, 0, 0)) -> Layer:
        """A window layer from the node's strides, dilation and padding, plus the padding of a
        PAD folded into it."""
        a = node.attrs
        kh, kw = kernel
        sh, sw = a.get("stride", (1, 1))
        dh, dw = a.get("dilation", (1, 1))
        if (dh, dw) != (1, 1):
            raise self.error(f"dilation {dh}x{dw} is not supported", node)
        if not (1 <= sh <= MAX_WINDOW and 1 <= sw <= MAX_WINDOW):
            raise self.error(f"stride {sh}x{sw} must be in [1, {MAX_WINDOW}]", node)
        if not (1 <= kh <= MAX_WINDOW and 1 <= kw <= MAX_WINDOW):
            raise self.error(f"kernel {kh}x{kw} must be in [1, {MAX_WINDOW}]", node)
        h, w, c = self.shape(view.t)
        ph, pw = h + folded[0] + folded[2], w + folded[1] + folded[3]
        padding = a.get("padding", "valid")
        if padding in ("same", "same_lower"):     # on the PAD-padded input
            (st, sb), (sl, sr) = same_padding(ph, kh, sh), same_padding(pw, kw, sw)
            own = (st, sl, sb, sr) if padding == "same" else (sb, sr, st, sl)
        elif padding == "valid":
            own = (0, 0, 0, 0)
        else:
            own = tuple(padding)
        top, left, bottom, right = (x + y for x, y in zip(own, folded))
        if max(top, bottom) >= kh or max(left, right) >= kw:
            raise self.error(f"padding {[top, left, bottom, right]} must be smaller than the "
                             f"kernel {kh}x{kw}", node)
        oh, ow = conv_out(h, kh, sh, top, bottom), conv_out(w, kw, sw, left, right)
        if a.get("ceil_mode") and (oh, ow) != (-(-(h + top + bottom - kh) // sh) + 1,
                                               -(-(w + left + right - kw) // sw) + 1):
            raise self.error("ceil_mode changes the output size (TFLite floors)", node)
        if oh < 1 or ow < 1:
            raise self.error(f"kernel {kh}x{kw} does not fit the {h}x{w} input", node)
        return Layer(op=op, in_shape=(h, w, c), out_shape=(oh, ow, cout), kernel=(kh, kw),
                     stride=(sh, sw), pad=(top, left, bottom, right), act=a.get("act", "none"))

    def folded_pad(self, node: Node, view: View) -> tuple[int, int, int, int]:
        """The padding of a PAD that `node` reads, if folding it into `node` is exact: padding
        taps of a conv hold the zero point (real 0), of a max pool they never win. So the PAD
        folds when it pads with 0 before a conv, and before a max pool with anything at or
        below the int8 minimum, or with 0 after a ReLU (nothing below 0 to beat)."""
        if view.pad is None:
            return (0, 0, 0, 0)
        value = view.pad_value
        if node.op == "max_pool":
            after_relu = view.t > 0 and self.layers[view.t - 1].act != "none" and value == 0.0
            q = self.q[view.t]
            lowest = value <= np.finfo(np.float32).min or (
                q is not None and value / q.scale + q.zero_point <= -127.5)
            if not (after_relu or lowest):
                raise self.refuse("pad_max_pool", node, view.pad_node, value=value,
                                  reader=node.op_name)
        elif value != 0.0:          # a conv's or average pool's padding taps are real 0
            raise self.error(f"pads with {value}: before a {node.op_name} only 0 folds into its "
                             "padding", view.pad_node)
        return view.pad

    # -- ops --------------------------------------------------------------------------------------
    def refused(self, node: Node) -> None:
        """What the importer refused in this node, raised in graph order."""
        tensor = node.attrs.get("tensor")
        raise self.error(node.attrs["message"], node,
                         self.g.tensors[tensor] if tensor in self.g.tensors else None)

    def conv(self, node: Node) -> None:
        """A convolution of `group` groups (an int, or "depthwise": one per input channel) with
        OHWI weights: plain (one group), depthwise (multiplier 1), or a depthwise over a
        single channel (any multiplier: a plain conv)."""
        view = self.view(node, pad_ok=True)
        folded = self.folded_pad(node, view)
        wt = self.weight_tensor(node)
        w = self.const(node, 1)
        cout, kh, kw, per_group = w.values.shape
        c = self.shape(view.t)[2]
        group = node.attrs.get("group", 1)
        multiplier = node.attrs.get("multiplier")
        if group == "depthwise":
            group = c
        role = node.role(1, "weight")
        if group == 1 and (multiplier is None or multiplier == cout):
            before, after = view.channel_pad
            if per_group != before + c + after:
                raise self.error(f"{role} {list(wt.shape)} takes {per_group} input channels, the "
                                 f"input has {before + c + after}", node)
            op = ir.CONV
            if any(view.channel_pad):   # padded channels hold the zero point: they add nothing
                w = Const(w.values[..., before:before + c], w.scale, w.zero_point, w.axis)
        elif group == c == cout and per_group == 1 and multiplier in (None, 1):
            op, w = ir.DEPTHWISE, w.transposed((3, 1, 2, 0))
        else:
            raise self.refuse("grouped", node, group=group, c=c, role=role,
                              shape=list(wt.shape))
        layer = self.window(node, view, op, (kh, kw), cout, folded)
        self.activation_q(node, self.tensor(node, 0))
        self.weighted(node, layer, w, wt, 3 if op == ir.DEPTHWISE else 0)

    def weight_tensor(self, node: Node) -> Tensor:
        """The weights (input 1) of a conv or dense layer, and its bias's type checked: int8
        weights unless the graph is float, an int32 (or float) bias."""
        wt = self.tensor(node, 1)
        if self.g.kind != FLOAT and wt.dtype != "INT8":
            raise self.refuse("int8_weights", node, tensor=wt, dtype=wt.dtype)
        bt = self.tensor(node, 2, required=False)
        if bt is not None and bt.dtype not in ("INT32", "FLOAT32"):
            raise self.error(f"has type {bt.dtype}, expected INT32", node, bt)
        return wt

    def weighted(self, node: Node, layer: Layer, w: Const, wt: Tensor, axis: int,
                 flat: bool = False) -> None:
        """Emit a conv or dense layer with weights `w` (IR layout, output channels along
        `axis`) and the node's bias: int8 ones checked here, float ones kept for a float or
        QDQ graph (a QDQ bias may need quantizing from them)."""
        n = layer.cout
        bias = self.const(node, 2)
        if bias is not None and bias.values.shape != (n,):
            raise self.error(f"bias shape {list(bias.values.shape)} != [{n}]", node,
                             self.tensor(node, 2))
        if self.g.kind != FLOAT:
            if not w.quantized or w.scale.size not in (1, n) or \
                    w.zero_point.size not in (1, w.scale.size):
                size = 0 if not w.quantized else w.scale.size
                zps = 0 if not w.quantized else w.zero_point.size
                raise self.error(f"weights need 1 or {n} scales and zero points, have "
                                 f"{size} and {zps}", node, wt)
            if w.scale.size == n and n > 1 and w.axis != axis:
                raise self.error("weights are quantized along another dimension than the "
                                 "output channels", node, wt)
            if np.any(w.zero_point != 0):
                raise self.error("weights must be symmetric (zero point 0)", node, wt)
            if not np.all(np.isfinite(w.scale) & (w.scale > 0)):
                raise self.error("weight scales must be positive and finite", node, wt)
        params = None
        if self.g.kind != INT8:
            params = FloatWeights(w.real(), np.zeros(n) if bias is None else bias.real())
        self.emit(node, layer, flat=flat, params=params, sources=(w, bias))

    def transpose_conv(self, node: Node) -> None:
        """A transposed convolution of one group, OHWI weights (TFLite TRANSPOSE_CONV, ONNX
        ConvTranspose): input row i's tap k lands on output row i * stride - pad_top + k. The
        output's H and W are given (`out_hw`) with the padding TFLite's SAME or VALID of a conv
        from the output back to the input, or follow from explicit `pads` (top, left, bottom,
        right) and ONNX's `output_padding`."""
        view = self.view(node)
        wt = self.weight_tensor(node)
        w = self.const(node, 1)
        cout, kh, kw, cin = w.values.shape
        h, wd, c = self.shape(view.t)
        if cin != c:
            raise self.error(f"{node.role(1, 'weight')} {list(wt.shape)} takes {cin} input "
                             f"channels, the input has {c}", node)
        a = node.attrs
        sh, sw = a.get("stride", (1, 1))
        if a.get("dilation", (1, 1)) != (1, 1):
            raise self.error(f"dilation {a['dilation']} is not supported", node)
        if not (1 <= sh <= MAX_WINDOW and 1 <= sw <= MAX_WINDOW and kh <= MAX_WINDOW and
                kw <= MAX_WINDOW):
            raise self.error(f"stride {sh}x{sw} and kernel {kh}x{kw} must be in "
                             f"[1, {MAX_WINDOW}]", node)
        if a.get("padding") in ("same", "valid"):
            oh, ow = a["out_hw"]
            top, left = (transposed_padding(n, k, s, a["padding"] == "same")
                         for n, k, s in ((oh, kh, sh), (ow, kw, sw)))
        else:
            top, left, bottom, right = a.get("pads", (0, 0, 0, 0))
            extra_h, extra_w = a.get("output_padding", (0, 0))
            oh = (h - 1) * sh + kh - top - bottom + extra_h
            ow = (wd - 1) * sw + kw - left - right + extra_w
            if "out_hw" in a and tuple(a["out_hw"]) != (oh, ow):
                raise self.error(f"output {list(a['out_hw'])} differs from the computed "
                                 f"{[oh, ow]}", node)
        if not (0 <= top < kh and 0 <= left < kw) or oh < 1 or ow < 1:
            raise self.error(f"padding {[top, left]} must be in [0, kernel {kh}x{kw}) and the "
                             f"output {[oh, ow]} not empty", node)
        bottom, right = (h - 1) * sh + kh - top - oh, (wd - 1) * sw + kw - left - ow
        layer = Layer(op=ir.TRANSPOSE_CONV, in_shape=(h, wd, c), out_shape=(oh, ow, cout),
                      kernel=(kh, kw), stride=(sh, sw), pad=(top, left, bottom, right),
                      act=a.get("act", "none"))
        self.activation_q(node, self.tensor(node, 0))
        self.weighted(node, layer, w, wt, 0)

    def resize_nearest(self, node: Node) -> None:
        """A nearest-neighbour resize to `out_hw` with TFLite's align_corners and
        half_pixel_centers; or (ONNX) to `sizes` or by `scales` of an NCHW map, whose `nearest`
        rule must pick the input pixels one of TFLite's flag pairs picks. Bytes copied, the
        input's quantization kept."""
        view = self.view(node)
        h, w, c = self.shape(view.t)
        a = node.attrs
        if "sizes" in a:
            if a["sizes"][:2] != (1, c):
                raise self.error(f"sizes {list(a['sizes'])} change the batch or the channels",
                                 node)
            out_hw = a["sizes"][2:]
        elif "scales" in a:
            out_hw = tuple(int(np.floor(n * float(np.float32(s))))
                           for n, s in zip((h, w), a["scales"]))
        else:
            out_hw = a["out_hw"]
        oh, ow = (int(v) for v in out_hw)
        if not (1 <= oh <= MAX_DIM and 1 <= ow <= MAX_DIM):
            raise self.error(f"output size {[oh, ow]} must be in [1, {MAX_DIM}]", node)
        flags = (a.get("align_corners", False), a.get("half_pixel", False))
        if "nearest" in a:           # the importer's rule, as one of TFLite's
            scales = a.get("scales") or (oh / h, ow / w)
            wanted = [a["nearest"](n, m, s) for n, m, s in ((h, oh, scales[0]),
                                                             (w, ow, scales[1]))]
            found = [f for f in ((False, False), (False, True), (True, False), (True, True))
                     if all(np.array_equal(nm.nearest_index(n, m, *f), v)
                            for (n, m), v in zip(((h, oh), (w, ow)), wanted))]
            if not found:
                raise self.error(f"its nearest-neighbour rule picks input pixels that no "
                                 f"TFLite RESIZE_NEAREST_NEIGHBOR does ({h}x{w} -> {oh}x{ow})",
                                 node)
            flags = found[0]
        self.activation_q(node, self.tensor(node, 0))
        q_in = self.q[view.t]
        self.emit(node, Layer(op=ir.RESIZE_NEAREST, in_shape=(h, w, c), out_shape=(oh, ow, c),
                              align_corners=flags[0], half_pixel=flags[1]))
        self.pool_q(node, q_in)

    def pool(self, node: Node) -> None:
        """MAX/AVERAGE_POOL_2D. An average pool after a PAD (or with ONNX's count_include_pad)
        divides by every tap of its window, the padded ones holding the zero point: the IR's
        `count_pad`, when all of its padding counts (the pool itself pads nothing)."""
        maximum = node.op == "max_pool"
        view = self.view(node, pad_ok=True)
        folded = self.folded_pad(node, view)
        own = node.attrs.get("padding", "valid")
        count_pad = not maximum and (view.pad is not None or node.attrs.get("count_pad", False))
        if count_pad and view.pad is not None and own not in ("valid", (0, 0, 0, 0)):
            raise self.error(f"an average pool with padding of its own after "
                             f"{view.pad_node.ref} counts only some padded taps: not supported",
                             node)
        self.activation_q(node, self.tensor(node, 0))
        q_in = self.q[view.t]
        h, w, c = self.shape(view.t)
        kh, kw = node.attrs["kernel"]
        sh, sw = node.attrs.get("stride", (1, 1))
        padding = node.attrs.get("padding", "valid")
        unpadded = padding in ("valid", (0, 0, 0, 0)) or (padding in ("same", "same_lower")
                                                          and sh >= h and sw >= w)
        if not maximum and (kh, kw) == (h, w) and min(sh, sw) >= 1 and unpadded and \
                view.pad is None and not node.attrs.get("count_pad") and \
                node.attrs.get("dilation", (1, 1)) == (1, 1):     # over the whole map
            layer = Layer(op=ir.GLOBAL_AVGPOOL, in_shape=(h, w, c), out_shape=(1, 1, c),
                          act=node.attrs.get("act", "none"))
        else:
            layer = self.window(node, view, ir.MAX_POOL if maximum else ir.AVG_POOL, (kh, kw),
                                c, folded)
            layer.count_pad = count_pad and any(layer.pad)
        self.emit(node, layer)
        self.pool_q(node, q_in)

    def pool_q(self, node: Node, q_in: QParams | None) -> None:
        """Pools keep their input's quantization, as TFLite's kernels do: an int8 file that
        says otherwise is refused, a QDQ file's own output scale is not used."""
        q_out = self.q[-1]
        if self.g.kind == INT8 and q_out != q_in:
            raise self.error(f"output quantization {q_out} differs from the input's {q_in} "
                             "(TFLite's kernel keeps the input's)", node, self.out(node))
        if self.g.kind == QDQ:
            self.q[-1] = self.layers[-1].q_out = q_in

    def mean(self, node: Node) -> None:
        """A mean over H and W: global average pooling, requantized to the output's own
        quantization where the file gives one (TFLite's MEAN)."""
        view = self.view(node)
        spatial = {1, 2} if self.g.layout == NHWC else {2, 3}
        axes = {int(a) % 4 for a in node.attrs["axes"]}
        if axes != spatial:
            raise self.error(f"{node.op_name} over axes {sorted(axes)}: only over H and W "
                             f"{tuple(sorted(spatial))}", node)
        self.activation_q(node, self.tensor(node, 0))
        q_in = self.q[view.t]
        h, w, c = self.shape(view.t)
        self.emit(node, Layer(op=ir.GLOBAL_AVGPOOL, in_shape=(h, w, c), out_shape=(1, 1, c)),
                  flat=not node.attrs.get("keep_dims", True))
        if self.q[-1] is not None and self.g.kind != FLOAT:
            self.layers[-1].requantize = True
        elif self.g.kind == QDQ:
            self.q[-1] = self.layers[-1].q_out = q_in

    def dense(self, node: Node) -> None:
        """A dense layer on a flattened map (or, with `flattens`, any map: TFLite's
        FULLY_CONNECTED flattens its input); weights (out, in) with the inputs in the file's
        flatten order, reordered to the IR's H, W, C."""
        view = self.view(node, flat_ok=True)
        if not node.attrs.get("flattens") and not view.flat:
            raise self.error("input must be flattened (a Flatten/Reshape to (1, N))", node)
        h, w, c = self.shape(view.t)
        n = h * w * c
        wt = self.weight_tensor(node)
        weights = self.const(node, 1)
        if weights.values.ndim != 2 or weights.values.shape[1] != n:
            raise self.error(f"{node.role(1, 'weight')} {list(wt.shape)} does not take the {n} "
                             "inputs", node, wt)
        if view.layout == NCHW and (h, w) != (1, 1):      # columns C, H, W -> H, W, C
            weights = Const(weights.values.reshape(-1, c, h, w).transpose(0, 2, 3, 1)
                            .reshape(-1, n), weights.scale, weights.zero_point, weights.axis)
        cout = weights.values.shape[0]
        self.activation_q(node, self.tensor(node, 0))
        self.weighted(node, Layer(op=ir.DENSE, in_shape=(h, w, c), out_shape=(1, 1, cout),
                                  act=node.attrs.get("act", "none")), weights, wt, 0, flat=True)

    def add(self, node: Node) -> None:
        if len(node.inputs) != 2:
            raise self.error(f"needs two inputs, has {len(node.inputs)}", node)
        known = [i for i in (0, 1) if node.inputs[i] in self.views]
        if len(known) == 1 and self.g.kind != INT8 and \
                self.g.tensors[node.inputs[1 - known[0]]].const is not None:
            return self.bias_add(node, known[0])
        for i in (0, 1):
            self.view(node, i)
        a, b = (self.views[name] for name in node.inputs)
        if a.t == b.t:
            raise self.error("adds a tensor to itself", node)
        # the latest tensor first when it is one of the two (the chain's residual form)
        main, skip = (b, a) if b.t == len(self.layers) else (a, b)
        shape = self.shape(main.t)
        if self.shape(skip.t) != shape:
            raise self.error(f"adds shapes {list(self.shape(skip.t))} and {list(shape)} (no "
                             "broadcasting)", node)
        for i in (0, 1):
            self.activation_q(node, self.tensor(node, i))
        self.reading = main.t
        self.emit(node, Layer(op=ir.ADD, in_shape=shape, out_shape=shape, skip=skip.t,
                              act=node.attrs.get("act", "none")), flat=main.flat)

    def bias_add(self, node: Node, main: int) -> None:
        """A constant added to a conv or dense output: a bias, folded into the layer; in a
        float graph, added to any other map by a layer of its own (`channel_affine`)."""
        if self.g.kind == FLOAT and not self.foldable(node, main):
            return self.channel_affine(node, main, shift=True)
        const = self.const(node, 1 - main).real()
        layer = self.fold_target(node, WEIGHTED_OPS, "a conv or dense layer", main)
        axis = -1 if layer.op == ir.DENSE or self.g.layout == NHWC else -3   # the channels
        per_channel = const.size == 1 or (const.ndim >= -axis and
                                          const.shape[axis] == const.size == layer.cout)
        if layer.act != "none" or not per_channel:
            raise self.error(f"constant {list(const.shape)} is not a per-channel bias of the "
                             f"{layer.op} before it", node)
        p = self.params[-1]
        self.params[-1] = FloatWeights(p.w, p.b + const.reshape(-1))
        self.sources[-1] = (self.sources[-1][0], None)

    def affine(self, node: Node, main: int, what: str, scale: np.ndarray,
               shift: np.ndarray | float = 0.0) -> Layer:
        """y * scale + shift of the conv or dense layer y before (one value, or one per output
        channel), folded into its float weights and bias before quantization: exact in real
        arithmetic, and the layer's int8 output is calibrated on the folded values."""
        layer = self.fold_target(node, WEIGHTED_OPS, "a conv or dense layer", main)
        p = self.params[-1]
        if p is None or layer.act != "none":
            raise self.error(f"{what} must follow the conv or dense layer before its "
                             "activation", node)
        scale = np.broadcast_to(np.asarray(scale, np.float64).reshape(-1), (layer.cout,))
        axis = 3 if layer.op == ir.DEPTHWISE else 0
        shape = [1] * p.w.ndim
        shape[axis] = layer.cout
        self.params[-1] = FloatWeights(p.w * scale.reshape(shape), p.b * scale + shift)
        self.sources[-1] = (self.sources[-1][0], None)
        return layer

    def foldable(self, node: Node, main: int) -> bool:
        """Whether input `main` of `node` is the output of the conv or dense layer just before,
        read by `node` alone, before any activation (what `affine` folds into)."""
        view = self.views.get(node.inputs[main])
        layer = self.layers[-1] if self.layers else None
        return (view is not None and layer is not None and view.t == len(self.layers)
                and layer.op in WEIGHTED_OPS and self.readers.get(node.inputs[main], 0) == 1
                and not view.alias and layer.act == "none" and self.params[-1] is not None)

    def const_operand(self, node: Node, main: int, channels: int, flat: bool) -> np.ndarray:
        """The constant operand of a binary node as one value per channel of a tensor of
        `channels` (or one value), refused in one line otherwise."""
        const = self.const(node, 1 - main).real()
        axis = -1 if flat or self.g.layout == NHWC else -3
        if const.size == 1 or (const.ndim >= -axis and
                               const.shape[axis] == const.size == channels):
            return const.reshape(-1)
        raise self.error(f"constant {list(const.shape)} is neither one value nor one per "
                         "channel of the tensor it meets", node)

    def const_mul(self, node: Node, main: int) -> None:
        """A map times a constant (one value or one per channel; PP-LCNet's learnable affine):
        folded into the conv or dense layer before it where it can be, else a layer of its
        own (`channel_affine`)."""
        if not self.foldable(node, main):
            return self.channel_affine(node, main, shift=False)
        layer = self.layers[-1]
        self.affine(node, main, node.op_name,
                    self.const_operand(node, main, layer.cout, layer.op == ir.DENSE))

    def channel_affine(self, node: Node, main: int, shift: bool) -> None:
        """x * the constant operand (`shift`: x + it) per channel of a map that no
        layer before can absorb (an activation's output, a tensor with other readers): a 1x1
        depthwise conv of weights the scale and bias the shift, TFLite's int8 DEPTHWISE_CONV_2D
        (a scale is exact as a per-channel int8 weight: 127 times scale / 127); a constant Add
        after it folds into its bias."""
        view = self.view(node, main, flat_ok=True)
        shape = self.shape(view.t)
        values = self.const_operand(node, main, shape[2], view.flat)
        ones = np.ones(shape[2])
        w, b = (ones, ones * values) if shift else (ones * values, np.zeros(shape[2]))
        self.activation_q(node, self.tensor(node, main))
        weights = Const(w.reshape(1, 1, 1, -1).astype(np.float32))
        self.emit(node, Layer(op=ir.DEPTHWISE, in_shape=shape, out_shape=shape, kernel=(1, 1),
                              stride=(1, 1), pad=(0, 0, 0, 0)), flat=view.flat, flat_ok=True,
                  params=FloatWeights(weights.values, b), sources=(weights, None))

    def hard_sigmoid(self, node: Node) -> None:
        """HardSigmoid(y) = clip(alpha * y + beta, 0, 1) of a conv or dense output y (a
        squeeze-and-excite gate): alpha and beta folded into the layer, the clip its fused
        activation relu_0_to_1 (the int8 clamp at the output's 0 and 1, as TFLite's)."""
        if self.g.kind != FLOAT:
            raise self.error("HardSigmoid is supported in float graphs (folded before "
                             "quantization)", node)
        alpha, beta = node.attrs["alpha"], node.attrs["beta"]
        if not (np.isfinite(alpha) and np.isfinite(beta)):
            raise self.error(f"alpha {alpha} and beta {beta} must be finite", node)
        layer = self.affine(node, 0, node.op_name, np.float64(alpha), beta)
        layer.act = "relu_0_to_1"

    def concat(self, node: Node) -> None:
        """Tensors along the channels (of maps, or of vectors: dense outputs), two at a time;
        TFLite's int8 kernel copies bytes, so in an int8 file every input must be quantized as
        the output. A state variable's value then new rows: a stream layer (`stream`)."""
        if node.inputs and node.inputs[0] in self.state_reads:
            return self.stream(node)
        if len(node.inputs) < 2:
            raise self.error(f"concatenates {len(node.inputs)} tensor (two or more are "
                             "supported)", node)
        views = [self.view(node, i, flat_ok=True) for i in range(len(node.inputs))]
        flat = views[0].flat
        axis = node.attrs.get("axis", 0)
        channels = 1 if flat else 3 if self.g.layout == NHWC else 1
        rank = 2 if flat else 4
        if axis not in (channels, channels - rank):
            raise self.error(f"concatenates along axis {axis}: only the channels (axis "
                             f"{channels} of {'(1, N)' if flat else self.g.layout}) are "
                             "supported", node)
        if node.attrs.get("act", "none") != "none":
            raise self.error(f"a fused activation on {node.op_name} is not supported", node)
        shapes = [self.shape(v.t) for v in views]
        if any(v.flat != flat for v in views) or (flat and shapes[0][:2] != (1, 1)):
            raise self.error("concatenates a flattened tensor", node)
        h, w, _ = shapes[0]
        for v, (h2, w2, _) in zip(views[1:], shapes[1:]):
            if (h, w) != (h2, w2):
                raise self.error(f"concatenates shapes {list(self.file_dims(views[0])[1:])} and "
                                 f"{list(self.file_dims(v)[1:])} (only the channels may "
                                 "differ)", node)
        q_out = self.activation_q(node, self.out(node))
        for i in range(len(views)):
            q_in = self.activation_q(node, self.tensor(node, i))
            if self.g.kind == INT8 and q_in != q_out:
                raise self.error(f"input quantization {q_in} differs from the output's {q_out} "
                                 "(TFLite Micro's int8 kernel requires them equal)", node,
                                 self.tensor(node, i))
        c = shapes[0][2]
        self.reading = views[0].t
        for k in range(1, len(views)):      # the first k + 1 inputs' channels
            self.emit(node, Layer(op=ir.CONCAT, in_shape=(h, w, c),
                                  out_shape=(h, w, c + shapes[k][2]), skip=views[k].t),
                      flat=flat, last=k == len(views) - 1)
            c += shapes[k][2]

    # -- state of a streaming model -------------------------------------------------------------
    def read_state(self, node: Node) -> None:
        """READ_VARIABLE: the state's value, which only a stream concatenation may read."""
        variable = node.attrs.get("variable", "")
        if self.g.kind != INT8:
            raise self.error("a state variable in a float model is not supported (int8 "
                             "streaming models only)", node)
        if any(n.attrs.get("variable") == variable for n in self.state_reads.values()):
            raise self.error(f"reads state variable '{variable}' a second time (a ring buffer "
                             "is read once per run)", node)
        out = self.out(node)
        if self.readers.get(out.name, 0) != 1:
            raise self.error(f"the value of state variable '{variable}' must be read by "
                             "exactly one CONCATENATION (a ring buffer of past rows)", node)
        self.state_reads[out.name] = node

    def stream(self, node: Node) -> None:
        """CONCATENATION over the rows of a state variable's value and new rows: a stream
        layer, whose state is the output's last rows (the STRIDED_SLICE an ASSIGN_VARIABLE
        stores, `slice`)."""
        read = self.state_reads[node.inputs[0]]
        variable = read.attrs.get("variable", "")
        rows_axis = 1 if self.g.layout == NHWC else 2
        if len(node.inputs) != 2 or node.attrs.get("axis") not in (rows_axis, rows_axis - 4):
            raise self.error(f"a state variable's value must be concatenated with one tensor "
                             f"along the rows (axis {rows_axis}), the state first", node)
        if node.attrs.get("act", "none") != "none":
            raise self.error(f"a fused activation on {node.op_name} is not supported", node)
        view = self.view(node, 1)
        h, w, c = self.shape(view.t)
        state = self.g.tensors[node.inputs[0]]
        dims = tuple(state.shape or ())
        if len(dims) != 4 or dims[0] != 1 or tuple(dims[2:]) != (w, c):
            raise self.error(f"state shape {list(dims)} does not fit the rows "
                             f"[1, {h}, {w}, {c}] appended to it", node, state)
        s = int(dims[1])
        q = self.activation_q(node, self.out(node))
        for t in (state, self.tensor(node, 1)):
            if self.activation_q(node, t) != q:
                raise self.error(f"input quantization {self.activation_q(node, t)} differs "
                                 f"from the output's {q} (TFLite Micro's int8 kernel requires "
                                 "them equal)", node, t)
        init = read.attrs.get("init")
        if init is None or init.dtype != "INT8" or init.const is None or \
                init.const.values.size != s * w * c:
            raise self.error(f"state variable '{variable}' has no int8 initial value of "
                             f"{s * w * c} bytes (CALL_ONCE's subgraph assigns none)", read)
        scale, zp = init.declared_q or (np.zeros(0), np.zeros(0))
        if scale.size != 1 or QParams(float(np.float32(scale[0])), int(zp[0])) != q:
            raise self.error(f"the initial value of state variable '{variable}' is not "
                             f"quantized as the state ({q})", read, init)
        self.reading = view.t
        self.emit(node, Layer(op=ir.STREAM, in_shape=(h, w, c), out_shape=(h + s, w, c),
                              state_rows=s,
                              state_init=init.const.values.astype(np.int8).reshape(s, w, c)))
        self.streams[variable] = len(self.layers)

    def row_slice(self, node: Node, view: View, begin: int, end: int) -> None:
        """Rows [begin, end) of a tensor: the state update of a stream layer (its output's
        last rows, stored by an ASSIGN_VARIABLE of its own variable: the layer keeps them) or
        a crop layer."""
        h, w, c = self.shape(view.t)
        name = node.outputs[0] if len(node.outputs) == 1 else ""
        assign = self.assigns.get(name)
        layer = self.layers[view.t - 1] if view.t > 0 else None
        if assign is not None:
            variable = assign.attrs.get("variable", "")
            if layer is None or layer.op != ir.STREAM or self.streams.get(variable) != view.t \
                    or (begin, end) != (h - layer.state_rows, h) or self.readers[name] != 1:
                raise self.error(f"state variable '{variable}' may only be assigned the last "
                                 f"rows of its own stream CONCATENATION (a ring buffer)", node)
            self.activation_q(node, self.tensor(node, 0))
            self.same_q(node, self.q[view.t])
            self.state_updates[name] = variable
            return
        if not 0 <= begin < end <= h:
            raise self.error(f"rows [{begin}, {end}) of {h}: an empty part", node)
        self.activation_q(node, self.tensor(node, 0))
        if (begin, end) == (0, h):             # every row: the tensor itself
            self.same_q(node, self.q[view.t])
            self.bind(node, self.out(node).name, View(view.t, layout=view.layout, alias=True))
            return
        self.reading = view.t
        self.emit(node, Layer(op=ir.CROP, in_shape=(h, w, c), out_shape=(end - begin, w, c),
                              begin=begin))
        if self.q[-1] != self.q[view.t]:
            raise self.error(f"output quantization {self.q[-1]} differs from its input's "
                             f"{self.q[view.t]}: a slice copies bytes", node, self.out(node))

    def assign_state(self, node: Node) -> None:
        """ASSIGN_VARIABLE: the state update its stream layer performs (`row_slice`)."""
        variable = node.attrs.get("variable", "")
        value = node.inputs[0] if node.inputs else ""
        if self.state_updates.get(value) != variable or variable in self.assigned:
            raise self.error(f"state variable '{variable}' may only be assigned once, the last "
                             "rows of its own stream CONCATENATION (a ring buffer)", node)
        self.assigned.add(variable)

    def check_states(self) -> None:
        """Every state variable read is a stream layer's and assigned by it."""
        for name, read in self.state_reads.items():
            variable = read.attrs.get("variable", "")
            if variable not in self.streams:
                raise self.error(f"the value of state variable '{variable}' is not "
                                 "concatenated with new rows (a ring buffer)", read)
            if variable not in self.assigned:
                raise self.error(f"state variable '{variable}' is never assigned its stream's "
                                 "last rows (a ring buffer)", read)

    def pad(self, node: Node) -> None:
        """A PAD: remembered, and folded into the padding of each window op that reads it
        (`folded_pad`; any other reader is refused by `view`)."""
        view = self.view(node)
        self.activation_q(node, self.tensor(node, 0))
        self.same_q(node, self.q[view.t])
        out = self.out(node)
        if view.flat or not self.readers.get(out.name, 0):
            raise self.error(f"a {node.op_name} must be read by a {self.name_of('conv')} or "
                             f"{self.name_of('max_pool')}", node)
        channels = node.attrs.get("channels", (0, 0))
        value = node.attrs.get("value", 0.0)
        if any(channels) and value != 0.0:
            raise self.error("a channel padding must pad with the zero point", node)
        self.views[out.name] = View(view.t, layout=view.layout, alias=True,
                                    pad=tuple(node.attrs["pads"]), pad_value=value,
                                    pad_node=node, channel_pad=tuple(channels))

    def reshape(self, node: Node) -> None:
        """A flatten of a map to (1, N) (in the axis order the file holds the map: a dense
        layer reading it reorders its weights), or its inverse, or no change: a view, no
        layer."""
        view = self.view(node, flat_ok=True, layout_ok=True)
        dims = self.file_dims(view)
        n = int(np.prod(dims))
        target = self.reshape_target(node, dims)
        h, w, c = self.shape(view.t)
        shape = "x".join(str(d) for d in dims[1:])
        as_map = self.file_dims(View(view.t, layout=view.layout))
        ones = (h, w) == (1, 1) and target is not None and \
            [d for d in target if d != 1] == [d for d in dims if d != 1]
        if target == (1, n):
            flat = True
        elif target == as_map and (not view.flat or (h, w) == (1, 1)):
            flat = False
        elif ones:                  # a vector given or rid of axes of size 1 (EXPAND_DIMS)
            self.activation_q(node, self.tensor(node, 0))
            self.same_q(node, self.q[view.t], view.t)
            self.views[self.out(node).name] = View(view.t, flat=view.flat, layout=view.layout,
                                                   alias=True)
            return
        else:
            raise self.error(f"only a flatten of the {shape} tensor to (1, {n}) (or back) is "
                             f"supported, not to {list(target) if target else 'that shape'}",
                             node)
        self.activation_q(node, self.tensor(node, 0))
        self.same_q(node, self.q[view.t], view.t)
        self.bind(node, self.out(node).name, View(view.t, flat=flat, layout=view.layout,
                                                 alias=True), flat_ok=flat)

    def reshape_target(self, node: Node, dims: tuple[int, ...]) -> tuple[int, ...] | None:
        """The node's target shape: `flatten_axis` (dims before it, dims from it), or `target`
        (0 copies the input's dimension, -1 is inferred, as ONNX's Reshape has it)."""
        n = int(np.prod(dims))
        if "squeeze" in node.attrs:          # the given axes (all of size 1) dropped
            axes = {a % len(dims) for a in node.attrs["squeeze"] or
                    [i for i, d in enumerate(dims) if d == 1]}
            return tuple(d for i, d in enumerate(dims) if i not in axes) \
                if all(dims[a] == 1 for a in axes) else None
        if "unsqueeze" in node.attrs:        # axes of size 1 inserted (ONNX's Unsqueeze)
            out = list(dims)
            rank = len(dims) + len(node.attrs["unsqueeze"])
            for a in sorted(a % rank for a in node.attrs["unsqueeze"]):
                out.insert(a, 1)
            return tuple(out)
        if "flatten_axis" in node.attrs:
            a = node.attrs["flatten_axis"] % (len(dims) + 1)
            return (int(np.prod(dims[:a])), int(np.prod(dims[a:])))
        target = [int(d) for d in node.attrs["target"]]
        target = [dims[i] if d == 0 and i < len(dims) else d for i, d in enumerate(target)]
        if target.count(-1) > 1 or any(d < -1 or d == 0 for d in target):
            return None
        if -1 in target:
            rest = int(np.prod([d for d in target if d != -1]))
            if rest <= 0 or n % rest:
                return None
            target[target.index(-1)] = n // rest
        return tuple(target)

    def transpose(self, node: Node) -> None:
        """TRANSPOSE [0, 2, 3, 1], NCHW -> NHWC: of the graph input of an NHWC graph (PyTorch
        exports open with it: the model then reads H x W x C, the TRANSPOSE is dropped), or of
        a map of an NCHW graph right before a flatten (TensorFlow exporters write Transpose +
        Reshape: the flatten then lists the map in H, W, C order)."""
        perm = [int(p) for p in node.attrs["perm"]]
        src = self.tensor(node, 0)
        of_input = (self.g.layout == NHWC and src.name == self.g.inputs[0] and not self.layers
                    and src.name in self.views and len(src.shape or ()) == 4)
        if perm != [0, 2, 3, 1] or not (of_input or self.g.layout == NCHW):
            raise self.refuse("transpose", node, perm=perm, transpose=node.op_name,
                              reshape=self.name_of("reshape"))
        view = self.view(node)
        out = self.out(node)
        if of_input:
            n, c, h, w = src.shape
            self.input_io = TensorIO(self.input_io.dtype, tuple(src.shape), self.input_io.q,
                                     channels_first=True)
            if out.shape is not None and tuple(out.shape) != (n, h, w, c):
                raise self.error(f"output shape {list(out.shape)} is not the input's NHWC",
                                 node, out)
            self.same_q(node, self.q[0])
            self.input_shape = (h, w, c)
            del self.views[src.name]             # nothing else may read the NCHW tensor
            self.views[out.name] = View(0)
            return
        self.same_q(node, self.q[view.t])
        self.views[out.name] = View(view.t, layout=NHWC, alias=True)

    def clip(self, node: Node) -> None:
        """A standalone ReLU or ReLU6 (Clip(0, 6)): the fused activation of the layer before."""
        lo, hi = node.attrs.get("min"), node.attrs.get("max")
        if lo != 0 or hi not in (6.0, None, np.inf):
            raise self.error(f"{node.op_name}({lo}, {hi}) is neither ReLU nor ReLU6", node)
        act = "relu6" if hi == 6.0 else "relu"
        if self.g.kind == INT8:        # the fused clamp is exact only without a requantization
            q_in, q_out = self.q[-1], self.activation_q(node, self.out(node))
            if q_in != q_out:
                raise self.error(f"output quantization {q_out} differs from its input's "
                                 f"{q_in}: a {node.op_name} that requantizes is not supported",
                                 node, self.out(node))
        layer = self.fold_target(node, _ACT_TARGETS, "a conv, add or dense layer")
        layer.act = "relu6" if "relu6" in (layer.act, act) else act

    def batchnorm(self, node: Node) -> None:
        if self.g.kind != FLOAT:
            raise self.error("a quantized model must have its BatchNormalization folded "
                             "before quantization (onnxruntime quant_pre_process)", node)
        layer = self.fold_target(node, (ir.CONV, ir.DEPTHWISE, ir.TRANSPOSE_CONV),
                                 "a convolution")
        p = self.params[-1]
        if p is None or layer.act != "none":
            raise self.error("must follow the convolution before its activation", node)
        scale, bias, mean, var = (self.const(node, i).real() for i in range(1, 5))
        g = scale / np.sqrt(var + node.attrs.get("epsilon", 1e-5))
        w = p.w * (g if layer.op == ir.DEPTHWISE else g.reshape(-1, 1, 1, 1))
        self.params[-1] = FloatWeights(w, (p.b - mean) * g + bias)

    def pixel_op(self, node: Node) -> None:
        """SOFTMAX (over the channels) and the element-wise activations: a layer of their own,
        on a map or on a dense layer's (1, n) output."""
        kind = _PIXEL[node.op]
        view = self.view(node)
        self.activation_q(node, self.tensor(node, 0))
        shape = self.shape(view.t)
        layer = Layer(op=kind, in_shape=shape, out_shape=shape)
        fixed = ir.FIXED_OUTPUT_Q.get(kind)
        q_out = self.activation_q(node, self.out(node))
        if fixed is not None and q_out is not None and q_out != fixed:
            raise self.error(f"int8 output must have scale 1/256 and zero point -128 (TFLite's "
                             f"kernel assumes them), has {q_out.scale} and {q_out.zero_point}",
                             node, self.out(node))
        if kind == ir.SOFTMAX:
            rank = 2 if view.flat else 4
            axis = node.attrs.get("axis", -1)
            channels = 1 if view.flat or self.g.layout == NCHW else 3
            coerced = node.attrs.get("coerced", False)    # ONNX before opset 13: 2-D from axis
            if not (axis % rank == channels and (not coerced or shape[:2] == (1, 1))):
                raise self.error(f"axis {axis} of a rank-{rank} tensor: only a softmax over the "
                                 "channels is supported", node)
            layer.beta = node.attrs.get("beta", 1.0)
            if not (np.isfinite(layer.beta) and layer.beta > 0):
                raise self.error(f"beta {layer.beta} must be positive", node)
        elif kind == ir.LEAKY_RELU:
            layer.alpha = node.attrs["alpha"]
            if not (np.isfinite(layer.alpha) and layer.alpha >= 0):
                raise self.error(f"alpha {layer.alpha}: only slopes >= 0 are supported", node)
        self.emit(node, layer, flat=view.flat, flat_ok=True)

    def prelu(self, node: Node) -> None:
        """PRELU with one slope per channel (shared over H and W, as Keras' PReLU with
        shared_axes=[1, 2] and the converters write it) or one per element (Keras' default);
        the slope broadcasts against the input from the right, as both formats have it."""
        view = self.view(node)
        self.activation_q(node, self.tensor(node, 0))
        shape = self.shape(view.t)
        h, w, c = shape
        dims = self.file_dims(view)
        rank = len(dims)
        st = self.tensor(node, 1)
        if self.g.kind == INT8:
            self.check_type(node, st, "INT8")
        slope = self.const(node, 1)
        channel = 1 if view.flat or self.g.layout == NCHW else 3
        sdims = slope.values.shape
        while len(sdims) > rank and sdims[0] == 1:
            sdims = sdims[1:]
        full = (1,) * (rank - len(sdims)) + sdims if len(sdims) <= rank else None
        per_pixel = not view.flat and full == dims and (h, w) != (1, 1)
        per_channel = full is not None and all(d == 1 for i, d in enumerate(full)
                                               if i != channel) and full[channel] in (1, c)
        if not (per_pixel or per_channel):
            one = [1] * (rank - 1)
            one[channel - 1] = c
            raise self.error(f"{node.role(1, 'slope')} of shape {list(st.shape)}: only one "
                             f"slope per channel ({one}) or per element "
                             f"({list(dims[1:])}) is supported", node, st)
        if per_pixel:
            values = slope.values.reshape(dims[1:])
            values = values.transpose(1, 2, 0) if self.g.layout == NCHW else values
        else:
            values = np.broadcast_to(slope.values.reshape(-1), (c,))
        slopes = Const(np.ascontiguousarray(values), slope.scale, slope.zero_point, 0)
        self.emit(node, Layer(op=ir.PRELU, in_shape=shape, out_shape=shape,
                              slope_per_pixel=per_pixel), flat=view.flat, flat_ok=True,
                  params=None if self.g.kind == INT8 else FloatWeights(slopes.real(), np.zeros(0)),
                  sources=(slopes, None))

    def mul(self, node: Node) -> None:
        """The product of two computed tensors of one shape, or of a map and a 1 x 1 x C vector
        (a squeeze-and-excite gate): the map is the layer's input, the other its `skip`."""
        if len(node.inputs) != 2:
            raise self.error(f"needs two inputs, has {len(node.inputs)}", node)
        known = [i for i in (0, 1) if node.inputs[i] in self.views]
        if len(known) == 1 and self.g.kind == FLOAT and \
                self.g.tensors[node.inputs[1 - known[0]]].const is not None:
            return self.const_mul(node, known[0])
        a, b = self.view(node, 0, flat_ok=True), self.view(node, 1, flat_ok=True)
        if a.t == b.t:
            raise self.error("multiplies a tensor by itself", node)
        sa, sb = self.shape(a.t), self.shape(b.t)
        main, other = (b, a) if sa[:2] == (1, 1) and sb[:2] != (1, 1) else (a, b)
        shape, second = self.shape(main.t), self.shape(other.t)
        if second not in (shape, (1, 1, shape[2])):
            raise self.error(f"multiplies shapes {list(self.file_dims(main)[1:])} and "
                             f"{list(self.file_dims(other)[1:])}: only alike, or by one value "
                             "per channel", node)
        for i in (0, 1):
            self.activation_q(node, self.tensor(node, i))
        self.reading = main.t
        self.emit(node, Layer(op=ir.MUL, in_shape=shape, out_shape=shape, skip=other.t,
                              act=node.attrs.get("act", "none")), flat=main.flat)

    def slice(self, node: Node) -> None:
        """Parts of the channels (SPLIT, STRIDED_SLICE, ONNX Split and Slice): output k is
        channels `bounds[k]` of the input; an output nothing reads is not computed."""
        view = self.view(node)
        h, w, c = self.shape(view.t)
        axis = node.attrs.get("axis", 3 if self.g.layout == NHWC else 1)
        bounds = node.attrs.get("bounds") or []
        if axis % 4 == (1 if self.g.layout == NHWC else 2) and len(bounds) == 1 == \
                len(node.outputs) and self.g.kind == INT8:    # rows: a streaming model's time
            begin, end = bounds[0]
            return self.row_slice(node, view, begin + h if begin < 0 else begin,
                                  end + h if end < 0 else end)
        if axis % 4 != (3 if self.g.layout == NHWC else 1):
            raise self.error(f"slices axis {axis}: only the channels (axis "
                             f"{3 if self.g.layout == NHWC else 1} of {self.g.layout}) are "
                             "supported", node)
        bounds = node.attrs.get("bounds")
        if bounds is None:                   # sizes (None: equal parts)
            sizes = node.attrs.get("sizes") or [c // len(node.outputs)] * len(node.outputs)
            ends = np.cumsum(sizes).tolist()
            bounds = list(zip([0] + ends[:-1], ends))
        bounds = [(b + c if b < 0 else b, e + c if e < 0 else e) for b, e in bounds]
        if len(bounds) != len(node.outputs):
            raise self.error(f"has {len(node.outputs)} outputs for {len(bounds)} parts", node)
        self.activation_q(node, self.tensor(node, 0))
        for (begin, end), name in zip(bounds, node.outputs):
            begin, end = max(begin, 0), min(end, c)
            if begin >= end:
                raise self.error(f"channels [{begin}, {end}) of {c}: an empty part", node)
            if not self.readers.get(name):
                continue
            part = Node(node.op, node.inputs[:1], [name], node.attrs, node.where, node.op_name,
                        self.g.tensors[name].title or name, node.roles, node.ref)
            self.reading = view.t
            self.emit(part, Layer(op=ir.SLICE, in_shape=(h, w, c), out_shape=(h, w, end - begin),
                                  begin=begin))
            if self.g.kind == INT8 and self.q[-1] != self.q[view.t]:
                raise self.error(f"output quantization {self.q[-1]} differs from its input's "
                                 f"{self.q[view.t]}: a slice copies bytes", node,
                                 self.g.tensors[name])
            if self.g.kind == QDQ:
                self.q[-1] = self.layers[-1].q_out = self.q[view.t]

    def quantize(self, node: Node) -> None:
        """QUANTIZE of the float or uint8 graph input into int8, or of the last int8 tensor
        into the uint8 graph output: the C API's edges (msf_model_run_io)."""
        src, out = self.tensor(node, 0), self.out(node)
        if out.dtype == "UINT8" and out.name in self.g.outputs and src.name in self.views:
            view = self.view(node, flat_ok=True)
            dims = self.file_dims(view)
            self.output_io = TensorIO("uint8", dims, self.uint8_q(node, out),
                                      channels_first=len(dims) == 4 and view.layout == NCHW)
            self.views[out.name] = view
            return
        if self.float_input is None or src.name != self.float_input or self.layers or self.q:
            raise self.error(f"{node.op_name} is supported only on the float or uint8 graph "
                             "input and into the uint8 graph output (int8 requantization "
                             "inside the graph is not)", node)
        if out.shape != src.shape:
            raise self.error(f"output shape {list(out.shape)} != input {list(src.shape)}", node)
        if src.dtype == "UINT8":
            self.input_io = TensorIO("uint8", self.input_io.dims, self.uint8_q(node, src),
                                     self.input_io.channels_first)
        self.q.append(self.activation_q(node, out))
        self.views[out.name] = View(0)

    def uint8_q(self, node: Node, t: Tensor) -> QParams:
        scale, zp = t.declared_q or (np.zeros(0), np.zeros(0, np.int64))
        if scale.size != 1 or zp.size != 1:
            raise self.error("a uint8 graph edge must be quantized per tensor", node, t)
        s, z = float(np.float32(scale[0])), int(zp[0])
        if not (np.isfinite(s) and s > 0) or not 0 <= z <= 255:
            raise self.error(f"bad uint8 quantization: scale {s}, zero point {z}", node, t)
        return QParams(s, z)

    def dequantize(self, node: Node) -> None:
        view = self.view(node, flat_ok=True)
        out = self.out(node)
        self.check_type(node, out, "FLOAT32")
        if out.name not in self.g.outputs:
            raise self.error(f"{node.op_name} is supported only as the graph output", node)
        self.views[out.name] = view

    # -- quantized weights ------------------------------------------------------------------------
    def quantized(self, model: Model) -> Model:
        """Attach the file's int8 weights (TFLite's rules where a QDQ file differs)."""
        if self.q[0] is None:
            raise MsfError(f"the graph input has no {self.name_of('quantize')}",
                           source=self.g.source)
        model.q_input = self.q[0]
        for i, layer in enumerate(self.layers):
            node = self.layer_nodes[i]
            if layer.q_out is None:
                raise self.error(f"output has no {self.name_of('quantize')}: every activation "
                                 "of a quantized model must be quantized", node)
            if layer.op in WEIGHTED_OPS:
                layer.weights = self.int8_weights(i, layer, node)
            elif layer.op == ir.PRELU:
                layer.weights = self.int8_slopes(i, layer, node)
            if layer.op in ir.PIXEL_OPS and layer.op != ir.PRELU:
                try:
                    nm.requantization(model, i)
                except ValueError as exc:
                    raise self.error(str(exc).split(": ", 1)[-1], node) from None
        return model

    def int8_weights(self, i: int, layer: Layer, node: Node) -> Weights:
        w, bias = self.sources[i]
        scales = f32(w.scale.astype(np.float64))
        if not np.all(np.isfinite(scales) & (scales > 0)):      # after float32 rounding
            raise self.error("weight scales must be positive and finite", node,
                             self.tensor(node, 1))
        if not (layer.op == ir.DENSE and scales.size == 1):
            scales = np.broadcast_to(scales, (layer.cout,)).copy()
        s_in = self.q[self.input_of(i)].scale
        return Weights(w=w.values.astype(np.int8), bias=self.int32_bias(i, node, bias, s_in,
                                                                         scales), scales=scales)

    def int32_bias(self, i: int, node: Node, bias: Const | None, s_in: float,
                   scales: np.ndarray) -> np.ndarray:
        """The int32 bias: as written in an int8 file (in the sums' units); in a QDQ file as
        written where its scale is s_in x s_w, else quantized from its real values."""
        n = self.layers[i].cout
        if bias is not None and bias.values.dtype == np.int32 and (
                self.g.kind == INT8 or (bias.quantized and not np.any(bias.zero_point) and
                                        np.allclose(bias.scale, s_in * scales, rtol=1e-5,
                                                    atol=0))):
            return bias.values.astype(np.int32)
        if self.params[i] is None:         # an int8 graph's float bias
            return quantize_bias(np.zeros(n) if bias is None else bias.real(), s_in, scales)
        return quantize_bias(self.params[i].b, s_in, scales)

    def int8_slopes(self, i: int, layer: Layer, node: Node) -> Weights:
        """PRELU's int8 slopes and their per-tensor quantization as written; float slopes of
        a QDQ file (onnxruntime leaves PRelu unquantized) are quantized as msf-pio's own
        quantizer does."""
        slopes, _ = self.sources[i]
        st = self.tensor(node, 1)
        if self.g.kind == QDQ and not slopes.quantized:
            return quantize_weights(layer, self.params[i], 1.0)
        if slopes.values.dtype != np.int8 or not slopes.quantized:
            raise self.error(f"has type {st.dtype}, expected INT8", node, st)
        if slopes.scale.size != 1 or slopes.zero_point.size != 1:
            raise self.error("slopes must be int8 quantized per tensor", node, st)
        s, z = float(np.float32(slopes.scale[0])), int(slopes.zero_point[0])
        if not (np.isfinite(s) and s > 0) or not -128 <= z <= 127:
            raise self.error(f"bad int8 quantization: scale {s}, zero point {z}", node, st)
        return Weights(w=slopes.values.astype(np.int8), bias=np.zeros(0, np.int32),
                       scales=np.array([s]), zero_point=z)

    def input_of(self, i: int) -> int:
        t = self.layers[i].input
        return i if t is None else t

""".tflite (from the TFLite converter or any other writer) -> the format-neutral graph of
`opgraph.py`, which `lowering.py` turns into the IR.

Operators read: CONV_2D, DEPTHWISE_CONV_2D, ADD, CONCATENATION, MAX_POOL_2D, AVERAGE_POOL_2D,
MEAN, FULLY_CONNECTED, SOFTMAX, HARD_SWISH, LEAKY_RELU, PRELU, LOGISTIC, RESHAPE (SQUEEZE,
EXPAND_DIMS), PAD/PADV2, QUANTIZE, DEQUANTIZE, TRANSPOSE, with fused NONE/RELU/RELU6 (what of
each the IR can run, the lowering says). The file's scales, zero points, int8 weights and int32
biases are kept exactly, so the IR computes TFLite Micro's bytes.

Decoding the flatbuffer (the only place a corrupt file can surprise Python) happens in `_decode`
and turns every failure into an MsfError; the graph is then built from plain Python values.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import MsfError
from .ir import Model
from .lowering import lower
from .opgraph import FLOAT, INT8, NHWC, Const, Graph, Node, Tensor


def _schema():
    """The .tflite schema module (ships with the `tflite-micro` package: msf-pio[tflite])."""
    try:
        from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as fb
    except ImportError:
        raise MsfError("reading .tflite files needs the tflite-micro package "
                       "(pip install 'msf-pio[tflite]')") from None
    return fb


_TYPES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 6: "BOOL",
          7: "INT16", 9: "INT8", 13: "RESOURCE"}
_NUMPY = {"FLOAT32": "<f4", "FLOAT16": "<f2", "INT32": "<i4", "UINT8": "u1", "INT64": "<i8",
          "BOOL": "u1", "INT16": "<i2", "INT8": "i1"}
_OPTION_FIELDS = {   # options table class -> accessor names read into the options dict
    "Conv2DOptions": ("Padding", "StrideW", "StrideH", "FusedActivationFunction",
                      "DilationWFactor", "DilationHFactor"),
    "DepthwiseConv2DOptions": ("Padding", "StrideW", "StrideH", "DepthMultiplier",
                               "FusedActivationFunction", "DilationWFactor", "DilationHFactor"),
    "Pool2DOptions": ("Padding", "StrideW", "StrideH", "FilterWidth", "FilterHeight",
                      "FusedActivationFunction"),
    "FullyConnectedOptions": ("FusedActivationFunction", "WeightsFormat", "KeepNumDims"),
    "AddOptions": ("FusedActivationFunction",),
    "MulOptions": ("FusedActivationFunction",),
    "SplitOptions": ("NumSplits",),
    "SplitVOptions": ("NumSplits",),
    "StridedSliceOptions": ("BeginMask", "EndMask", "EllipsisMask", "NewAxisMask",
                            "ShrinkAxisMask", "Offset"),
    "ConcatenationOptions": ("Axis", "FusedActivationFunction"),
    "ReducerOptions": ("KeepDims",),
    "CallOnceOptions": ("InitSubgraphIndex",),
    "TransposeConvOptions": ("Padding", "StrideW", "StrideH", "FusedActivationFunction"),
    "ResizeNearestNeighborOptions": ("AlignCorners", "HalfPixelCenters"),
}
_FLOAT_OPTION_FIELDS = {"SoftmaxOptions": ("Beta",), "LeakyReluOptions": ("Alpha",)}
_PADDING = {0: "same", 1: "valid"}
_ACT = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6"}
_ACT_NAMES = {4: "TANH", 5: "SIGN_BIT"}
_HINTS = {"TANH": " (supported activations: HARD_SWISH, LEAKY_RELU, PRELU, LOGISTIC, RELU, "
                  "RELU6)"}
_OP_NAMES = {"conv": "CONV_2D", "max_pool": "MAX_POOL_2D", "avg_pool": "AVERAGE_POOL_2D",
             "dense": "FULLY_CONNECTED", "reshape": "RESHAPE", "pad": "PAD",
             "transpose": "TRANSPOSE", "quantize": "QUANTIZE"}
_WORDING = {
    "pad_max_pool": ("node", "a max pool after PAD needs PADV2 with -128 (or a ReLU before the "
                             "PAD)"),
    "grouped": ("node", "{role} {shape} on {c} channels: only depth multiplier 1 is supported "
                        "(or any over one channel)"),
    "transpose": ("node", "TRANSPOSE {perm}: only NCHW -> NHWC ([0, 2, 3, 1]) of the int8 graph "
                          "input itself is supported (the model's input then is H x W x C), "
                          "not a graph kept in NCHW between its operators"),
}


def load_tflite(path: str | Path, input_shape: tuple[int, int, int] | None = None) -> Model:
    """A .tflite file -> IR model (quantized, or weightless for a float file)."""
    return lower(read_tflite(path, input_shape))[0]


def read_tflite(path: str | Path, input_shape: tuple[int, int, int] | None = None) -> Graph:
    """A .tflite file -> its format-neutral graph: int8 if any activation is, else float
    (quantized post-training, its weights kept in `weights_spec`'s file)."""
    path = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise MsfError(f"cannot read model file ({exc.strerror})", source=path) from None
    tensors, ops, inputs, outputs = _decode(data, path)
    ops = _fold_constant_dequantize(tensors, ops)
    made = {t for op in ops for t in op[3]} | set(inputs)
    kind = INT8 if any(tensors[str(t)].dtype in ("INT8", "UINT8") for t in made
                       if str(t) in tensors) else FLOAT
    graph = Graph(source=path, name=Path(path).stem, kind=kind, layout=NHWC, tensors=tensors,
                  nodes=[], inputs=inputs, outputs=outputs, op_names=_OP_NAMES,
                  wording=_WORDING, input_shape=input_shape,
                  weights_spec={"tflite": path} if kind == FLOAT else {})
    if input_shape is not None and kind == FLOAT:
        graph.weights_spec["input_shape"] = list(input_shape)
    graph.nodes = [_node(graph, *op) for op in ops]
    return graph


def _fold_constant_dequantize(tensors: dict, ops: list) -> list:
    """A DEQUANTIZE of a constant (float16 or int8 weights of a float model) is the float
    constant itself: its output gets the values, and the operator goes."""
    kept = []
    for op in ops:
        index, name, inputs, outputs, _ = op
        src = tensors.get(str(inputs[0])) if name == "DEQUANTIZE" and inputs else None
        if src is not None and src.const is not None and len(outputs) == 1:
            out = tensors[str(outputs[0])]
            out.const, out.problem = Const(src.const.real().astype(np.float32)), ""
            continue
        kept.append(op)
    return kept


def _decode(data: bytes, path: str):
    """(tensors by name, operators as (index, name, inputs, outputs, options), graph inputs,
    graph outputs) of the single subgraph. Tensors are named by their index."""
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
        n_subgraphs = count(model.SubgraphsLength(), "subgraphs")
        if n_subgraphs == 0:
            raise MsfError("has no subgraph", source=path)
        sub = model.Subgraphs(0)
        n_buffers = count(model.BuffersLength(), "buffers")
        codes = []
        for i in range(count(model.OperatorCodesLength(), "operator codes")):
            oc = model.OperatorCodes(i)
            code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
            custom = oc.CustomCode()
            codes.append(f"custom op '{custom.decode(errors='replace')}'" if custom
                         and code == fb.BuiltinOperator.CUSTOM else names.get(code, f"op {code}"))

        def tensor_of(sub, i: int, where: str = "") -> Tensor:
            t = sub.Tensors(i)
            raw = t.Name()
            title = raw.decode(errors="replace") if raw else f"tensor{i}"
            label = f"{where}tensor {i} '{title}'"
            shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
            # -1 in the signature: a dynamic dimension (a -1 batch, which the converter writes
            # for every model, is the shape's 1)
            if shape and t.ShapeSignatureLength() == len(shape):
                shape = tuple("?" if int(d) < 0 and j else shape[j]
                              for j, d in enumerate(t.ShapeSignatureAsNumpy()))
            tensor = Tensor(str(i), shape, _TYPES.get(t.Type(), str(t.Type())),
                            label=label, title=title)
            q = t.Quantization()
            scale, zp, axis = np.zeros(0), np.zeros(0, np.int64), 0
            if q is not None:
                scale = q.ScaleAsNumpy().astype(np.float64) if q.ScaleLength() else scale
                zp = q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength() else zp
                axis = q.QuantizedDimension()
            tensor.declared_q = (scale, zp)
            buffer = t.Buffer()
            if not 0 <= buffer < max(n_buffers, 1):
                raise MsfError(f"buffer index {buffer} out of range (the file has "
                               f"{n_buffers} buffers)", source=path, where=label)
            raw_data = _buffer_data(model.Buffers(buffer), data, path, label) if buffer else None
            if raw_data is not None:
                _constant(tensor, raw_data, scale, zp, axis)
            return tensor

        def operator_of(sub, i: int, n_tensors: int, where: str = ""):
            o = sub.Operators(i)
            if not 0 <= o.OpcodeIndex() < len(codes):
                raise MsfError(f"opcode index {o.OpcodeIndex()} out of range", source=path,
                               where=f"{where}operator {i}")
            name = codes[o.OpcodeIndex()]
            inputs = [int(x) for x in o.InputsAsNumpy()] if o.InputsLength() else []
            outputs = [int(x) for x in o.OutputsAsNumpy()] if o.OutputsLength() else []
            for t in inputs + outputs:          # -1: an absent optional input (not an output)
                if not (-1 if t in inputs else 0) <= t < n_tensors:
                    raise MsfError(f"tensor index {t} out of range (the subgraph has "
                                   f"{n_tensors} tensors)", source=path,
                                   where=f"{where}operator {i} ({name})")
            return i, name, inputs, outputs, _options(fb, o, option_names)

        initial = {}
        if n_subgraphs != 1:
            initial = _initial_states(model, sub, n_subgraphs, codes, fb, names, path,
                                      tensor_of, operator_of, count)
        tensors = {}
        for i in range(count(sub.TensorsLength(), "tensors")):
            tensor = tensor_of(sub, i)
            tensors[tensor.name] = tensor
        ops = [operator_of(sub, i, len(tensors))
               for i in range(count(sub.OperatorsLength(), "operators"))]
        ops = _state_variables(tensors, ops, initial, path)
        inputs = [int(x) for x in sub.InputsAsNumpy()] if sub.InputsLength() else []
        outputs = [int(x) for x in sub.OutputsAsNumpy()] if sub.OutputsLength() else []
    except MsfError:
        raise
    except Exception as exc:     # a corrupt flatbuffer fails anywhere inside the accessors
        raise MsfError(f"corrupt .tflite flatbuffer ({type(exc).__name__}: {exc})",
                       source=path) from None
    for t in inputs + outputs:
        if not 0 <= t < len(tensors):
            raise MsfError(f"graph input/output tensor index {t} out of range", source=path)
    return tensors, ops, [str(t) for t in inputs], [str(t) for t in outputs]


def _subgraphs_cause(model, names: dict) -> str:
    """Why a file has several subgraphs, in one line: the operators that call the others
    (state variables of a streaming model, control flow)."""
    n = model.SubgraphsLength()
    callers = set()
    for k in range(min(n, 1)):
        sub = model.Subgraphs(k)
        for i in range(min(sub.OperatorsLength(), 10000)):
            code = model.OperatorCodes(sub.Operators(i).OpcodeIndex())
            op = names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "")
            if op in ("CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "WHILE",
                      "IF", "CALL"):
                callers.add(op)
    if callers & {"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"}:
        why = (f"a stateful streaming model (state variables: {', '.join(sorted(callers))}) "
               "whose initial state is not one CALL_ONCE of subgraph 1, which msf-pio needs")
    elif callers:
        why = f"control flow ({', '.join(sorted(callers))}), which msf-pio does not run"
    else:
        why = "only a single-subgraph model runs"
    return f"has {n} subgraphs: {why}"


_STATE_OPS = ("CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE")


def _initial_states(model, sub, n: int, codes: list, fb, names: dict, path: str, tensor_of,
                    operator_of, count) -> dict:
    """A stateful streaming model's second subgraph, which its CALL_ONCE runs once before the
    first run: the initial value of each state variable (shared name -> constant tensor).
    Any other use of several subgraphs is refused in one line (`_subgraphs_cause`)."""
    calls = [operator_of(sub, i, count(sub.TensorsLength(), "tensors"))
             for i in range(count(sub.OperatorsLength(), "operators"))]
    calls = [op for op in calls if op[1] == "CALL_ONCE"]
    if n != 2 or len(calls) != 1 or calls[0][4].get("InitSubgraphIndex") != 1:
        raise MsfError(_subgraphs_cause(model, names), source=path)
    init = model.Subgraphs(1)
    where = "subgraph 1 (the initial state): "
    tensors = [tensor_of(init, i, "subgraph 1 ")
               for i in range(count(init.TensorsLength(), "tensors"))]
    handles, values = {}, {}
    for i in range(count(init.OperatorsLength(), "operators")):
        _, name, inputs, outputs, options = operator_of(init, i, len(tensors), where)
        if name == "VAR_HANDLE" and len(outputs) == 1:
            handles[outputs[0]] = options.get("variable", "")
        elif name == "ASSIGN_VARIABLE" and len(inputs) == 2 and inputs[0] in handles \
                and inputs[1] >= 0 and tensors[inputs[1]].const is not None:
            values[handles[inputs[0]]] = tensors[inputs[1]]
        else:
            raise MsfError(f"{name}: an initial-state subgraph may only assign constants to "
                           "state variables (VAR_HANDLE, ASSIGN_VARIABLE)", source=path,
                           where=f"{where}operator {i}")
    return values


def _state_variables(tensors: dict, ops: list, initial: dict, path: str) -> list:
    """The main subgraph's operators with the state variables resolved: CALL_ONCE and
    VAR_HANDLE go (the initial values are known), READ_VARIABLE and ASSIGN_VARIABLE keep the
    variable's name (and a read its initial value, `initial`)."""
    handles, kept = {}, []
    for op in ops:
        index, name, inputs, outputs, options = op
        if name == "CALL_ONCE" and initial:
            continue
        if name == "VAR_HANDLE" and len(outputs) == 1:
            handles[outputs[0]] = options.get("variable", "")
            continue
        if name in ("READ_VARIABLE", "ASSIGN_VARIABLE"):
            if not inputs or inputs[0] not in handles:
                raise MsfError(f"input 0 is not a state variable (made by no earlier VAR_HANDLE)",
                               source=path, where=f"operator {index} ({name})")
            variable = handles[inputs[0]]
            options = {"variable": variable, "init": initial.get(variable)}
            op = (index, name, inputs[1:], outputs, options)
        kept.append(op)
    return kept


def _options(fb, o, option_names) -> dict:
    kind = option_names.get(o.BuiltinOptionsType())
    table = o.BuiltinOptions()
    if table is None:
        return {}
    if kind == "VarHandleOptions":        # a state variable: named by its shared name, escaped
        opts = fb.VarHandleOptions()         # (messages name it on one line)
        opts.Init(table.Bytes, table.Pos)
        raw = opts.SharedName() or b""
        return {"variable": raw.decode(errors="replace").encode("unicode_escape").decode()}
    if kind in _OPTION_FIELDS:
        opts = getattr(fb, kind)()
        opts.Init(table.Bytes, table.Pos)
        return {f: int(getattr(opts, f)()) for f in _OPTION_FIELDS[kind]}
    if kind in _FLOAT_OPTION_FIELDS:
        opts = getattr(fb, kind)()
        opts.Init(table.Bytes, table.Pos)
        return {f: float(np.float32(getattr(opts, f)())) for f in _FLOAT_OPTION_FIELDS[kind]}
    return {}


def _buffer_data(buffer, data: bytes, path: str, label: str) -> np.ndarray | None:
    """The constant bytes of a tensor: inside the flatbuffer, or after it (offset/size)."""
    if buffer is None:
        return None
    if buffer.Offset() > 1:       # large models keep buffers outside the flatbuffer
        start, n = buffer.Offset(), buffer.Size()
        if start + n > len(data):
            raise MsfError(f"constant data [{start}, {start + n}) lies beyond the "
                           f"{len(data)}-byte file", source=path, where=label)
        return np.frombuffer(data, np.uint8, n, start)
    return buffer.DataAsNumpy() if buffer.DataLength() else None


def _constant(tensor: Tensor, raw: np.ndarray, scale, zp, axis: int) -> None:
    """Decode a constant's bytes by its type; a constant that cannot be read keeps the reason
    (`problem`), raised only if an operator uses it."""
    dtype = _NUMPY.get(tensor.dtype)
    if dtype is None:
        tensor.problem = f"constant of type {tensor.dtype} cannot be read"
        return
    if any(d < 0 for d in tensor.shape) or np.prod([float(d) for d in tensor.shape]) > 1 << 28:
        tensor.problem = f"constant shape {list(tensor.shape)} is out of range"
        return
    n = int(np.prod(tensor.shape)) if tensor.shape else 1
    itemsize = np.dtype(dtype).itemsize
    if raw.size != n * itemsize:
        tensor.problem = (f"holds {raw.size} bytes, its shape {list(tensor.shape)} needs "
                          f"{n * itemsize}")
        return
    values = np.frombuffer(raw.tobytes(), dtype).reshape(tensor.shape)
    if dtype[0] == "<":
        values = values.astype(dtype[1:])            # native byte order
    tensor.const = Const(values, scale if scale.size else None,
                         (zp if zp.size else np.zeros(1, np.int64)) if scale.size else None, axis)


# -- operators -> neutral nodes --------------------------------------------------------------------
def _node(graph: Graph, index: int, name: str, inputs: list[int], outputs: list[int],
          options: dict) -> Node:
    node = Node("", [str(t) if t >= 0 else "" for t in inputs], [str(t) for t in outputs],
                where=f"operator {index} ({name})", op_name=name, ref=f"{name} (operator {index})")
    node.name = graph.tensors[node.outputs[0]].title if len(node.outputs) == 1 else ""
    try:
        build = _BUILDERS.get(name)
        if build is None:
            raise _Refused(f"unsupported op{_HINTS.get(name, '')}")
        build(graph, node, options)
    except _Refused as refusal:
        node.op, node.attrs = "error", {"message": str(refusal), "tensor": refusal.tensor}
    return node


class _Refused(Exception):
    """What the file says that the format's reader refuses (raised by the lowering in order)."""

    def __init__(self, message: str, tensor: str | None = None):
        super().__init__(message)
        self.tensor = tensor


def _option(node: Node, options: dict, key: str, default=None):
    if key not in options:
        if default is None:
            raise _Refused(f"has no builtin options (needs {key})")
        return default
    return options[key]


def _act(node: Node, options: dict) -> str:
    code = _option(node, options, "FusedActivationFunction", 0)
    if code not in _ACT:
        raise _Refused(f"fused activation {_ACT_NAMES.get(code, code)} is not supported "
                       "(NONE, RELU, RELU_N1_TO_1, RELU6)")
    return _ACT[code]


def _window(node: Node, options: dict) -> dict:
    padding = _option(node, options, "Padding")
    if padding not in _PADDING:
        raise _Refused(f"unknown padding {padding}")
    return {"stride": (_option(node, options, "StrideH"), _option(node, options, "StrideW")),
            "dilation": (options.get("DilationHFactor", 1), options.get("DilationWFactor", 1)),
            "padding": _PADDING[padding], "act": _act(node, options)}


def _ints(graph: Graph, node: Node, i: int, shape_ok) -> list[int]:
    """A small int32/int64 constant operand (axes, paddings, a permutation)."""
    t = graph.tensors.get(node.inputs[i]) if i < len(node.inputs) else None
    if t is None or t.dtype not in ("INT32", "INT64") or not shape_ok(t.shape):
        raise _Refused(f"input {i} must be a constant int32 tensor "
                       f"{'' if t is None else list(t.shape)}", node.inputs[i] if t else None)
    if t.const is None:
        raise _Refused(t.problem or "must be a constant (it has no data buffer)", t.name)
    return t.const.values.astype(np.int64).reshape(-1).tolist()


def _conv(graph: Graph, node: Node, options: dict) -> None:
    node.op, node.attrs, node.roles = "conv", _window(node, options), ("input", "filter", "bias")
    f = graph.tensors.get(node.inputs[1]) if len(node.inputs) > 1 else None
    if f is not None and len(f.shape) != 4:
        raise _Refused(f"filter shape {list(f.shape)} is not 4-D")
    if node.op_name == "DEPTHWISE_CONV_2D":          # (1, kh, kw, C x M): OHWI with I = 1
        if f is not None and f.shape[0] != 1:
            raise _Refused(f"filter {list(f.shape)} is not [1, kh, kw, C]", f.name)
        node.attrs.update(group="depthwise", multiplier=_option(node, options,
                                                                "DepthMultiplier", 1),
                          to_ir={1: (3, 1, 2, 0)})


def _pool(graph: Graph, node: Node, options: dict) -> None:
    node.op = "max_pool" if node.op_name == "MAX_POOL_2D" else "avg_pool"
    node.attrs = _window(node, options)
    node.attrs["kernel"] = (_option(node, options, "FilterHeight"),
                            _option(node, options, "FilterWidth"))


def _mean(graph: Graph, node: Node, options: dict) -> None:
    axes = _ints(graph, node, 1, lambda s: len(s) <= 1)
    node.op, node.attrs = "mean", {"axes": axes, "keep_dims": bool(options.get("KeepDims", 0))}
    node.inputs = node.inputs[:1]


def _dense(graph: Graph, node: Node, options: dict) -> None:
    if _option(node, options, "WeightsFormat", 0) != 0:
        raise _Refused("only the DEFAULT weights format is supported")
    node.op, node.roles = "dense", ("input", "filter", "bias")
    node.attrs = {"act": _act(node, options), "flattens": True}
    f = graph.tensors.get(node.inputs[1]) if len(node.inputs) > 1 else None
    c = f.const if f is not None else None
    if c is not None and c.quantized and np.unique(np.float32(c.scale)).size == 1 and \
            np.unique(c.zero_point).size == 1:    # per tensor, as FULLY_CONNECTED stores it
        c.scale, c.zero_point = c.scale[:1], c.zero_point[:1]


def _add(graph: Graph, node: Node, options: dict) -> None:
    node.op, node.attrs = "add", {"act": _act(node, options)}


def _concat(graph: Graph, node: Node, options: dict) -> None:
    node.op, node.attrs = "concat", {"axis": _option(node, options, "Axis", 0),
                                     "act": _act(node, options)}


def _reshape(graph: Graph, node: Node, options: dict) -> None:
    out = graph.tensors[node.outputs[0]] if len(node.outputs) == 1 else None
    target = list(out.shape) if out is not None else []
    if any(not isinstance(d, int) for d in target) and len(node.inputs) > 1:
        target = _ints(graph, node, 1, lambda s: len(s) == 1)     # the new shape, -1 inferred
    node.op, node.attrs = "reshape", {"target": target}
    node.inputs = node.inputs[:1]


def _pad(graph: Graph, node: Node, options: dict) -> None:
    pads = np.array(_ints(graph, node, 1, lambda s: s == (4, 2))).reshape(4, 2)
    if np.any(pads[0] != 0) or np.any(pads < 0):
        raise _Refused(f"pads {pads.tolist()}: only non-negative H, W and channel padding")
    value = 0.0                                       # PAD: the zero point, real 0
    x = graph.tensors[node.inputs[0]]
    if node.op_name == "PADV2" and graph.kind == FLOAT:
        v = graph.tensors.get(node.inputs[2]) if len(node.inputs) > 2 else None
        if v is None or v.const is None or v.const.values.size != 1:
            raise _Refused("the pad value must be a constant scalar")
        value = float(v.const.real().reshape(-1)[0])
    elif node.op_name == "PADV2":
        v = graph.tensors.get(node.inputs[2]) if len(node.inputs) > 2 else None
        if v is None or v.dtype != "INT8" or v.const is None or v.const.values.size != 1:
            raise _Refused("the pad value must be a constant int8 scalar")
        scale, zp = x.declared_q
        if scale.size != 1 or zp.size != 1:
            raise _Refused("activations must be quantized per tensor", x.name)
        value = float((int(v.const.values.reshape(-1)[0]) - int(zp[0])) * np.float32(scale[0]))
        if int(v.const.values.reshape(-1)[0]) != -128:
            raise _Refused("PADV2 pads with a value other than -128", v.name)
    top, bottom, left, right = (int(x) for x in pads[1:3].reshape(-1))
    node.op, node.inputs = "pad", node.inputs[:1]
    node.attrs = {"pads": (top, left, bottom, right), "value": value,
                  "channels": (int(pads[3][0]), int(pads[3][1]))}


def _transpose(graph: Graph, node: Node, options: dict) -> None:
    node.op, node.attrs = "transpose", {"perm": _ints(graph, node, 1, lambda s: s == (4,))}
    node.inputs = node.inputs[:1]


def _unary(op: str):
    def build(graph: Graph, node: Node, options: dict) -> None:
        node.op = op
        node.inputs = node.inputs[:1]
        if op == "softmax":
            node.attrs = {"axis": -1, "beta": options.get("Beta", 1.0)}
        elif op == "leaky_relu":
            node.attrs = {"alpha": options.get("Alpha", 0.2)}
    return build


def _mul(graph: Graph, node: Node, options: dict) -> None:
    node.op, node.attrs = "mul", {"act": _act(node, options)}


def _dims(graph: Graph, name: str) -> tuple[int, ...]:
    t = graph.tensors.get(name)
    if t is None:
        raise _Refused("input 0 is missing")
    if not t.shape or not all(isinstance(d, int) for d in t.shape):
        raise _Refused(f"the input's shape {list(t.shape or [])} must be static", name)
    return t.shape


def _channel_slice(node: Node, dims, begin, end, what: str) -> None:
    """Channels [begin, end) of a 4-D NHWC tensor, or rows [begin, end) (a streaming model's
    time axis), every other axis whole."""
    whole = [(b, e) == (0, d) for b, e, d in zip(begin, end, dims)]
    if len(dims) != 4 or not whole[0] or not whole[2] or not (whole[1] or whole[3]):
        raise _Refused(f"{what} [{', '.join(f'{b}:{e}' for b, e in zip(begin, end))}] of "
                       f"{list(dims)}: only a part of the channels or of the rows is supported")
    axis = 1 if whole[3] else 3
    node.op, node.attrs = "slice", {"axis": axis, "bounds": [(begin[axis], end[axis])]}


def _strided_slice(graph: Graph, node: Node, options: dict) -> None:
    dims = _dims(graph, node.inputs[0] if node.inputs else "")
    begin, end, strides = (_ints(graph, node, i, lambda s: s == (len(dims),)) for i in (1, 2, 3))
    if any(options.get(k, 0) for k in ("EllipsisMask", "NewAxisMask", "ShrinkAxisMask",
                                        "Offset")) or any(v != 1 for v in strides):
        raise _Refused("only a STRIDED_SLICE of stride 1 without ellipsis, new or shrunk axes "
                       "is supported")
    bm, em = options.get("BeginMask", 0), options.get("EndMask", 0)
    begin = [0 if bm >> i & 1 else (b % d if b < 0 else b) for i, (b, d) in
             enumerate(zip(begin, dims))]
    end = [d if em >> i & 1 else (e + d if e < 0 else min(e, d)) for i, (e, d) in
           enumerate(zip(end, dims))]
    _channel_slice(node, dims, begin, end, "STRIDED_SLICE")
    node.inputs = node.inputs[:1]


def _slice(graph: Graph, node: Node, options: dict) -> None:
    dims = _dims(graph, node.inputs[0] if node.inputs else "")
    begin, size = (_ints(graph, node, i, lambda s: s == (len(dims),)) for i in (1, 2))
    end = [d if n == -1 else b + n for b, n, d in zip(begin, size, dims)]
    _channel_slice(node, dims, begin, end, "SLICE")
    node.inputs = node.inputs[:1]


def _split(graph: Graph, node: Node, options: dict) -> None:
    """SPLIT (axis, tensor) into equal parts, SPLIT_V (tensor, sizes, axis) into given ones."""
    if node.op_name == "SPLIT":
        axis = _ints(graph, node, 0, lambda s: len(s) <= 1)[0]
        x = node.inputs[1] if len(node.inputs) > 1 else ""
        dims = _dims(graph, x)
        n = len(node.outputs)
        if dims[axis % len(dims)] % max(n, 1):
            raise _Refused(f"splits {dims[axis % len(dims)]} into {n} unequal parts")
        sizes = [dims[axis % len(dims)] // max(n, 1)] * n
    else:
        x = node.inputs[0] if node.inputs else ""
        dims = _dims(graph, x)
        sizes = _ints(graph, node, 1, lambda s: len(s) == 1)
        axis = _ints(graph, node, 2, lambda s: len(s) <= 1)[0]
        if -1 in sizes:
            sizes[sizes.index(-1)] = dims[axis % len(dims)] - (sum(sizes) + 1)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
    node.op, node.inputs = "slice", [x]
    node.attrs = {"axis": axis if len(dims) == 4 else 99,
                  "bounds": list(zip(starts[:-1], starts[1:]))}


def _variable(graph: Graph, node: Node, options: dict) -> None:
    """READ_VARIABLE (the state's value, its initial one from the initial-state subgraph) and
    ASSIGN_VARIABLE (the state's value for the next run)."""
    node.op = "read_state" if node.op_name == "READ_VARIABLE" else "assign_state"
    node.attrs = {"variable": options.get("variable", "")}
    init = options.get("init")
    if init is not None:
        node.attrs["init"] = init


def _relu(graph: Graph, node: Node, options: dict) -> None:
    node.op, node.inputs = "clip", node.inputs[:1]
    node.attrs = {"min": 0.0, "max": 6.0 if node.op_name == "RELU6" else None}


def _prelu(graph: Graph, node: Node, options: dict) -> None:
    node.op, node.roles = "prelu", ("input", "alpha")


def _transpose_conv(graph: Graph, node: Node, options: dict) -> None:
    """TRANSPOSE_CONV (output_shape, filter OHWI, input, bias): the output's H and W given, the
    padding TFLite's SAME or VALID of a conv from the output back to the input."""
    out = _ints(graph, node, 0, lambda s: s == (4,))
    node.op, node.roles = "transpose_conv", ("input", "filter", "bias")
    node.attrs = {**_window(node, options), "out_hw": (out[1], out[2])}
    node.inputs = [node.inputs[2], node.inputs[1]] + node.inputs[3:4]
    f = graph.tensors.get(node.inputs[1])
    if f is not None and len(f.shape) != 4:
        raise _Refused(f"filter shape {list(f.shape)} is not 4-D")


def _resize_nearest(graph: Graph, node: Node, options: dict) -> None:
    size = _ints(graph, node, 1, lambda s: s == (2,))
    node.op, node.inputs = "resize_nearest", node.inputs[:1]
    node.attrs = {"out_hw": tuple(size), "align_corners": bool(options.get("AlignCorners", 0)),
                  "half_pixel": bool(options.get("HalfPixelCenters", 0))}


_BUILDERS = {
    "CONV_2D": _conv, "DEPTHWISE_CONV_2D": _conv, "ADD": _add, "MAX_POOL_2D": _pool,
    "AVERAGE_POOL_2D": _pool, "MEAN": _mean, "FULLY_CONNECTED": _dense, "RESHAPE": _reshape,
    "PAD": _pad, "PADV2": _pad, "QUANTIZE": _unary("quantize"),
    "DEQUANTIZE": _unary("dequantize"), "SOFTMAX": _unary("softmax"),
    "HARD_SWISH": _unary("hard_swish"), "LEAKY_RELU": _unary("leaky_relu"),
    "LOGISTIC": _unary("logistic"), "PRELU": _prelu, "TRANSPOSE": _transpose,
    "CONCATENATION": _concat, "RELU": _relu, "RELU6": _relu, "MUL": _mul,
    "STRIDED_SLICE": _strided_slice, "SLICE": _slice, "SPLIT": _split, "SPLIT_V": _split,
    "SQUEEZE": _reshape, "EXPAND_DIMS": _reshape, "READ_VARIABLE": _variable,
    "ASSIGN_VARIABLE": _variable,
    "TRANSPOSE_CONV": _transpose_conv, "RESIZE_NEAREST_NEIGHBOR": _resize_nearest,
}

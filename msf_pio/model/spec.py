"""YAML model spec -> IR, with shape inference and validation (docs/design.md).

Every error names the file, the spec layer index and the field, e.g.
`models/net.yaml: layers[3].kernel: must be a positive integer, got 'x'`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..errors import MsfError
from . import ir
from .ir import Layer, Model, conv_out, same_padding, transposed_padding
from .limits import MAX_CHANNELS, MAX_DIM, MAX_INT, MAX_LAYERS, MAX_REPEAT, check_model

_COMMON = {"op", "name", "input"}   # input: the tensor the layer reads (default: the previous)
_FIELDS = {
    "conv2d": {"out", "kernel", "stride", "padding", "act"},
    "pointwise": {"out", "stride", "act"},
    "depthwise_conv2d": {"out", "kernel", "stride", "padding", "act"},
    "inverted_residual": {"out", "expand", "expanded", "kernel", "stride", "repeat", "act",
                          "residual", "se"},
    "add": {"from", "act"},
    "concat": {"from"},
    "mul": {"from", "act"},
    "slice": {"begin", "out"},
    "max_pool": {"kernel", "stride", "padding"},
    "avg_pool": {"kernel", "stride", "padding", "count_pad"},
    "global_avgpool": set(),
    "dense": {"out", "act"},
    "softmax": {"beta"},
    "hard_swish": set(),
    "leaky_relu": {"alpha"},
    "logistic": set(),
    "prelu": {"slopes"},
    "transpose_conv": {"out", "kernel", "stride", "padding", "act"},
    "resize_nearest": {"scale", "size", "align_corners", "half_pixel"},
}
_TOP = {"name", "input", "weights", "layers", "outputs"}
_WEIGHT_KINDS = ("random", "npz", "onnx")


class _Ctx:
    """Where we are in the spec, for error messages."""

    def __init__(self, source: str):
        self.source = source
        self.where = ""

    def error(self, field: str, message: str) -> MsfError:
        where = f"{self.where}.{field}" if self.where and field else (self.where or field)
        return MsfError(message, source=self.source, where=where)


def load_spec(path: str | Path) -> Model:
    """Read a YAML spec file into a (weightless) IR model."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise MsfError(f"cannot read model file ({exc.strerror})", source=str(path)) from None
    if len(raw) > MAX_SPEC_BYTES:
        raise MsfError(f"{len(raw)} B: a YAML spec is at most {MAX_SPEC_BYTES} B",
                       source=str(path))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MsfError(f"not UTF-8 text (byte {exc.start}): a YAML spec is text",
                       source=str(path)) from None
    return spec_to_model(safe_yaml(text, str(path)), source=str(path))


MAX_SPEC_BYTES = 1 << 20        # a spec is a page of text; weights live in their own files
MAX_YAML_NODES = 100_000        # nodes once aliases are expanded (a "billion laughs" is 10^9)
MAX_YAML_DEPTH = 64


def safe_yaml(text: str, source: str):
    """yaml.safe_load, with the document's size counted as if every alias were expanded (every
    later reader, str() and error messages included, may expand it) and its nesting bounded,
    before anything is built."""
    loader = None
    try:
        loader = yaml.SafeLoader(text)      # its reader refuses control characters here
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, source)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        raise MsfError(f"malformed YAML: {getattr(exc, 'problem', None) or exc}",
                       source=source, where=loc) from None
    except RecursionError:
        raise MsfError(f"malformed YAML: nested deeper than {MAX_YAML_DEPTH} levels",
                       source=source) from None
    finally:
        if loader is not None:
            loader.dispose()


def _expanded_size(root, source: str) -> None:
    """Nodes of the document with aliases expanded (shared nodes counted once per use), and
    its depth: iterative, memoised per node, so an alias bomb is measured without expanding."""
    sizes: dict[int, int] = {}
    stack = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        if depth > MAX_YAML_DEPTH:
            raise MsfError(f"malformed YAML: nested deeper than {MAX_YAML_DEPTH} levels",
                           source=source)
        children = ([c for pair in node.value for c in pair]
                    if isinstance(node, yaml.MappingNode) else
                    node.value if isinstance(node, yaml.SequenceNode) else [])
        if isinstance(node, yaml.MappingNode) and not done:
            keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
            twice = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
            if twice is not None:      # PyYAML would keep the last silently
                line = node.start_mark.line + 1
                raise MsfError(f"duplicate key {twice[:40]!r} in the mapping at line {line}",
                               source=source)
        if id(node) in sizes:
            continue
        if not done:
            stack.append((node, depth, True))
            stack.extend((c, depth + 1, False) for c in children if id(c) not in sizes)
            continue
        sizes[id(node)] = 1 + sum(sizes.get(id(c), 1) for c in children)
        if sizes[id(node)] > MAX_YAML_NODES:
            raise MsfError(f"the YAML expands to more than {MAX_YAML_NODES} values (aliases "
                           "counted where they are used)", source=source)


def spec_to_model(data: Any, source: str = "<spec>") -> Model:
    ctx = _Ctx(source)
    if not isinstance(data, dict):
        raise ctx.error("", "a model spec must be a mapping with 'input' and 'layers'")
    for key in data:
        if key not in _TOP:
            raise ctx.error(_key(key), f"unknown top-level field (expected one of {sorted(_TOP)})")
    name = data.get("name") or Path(source).stem
    if not isinstance(name, (str, int, float)) or len(str(name)) > 256:
        raise ctx.error("name", "must be a string of at most 256 characters")
    input_shape = _input_shape(data.get("input"), ctx)
    weights_spec = _weights_spec(data.get("weights", {"random": 0}), ctx, source)
    layers_spec = data.get("layers")
    if not isinstance(layers_spec, list) or not layers_spec:
        raise ctx.error("layers", "must be a non-empty list of layers")

    builder = _Builder(input_shape, ctx)
    for index, spec in enumerate(layers_spec):
        ctx.where = f"layers[{index}]"
        builder.add_spec_layer(index, spec)
    ctx.where = ""
    outputs = None
    if "outputs" in data:     # several graph outputs (detection heads): spec layers, in order
        refs = data["outputs"]
        if not isinstance(refs, list) or not refs:
            raise ctx.error("outputs", "must be a list of spec layers (indices or names)")
        outputs = [builder._ref({"outputs": r}, "outputs") for r in refs]
        if len(builder.layers) not in outputs:
            outputs.append(len(builder.layers))      # the last layer's output is one
    model = Model(name=str(name), input_shape=input_shape, layers=builder.layers, source=source,
                  weights_spec=weights_spec, outputs=outputs)
    bad = ir.graph_error(model)
    if bad:
        raise MsfError(bad[1], source=source, where=builder.spec_where[bad[0]])
    check_model(model, lambda i: builder.spec_where[i])
    return model


def _input_shape(value: Any, ctx: _Ctx) -> ir.Shape:
    shape = value.get("shape") if isinstance(value, dict) else None
    if (not isinstance(shape, list) or len(shape) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in shape)):
        raise ctx.error("input.shape", f"must be [H, W, C] of positive integers, got "
                                       f"{_short(shape)}")
    if max(shape[:2]) > MAX_DIM or shape[2] > MAX_CHANNELS:
        raise ctx.error("input.shape", f"{shape} is beyond any microcontroller: height and "
                                       f"width are limited to {MAX_DIM}, channels to "
                                       f"{MAX_CHANNELS}")
    return (shape[0], shape[1], shape[2])


def _key(key: Any) -> str:
    """A mapping key as the field an error names."""
    return key[:60] if isinstance(key, str) else _short(key)


def _short(value: Any, limit: int = 60) -> str:
    """repr of a bad value for a message, cut short (a value may be huge)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _weights_spec(value: Any, ctx: _Ctx, source: str) -> dict:
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in _WEIGHT_KINDS:
        raise ctx.error("weights", "must be one of {random: SEED}, {npz: FILE}, {onnx: FILE}")
    kind, arg = next(iter(value.items()))
    if kind == "random":
        if not isinstance(arg, int) or isinstance(arg, bool):
            raise ctx.error("weights.random", f"seed must be an integer, got {_short(arg)}")
        return {"random": arg}
    if not isinstance(arg, str):
        raise ctx.error(f"weights.{kind}", "must be a file path")
    base = Path(source).parent if source and not source.startswith("<") else Path(".")
    if source and not source.startswith("<") and not (base / arg).is_file():
        raise ctx.error(f"weights.{kind}", f"no such file: {base / arg}")
    return {kind: str(base / arg)}


class _Builder:
    """Expands spec layers (and macros) into IR layers, inferring shapes as it goes."""

    def __init__(self, input_shape: ir.Shape, ctx: _Ctx):
        self.ctx = ctx
        self.layers: list[Layer] = []
        self.shape = input_shape
        self.input_shape = input_shape
        self.spec_outputs: list[int] = []     # spec layer index -> IR tensor index of its output
        self.names: dict[str, int] = {}
        self.pending_input: int | None = None   # an `input:` the next emitted layer reads
        self.spec_where: list[str] = []           # IR layer -> the spec layer it came from

    # -- field readers ---------------------------------------------------------------------
    def _int(self, spec: dict, key: str, default: int | None = None, minimum: int = 1,
             maximum: int = MAX_INT) -> int:
        value = spec.get(key, default)
        if value is None:
            raise self.ctx.error(key, "is required")
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.ctx.error(key, f"must be an integer >= {minimum}, got {_short(value)}")
        if value > maximum:
            raise self.ctx.error(key, f"{_short(value)} is over the limit of {maximum}")
        return value

    def _out(self, spec: dict) -> int:
        """Output channels (dense: neurons)."""
        return self._int(spec, "out", maximum=MAX_CHANNELS)

    def _pair(self, spec: dict, key: str, default=None) -> ir.Pair:
        """A kernel or stride: one integer >= 1 (square) or [rows, columns]."""
        value = spec.get(key, default)
        if value is None:
            raise self.ctx.error(key, "is required")
        items = value if isinstance(value, list) and len(value) == 2 else [value, value]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in items):
            raise self.ctx.error(key, "must be an integer >= 1 or a list [rows, columns] of two, "
                                      f"got {_short(value)}")
        if max(items) > MAX_DIM:
            raise self.ctx.error(key, f"{_short(value)} is over the limit of {MAX_DIM}")
        return ir.pair(tuple(items))

    def _float(self, spec: dict, key: str, default: float, lo: float) -> float:
        """A float field, stored as the float32 a .tflite would hold."""
        value = spec.get(key, default)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not np.isfinite(value) or value < lo or (key == "beta" and value == 0):
            bound = f"> {lo}" if key == "beta" else f">= {lo}"
            raise self.ctx.error(key, f"must be a finite number {bound}, got {_short(value)}")
        return float(np.float32(value))

    def _act(self, spec: dict, default: str) -> str:
        act = spec.get("act", default)
        if act is None:
            act = "none"
        if act not in ir.ACTIVATIONS:
            raise self.ctx.error("act", f"must be one of {list(ir.ACTIVATIONS)}, got {_short(act)}")
        return act

    def _padding(self, spec: dict, kernel: ir.Pair, stride: ir.Pair,
                 default: str) -> tuple[int, int, int, int]:
        value = spec.get("padding", default)
        h, w, _ = self.shape
        if value == "same":
            top, bottom = same_padding(h, kernel[0], stride[0])
            left, right = same_padding(w, kernel[1], stride[1])
            return (top, left, bottom, right)
        if value == "valid":
            return (0, 0, 0, 0)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < min(kernel):
            return (value, value, value, value)
        raise self.ctx.error("padding", "must be 'same', 'valid' or an integer in [0, kernel), "
                                        f"got {_short(value)}")

    # -- layer emitters --------------------------------------------------------------------
    def _emit(self, op: str, out_c: int, kernel: ir.Pair = (1, 1), stride: ir.Pair = (1, 1),
              pad=(0, 0, 0, 0), act: str = "none", skip: int | None = None, name: str = "",
              out_hw: ir.Pair | None = None) -> int:
        h, w, c = self.shape
        kernel, stride = ir.pair(kernel), ir.pair(stride)
        if out_hw is not None:          # upsampling: the size is the op's own
            out = (*out_hw, out_c)
        elif op in ir.WINDOW_OPS:
            oh = conv_out(h, kernel[0], stride[0], pad[0], pad[2])
            ow = conv_out(w, kernel[1], stride[1], pad[1], pad[3])
            if oh < 1 or ow < 1:
                raise self.ctx.error("kernel", f"kernel {kernel[0]}x{kernel[1]} does not fit "
                                               f"the {h}x{w} input")
            out = (oh, ow, out_c)
        elif op == ir.GLOBAL_AVGPOOL:
            out = (1, 1, c)
        elif op == ir.DENSE:
            out = (1, 1, out_c)
        elif op == ir.CONCAT:
            out = (h, w, c + self._tensor_shape(skip)[2])
        elif op == ir.SLICE:
            out = (h, w, out_c)
        else:  # add, mul
            out = (h, w, c)
        source, self.pending_input = self.pending_input, None
        layer = Layer(op=op, in_shape=self.shape, out_shape=out, kernel=kernel, stride=stride,
                      pad=tuple(pad), act=act, skip=skip,
                      input=source if source != len(self.layers) else None,
                      name=name or f"{op}_{len(self.layers)}")
        self.layers.append(layer)
        self.spec_where.append(self.ctx.where)
        if len(self.layers) > MAX_LAYERS:
            raise self.ctx.error("", f"the spec expands to more than {MAX_LAYERS} layers")
        self.shape = out
        return len(self.layers)      # tensor index of this layer's output

    def _window(self, op: str, spec: dict, out_c: int, default_pad: str, act: str) -> int:
        kernel = self._pair(spec, "kernel")
        stride = self._pair(spec, "stride", list(kernel) if op in (ir.MAX_POOL, ir.AVG_POOL)
                            else 1)
        pad = self._padding(spec, kernel, stride, default_pad)
        return self._emit(op, out_c, kernel, stride, pad, act, name=spec.get("name", ""))

    def add_spec_layer(self, index: int, spec: Any) -> None:
        if not isinstance(spec, dict):
            raise self.ctx.error("", f"must be a mapping with an 'op', got {_short(spec)}")
        op = spec.get("op")
        if op not in _FIELDS:
            raise self.ctx.error("op", f"unknown op {_short(op)} (supported: {', '.join(_FIELDS)})")
        for key in spec:
            if key not in _FIELDS[op] | _COMMON:
                raise self.ctx.error(_key(key), f"unknown field for op {op} "
                                                f"(allowed: {', '.join(sorted(_FIELDS[op]))})")
        if "input" in spec:             # a branch: read an earlier tensor instead of the last
            self.pending_input = self._ref(spec, "input")
            self.shape = self._tensor_shape(self.pending_input)
        c = self.shape[2]
        if op == "conv2d":
            out = self._window(ir.CONV, spec, self._out(spec), "same", self._act(spec, "none"))
        elif op == "pointwise":
            spec = {**spec, "kernel": 1}
            out = self._window(ir.CONV, spec, self._out(spec), "valid", self._act(spec, "none"))
        elif op == "depthwise_conv2d":
            if self._int(spec, "out", c) != c:
                raise self.ctx.error("out", f"a depthwise conv keeps the channels: must be {c}")
            out = self._window(ir.DEPTHWISE, spec, c, "same", self._act(spec, "none"))
        elif op in ("max_pool", "avg_pool"):
            out = self._window(op, spec, c, "valid", "none")
            if spec.get("count_pad", False) not in (True, False):
                raise self.ctx.error("count_pad", "must be true (padding taps count, as the "
                                                  "zero point) or false")
            self.layers[-1].count_pad = bool(spec.get("count_pad")) and any(self.layers[-1].pad)
        elif op == "mul":
            out = self._mul(spec)
        elif op == "transpose_conv":
            out = self._transpose_conv(spec)
        elif op == "resize_nearest":
            out = self._resize(spec)
        elif op == "slice":
            begin, n = self._int(spec, "begin", 0, minimum=0), self._int(spec, "out")
            if begin + n > c:
                raise self.ctx.error("out", f"channels [{begin}, {begin + n}) of {c}")
            out = self._emit(ir.SLICE, n, name=spec.get("name", ""))
            self.layers[-1].begin = begin
        elif op == "global_avgpool":
            out = self._emit(ir.GLOBAL_AVGPOOL, c, name=spec.get("name", ""))
        elif op == "dense":
            out = self._emit(ir.DENSE, self._out(spec), act=self._act(spec, "none"),
                             name=spec.get("name", ""))
        elif op == "add":
            out = self._add(spec)
        elif op == "concat":
            out = self._concat(spec)
        elif op in ir.PIXEL_OPS:
            out = self._emit(op, c, name=spec.get("name", ""))
            if op == ir.SOFTMAX:
                self.layers[-1].beta = self._float(spec, "beta", 1.0, lo=0.0)
            elif op == ir.LEAKY_RELU:
                self.layers[-1].alpha = self._float(spec, "alpha", 0.2, lo=0.0)
            elif op == ir.PRELU:
                slopes = spec.get("slopes", "channel")
                if slopes not in ("channel", "pixel"):
                    raise self.ctx.error("slopes", f"must be channel (one slope per channel) or "
                                                   f"pixel (one per element), got {_short(slopes)}")
                self.layers[-1].slope_per_pixel = slopes == "pixel"
        else:
            out = self._inverted_residual(spec)
        self.spec_outputs.append(out)
        if "name" in spec:
            self.names[str(spec["name"])] = out

    def _ref(self, spec: dict, key: str) -> int:
        """The tensor an earlier spec layer (index or name) made, or 0 for 'input'."""
        ref = spec.get(key)
        if ref == "input":
            return 0
        if isinstance(ref, str) and ref in self.names:
            return self.names[ref]
        if isinstance(ref, int) and not isinstance(ref, bool) and 0 <= ref < len(self.spec_outputs):
            return self.spec_outputs[ref]
        raise self.ctx.error(key, "must be 'input', the index of an earlier layer or the "
                                  f"name of an earlier layer, got {_short(ref)}")

    def _current(self) -> int:
        """The tensor the next layer reads."""
        return len(self.layers) if self.pending_input is None else self.pending_input

    def _add(self, spec: dict) -> int:
        skip = self._ref(spec, "from")
        skip_shape = self._tensor_shape(skip)
        if skip_shape != self.shape:
            raise self.ctx.error("from", f"shape {list(skip_shape)} of the added tensor differs "
                                         f"from the current shape {list(self.shape)}")
        if skip == self._current():
            raise self.ctx.error("from", "adds the current tensor to itself")
        return self._emit(ir.ADD, self.shape[2], act=self._act(spec, "none"), skip=skip,
                          name=spec.get("name", ""))

    def _mul(self, spec: dict) -> int:
        """The current tensor times `from`'s: a tensor of its shape, or 1 x 1 x C."""
        skip = self._ref(spec, "from")
        skip_shape = self._tensor_shape(skip)
        if skip_shape not in (self.shape, (1, 1, self.shape[2])):
            raise self.ctx.error("from", f"shape {list(skip_shape)} is neither the current "
                                         f"shape {list(self.shape)} nor [1, 1, {self.shape[2]}]")
        if skip == self._current():
            raise self.ctx.error("from", "multiplies the current tensor by itself")
        return self._emit(ir.MUL, self.shape[2], act=self._act(spec, "none"), skip=skip,
                          name=spec.get("name", ""))

    def _transpose_conv(self, spec: dict) -> int:
        """TFLite's TRANSPOSE_CONV: 'same' gives H s x W s, 'valid' (H - 1) s + max(k, s)."""
        kernel, stride = self._pair(spec, "kernel"), self._pair(spec, "stride", 2)
        padding = spec.get("padding", "same")
        if padding not in ("same", "valid"):
            raise self.ctx.error("padding", f"must be 'same' or 'valid', got {_short(padding)}")
        same = padding == "same"
        out_hw = tuple(n * s if same else (n - 1) * s + max(k, s)
                       for n, k, s in zip(self.shape[:2], kernel, stride))
        if max(out_hw) > MAX_DIM:
            raise self.ctx.error("stride", f"the {out_hw[0]}x{out_hw[1]} output is over the "
                                           f"limit of {MAX_DIM}")
        top, left = (transposed_padding(n, k, s, same)
                     for n, k, s in zip(out_hw, kernel, stride))
        bottom, right = ((n - 1) * s + k - p - o for n, k, s, p, o in
                         zip(self.shape[:2], kernel, stride, (top, left), out_hw))
        return self._emit(ir.TRANSPOSE_CONV, self._out(spec), kernel, stride,
                          (top, left, bottom, right), self._act(spec, "none"),
                          name=spec.get("name", ""), out_hw=out_hw)

    def _resize(self, spec: dict) -> int:
        """Nearest-neighbour resize to `size` [H, W], or by an integer `scale` (default 2)."""
        if "size" in spec and "scale" in spec:
            raise self.ctx.error("size", "give either size or scale")
        if "size" in spec:
            out_hw = self._pair(spec, "size")
        else:
            scale = self._pair(spec, "scale", 2)
            out_hw = (self.shape[0] * scale[0], self.shape[1] * scale[1])
        if max(out_hw) > MAX_DIM:
            raise self.ctx.error("scale", f"the {out_hw[0]}x{out_hw[1]} output is over the "
                                          f"limit of {MAX_DIM}")
        flags = {}
        for key in ("align_corners", "half_pixel"):
            if spec.get(key, False) not in (True, False):
                raise self.ctx.error(key, f"must be true or false, got {_short(spec[key])}")
            flags[key] = bool(spec.get(key, False))
        out = self._emit(ir.RESIZE_NEAREST, self.shape[2], name=spec.get("name", ""),
                         out_hw=out_hw)
        self.layers[-1].align_corners = flags["align_corners"]
        self.layers[-1].half_pixel = flags["half_pixel"]
        return out

    def _squeeze_excite(self, squeeze: int, name: str) -> int:
        # MobileNetV3 gates with a hard sigmoid, EfficientNet with a sigmoid: the gate here is
        # TFLite's LOGISTIC (the int8 ops of a hard sigmoid are a constant ADD and MUL)
        """x * logistic(1x1(relu(1x1(global_avgpool(x))))): the gate of MobileNetV3 and
        EfficientNet, per channel."""
        x, c = self._current(), self.shape[2]
        self._emit(ir.GLOBAL_AVGPOOL, c, name=f"{name}.squeeze")
        self._emit(ir.CONV, squeeze, act="relu", name=f"{name}.reduce")
        self._emit(ir.CONV, c, name=f"{name}.expand")
        gate = self._emit(ir.LOGISTIC, c, name=f"{name}.gate")
        self.pending_input, self.shape = x, self._tensor_shape(x)
        return self._emit(ir.MUL, c, skip=gate, name=f"{name}.excite")

    def _concat(self, spec: dict) -> int:
        """CONCATENATION along channels: the current tensor's channels, then `from`'s."""
        skip = self._ref(spec, "from")
        skip_shape = self._tensor_shape(skip)
        if skip_shape[:2] != self.shape[:2]:
            raise self.ctx.error("from", f"shape {list(skip_shape)} of the concatenated tensor "
                                         f"differs in height or width from the current shape "
                                         f"{list(self.shape)}")
        return self._emit(ir.CONCAT, self.shape[2] + skip_shape[2], skip=skip,
                          name=spec.get("name", ""))

    def _tensor_shape(self, t: int) -> ir.Shape:
        return self.layers[t - 1].out_shape if t else self.input_shape

    def _inverted_residual(self, spec: dict) -> int:
        """MobileNetV2 block: [1x1 expand relu6] -> kxk depthwise relu6 -> 1x1 project (+ skip)."""
        out_c = self._out(spec)
        expand = self._int(spec, "expand", 1)
        kernel = self._pair(spec, "kernel", 3)
        stride = self._pair(spec, "stride", 1)
        repeat = self._int(spec, "repeat", 1, maximum=MAX_REPEAT)
        act = spec.get("act", "relu6")
        if act not in ir.ACTIVATIONS + (ir.HARD_SWISH,):
            raise self.ctx.error("act", f"must be one of none, relu, relu6, hard_swish, got "
                                        f"{act!r}")
        se = self._int(spec, "se", 0, minimum=0)
        residual = spec.get("residual", "auto")
        if residual not in ("auto", True, False):
            raise self.ctx.error("residual", f"must be auto, true or false, got {_short(residual)}")
        base = spec.get("name", f"ir{len(self.spec_outputs)}")
        out = len(self.layers)
        for r in range(repeat):
            s = stride if r == 0 else (1, 1)
            block_in = self._current()
            cin = self.shape[2]
            can_add = s == (1, 1) and cin == out_c
            if residual is True and not can_add:
                raise self.ctx.error("residual", f"needs stride 1 and in == out channels "
                                                 f"(got stride {list(s)}, {cin} -> {out_c})")
            name = f"{base}.{r}" if repeat > 1 else base
            fused = "none" if act == ir.HARD_SWISH else act
            hidden = self._int(spec, "expanded") if "expanded" in spec else cin * expand
            if hidden != cin:
                self._emit(ir.CONV, hidden, 1, 1, (0, 0, 0, 0), fused, name=f"{name}.expand")
                if act == ir.HARD_SWISH:
                    self._emit(ir.HARD_SWISH, self.shape[2], name=f"{name}.expand.hswish")
            h, w, _ = self.shape
            top, bottom = same_padding(h, kernel[0], s[0])
            left, right = same_padding(w, kernel[1], s[1])
            self._emit(ir.DEPTHWISE, self.shape[2], kernel, s, (top, left, bottom, right), fused,
                       name=f"{name}.dw")
            if act == ir.HARD_SWISH:
                self._emit(ir.HARD_SWISH, self.shape[2], name=f"{name}.dw.hswish")
            if se:
                self._squeeze_excite(se, f"{name}.se")
            out = self._emit(ir.CONV, out_c, 1, 1, (0, 0, 0, 0), "none", name=f"{name}.project")
            if can_add and residual in ("auto", True):
                out = self._emit(ir.ADD, out_c, skip=block_in, name=f"{name}.add")
        return out

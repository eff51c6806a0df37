"""Hand-built .tflite files, written with the flatbuffers schema directly (not msf-pio's exporter),
so the importer is tested against files laid out the way other writers lay them out: shuffled
tensor order, operator codes in the deprecated field only, float edges with QUANTIZE/DEQUANTIZE,
MEAN instead of AVERAGE_POOL_2D, a RESHAPE with a shape tensor, an explicit PAD."""
from __future__ import annotations

import flatbuffers
import numpy as np
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as fb

OP = fb.BuiltinOperator
OPT = fb.BuiltinOptions
TT = fb.TensorType


class TfliteBuilder:
    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.tensors: list[fb.TensorT] = []
        self.buffers: list[fb.BufferT] = [fb.BufferT()]
        self.codes: list[int] = []
        self.deprecated_only: set[int] = set()
        self.operators: list[fb.OperatorT] = []

    def tensor(self, name, shape, dtype=TT.INT8, scale=None, zero_point=None, axis=0,
               data=None) -> int:
        t = fb.TensorT()
        t.name, t.shape, t.type, t.buffer = name, list(shape), dtype, 0
        if scale is not None:
            q = fb.QuantizationParametersT()
            q.scale = [float(s) for s in np.atleast_1d(scale)]
            zp = np.zeros(len(q.scale), int) if zero_point is None else np.atleast_1d(zero_point)
            q.zeroPoint = [int(z) for z in zp]
            q.quantizedDimension = axis
            t.quantization = q
        if data is not None:
            b = fb.BufferT()
            b.data = np.ascontiguousarray(data).tobytes()
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        self.tensors.append(t)
        return len(self.tensors) - 1

    def activation(self, name, shape, scale, zero_point) -> int:
        return self.tensor(name, shape, TT.INT8, np.float32(scale), zero_point)

    def op(self, code, inputs, outputs, options_type=OPT.NONE, options=None) -> None:
        if code not in self.codes:
            self.codes.append(code)
        o = fb.OperatorT()
        o.opcodeIndex = self.codes.index(code)
        o.inputs, o.outputs = list(inputs), list(outputs)
        o.builtinOptionsType, o.builtinOptions = options_type, options
        self.operators.append(o)

    def finish(self, inputs, outputs, shuffle: bool = True) -> bytes:
        """The file; tensors are renumbered in a random order when `shuffle`."""
        n = len(self.tensors)
        order = self.rng.permutation(n) if shuffle else np.arange(n)   # new index -> old
        new = {int(old): i for i, old in enumerate(order)}
        sub = fb.SubGraphT()
        sub.tensors = [self.tensors[int(old)] for old in order]
        for o in self.operators:
            o.inputs = [new[t] if t >= 0 else -1 for t in o.inputs]
            o.outputs = [new[t] for t in o.outputs]
        sub.operators = self.operators
        sub.inputs, sub.outputs = [new[t] for t in inputs], [new[t] for t in outputs]
        model = fb.ModelT()
        model.version, model.subgraphs, model.buffers = 3, [sub], self.buffers
        model.operatorCodes = []
        for code in self.codes:
            oc = fb.OperatorCodeT()
            oc.deprecatedBuiltinCode, oc.version = min(code, 127), 1
            oc.builtinCode = 0 if code in self.deprecated_only else code   # old writers: 0
            model.operatorCodes.append(oc)
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())

    # -- layers with random int8 parameters -----------------------------------------------------
    def weights(self, name, shape, axis, per_channel=True):
        w = self.rng.integers(-127, 128, shape).astype(np.int8)
        n = shape[axis] if per_channel else 1
        scales = np.float32(self.rng.uniform(0.002, 0.02, n))
        return self.tensor(f"{name}/w", shape, TT.INT8, scales, np.zeros(n, int), axis, w), scales

    def bias(self, name, n, std):
        b = self.rng.integers(-std, std, n).astype("<i4")
        return self.tensor(f"{name}/b", (n,), TT.INT32, np.ones(n, np.float32), None, 0, b)

    def out_scale(self, s_in, scales, fan_in):
        """An output scale that keeps a layer's int8 outputs mostly unsaturated."""
        return np.float32(s_in * float(np.median(scales)) * np.sqrt(fan_in) * 74 * 74 / 50)


def _strides(stride):
    """(strideH, strideW) of one int or a pair."""
    return tuple(stride) if isinstance(stride, (tuple, list)) else (stride, stride)


def conv_options(padding, stride, act, depthwise=False, dilation=1):
    o = fb.DepthwiseConv2DOptionsT() if depthwise else fb.Conv2DOptionsT()
    o.padding, o.fusedActivationFunction = padding, act
    o.strideH, o.strideW = _strides(stride)
    o.dilationHFactor = o.dilationWFactor = dilation
    if depthwise:
        o.depthMultiplier = 1
    return o


def pool_options(padding, stride, kh, kw, act=fb.ActivationFunctionType.NONE):
    o = fb.Pool2DOptionsT()
    o.padding, o.filterHeight, o.filterWidth, o.fusedActivationFunction = padding, kh, kw, act
    o.strideH, o.strideW = _strides(stride)
    return o


def foreign_net(seed: int = 0, shuffle: bool = True) -> bytes:
    """float input -> QUANTIZE -> PAD -> CONV 3x3/2 VALID (per-tensor filter, RELU6) ->
    DEPTHWISE 3x3 SAME (RELU) -> CONV 1x1 (no bias) -> ADD(skip first) -> MAX_POOL 2x2 ->
    MEAN over (2, 1) keep_dims -> RESHAPE [1, 8] -> FULLY_CONNECTED (per channel) -> DEQUANTIZE."""
    b = TfliteBuilder(seed)
    b.deprecated_only = {OP.CONV_2D, OP.ADD, OP.QUANTIZE}
    A = fb.ActivationFunctionType
    s_x = np.float32(1 / 64)
    x_f = b.tensor("image", (1, 12, 12, 3), TT.FLOAT32)
    x = b.activation("image_int8", (1, 12, 12, 3), s_x, -3)
    b.op(OP.QUANTIZE, [x_f], [x])
    paddings = b.tensor("paddings", (4, 2), TT.INT32,
                        data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]], "<i4"))
    xp = b.activation("image_padded", (1, 14, 14, 3), s_x, -3)
    b.op(OP.PAD, [x, paddings], [xp], OPT.PadOptions, fb.PadOptionsT())
    w, sw = b.weights("stem", (8, 3, 3, 3), 0, per_channel=False)
    s1 = b.out_scale(s_x, sw, 27)
    c1 = b.activation("stem/relu6", (1, 6, 6, 8), s1, -128)
    b.op(OP.CONV_2D, [xp, w, b.bias("stem", 8, 3000)], [c1], OPT.Conv2DOptions,
         conv_options(fb.Padding.VALID, 2, A.RELU6))
    w, sw = b.weights("dw", (1, 3, 3, 8), 3)
    s2 = b.out_scale(s1, sw, 9)
    d1 = b.activation("dw/relu", (1, 6, 6, 8), s2, -128)
    b.op(OP.DEPTHWISE_CONV_2D, [c1, w, b.bias("dw", 8, 2000)], [d1],
         OPT.DepthwiseConv2DOptions, conv_options(fb.Padding.SAME, 1, A.RELU, depthwise=True))
    w, sw = b.weights("project", (8, 1, 1, 8), 0)
    s3 = b.out_scale(s2, sw, 8)
    p1 = b.activation("project", (1, 6, 6, 8), s3, 7)
    b.op(OP.CONV_2D, [d1, w, -1], [p1], OPT.Conv2DOptions,
         conv_options(fb.Padding.VALID, 1, A.NONE))
    s4 = np.float32(max(s1, s3) * 1.3)
    a1 = b.activation("add", (1, 6, 6, 8), s4, -20)
    add = fb.AddOptionsT()
    b.op(OP.ADD, [c1, p1], [a1], OPT.AddOptions, add)
    m1 = b.activation("maxpool", (1, 3, 3, 8), s4, -20)
    b.op(OP.MAX_POOL_2D, [a1], [m1], OPT.Pool2DOptions, pool_options(fb.Padding.VALID, 2, 2, 2))
    axes = b.tensor("axes", (2,), TT.INT32, data=np.array([2, 1], "<i4"))
    s5 = np.float32(s4 / 3.7)
    g = b.activation("mean", (1, 1, 1, 8), s5, 11)
    reducer = fb.ReducerOptionsT()
    reducer.keepDims = True
    b.op(OP.MEAN, [m1, axes], [g], OPT.ReducerOptions, reducer)
    shape = b.tensor("flat_shape", (2,), TT.INT32, data=np.array([1, 8], "<i4"))
    flat = b.activation("flat", (1, 8), s5, 11)
    b.op(OP.RESHAPE, [g, shape], [flat], OPT.ReshapeOptions, fb.ReshapeOptionsT())
    w, sw = b.weights("fc", (5, 8), 0)
    logits = b.activation("logits", (1, 5), b.out_scale(s5, sw, 8), 3)
    fc = fb.FullyConnectedOptionsT()
    b.op(OP.FULLY_CONNECTED, [flat, w, b.bias("fc", 5, 2000)], [logits],
         OPT.FullyConnectedOptions, fc)
    y = b.tensor("scores", (1, 5), TT.FLOAT32)
    b.op(OP.DEQUANTIZE, [logits], [y])
    return b.finish([x_f], [y], shuffle)


def rect_net(seed: int = 0, shuffle: bool = True) -> bytes:
    """Rectangular windows on every window op: int8 (1, 13, 9, 3) -> CONV 3x1 SAME stride (2, 1)
    (RELU) -> DEPTHWISE 1x3 SAME stride (1, 2) -> CONV 2x3 VALID stride (1, 2) -> MAX_POOL 3x2
    VALID stride (2, 1) -> AVERAGE_POOL 1x2 SAME."""
    b = TfliteBuilder(seed)
    A, SAME, VALID = fb.ActivationFunctionType, fb.Padding.SAME, fb.Padding.VALID
    s_x = np.float32(1 / 40)
    x = b.activation("x", (1, 13, 9, 3), s_x, -7)
    w, sw = b.weights("stem", (8, 3, 1, 3), 0)
    s1 = b.out_scale(s_x, sw, 9)
    c1 = b.activation("stem", (1, 7, 9, 8), s1, -128)
    b.op(OP.CONV_2D, [x, w, b.bias("stem", 8, 2000)], [c1], OPT.Conv2DOptions,
         conv_options(SAME, (2, 1), A.RELU))
    w, sw = b.weights("dw", (1, 1, 3, 8), 3)
    s2 = b.out_scale(s1, sw, 3)
    d1 = b.activation("dw", (1, 7, 5, 8), s2, 4)
    b.op(OP.DEPTHWISE_CONV_2D, [c1, w, b.bias("dw", 8, 1500)], [d1],
         OPT.DepthwiseConv2DOptions, conv_options(SAME, (1, 2), A.NONE, depthwise=True))
    w, sw = b.weights("conv", (6, 2, 3, 8), 0)
    s3 = b.out_scale(s2, sw, 48)
    c2 = b.activation("conv", (1, 6, 2, 6), s3, -9)
    b.op(OP.CONV_2D, [d1, w, b.bias("conv", 6, 4000)], [c2], OPT.Conv2DOptions,
         conv_options(VALID, (1, 2), A.NONE))
    m1 = b.activation("maxpool", (1, 2, 1, 6), s3, -9)
    b.op(OP.MAX_POOL_2D, [c2], [m1], OPT.Pool2DOptions, pool_options(VALID, (2, 1), 3, 2))
    y = b.activation("avgpool", (1, 2, 1, 6), s3, -9)
    b.op(OP.AVERAGE_POOL_2D, [m1], [y], OPT.Pool2DOptions, pool_options(SAME, 1, 1, 2))
    return b.finish([x], [y], shuffle)


def activation_net(seed: int = 0, shuffle: bool = True) -> bytes:
    """int8 input -> PAD 1 -> CONV 3x3 SAME (pad folded: 2 on each side) -> HARD_SWISH ->
    DEPTHWISE 3x3 SAME -> LEAKY_RELU(0.15) -> CONV 1x1 -> LOGISTIC -> MEAN -> RESHAPE [1, 6] ->
    FULLY_CONNECTED -> SOFTMAX(beta 0.8) on (1, 5)."""
    b = TfliteBuilder(seed)
    A = fb.ActivationFunctionType
    s_x = np.float32(1 / 50)
    x = b.activation("image", (1, 9, 9, 3), s_x, 5)
    paddings = b.tensor("paddings", (4, 2), TT.INT32,
                        data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]], "<i4"))
    xp = b.activation("padded", (1, 11, 11, 3), s_x, 5)
    b.op(OP.PAD, [x, paddings], [xp], OPT.PadOptions, fb.PadOptionsT())
    w, sw = b.weights("stem", (6, 3, 3, 3), 0)
    s1 = b.out_scale(s_x, sw, 27)
    c1 = b.activation("stem", (1, 6, 6, 6), s1, 10)
    b.op(OP.CONV_2D, [xp, w, b.bias("stem", 6, 3000)], [c1], OPT.Conv2DOptions,
         conv_options(fb.Padding.SAME, 2, A.NONE))
    h1 = b.activation("hswish", (1, 6, 6, 6), np.float32(s1 * 0.7), -60)
    b.op(OP.HARD_SWISH, [c1], [h1])
    w, sw = b.weights("dw", (1, 3, 3, 6), 3)
    s2 = b.out_scale(s1 * 0.7, sw, 9)
    d1 = b.activation("dw", (1, 6, 6, 6), s2, -3)
    b.op(OP.DEPTHWISE_CONV_2D, [h1, w, b.bias("dw", 6, 2000)], [d1],
         OPT.DepthwiseConv2DOptions, conv_options(fb.Padding.SAME, 1, A.NONE, depthwise=True))
    leaky = fb.LeakyReluOptionsT()
    leaky.alpha = 0.15
    l1 = b.activation("leaky", (1, 6, 6, 6), np.float32(s2 * 0.6), -70)
    b.op(OP.LEAKY_RELU, [d1], [l1], OPT.LeakyReluOptions, leaky)
    w, sw = b.weights("project", (6, 1, 1, 6), 0)
    s3 = np.float32(b.out_scale(s2 * 0.6, sw, 6) / 8)
    p1 = b.activation("project", (1, 6, 6, 6), s3, 0)
    b.op(OP.CONV_2D, [l1, w, -1], [p1], OPT.Conv2DOptions,
         conv_options(fb.Padding.VALID, 1, A.NONE))
    g1 = b.activation("sigmoid", (1, 6, 6, 6), np.float32(1 / 256), -128)
    b.op(OP.LOGISTIC, [p1], [g1])
    axes = b.tensor("axes", (2,), TT.INT32, data=np.array([1, 2], "<i4"))
    s4 = np.float32(1 / 300)
    m1 = b.activation("mean", (1, 1, 1, 6), s4, -100)
    reducer = fb.ReducerOptionsT()
    reducer.keepDims = True
    b.op(OP.MEAN, [g1, axes], [m1], OPT.ReducerOptions, reducer)
    shape = b.tensor("flat_shape", (2,), TT.INT32, data=np.array([1, 6], "<i4"))
    flat = b.activation("flat", (1, 6), s4, -100)
    b.op(OP.RESHAPE, [m1, shape], [flat], OPT.ReshapeOptions, fb.ReshapeOptionsT())
    w, sw = b.weights("fc", (5, 6), 0, per_channel=False)
    logits = b.activation("logits", (1, 5), np.float32(b.out_scale(s4, sw, 6) / 4), 3)
    bias = b.tensor("fc/b", (5,), TT.INT32, np.float32(s4 * sw), None, 0,
                    b.rng.integers(-3000, 3000, 5).astype("<i4"))     # TFLM checks its scale
    b.op(OP.FULLY_CONNECTED, [flat, w, bias], [logits], OPT.FullyConnectedOptions,
         fb.FullyConnectedOptionsT())
    softmax = fb.SoftmaxOptionsT()
    softmax.beta = 0.8
    probs = b.activation("probs", (1, 5), np.float32(1 / 256), -128)
    b.op(OP.SOFTMAX, [logits], [probs], OPT.SoftmaxOptions, softmax)
    return b.finish([x], [probs], shuffle)


def _strided_slice_args(b: TfliteBuilder, name: str, begin, end) -> list[int]:
    """STRIDED_SLICE's begin, end and strides tensors (stride 1)."""
    return [b.tensor(f"{name}/{k}", (4,), TT.INT32, data=np.array(v, "<i4"))
            for k, v in (("begin", begin), ("end", end), ("strides", [1, 1, 1, 1]))]


def _ring(b: TfliteBuilder, name: str, x: int, rows: int, state_rows: int, width: int,
          channels: int, scale, zero_point, initial: list, update=None) -> int:
    """A Keras `Stream` ring buffer as microWakeWord's converter writes it: VAR_HANDLE,
    READ_VARIABLE, CONCATENATION over time (state first), STRIDED_SLICE of the last rows ->
    ASSIGN_VARIABLE; returns the concatenation. The variable's initial value (random) is
    appended to `initial` for the CALL_ONCE subgraph. `update`: the rows [begin, end) stored
    instead of the last ones."""
    handle = b.tensor(f"{name}/states", (), TT.RESOURCE)
    options = fb.VarHandleOptionsT()
    options.sharedName = f"{name}/states"
    b.op(OP.VAR_HANDLE, [], [handle], OPT.VarHandleOptions, options)
    shape = (1, state_rows, width, channels)
    value = b.activation(f"{name}/read", shape, scale, zero_point)
    b.op(OP.READ_VARIABLE, [handle], [value])
    joined = b.activation(f"{name}/concat", (1, state_rows + rows, width, channels), scale,
                          zero_point)
    concat = fb.ConcatenationOptionsT()
    concat.axis = 1
    b.op(OP.CONCATENATION, [value, x], [joined], OPT.ConcatenationOptions, concat)
    kept = b.activation(f"{name}/kept", shape, scale, zero_point)
    sl = fb.StridedSliceOptionsT()
    bounds = ([0, -state_rows, 0, 0], [0, 0, 0, channels])
    if update is None:
        sl.beginMask, sl.endMask = 13, 15         # as the converter writes a [:, -n:] slice
    else:
        bounds = ([0, update[0], 0, 0], [1, update[1], width, channels])
    b.op(OP.STRIDED_SLICE, [joined, *_strided_slice_args(b, name, *bounds)],
         [kept], OPT.StridedSliceOptions, sl)
    b.op(OP.ASSIGN_VARIABLE, [handle, kept], [])
    initial.append((options.sharedName, shape, scale, zero_point,
                    b.rng.integers(-128, 128, shape).astype(np.int8)))
    return joined


def with_initial_state(data: bytes, initial: list) -> bytes:
    """A one-subgraph file with a CALL_ONCE of subgraph 1, which this adds: it assigns every
    state variable its initial value (VAR_HANDLE, ASSIGN_VARIABLE of a constant)."""
    import flatbuffers
    model = fb.ModelT.InitFromObj(fb.Model.GetRootAs(data, 0))
    codes = {max(c.builtinCode, c.deprecatedBuiltinCode): i
             for i, c in enumerate(model.operatorCodes)}
    sub = fb.SubGraphT()
    sub.tensors, sub.operators, sub.name = [], [], "NoOp"
    for name, shape, scale, zero_point, values in initial:
        handle = fb.TensorT()
        handle.name, handle.shape, handle.type, handle.buffer = f"{name}1", [], TT.RESOURCE, 0
        const = fb.TensorT()
        const.name, const.shape, const.type = f"{name}/initial", list(shape), TT.INT8
        q = fb.QuantizationParametersT()
        q.scale, q.zeroPoint = [float(scale)], [int(zero_point)]
        const.quantization = q
        buf = fb.BufferT()
        buf.data = values.tobytes()
        model.buffers.append(buf)
        const.buffer = len(model.buffers) - 1
        sub.tensors += [handle, const]
        var = fb.OperatorT()
        var.opcodeIndex, var.inputs, var.outputs = codes[OP.VAR_HANDLE], [], [len(sub.tensors) - 2]
        options = fb.VarHandleOptionsT()
        options.sharedName = name
        var.builtinOptionsType, var.builtinOptions = OPT.VarHandleOptions, options
        assign = fb.OperatorT()
        assign.opcodeIndex = codes[OP.ASSIGN_VARIABLE]
        assign.inputs, assign.outputs = [len(sub.tensors) - 2, len(sub.tensors) - 1], []
        sub.operators += [var, assign]
    model.subgraphs.append(sub)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def streaming_net(seed: int = 0, frame_rows: int = 2, features: int = 6,
                  state_update=None) -> bytes:
    """A microWakeWord-style streaming model: frames (1, T, F) int8 -> RESHAPE (1, T, 1, F) ->
    ring a (3 rows) -> CONV 4x1 VALID RELU -> ring b (2 rows) -> STRIDED_SLICE of rows 1.. (a
    crop over time) -> DEPTHWISE 3x1 VALID -> RESHAPE (1, 8) -> FULLY_CONNECTED 4; a CALL_ONCE
    subgraph sets both rings' initial values. `state_update` shifts ring b's stored rows
    (begin, end) from the last ones (a file msf-pio refuses)."""
    b = TfliteBuilder(seed)
    A = fb.ActivationFunctionType
    s_x, T, F = np.float32(0.05), frame_rows, features
    x = b.activation("frames", (1, T, F), s_x, -3)
    b.op(OP.CALL_ONCE, [], [], OPT.CallOnceOptions, _call_once())
    initial: list = []
    x4 = b.activation("frames/4d", (1, T, 1, F), s_x, -3)
    b.op(OP.RESHAPE, [x, b.tensor("frames/shape", (4,), TT.INT32,
                                  data=np.array([1, T, 1, F], "<i4"))], [x4])
    ring_a = _ring(b, "stream", x4, T, 3, 1, F, s_x, -3, initial)
    w, sw = b.weights("conv", (8, 4, 1, F), 0)
    s1 = b.out_scale(s_x, sw, 4 * F)
    c1 = b.activation("conv/relu", (1, T, 1, 8), s1, -128)
    b.op(OP.CONV_2D, [ring_a, w, b.bias("conv", 8, 2000)], [c1], OPT.Conv2DOptions,
         conv_options(fb.Padding.VALID, 1, A.RELU))
    ring_b = _ring(b, "stream_1", c1, T, 2, 1, 8, s1, -128, initial, state_update)
    crop = b.activation("keep", (1, T + 1, 1, 8), s1, -128)
    b.op(OP.STRIDED_SLICE, [ring_b, *_strided_slice_args(b, "keep", [0, 1, 0, 0],
                                                         [1, T + 2, 1, 8])],
         [crop], OPT.StridedSliceOptions, fb.StridedSliceOptionsT())
    w, sw = b.weights("dw", (1, T + 1, 1, 8), 3)
    s2 = b.out_scale(s1, sw, T + 1)
    d = b.activation("dw", (1, 1, 1, 8), s2, 5)
    b.op(OP.DEPTHWISE_CONV_2D, [crop, w, b.bias("dw", 8, 2000)], [d], OPT.DepthwiseConv2DOptions,
         conv_options(fb.Padding.VALID, 1, A.NONE, depthwise=True))
    flat = b.activation("flatten", (1, 8), s2, 5)
    b.op(OP.RESHAPE, [d, b.tensor("flatten/shape", (2,), TT.INT32,
                                  data=np.array([1, 8], "<i4"))], [flat])
    w, sw = b.weights("dense", (4, 8), 0, per_channel=False)
    y = b.activation("logits", (1, 4), b.out_scale(s2, sw, 8), 0)
    bias = b.tensor("dense/b", (4,), TT.INT32, np.float32(s2 * sw), None, 0,
                    b.rng.integers(-2000, 2000, 4).astype("<i4"))     # TFLM checks its scale
    b.op(OP.FULLY_CONNECTED, [flat, w, bias], [y], OPT.FullyConnectedOptions,
         fb.FullyConnectedOptionsT())
    return with_initial_state(b.finish([x], [y], shuffle=False), initial)


def _call_once() -> fb.CallOnceOptionsT:
    options = fb.CallOnceOptionsT()
    options.initSubgraphIndex = 1
    return options

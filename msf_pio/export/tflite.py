"""Write a quantized IR model as a .tflite flatbuffer without TensorFlow.

Uses the schema module that the `tflite-micro` wheel ships and the `flatbuffers` package, so the
TFLM reference kernels can check the numpy reference (and hence the generated C) bit-exactly.
Activations are 4-D NHWC (N = 1); a dense output is 2-D (1, out); RESHAPE bridges the two.
Explicit padding that is neither TFLite SAME nor VALID becomes a PAD op (the zero point; -128
before a max pool) followed by a VALID op. Global average pooling is AVERAGE_POOL_2D when it keeps
its input's quantization and MEAN when it requantizes (`Layer.requantize`). SOFTMAX, HARD_SWISH,
LEAKY_RELU, PRELU and LOGISTIC are single ops on the tensor as it is (after a dense layer: (1, n));
MUL takes its 1 x 1 x C operand as TFLite broadcasts it; a slice is a STRIDED_SLICE of the
channels; an average pool counting its padding taps is a PAD (the zero point) and a VALID pool;
TRANSPOSE_CONV takes its padding as SAME or VALID of a conv from its output back to its input;
RESIZE_NEAREST_NEIGHBOR its output size and TFLite's two flags;
PRELU's alpha is an int8 constant (1, 1, C) (or (C,) on a (1, n) tensor, or (H, W, C) with a
slope per element), quantized per tensor. A stream layer is a state variable as microWakeWord's
files hold one (VAR_HANDLE, READ_VARIABLE, CONCATENATION over the rows, STRIDED_SLICE of the
last rows, ASSIGN_VARIABLE), its initial value assigned by a second subgraph that a CALL_ONCE
first in the main one runs; a crop is a STRIDED_SLICE of rows.
"""
from __future__ import annotations

from pathlib import Path

import flatbuffers
import numpy as np
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as fb

from .. import numerics as nm
from ..model import ir
from ..model.ir import Layer, Model, QParams, same_padding, transposed_padding

_ACTIVATION = {"none": fb.ActivationFunctionType.NONE, "relu": fb.ActivationFunctionType.RELU,
               "relu6": fb.ActivationFunctionType.RELU6,
               "relu_0_to_1": fb.ActivationFunctionType.RELU_N1_TO_1,   # see _activation
               "relu_n1_to_1": fb.ActivationFunctionType.RELU_N1_TO_1}
_BUFFER_ALIGN = 16      # constant data aligned for MCU loaders (int32 bias, SIMD weight loads)


def export_tflite(model: Model, path: str | Path) -> None:
    """Write `model` (quantized, with weights) to `path` as a .tflite file."""
    Path(path).write_bytes(tflite_bytes(model))


def tflite_bytes(model: Model) -> bytes:
    """The .tflite flatbuffer of a quantized model, as bytes (TFLM reads these directly)."""
    if not model.quantized:
        raise ValueError(f"model {model.name}: export needs a quantized model (materialize it)")
    graph = _Graph(model)
    for index in range(model.n_layers):
        graph.layer(index)
    return graph.finish()


def _activation(index: int, layer: Layer) -> int:
    """The fused activation TFLite clamps the layer's int8 output with as the IR does. TFLite
    has no fused clip to [0, 1]: its RELU_N1_TO_1 clamps at the output's -1 and 1, the same
    int8 bounds when the output's zero point is -128 (real 0 is the least value, as a
    calibrated [0, 1] output has it)."""
    if layer.act == "relu_0_to_1" and layer.q_out is not None and layer.q_out.zero_point != -128:
        raise ValueError(f"layer {index} ({layer.name}): TFLite cannot express relu_0_to_1 on an "
                         f"output with zero point {layer.q_out.zero_point} (needs -128)")
    return _ACTIVATION[layer.act]


class _AlignedBuffer(fb.BufferT):
    """A constant buffer whose bytes start on a _BUFFER_ALIGN boundary in the file."""

    def Pack(self, builder):
        data = None
        if self.data is not None:
            raw = bytes(self.data)
            builder.StartVector(1, len(raw), _BUFFER_ALIGN)
            builder.head -= len(raw)
            builder.Bytes[builder.head:builder.head + len(raw)] = raw
            data = builder.EndVector()
        fb.BufferStart(builder)
        if data is not None:
            fb.BufferAddData(builder, data)
        return fb.BufferEnd(builder)


class _Graph:
    """Accumulates tensors, buffers, operator codes and operators of the single subgraph."""

    def __init__(self, model: Model):
        self.model = model
        self.tensors: list[fb.TensorT] = []
        self.buffers: list[fb.BufferT] = [_AlignedBuffer()]     # buffer 0: the empty sentinel
        self.opcodes: dict[int, int] = {}
        self.operators: list[fb.OperatorT] = []
        self.views: dict[tuple[int, int], int] = {}            # (IR tensor, rank) -> tensor
        self.initial: list[tuple[str, Layer]] = []              # state variables: name, layer
        h, w, c = model.input_shape
        self.views[(0, 4)] = self.tensor("input", (1, h, w, c), fb.TensorType.INT8,
                                         _per_tensor(model.q_input))

    # -- tensors --------------------------------------------------------------------------
    def tensor(self, name, shape, dtype, quantization=None, data: np.ndarray | None = None) -> int:
        t = fb.TensorT()
        t.name, t.shape, t.type, t.quantization = name, list(shape), dtype, quantization
        t.buffer = 0
        if data is not None:
            buf = _AlignedBuffer()
            buf.data = np.ascontiguousarray(data).tobytes()
            self.buffers.append(buf)
            t.buffer = len(self.buffers) - 1
        self.tensors.append(t)
        return len(self.tensors) - 1

    def activation(self, t: int, rank: int) -> int:
        """The flatbuffer tensor holding IR tensor t with the given rank (4: NHWC, 2: (1, n))."""
        if (t, rank) not in self.views:
            other = self.views[(t, 6 - rank)]
            h, w, c = self.model.tensor_shape(t)
            shape = (1, h, w, c) if rank == 4 else (1, h * w * c)
            view = self.tensor(f"t{t}_rank{rank}", shape, fb.TensorType.INT8,
                               _per_tensor(self.model.tensor_q(t)))
            new_shape = self.tensor(f"t{t}_shape{rank}", (rank,), fb.TensorType.INT32,
                                    data=np.array(shape, dtype="<i4"))
            options = fb.ReshapeOptionsT()
            options.newShape = list(shape)
            self.op(fb.BuiltinOperator.RESHAPE, [other, new_shape], [view],
                    fb.BuiltinOptions.ReshapeOptions, options)
            self.views[(t, rank)] = view
        return self.views[(t, rank)]

    def output(self, index: int, layer: Layer, rank: int = 4) -> int:
        h, w, c = layer.out_shape
        shape = (1, h, w, c) if rank == 4 else (1, h * w * c)
        out = self.tensor(layer.name or f"layer{index}", shape, fb.TensorType.INT8,
                          _per_tensor(layer.q_out))
        self.views[(index + 1, rank)] = out
        return out

    # -- operators ------------------------------------------------------------------------
    def op(self, code: int, inputs, outputs, options_type=fb.BuiltinOptions.NONE, options=None):
        o = fb.OperatorT()
        o.opcodeIndex = self.opcodes.setdefault(code, len(self.opcodes))
        o.inputs, o.outputs = list(inputs), list(outputs)
        o.builtinOptionsType, o.builtinOptions = options_type, options
        self.operators.append(o)

    def padded_input(self, index: int, layer: Layer) -> tuple[int, int]:
        """(input tensor, TFLite padding) for a window op, inserting a PAD op when needed."""
        src = self.model.input_of(index)
        x = self.activation(src, 4)
        h, w, c = layer.in_shape
        (kh, kw), (sh, sw) = layer.kernel, layer.stride
        same = same_padding(h, kh, sh) + same_padding(w, kw, sw)
        top, left, bottom, right = layer.pad
        if (top, bottom, left, right) == same and not layer.count_pad:
            return x, fb.Padding.SAME
        if not any(layer.pad):
            return x, fb.Padding.VALID
        if layer.op == ir.AVG_POOL and not layer.count_pad:
            raise ValueError(f"layer {index} ({layer.name}): TFLite cannot express avg_pool "
                             f"padding {layer.pad} (neither SAME nor VALID)")
        q = self.model.tensor_q(src)
        out = self.tensor(f"{layer.name}_padded", (1, h + top + bottom, w + left + right, c),
                          fb.TensorType.INT8, _per_tensor(q))
        paddings = self.tensor(f"{layer.name}_paddings", (4, 2), fb.TensorType.INT32,
                               data=np.array([[0, 0], [top, bottom], [left, right], [0, 0]], "<i4"))
        if layer.op == ir.MAX_POOL:        # padding must never win the max
            value = self.tensor(f"{layer.name}_pad_value", (1,), fb.TensorType.INT8,
                                _per_tensor(q), np.array([nm.INT8_MIN], np.int8))
            self.op(fb.BuiltinOperator.PADV2, [x, paddings, value], [out],
                    fb.BuiltinOptions.PadV2Options, fb.PadV2OptionsT())
        else:                              # PAD fills with the zero point: contributes nothing
            self.op(fb.BuiltinOperator.PAD, [x, paddings], [out],
                    fb.BuiltinOptions.PadOptions, fb.PadOptionsT())
        return out, fb.Padding.VALID

    def weights(self, index: int, layer: Layer, dim: int) -> tuple[int, int]:
        """Filter and bias tensors; per-channel along `dim` unless the scales are all equal."""
        wts = layer.weights
        scales = nm.f32(wts.scales).astype(np.float32)
        in_scale = nm.f32(self.model.tensor_q(self.model.input_of(index)).scale)
        per_channel = layer.op != ir.DENSE or np.unique(scales).size > 1
        if not per_channel:
            scales = scales[:1]
        zeros = [0] * scales.size
        filt = self.tensor(f"{layer.name}_weights", wts.w.shape, fb.TensorType.INT8,
                           _quant(scales, zeros, dim), wts.w.astype(np.int8))
        bias_scales = (in_scale * scales.astype(np.float64)).astype(np.float32)
        bias = self.tensor(f"{layer.name}_bias", wts.bias.shape, fb.TensorType.INT32,
                           _quant(bias_scales, zeros, 0), wts.bias.astype("<i4"))
        return filt, bias

    def layer(self, index: int) -> None:
        layer = self.model.layers[index]
        act = _activation(index, layer)
        src = self.model.input_of(index)          # the tensor it reads (a branch: not index)
        if layer.op in (ir.CONV, ir.DEPTHWISE):
            x, padding = self.padded_input(index, layer)
            filt, bias = self.weights(index, layer, 0 if layer.op == ir.CONV else 3)
            if layer.op == ir.CONV:
                code, kind, options = (fb.BuiltinOperator.CONV_2D,
                                       fb.BuiltinOptions.Conv2DOptions, fb.Conv2DOptionsT())
            else:
                code, kind, options = (fb.BuiltinOperator.DEPTHWISE_CONV_2D,
                                       fb.BuiltinOptions.DepthwiseConv2DOptions,
                                       fb.DepthwiseConv2DOptionsT())
                options.depthMultiplier = 1
            options.padding = padding
            options.strideH, options.strideW = layer.stride
            options.fusedActivationFunction = act
            self.op(code, [x, filt, bias], [self.output(index, layer)], kind, options)
        elif layer.op == ir.TRANSPOSE_CONV:
            self.transpose_conv(index, layer)
        elif layer.op == ir.RESIZE_NEAREST:
            size = self.tensor(f"{layer.name}_size", (2,), fb.TensorType.INT32,
                               data=np.array(layer.out_shape[:2], "<i4"))
            options = fb.ResizeNearestNeighborOptionsT()
            options.alignCorners, options.halfPixelCenters = layer.align_corners, layer.half_pixel
            self.op(fb.BuiltinOperator.RESIZE_NEAREST_NEIGHBOR, [self.activation(src, 4), size],
                    [self.output(index, layer)], fb.BuiltinOptions.ResizeNearestNeighborOptions,
                    options)
        elif layer.op == ir.GLOBAL_AVGPOOL and layer.requantize:
            if layer.act != "none":
                raise ValueError(f"layer {index} ({layer.name}): TFLite's MEAN has no fused "
                                 f"activation, got {layer.act}")
            axes = self.tensor(f"{layer.name}_axes", (2,), fb.TensorType.INT32,
                               data=np.array([1, 2], "<i4"))
            options = fb.ReducerOptionsT()
            options.keepDims = True
            self.op(fb.BuiltinOperator.MEAN, [self.activation(src, 4), axes],
                    [self.output(index, layer)], fb.BuiltinOptions.ReducerOptions, options)
        elif layer.op in (ir.MAX_POOL, ir.AVG_POOL, ir.GLOBAL_AVGPOOL):
            if layer.op == ir.GLOBAL_AVGPOOL:
                x, padding = self.activation(src, 4), fb.Padding.VALID
                (kh, kw), stride = layer.in_shape[:2], (1, 1)
            else:
                x, padding = self.padded_input(index, layer)
                (kh, kw), stride = layer.kernel, layer.stride
            options = fb.Pool2DOptionsT()
            options.padding = padding
            options.strideH, options.strideW = stride
            options.filterHeight, options.filterWidth = kh, kw
            options.fusedActivationFunction = act
            code = (fb.BuiltinOperator.MAX_POOL_2D if layer.op == ir.MAX_POOL
                    else fb.BuiltinOperator.AVERAGE_POOL_2D)
            self.op(code, [x], [self.output(index, layer)], fb.BuiltinOptions.Pool2DOptions,
                    options)
        elif layer.op == ir.ADD:
            options = fb.AddOptionsT()
            options.fusedActivationFunction = act
            self.op(fb.BuiltinOperator.ADD,
                    [self.activation(src, 4), self.activation(layer.skip, 4)],
                    [self.output(index, layer)], fb.BuiltinOptions.AddOptions, options)
        elif layer.op == ir.MUL:
            options = fb.MulOptionsT()
            options.fusedActivationFunction = act
            rank = 2 if (src, 4) not in self.views else 4
            self.op(fb.BuiltinOperator.MUL,
                    [self.activation(src, rank), self.activation(layer.skip, rank)],
                    [self.output(index, layer, rank)], fb.BuiltinOptions.MulOptions, options)
        elif layer.op == ir.SLICE:
            h, w, c = layer.in_shape
            ends = {"begin": [0, 0, 0, layer.begin], "end": [1, h, w, layer.begin + layer.cout],
                    "strides": [1, 1, 1, 1]}
            args = [self.tensor(f"{layer.name}_{k}", (4,), fb.TensorType.INT32,
                                data=np.array(v, "<i4")) for k, v in ends.items()]
            self.op(fb.BuiltinOperator.STRIDED_SLICE, [self.activation(src, 4), *args],
                    [self.output(index, layer)], fb.BuiltinOptions.StridedSliceOptions,
                    fb.StridedSliceOptionsT())
        elif layer.op == ir.CROP:
            h, w, c = layer.in_shape
            self.strided_slice(layer.name, self.activation(src, 4), (layer.begin, 0, 0),
                               (layer.begin + layer.out_shape[0], w, c), self.output(index, layer))
        elif layer.op == ir.STREAM:
            self.stream(index, layer, self.activation(src, 4))
        elif layer.op == ir.CONCAT:
            if layer.act != "none":
                raise ValueError(f"layer {index} ({layer.name}): concat has no fused activation")
            options = fb.ConcatenationOptionsT()
            options.axis = 3
            self.op(fb.BuiltinOperator.CONCATENATION,
                    [self.activation(src, 4), self.activation(layer.skip, 4)],
                    [self.output(index, layer)], fb.BuiltinOptions.ConcatenationOptions,
                    options)
        elif layer.op == ir.DENSE:
            filt, bias = self.weights(index, layer, 0)
            options = fb.FullyConnectedOptionsT()
            options.fusedActivationFunction = act
            self.op(fb.BuiltinOperator.FULLY_CONNECTED, [self.activation(src, 2), filt, bias],
                    [self.output(index, layer, rank=2)], fb.BuiltinOptions.FullyConnectedOptions,
                    options)
        elif layer.op in ir.PIXEL_OPS and layer.op != ir.SLICE:
            self.pixel_op(index, layer)
        else:
            raise ValueError(f"layer {index}: unsupported op {layer.op!r}")

    def strided_slice(self, name: str, x: int, begin, end, out: int) -> None:
        """STRIDED_SLICE [begin, end) of H, W, C (stride 1)."""
        args = [self.tensor(f"{name}_{k}", (4,), fb.TensorType.INT32, data=np.array(v, "<i4"))
                for k, v in (("begin", [0, *begin]), ("end", [1, *end]),
                             ("strides", [1, 1, 1, 1]))]
        self.op(fb.BuiltinOperator.STRIDED_SLICE, [x, *args], [out],
                fb.BuiltinOptions.StridedSliceOptions, fb.StridedSliceOptionsT())

    def stream(self, index: int, layer: Layer, x: int) -> None:
        """A state variable: its value then the input's rows, its last rows stored back."""
        name = f"stream{index}/states"
        handle = self.tensor(name, (), fb.TensorType.RESOURCE)
        self.op(fb.BuiltinOperator.VAR_HANDLE, [], [handle], fb.BuiltinOptions.VarHandleOptions,
                _var_handle(name))
        s, (h, w, c) = layer.state_rows, layer.out_shape
        value = self.tensor(f"{name}/read", (1, s, w, c), fb.TensorType.INT8,
                            _per_tensor(layer.q_out))
        self.op(fb.BuiltinOperator.READ_VARIABLE, [handle], [value])
        out = self.output(index, layer)
        options = fb.ConcatenationOptionsT()
        options.axis = 1
        self.op(fb.BuiltinOperator.CONCATENATION, [value, x], [out],
                fb.BuiltinOptions.ConcatenationOptions, options)
        kept = self.tensor(f"{name}/kept", (1, s, w, c), fb.TensorType.INT8,
                           _per_tensor(layer.q_out))
        self.strided_slice(name, out, (h - s, 0, 0), (h, w, c), kept)
        self.op(fb.BuiltinOperator.ASSIGN_VARIABLE, [handle, kept], [])
        self.initial.append((name, layer))

    def initial_state(self) -> fb.SubGraphT:
        """The subgraph CALL_ONCE runs before the first run: each variable's initial value."""
        sub = fb.SubGraphT()
        sub.name, sub.tensors, sub.operators, sub.inputs, sub.outputs = "init", [], [], [], []
        for name, layer in self.initial:
            handle, const = fb.TensorT(), fb.TensorT()
            handle.name, handle.shape, handle.type, handle.buffer = name, [], \
                fb.TensorType.RESOURCE, 0
            buf = _AlignedBuffer()
            buf.data = np.ascontiguousarray(layer.state_init, np.int8).tobytes()
            self.buffers.append(buf)
            const.name, const.shape, const.type = f"{name}/initial", \
                [1, *layer.state_init.shape], fb.TensorType.INT8
            const.quantization, const.buffer = _per_tensor(layer.q_out), len(self.buffers) - 1
            sub.tensors += [handle, const]
            for code, inputs, outputs, kind, options in (
                    (fb.BuiltinOperator.VAR_HANDLE, [], [len(sub.tensors) - 2],
                     fb.BuiltinOptions.VarHandleOptions, _var_handle(name)),
                    (fb.BuiltinOperator.ASSIGN_VARIABLE,
                     [len(sub.tensors) - 2, len(sub.tensors) - 1], [], fb.BuiltinOptions.NONE,
                     None)):
                o = fb.OperatorT()
                o.opcodeIndex = self.opcodes.setdefault(code, len(self.opcodes))
                o.inputs, o.outputs = inputs, outputs
                o.builtinOptionsType, o.builtinOptions = kind, options
                sub.operators.append(o)
        return sub

    def transpose_conv(self, index: int, layer: Layer) -> None:
        """TRANSPOSE_CONV (output shape, OHWI filter, input, bias); its padding is SAME or VALID
        of a conv from the output back to the input, one of which must give the layer's."""
        (oh, ow, oc), (kh, kw), (sh, sw) = layer.out_shape, layer.kernel, layer.stride
        paddings = [p for p, same in ((fb.Padding.SAME, True), (fb.Padding.VALID, False))
                    if (transposed_padding(oh, kh, sh, same),
                        transposed_padding(ow, kw, sw, same)) == layer.pad[:2]]
        if not paddings:
            raise ValueError(f"layer {index} ({layer.name}): TFLite cannot express transpose_conv "
                             f"padding {layer.pad[:2]} (neither SAME nor VALID)")
        filt, bias = self.weights(index, layer, 0)
        shape = self.tensor(f"{layer.name}_output_shape", (4,), fb.TensorType.INT32,
                            data=np.array([1, oh, ow, oc], "<i4"))
        options = fb.TransposeConvOptionsT()
        options.padding, (options.strideH, options.strideW) = paddings[0], (sh, sw)
        options.fusedActivationFunction = _activation(index, layer)
        self.op(fb.BuiltinOperator.TRANSPOSE_CONV,
                [shape, filt, self.activation(self.model.input_of(index), 4), bias],
                [self.output(index, layer)], fb.BuiltinOptions.TransposeConvOptions, options)

    def pixel_op(self, index: int, layer: Layer) -> None:
        """SOFTMAX and the element-wise activations, on the rank the input already has (a
        dense output stays (1, n): no RESHAPE around a classifier's softmax)."""
        if layer.act != "none":
            raise ValueError(f"layer {index} ({layer.name}): {layer.op} has no fused activation")
        src = self.model.input_of(index)
        rank = 2 if (src, 4) not in self.views else 4
        x = self.activation(src, rank)
        out = self.output(index, layer, rank)
        if layer.op == ir.SOFTMAX:
            options = fb.SoftmaxOptionsT()
            options.beta = layer.beta
            self.op(fb.BuiltinOperator.SOFTMAX, [x], [out], fb.BuiltinOptions.SoftmaxOptions,
                    options)
        elif layer.op == ir.LEAKY_RELU:
            options = fb.LeakyReluOptionsT()
            options.alpha = layer.alpha
            self.op(fb.BuiltinOperator.LEAKY_RELU, [x], [out],
                    fb.BuiltinOptions.LeakyReluOptions, options)
        elif layer.op == ir.PRELU:
            wts = layer.weights
            shape = ((layer.cin,) if rank != 4 else tuple(layer.in_shape)
                     if layer.slope_per_pixel else (1, 1, layer.cin))
            alpha = self.tensor(f"{layer.name}_alpha", shape, fb.TensorType.INT8,
                                _quant([wts.scales[0]], [wts.zero_point], 0),
                                wts.w.astype(np.int8))
            self.op(fb.BuiltinOperator.PRELU, [x, alpha], [out])
        else:
            code = {ir.HARD_SWISH: fb.BuiltinOperator.HARD_SWISH,
                    ir.LOGISTIC: fb.BuiltinOperator.LOGISTIC}[layer.op]
            self.op(code, [x], [out])

    def finish(self) -> bytes:
        n = self.model.n_layers
        sub = fb.SubGraphT()
        sub.tensors, sub.operators, sub.name = self.tensors, self.operators, self.model.name
        sub.inputs = [self.views[(0, 4)]]
        sub.outputs = [self.views.get((t, 4), self.views.get((t, 2)))
                       for t in self.model.output_tensors]
        m = fb.ModelT()
        m.version, m.description = 3, f"msf-pio export of {self.model.name}"
        m.subgraphs, m.buffers = [sub], self.buffers
        if self.initial:               # a streaming model: CALL_ONCE of its initial state first
            options = fb.CallOnceOptionsT()
            options.initSubgraphIndex = 1
            self.op(fb.BuiltinOperator.CALL_ONCE, [], [], fb.BuiltinOptions.CallOnceOptions,
                    options)
            sub.operators = [self.operators.pop()] + self.operators
            m.subgraphs.append(self.initial_state())
        m.operatorCodes = [_opcode(code) for code in sorted(self.opcodes, key=self.opcodes.get)]
        builder = flatbuffers.Builder(1024)
        builder.Finish(m.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())


def _opcode(code: int) -> fb.OperatorCodeT:
    """Builtin codes above 127 live only in the newer field; the deprecated one saturates."""
    opcode = fb.OperatorCodeT()
    opcode.builtinCode, opcode.deprecatedBuiltinCode, opcode.version = code, min(code, 127), 1
    return opcode


def _var_handle(name: str) -> fb.VarHandleOptionsT:
    options = fb.VarHandleOptionsT()
    options.sharedName = name
    return options


def _quant(scales, zero_points, dim: int) -> fb.QuantizationParametersT:
    q = fb.QuantizationParametersT()
    q.scale = [float(s) for s in scales]
    q.zeroPoint = [int(z) for z in zero_points]
    q.quantizedDimension = dim
    return q


def _per_tensor(q: QParams) -> fb.QuantizationParametersT:
    return _quant([q.scale], [q.zero_point], 0)

"""The one model IR: a list of layers over HWC int8 tensors.

Tensors are numbered as the paper's graph nodes: tensor 0 is the network input, tensor n+1 the
output of layer n, so layer order is a topological order of the graph. Layer n reads tensor n
unless its `input` names an earlier tensor (a branch: a ResNet shortcut conv reads its stage
input); `add` and `concat` also read a second earlier tensor `skip`. Pixel ops (softmax over
the channels, element-wise activations) read one input pixel per output pixel: windows of
1 x 1, so they fuse like any spatial layer. Cost models, solvers, the code generator and the
numpy reference all read these objects, so a prediction and the code it predicts cannot drift
apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

# Layer kinds. Spatial ops can live inside a fusion block; head ops end one (iteratively).
CONV = "conv2d"
DEPTHWISE = "depthwise_conv2d"
ADD = "add"
CONCAT = "concat"          # CONCATENATION along channels: `input` then `skip`
MAX_POOL = "max_pool"
AVG_POOL = "avg_pool"
GLOBAL_AVGPOOL = "global_avgpool"
DENSE = "dense"
SOFTMAX = "softmax"
HARD_SWISH = "hard_swish"
LEAKY_RELU = "leaky_relu"
LOGISTIC = "logistic"
PRELU = "prelu"
MUL = "mul"                # element-wise product: `skip` the same shape, or 1 x 1 x C (broadcast)
SLICE = "slice"            # channels [begin, begin + C_out) of the input
# A stateful streaming model's ring buffer (a Keras `Stream` layer: READ_VARIABLE, CONCATENATION
# over time, STRIDED_SLICE of the last rows, ASSIGN_VARIABLE): the `state_rows` rows kept from
# the previous run, then the input's rows; the last `state_rows` rows of the output are kept
# for the next run. The output lives in the arena across runs, in the state region
# (Model.state_bytes): the new rows are written after the kept ones, and at the end of the run
# the last rows move to its start.
STREAM = "stream"
CROP = "crop"              # rows [begin, begin + H_out) of the input (STRIDED_SLICE over time)
# Upsampling (an output larger than its input): nearest-neighbour resize, output pixel (r, c)
# the input's (numerics.nearest_index of r, of c); transposed convolution, OHWI weights, input
# pixel i scattered to output rows i * stride - pad_top + ky (TFLite's TRANSPOSE_CONV).
RESIZE_NEAREST = "resize_nearest"
TRANSPOSE_CONV = "transpose_conv"

WINDOW_OPS = (CONV, DEPTHWISE, MAX_POOL, AVG_POOL)   # ops with a kh x kw window and strides
ELEMENTWISE_OPS = (HARD_SWISH, LEAKY_RELU, LOGISTIC, PRELU)  # one output value per input
PIXEL_OPS = (SOFTMAX,) + ELEMENTWISE_OPS + (SLICE,)  # one output pixel per input pixel
BINARY_OPS = (ADD, CONCAT, MUL)                      # read two tensors, pixel by pixel
SPATIAL_OPS = WINDOW_OPS + BINARY_OPS + PIXEL_OPS    # fusable inside a block's tiles
HEAD_OPS = (GLOBAL_AVGPOOL, DENSE)                   # consume a block's output iteratively
WHOLE_OPS = (STREAM, CROP)      # whole tensors moved by rows: single edges, never in a block
# Ops whose output row needs input rows by their own rule (r // 2 for a nearest x2, not
# r * stride - pad; msf_pio/fusion/geometry.input_span): a single-layer edge running its
# whole-tensor kernel, or inside the fusion blocks of the schemes that hold them (line buffer).
UPSAMPLE_OPS = (RESIZE_NEAREST, TRANSPOSE_CONV)
BLOCK_OPS = SPATIAL_OPS + UPSAMPLE_OPS               # what a fusion block may hold
ALL_OPS = SPATIAL_OPS + HEAD_OPS + WHOLE_OPS + UPSAMPLE_OPS
ACTIVATIONS = ("none", "relu", "relu6", "relu_0_to_1", "relu_n1_to_1")   # fused clamps of a layer's output

# Short op names for tables: a layer is shown as op + index (dwconv3); the file's own tensor
# or node names, often hundreds of characters, appear only in JSON.
SHORT_OP = {CONV: "conv", DEPTHWISE: "dwconv", MAX_POOL: "maxpool", AVG_POOL: "avgpool",
            GLOBAL_AVGPOOL: "gavgpool", HARD_SWISH: "hswish", LEAKY_RELU: "lrelu",
            RESIZE_NEAREST: "resize", TRANSPOSE_CONV: "tconv"}


def layer_label(op: str, index: int) -> str:
    """The short name of layer `index` in tables and reports, e.g. conv0, dwconv1, add6."""
    return f"{SHORT_OP.get(op, op)}{index}"


Shape = tuple[int, int, int]   # (H, W, C)
Pair = tuple[int, int]         # (rows, columns): a window's kernel or stride per axis


def pair(value: int | tuple[int, int]) -> Pair:
    """(rows, columns) of a kernel or stride given as one int (square) or a pair."""
    if isinstance(value, (int, np.integer)):
        return int(value), int(value)
    h, w = value
    return int(h), int(w)


@dataclass(frozen=True)
class QParams:
    """Per-tensor asymmetric int8 quantization: real = scale * (q - zero_point)."""
    scale: float
    zero_point: int


# Ops whose int8 output quantization TFLite fixes: probabilities in [0, 1) on 1/256 steps.
UNIT_INTERVAL = QParams(1.0 / 256.0, -128)
FIXED_OUTPUT_Q = {SOFTMAX: UNIT_INTERVAL, LOGISTIC: UNIT_INTERVAL}


@dataclass
class Weights:
    """Quantized parameters of one layer (TFLite layouts).

    conv2d and transpose_conv: int8 (C_out, kh, kw, C_in); depthwise: int8 (1, kh, kw, C);
    dense: int8 (out, in).
    `scales` are the per-output-channel symmetric weight scales, `bias` int32 per channel.
    prelu: the slopes below zero, int8 (C,) with one scale and a `zero_point` (TFLite's alpha
    tensor, per tensor and possibly asymmetric), (C,) or with `slope_per_pixel` (H, W, C); no
    bias (an empty array).
    """
    w: np.ndarray
    bias: np.ndarray
    scales: np.ndarray
    zero_point: int = 0


@dataclass
class Layer:
    op: str
    in_shape: Shape
    out_shape: Shape
    kernel: Pair = (1, 1)                            # (kh, kw); an int is read as square
    stride: Pair = (1, 1)                            # (sh, sw); likewise
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)   # top, left, bottom, right
    act: str = "none"
    skip: int | None = None                          # add, concat: the second tensor read
    input: int | None = None                         # the (first) tensor read; None: the previous
    name: str = ""
    weights: Weights | None = None
    q_out: QParams | None = None                    # quantization of this layer's output tensor
    # global_avgpool only: True rescales the mean to q_out as TFLite's MEAN does (the file's own
    # output scale); False keeps the input's quantization as TFLite's AVERAGE_POOL_2D does.
    requantize: bool = False
    alpha: float = 0.0                               # leaky_relu: slope below zero (float32)
    beta: float = 1.0                                # softmax: exp(beta * x) (float32)
    # prelu: one slope per element (alpha H x W x C, Keras' PReLU without shared axes) instead
    # of one per channel
    slope_per_pixel: bool = False
    begin: int = 0          # slice: the first input channel taken; crop: the first row
    # stream: the rows kept across runs and their values before the first run (int8
    # state_rows x W x C: the file's initial state, which msf_model_reset restores)
    state_rows: int = 0
    state_init: np.ndarray | None = None
    # avg_pool: every window tap counts, the padding ones holding the zero point (a PAD before
    # the pool, or ONNX's count_include_pad), instead of the taps inside the input only
    count_pad: bool = False
    # resize_nearest: TFLite's align_corners and half_pixel_centers (numerics.nearest_index)
    align_corners: bool = False
    half_pixel: bool = False

    def __post_init__(self):
        self.kernel, self.stride = pair(self.kernel), pair(self.stride)

    @property
    def kernel_h(self) -> int:
        return self.kernel[0]

    @property
    def kernel_w(self) -> int:
        return self.kernel[1]

    @property
    def stride_h(self) -> int:
        return self.stride[0]

    @property
    def stride_w(self) -> int:
        return self.stride[1]

    def window(self, axis: int) -> tuple[int, int, int]:
        """(kernel, stride, padding before) along one axis: 0 the rows, 1 the columns."""
        return self.kernel[axis], self.stride[axis], self.pad[axis]

    @property
    def cin(self) -> int:
        return self.in_shape[2]

    @property
    def cout(self) -> int:
        return self.out_shape[2]

    @property
    def pad_top(self) -> int:
        return self.pad[0]

    @property
    def pad_left(self) -> int:
        return self.pad[1]

    @property
    def has_window(self) -> bool:
        return self.op in WINDOW_OPS

    def macs_per_tap(self) -> int:
        """Multiply-accumulates per output element and per kernel tap."""
        if self.op in (CONV, TRANSPOSE_CONV):
            return self.cin
        return 1


@dataclass(frozen=True)
class TensorIO:
    """A graph input or output as the model file has it: its type (int8, uint8 or float32),
    its shape (batch 1, in the file's layout: NHWC, NCHW, or (1, N)) and, for uint8, its own
    quantization. The generated C takes and returns it through the file's own QUANTIZE /
    DEQUANTIZE arithmetic (msf_model_run_io); the IR itself computes in int8 HWC."""
    dtype: str = "int8"
    dims: tuple[int, ...] = ()
    q: QParams | None = None
    channels_first: bool = False            # dims are (1, C, H, W)

    def hwc(self, x):
        """An array of the file's shape as the IR's H, W, C."""
        x = np.asarray(x)
        if self.channels_first:
            return np.moveaxis(x.reshape(self.dims)[0], 0, -1)
        if len(self.dims) == 3:              # (1, T, F): a streaming model's frames, T x 1 x F
            return x.reshape(self.dims[1], 1, self.dims[2])
        return x.reshape(self.dims[1:] if len(self.dims) == 4 else (1, 1, self.dims[-1]))

    def file(self, x):
        """An HWC array of the IR as the file's shape."""
        x = np.asarray(x)
        if self.channels_first:
            return np.moveaxis(x, -1, 0).reshape(self.dims)
        return x.reshape(self.dims)


@dataclass
class Model:
    name: str
    input_shape: Shape
    layers: list[Layer]
    source: str = ""                     # file the model came from (for error messages)
    q_input: QParams | None = None
    weights_spec: dict = field(default_factory=dict)   # how to materialize weights (see weights.py)
    # The output handed to a sink pixel by pixel (the paper's uncounted output, made honest):
    # the arena then holds one output pixel instead of the caller holding the whole tensor.
    stream_output: bool = False
    # The input pulled row by row from a source (a camera): the first edge keeps the input rows
    # it still needs in an arena ring instead of the caller holding the whole tensor.
    stream_input: bool = False
    # Bytes of code the shape-specialised kernels may take (None: the default;
    # fusion/kernel_counts.choose): the generator and the cost model read the same choice.
    code_budget: float | None = None
    # The graph input and output as the file has them (None: int8 H x W x C, as the IR)
    input_io: TensorIO | None = None
    output_io: TensorIO | None = None
    # Several graph outputs (detection heads): the tensors, in the file's order; None: the last
    # layer's alone. Each is read by no layer and lives in the caller's buffer.
    outputs: list[int] | None = None

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def tensor_shape(self, t: int) -> Shape:
        """Shape of tensor t (0 = network input, n+1 = output of layer n)."""
        return self.input_shape if t == 0 else self.layers[t - 1].out_shape

    def tensor_q(self, t: int) -> QParams | None:
        """Quantization of tensor t (inputs of a layer are looked up here, never duplicated)."""
        return self.q_input if t == 0 else self.layers[t - 1].q_out

    def tensor_bytes(self, t: int) -> int:
        h, w, c = self.tensor_shape(t)
        return h * w * c

    @property
    def output_shape(self) -> Shape:
        return self.tensor_shape(self.n_layers)

    @property
    def output_tensors(self) -> list[int]:
        """The graph outputs, in order (the last layer's output among them)."""
        return list(self.outputs) if self.outputs else [self.n_layers]

    def is_output(self, t: int) -> bool:
        return t == self.n_layers or (self.outputs is not None and t in self.outputs)

    def output_bytes(self) -> int:
        """The outputs' bytes, packed one after another in order (msf_model_run's output)."""
        return sum(self.tensor_bytes(t) for t in self.output_tensors)

    def input_of(self, l: int) -> int:
        """The tensor layer l reads first (its `input`, by default the previous layer's output)."""
        t = self.layers[l].input
        return l if t is None else t

    def inputs(self, l: int) -> list[int]:
        """Every tensor layer l reads, its first input first."""
        layer = self.layers[l]
        return [self.input_of(l)] + ([layer.skip] if layer.op in BINARY_OPS else [])

    def readers(self) -> dict[int, list[int]]:
        """Map tensor -> the layers that read it, in order (shared: do not modify it)."""
        return self._topology()[0]

    def last_reader(self) -> dict[int, int]:
        """Map tensor -> the last layer reading it (a cut keeps the tensor alive until then;
        shared: do not modify it)."""
        return self._topology()[1]

    def _topology(self) -> tuple[dict[int, list[int]], dict[int, int]]:
        """readers() and last_reader(), computed once per layer list: the fusion graph asks
        for them for every edge it costs."""
        key = (id(self.layers), len(self.layers))
        cached = self.__dict__.get("_topology_cache")
        if cached is None or cached[0] != key:
            out: dict[int, list[int]] = {}
            for l in range(self.n_layers):
                for t in self.inputs(l):
                    out.setdefault(t, []).append(l)
            cached = (key, out, {t: ls[-1] for t, ls in out.items()})
            self.__dict__["_topology_cache"] = cached
        return cached[1], cached[2]

    def state_layers(self) -> list[int]:
        """The stream layers, whose state lives in the arena across runs, in order."""
        return [l for l, layer in enumerate(self.layers) if layer.op == STREAM]

    def state_bytes(self) -> int:
        """Arena bytes of the state region (one, never reused, alive across runs): every stream
        layer's output, its kept rows then the run's new ones. Every edge of a plan holds it
        (the cost model asks once per edge, so it is kept per layer list)."""
        key = (id(self.layers), len(self.layers))
        cached = self.__dict__.get("_state_cache")
        if cached is None or cached[0] != key:
            cached = (key, sum(self.tensor_bytes(l + 1) for l in self.state_layers()))
            self.__dict__["_state_cache"] = cached
        return cached[1]

    def in_state(self, t: int) -> bool:
        """Tensor t lives in the state region (a stream layer's output)."""
        return t > 0 and self.layers[t - 1].op == STREAM

    def broadcasts(self, l: int) -> bool:
        """Layer l multiplies its input by a 1 x 1 x C vector (a squeeze-and-excite gate): the
        vector is read whole, at pixel (0, 0), for every output pixel."""
        layer = self.layers[l]
        return layer.op == MUL and self.tensor_shape(layer.skip)[:2] == (1, 1) \
            and layer.out_shape[:2] != (1, 1)

    def residuals(self) -> dict[int, int]:
        """Map add-layer index -> skip tensor index."""
        return {i: l.skip for i, l in enumerate(self.layers) if l.op == ADD}

    @property
    def quantized(self) -> bool:
        return self.q_input is not None and all(l.q_out is not None for l in self.layers)

    def with_layers(self, layers: list[Layer]) -> "Model":
        return replace(self, layers=layers)


def graph_error(model: Model) -> tuple[int, str] | None:
    """The first layer that breaks the graph rules, as (layer index, message), or None: every
    layer reads earlier tensors only, a head layer (global pooling, dense) reads the previous
    layer's output, and every tensor but the network output is read (one graph output)."""
    for l, layer in enumerate(model.layers):
        for t in model.inputs(l):
            if t is None or not 0 <= t <= l:
                return l, f"reads tensor {t}, which is not made before it"
        if layer.op in HEAD_OPS and model.input_of(l) != l:
            return l, f"{layer.op} must read the previous layer's output"
        if layer.op == STREAM and model.is_output(l + 1):
            return l, "a stream layer's output is a graph output (it lives in the state region)"
        if layer.op == STREAM and (layer.out_shape != (layer.in_shape[0] + layer.state_rows,
                                                       *layer.in_shape[1:])
                                   or not 0 < layer.state_rows <= layer.out_shape[0]):
            return l, (f"stream of {layer.state_rows} state rows: {list(layer.in_shape)} -> "
                       f"{list(layer.out_shape)} is not the state's rows then the input's")
        if layer.op == CROP and (layer.out_shape[1:] != layer.in_shape[1:] or not
                                 0 <= layer.begin <= layer.in_shape[0] - layer.out_shape[0]):
            return l, (f"crop from row {layer.begin}: {list(layer.in_shape)} -> "
                       f"{list(layer.out_shape)} is not a range of the input's rows")
        if layer.op == MUL and model.tensor_shape(layer.skip) not in (
                layer.out_shape, (1, 1, layer.cout)):
            return l, (f"multiplies by a tensor of shape {list(model.tensor_shape(layer.skip))}:"
                       f" only {list(layer.out_shape)} or [1, 1, {layer.cout}] (per channel)")
    readers = model.readers()
    for t in range(model.n_layers):
        if t not in readers and not (t > 0 and model.is_output(t)):
            where = "the input" if t == 0 else f"the output of layer {t - 1}"
            return max(t - 1, 0), f"{where} is read by no layer (a second graph output)"
        if t in readers and model.is_output(t):
            return readers[t][0], (f"reads graph output {model.output_tensors.index(t)} (the "
                                   f"output of layer {t - 1}): an output is read by no layer")
    return None


def conv_out(size: int, kernel: int, stride: int, pad_before: int, pad_after: int) -> int:
    """Output length of a window op along one axis."""
    return (size + pad_before + pad_after - kernel) // stride + 1


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TFLite SAME padding along one axis: (before, after); the extra pixel goes after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def transposed_padding(out_len: int, kernel: int, stride: int, same: bool) -> int:
    """The padding before a TFLite TRANSPOSE_CONV's output along one axis: that of a SAME (or
    VALID) conv from the output back to the input, the extra row of an odd total after."""
    conv_len = (out_len + stride - 1) // stride if same else (out_len + stride - kernel) // stride
    return max((conv_len - 1) * stride + kernel - out_len, 0) // 2

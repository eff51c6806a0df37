"""What msf-pio accepts of a model, checked once for every command (solve, generate, run, the
build) before any work or allocation: sizes beyond any microcontroller, and the runtime's own
field widths. A model over a limit is refused in one line naming the field and the limit."""
from __future__ import annotations

from ..errors import MsfError

MAX_DIM = 8192                  # height or width of a tensor
MAX_CHANNELS = 65536            # channels of a tensor (dense: neurons)
MAX_TENSOR_BYTES = 1 << 26      # 64 MiB: more than any microcontroller's RAM, external included
MAX_WEIGHT_BYTES = 1 << 26      # 64 MiB of weights: more than any microcontroller's flash
MAX_LAYERS = 4096               # layers after macros (inverted_residual, repeat) expand
MAX_REPEAT = 1024               # a spec's `repeat`
MAX_INT = (1 << 31) - 1         # any integer field: the C runtime's int32_t
MAX_KERNEL = 11                 # kernel columns: a pointer each (library/src/kernels/window.h)
MAX_WINDOW_FIELD = 255          # kernel rows and strides: uint8 fields of msf_layer_t


def check_model(model, where_of=lambda i: f"layers[{i}]") -> None:
    """Raise MsfError if `model` (an ir.Model) is over a limit; `where_of(i)` names layer i in
    the model's own file (a spec index, an operator index)."""
    from . import ir
    source = model.source or model.name
    if model.n_layers > MAX_LAYERS:
        raise MsfError(f"{model.n_layers} layers, more than the {MAX_LAYERS} msf-pio plans",
                       source=source, where="layers")
    _check_shape(model.input_shape, source, "input.shape")
    weight_bytes = 0
    for i, layer in enumerate(model.layers):
        where = where_of(i)
        _check_shape(layer.out_shape, source, where)
        if layer.has_window or layer.op == ir.TRANSPOSE_CONV:
            if layer.kernel_w > MAX_KERNEL:
                raise MsfError(f"kernel width {layer.kernel_w} is larger than the runtime's "
                               f"{MAX_KERNEL}", source=source, where=f"{where}.kernel")
            for field, value in (("kernel", layer.kernel_h), ("stride", max(layer.stride))):
                if value > MAX_WINDOW_FIELD:
                    raise MsfError(f"{field} {value} is larger than the runtime's "
                                   f"{MAX_WINDOW_FIELD}", source=source, where=f"{where}.{field}")
        weight_bytes += layer_weight_count(layer)
        if weight_bytes > MAX_WEIGHT_BYTES:
            raise MsfError(f"the weights up to here need {weight_bytes} B, more than "
                           f"{MAX_WEIGHT_BYTES} B (64 MiB) of flash", source=source, where=where)


def layer_weight_count(layer) -> int:
    """Weight bytes a layer's shapes imply (the int8 kernel; biases are small beside it)."""
    from . import ir
    cin, cout = layer.in_shape[2], layer.out_shape[2]
    if layer.op in (ir.CONV, ir.TRANSPOSE_CONV):
        return cout * layer.kernel_h * layer.kernel_w * cin
    if layer.op == ir.DEPTHWISE:
        return layer.kernel_h * layer.kernel_w * cout
    if layer.op == ir.DENSE:
        h, w, c = layer.in_shape
        return h * w * c * cout
    return 0


def _check_shape(shape, source: str, where: str) -> None:
    h, w, c = shape
    if max(h, w) > MAX_DIM:
        raise MsfError(f"a {h}x{w} tensor: height and width are limited to {MAX_DIM}",
                       source=source, where=where)
    if c > MAX_CHANNELS:
        raise MsfError(f"{c} channels: more than the {MAX_CHANNELS} msf-pio supports",
                       source=source, where=where)
    if h * w * c > MAX_TENSOR_BYTES:
        raise MsfError(f"a {h}x{w}x{c} tensor ({h * w * c} B) is larger than "
                       f"{MAX_TENSOR_BYTES} B (64 MiB), beyond any microcontroller",
                       source=source, where=where)

"""The msf-CNN paper's analytic cost model, as its published Table 1 was computed.

A compatibility model (rules: shared reference/paper_cost_model.md): it reproduces the paper's
numbers to the byte, including its quirks (the first layer of a block is charged a cache, 1x1
convs too, the network input and output are not counted). The `exact` model predicts our code.
Beyond the paper's chains: adds, pixel ops (softmax, activations: no MACs), global pooling and
dense layers are single-layer edges (the
paper keeps no skip tensor alive), only runs of conv/depthwise/pool layers fuse, and asymmetric
padding splits the paper's 2p into top + bottom.
"""
from __future__ import annotations

from ..errors import MsfError
from ..model import ir
from ..model.ir import Layer, Model
from .edge import Edge

NAME = "paper"


def _check(model: Model) -> None:
    for i, layer in enumerate(model.layers):
        if layer.op not in ir.ALL_OPS:
            raise MsfError(f"unsupported op '{layer.op}'", source=model.source or model.name,
                           where=f"layers[{i}]")
        if layer.op in ir.WHOLE_OPS:
            raise MsfError("the paper cost model has no state or row crops of a streaming "
                           "model (use the exact cost model)", source=model.source or model.name,
                           where=f"layers[{i}]")
        if layer.op in ir.UPSAMPLE_OPS:
            raise MsfError(f"the paper cost model has no upsampling ('{layer.name or layer.op}'"
                           f"; use the exact cost model)", source=model.source or model.name,
                           where=f"layers[{i}]")
        # the paper's model is a chain with residual adds: it has no cost for a branch
        if model.input_of(i) != i or layer.op == ir.CONCAT:
            raise MsfError(f"the paper cost model takes chains with residual adds only, "
                           f"'{layer.name or layer.op}' branches (use the exact cost model)",
                           source=model.source or model.name, where=f"layers[{i}]")


def _mpe(layer: Layer) -> int:
    """MACs per output element: c_in*kh*kw for a dense conv, kh*kw for depthwise and pooling."""
    if layer.op == ir.GLOBAL_AVGPOOL:
        return layer.in_shape[0] * layer.in_shape[1]
    if layer.op == ir.DENSE:
        h, w, c = layer.in_shape
        return h * w * c
    if layer.op in ir.BINARY_OPS or layer.op in ir.PIXEL_OPS:
        return 0
    return layer.kernel_h * layer.kernel_w * layer.macs_per_tap()


def layer_macs(layer: Layer) -> int:
    h, w, c = layer.out_shape
    return h * w * c * _mpe(layer)


def _pads(layer: Layer) -> tuple[int, int]:
    """Top and bottom padding (the paper's p, p for its symmetric chains)."""
    return layer.pad[0], layer.pad[2]


def unfused_macs(model: Model) -> int:
    return sum(layer_macs(l) for l in model.layers)


def tile_backprop(layers: list[Layer], axis: int = 0) -> tuple[int, int]:
    """Input tile height T0 and tile stride S0 of a block producing one output row (axis 0;
    axis 1: the width and stride of one output column's input tile)."""
    t, s = 1, 1
    for layer in reversed(layers):
        t = (t - 1) * layer.stride[axis] + layer.kernel[axis]
        s *= layer.stride[axis]
    return t, s


def _block_cache(layers: list[Layer], t0: int, s0: int) -> int:
    """Sum of kw*t*c_in over all layers (kw cached columns of t rows), t following the block's
    last tile row (with padding)."""
    h0 = layers[0].in_shape[0]
    i_last = ((h0 - t0) // s0) * s0
    t, cum, total = t0, 1, 0
    for layer in layers:
        total += layer.kernel_w * t * layer.cin
        ih = i_last // cum           # the last tile's first row in this layer's input
        cum *= layer.stride_h
        (pt, pb), hq = _pads(layer), layer.in_shape[0]
        t = (t - layer.kernel_h + pt * (ih == 0) + pb * (ih + t >= hq)) // layer.stride_h + 1
    return total


def _block_macs(layers: list[Layer], t0: int, s0: int) -> int:
    """H-cache MACs: columns cached, rows recomputed for every tile row."""
    t, s, macs = t0, s0, 0
    for layer in layers:
        hq, _, _ = layer.in_shape
        (pt, pb), k = _pads(layer), layer.kernel_h
        rows = (hq + pt + pb - t) // s + 1
        w_out = layer.out_shape[1]
        oh = (t - k) // layer.stride_h + 1
        macs += rows * w_out * oh * layer.cout * _mpe(layer)
        t, s = oh, s // layer.stride_h
    return macs


def edges(model: Model) -> list[Edge]:
    """Every single-layer edge and every feasible fusion block of the model."""
    _check(model)
    n = model.n_layers
    io = [model.tensor_bytes(t) for t in range(n + 1)]
    io[0] = 0          # the network input is not counted (it may be streamed)
    io[n] = 0          # nor is the network output
    out: list[Edge] = []
    for first in range(n):
        for last in range(first, n):
            block = model.layers[first:last + 1]
            if first == last:
                out.append(Edge(first, last, io[first] + io[last + 1], layer_macs(block[0])))
                continue
            if block[-1].op not in ir.WINDOW_OPS:
                break          # only runs of conv/depthwise/pool layers fuse
            t0, s0 = tile_backprop(block)
            h, w, _ = block[0].in_shape
            if t0 > h or tile_backprop(block, 1)[0] > w:
                continue
            ram = io[first] + io[last + 1] + _block_cache(block, t0, s0)
            out.append(Edge(first, last, ram, _block_macs(block, t0, s0), "h-cache",
                            {"tile": t0, "tile_stride": s0}))
    return out

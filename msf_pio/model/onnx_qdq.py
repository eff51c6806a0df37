"""QuantizeLinear/DequantizeLinear (QDQ) pairs of an int8 ONNX model, read as quantization facts.

A QDQ model is a float graph with Q -> DQ pairs on its activations and DQ on its int8/int32
initializers (onnxruntime `quantize_static(..., quant_format=QuantFormat.QDQ)`). Removing the
pairs leaves the float graph the importer already understands, plus per tensor the int8
parameters TFLite would store: that is all the IR needs, no calibration.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import NodeProto, helper

from ..errors import MsfError
from .ir import QParams


@dataclass
class QConst:
    """An integer constant behind a DequantizeLinear: real = scale * (q - zero_point)."""
    q: np.ndarray
    scale: np.ndarray          # one value, or one per index of `axis`
    zero_point: np.ndarray
    axis: int

    def _along_axis(self, a: np.ndarray) -> np.ndarray:
        if a.size == 1:
            return a.reshape(())
        shape = [1] * self.q.ndim
        shape[self.axis] = -1
        return a.reshape(shape)

    def dequantized(self) -> np.ndarray:
        zp = self._along_axis(self.zero_point.astype(np.float64))
        return (self.q.astype(np.float64) - zp) * self._along_axis(self.scale.astype(np.float64))


@dataclass
class QdqView:
    """The float graph under the Q/DQ pairs, and what the pairs said."""
    nodes: list[NodeProto]           # every other node, in graph order
    alias: dict[str, str]            # DQ output -> the float tensor its Q/DQ pair quantized
    qparams: dict[str, QParams]      # float activation tensor -> its int8 quantization
    consts: dict[str, QConst]        # DQ output -> the integer initializer it dequantizes
    quantized: bool                  # the file had any Q/DQ node


def strip_qdq(nodes: list[NodeProto], initializers: dict[str, np.ndarray], source: str) -> QdqView:
    """Split Q/DQ nodes from compute nodes; activation pairs become aliases with QParams."""
    view = QdqView([], {}, {}, {}, False)
    quantize_ops: dict[str, tuple[str, QParams]] = {}     # Q output -> (Q input, params)
    for node in nodes:
        if node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            view.nodes.append(node)
            continue
        view.quantized = True
        where = f"node '{node.name or node.output[0]}' ({node.op_type})"
        scale = _operand(node, 1, initializers, source, where)
        if node.op_type == "DequantizeLinear" and node.input[0] in initializers:
            q = initializers[node.input[0]]
            zp = (_operand(node, 2, initializers, source, where) if len(node.input) > 2
                  and node.input[2] else np.zeros(1, q.dtype))
            if q.dtype not in (np.int8, np.int32):
                raise MsfError(f"constants must be int8 (weights) or int32 (bias), got {q.dtype}",
                               source=source, where=where)
            axis = next((helper.get_attribute_value(a) for a in node.attribute
                         if a.name == "axis"), 1)
            if not isinstance(axis, int):
                raise MsfError("attribute axis must be an int", source=source, where=where)
            _check_scales(scale, source, where)
            view.consts[node.output[0]] = QConst(q, scale.ravel(), zp.ravel(),
                                                 axis % max(q.ndim, 1))
            continue
        zp = _operand(node, 2, initializers, source, where)
        if node.op_type == "QuantizeLinear":
            qp = _activation_qparams(scale, zp, source, where)
            quantize_ops[node.output[0]] = (node.input[0], qp)
        elif node.input[0] in quantize_ops:
            src, qp = quantize_ops[node.input[0]]
            if _activation_qparams(scale, zp, source, where) != qp:
                raise MsfError("dequantizes with other parameters than its QuantizeLinear",
                               source=source, where=where)
            if view.qparams.setdefault(src, qp) != qp:
                raise MsfError(f"'{src}' is quantized twice with different parameters",
                               source=source, where=where)
            view.alias[node.output[0]] = src
        else:
            raise MsfError("input is neither an initializer nor a QuantizeLinear output",
                           source=source, where=where)
    return view


def _operand(node: NodeProto, i: int, initializers: dict[str, np.ndarray], source: str,
             where: str) -> np.ndarray:
    if len(node.input) <= i or not node.input[i]:
        raise MsfError("needs an explicit scale and int8 zero point (uint8 is the ONNX default)",
                       source=source, where=where)
    if node.input[i] not in initializers:
        raise MsfError(f"'{node.input[i]}' must be an initializer", source=source, where=where)
    return initializers[node.input[i]]


def _activation_qparams(scale: np.ndarray, zp: np.ndarray, source: str, where: str) -> QParams:
    _check_scales(scale, source, where)
    if scale.size != 1 or zp.size != 1:
        raise MsfError("activations must be quantized per tensor", source=source, where=where)
    if zp.dtype != np.int8:
        raise MsfError(f"activations must be int8, got {zp.dtype} (quantize with "
                       "activation_type=QuantType.QInt8)", source=source, where=where)
    return QParams(float(scale.reshape(())), int(zp.reshape(())))


def _check_scales(scale: np.ndarray, source: str, where: str) -> None:
    if (not np.issubdtype(scale.dtype, np.floating) or scale.size == 0
            or not np.all(np.isfinite(scale) & (scale > 0))):
        raise MsfError("scales must be positive finite floats", source=source, where=where)

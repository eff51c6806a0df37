"""The format-neutral graph an importer reads a model file into, and `lowering.py` turns into
the IR: tensors by name, each with its declared shape, type and (int8) quantization, and nodes
in graph order, each a neutral op with the file's operands and attributes.

An importer keeps its format: it decodes the file, checks what only its format can get wrong
(an attribute's spelling, an option out of range), puts weights into the IR's layouts (conv
OHWI, dense (out, in)), and names nodes and tensors as its users know them (`where`,
`label`, `roles`). Everything else, from folding a PAD into the window after it to the
quantization TFLite fixes for a pool, is the lowering's, once for every format.

Shapes and axes stay in the file's layout (`Graph.layout`, NHWC or NCHW): the lowering reads
them through it, so an error names a shape as the user's file has it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .ir import QParams

# Graph kinds: how the file's numbers are meant (the lowering's rules differ only where the
# formats' semantics do).
INT8 = "int8"      # integer arithmetic as written (TFLite): every scale kept, nothing rounded anew
QDQ = "qdq"        # a float graph annotated with int8 quantization (ONNX Q/DQ pairs)
FLOAT = "float"    # float weights and activations, quantized post-training by msf-pio

NHWC, NCHW = "NHWC", "NCHW"


@dataclass
class Const:
    """A constant operand: `values` as stored (float reals, or integers with their
    quantization: real = scale * (q - zero_point), per tensor or along `axis`)."""
    values: np.ndarray
    scale: np.ndarray | None = None      # None: float values (or int32 bias in sum units)
    zero_point: np.ndarray | None = None
    axis: int = 0

    @property
    def quantized(self) -> bool:
        return self.scale is not None

    def real(self) -> np.ndarray:
        """The real values (float64)."""
        v = self.values.astype(np.float64)
        if not self.quantized:
            return v

        def along(a: np.ndarray) -> np.ndarray:
            a = a.astype(np.float64)
            if a.size == 1:
                return a.reshape(())
            shape = [1] * v.ndim
            shape[self.axis] = -1
            return a.reshape(shape)

        zp = self.zero_point if self.zero_point is not None else np.zeros(1)
        return (v - along(zp)) * along(self.scale)

    def transposed(self, axes: tuple[int, ...]) -> "Const":
        """The same constant with its dimensions permuted (its quantized axis follows)."""
        return Const(np.ascontiguousarray(self.values.transpose(axes)), self.scale,
                     self.zero_point, list(axes).index(self.axis) if self.values.ndim else 0)


@dataclass
class Tensor:
    name: str
    shape: tuple[int, ...] | None          # as declared, in the file's layout (None: unknown)
    dtype: str = "FLOAT32"                 # FLOAT32, INT8, UINT8, INT32, ... (TFLite's names)
    q: QParams | None = None               # per-tensor int8 quantization of an activation
    const: Const | None = None             # a constant's value
    label: str = ""                        # how errors name it ("tensor 4 'x'"); "" for none
    title: str = ""                        # the file's own name for it, if not `name`
    declared_q: tuple = ()                 # (scales, zero points) as the file has them
    problem: str = ""                      # why its constant value cannot be read, if so


@dataclass
class Node:
    op: str                                # a neutral op (see lowering.Lowering.handlers)
    inputs: list[str]                      # tensor names; "" for an absent optional operand
    outputs: list[str]
    attrs: dict = field(default_factory=dict)
    where: str = ""                        # how errors name it ("operator 3 (CONV_2D)")
    op_name: str = ""                      # the file's op ("CONV_2D", "Conv")
    name: str = ""                         # the IR layer's name if it becomes one
    roles: tuple[str, ...] = ()            # the file's names of the inputs ("filter", "slope")
    ref: str = ""                          # how a message about another node names it

    def role(self, i: int, default: str) -> str:
        return self.roles[i] if i < len(self.roles) and self.roles[i] else default


@dataclass
class Graph:
    source: str                            # the file (every error names it)
    name: str
    kind: str                              # INT8, QDQ or FLOAT
    layout: str                            # NHWC or NCHW: the axes of 4-D shapes
    tensors: dict[str, Tensor]
    nodes: list[Node]
    inputs: list[str]
    outputs: list[str]
    op_names: dict[str, str] = field(default_factory=dict)   # neutral op -> the file's name
    # How the format's users say a few things the lowering refuses (key -> template), where
    # its own words fit the file better than the lowering's (see Lowering.refuse).
    wording: dict[str, tuple[str, str]] = field(default_factory=dict)
    weights_spec: dict = field(default_factory=dict)   # a float graph's source of weights
    input_shape: tuple[int, int, int] | None = None     # H, W, C the user fixes the input at

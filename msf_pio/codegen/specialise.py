"""Kernels specialised to the shapes of a model's layers.

The C kernels' inner loops are inline templates of a layer's shape (library/include/msf/kernels.h);
for each distinct shape of the model's conv2d and folded 3x3 depthwise layers the generated code
instantiates them with the shape as constants (MSF_CONV2D_KERNEL, MSF_DW3X3_KERNEL: loops of
known counts unrolled, offsets immediate), each a whole kernel that calls nothing back through
a pointer (the stack predictor follows its calls), and points the layers of that shape at it
(msf_layer_t.column). Layers of one shape share it, so a network of repeated blocks pays for
each kernel once. Which shapes get one is a code budget's choice (fusion/kernel_counts.choose:
the most instructions saved per byte first, at most kernel_counts.LIMIT per kind, so flash and
compile time stay bounded however varied the network); the other layers keep the kernel for any
shape. Which layers are specialised is fusion/kernel_counts.specialised, read by the
generator and by the cost model, which prices the instance each layer runs.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..model import ir


@dataclass(frozen=True)
class ConvShape:
    kh: int
    kw: int
    cin: int
    sh: int
    sw: int
    pl: int
    mode: int         # enum msf_requant
    full: bool        # the activation clamp is the int8 range
    even: bool = True  # an even output channel count (the pairs' stores go unchecked)

    @property
    def name(self) -> str:
        return (f"msf_conv_{self.kh}x{self.kw}_{self.cin}_s{self.sh}x{self.sw}"
                f"_p{self.pl}_r{self.mode}{'f' if self.full else ''}{'' if self.even else '_odd'}")

    def definition(self) -> str:
        args = ", ".join(str(v) for v in (self.kh, self.kw, self.cin, self.sh, self.sw, self.pl,
                                           self.mode, int(self.full), int(self.even)))
        return f"MSF_CONV2D_KERNEL({self.name}, {args})\n"


@dataclass(frozen=True)
class DepthwiseShape:
    """A folded 3x3 depthwise layer (kernel_data.folds)."""
    c: int
    full: bool

    @property
    def name(self) -> str:
        return f"msf_dw3x3_{self.c}{'_f' if self.full else ''}"

    def definition(self) -> str:
        return f"MSF_DW3X3_KERNEL({self.name}, {self.c}, {int(self.full)})\n"


def depthwise_shape(layer: ir.Layer, act: tuple[int, int], c: int | None = None):
    """The shape of a folded 3x3 depthwise layer (or of its first c channels: a channel-split
    group's)."""
    return DepthwiseShape(c or layer.cin, act == (-128, 127))


def conv_shape(layer: ir.Layer, mode: int, act: tuple[int, int],
               cout: int | None = None) -> ConvShape:
    """The shape of a conv2d layer (or of a channel-split group of cout of its channels) with
    its requant mode and activation clamp: the output channel count stays the layer's field
    (the outermost loop: nothing to unroll) but for its parity, so layers that differ only in
    it share one kernel."""
    (kh, kw), (sh, sw) = layer.kernel, layer.stride
    return ConvShape(kh, kw, layer.cin, sh, sw, layer.pad_left, mode, act == (-128, 127),
                     (cout or layer.cout) % 2 == 0)


def definitions(shapes) -> list[str]:
    """The C kernels of the distinct shapes, in a stable order."""
    return [s.definition() for s in sorted(set(shapes), key=lambda s: s.name)]

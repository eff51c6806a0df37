"""A streamed network input: the rows of tensor 0 a plan's first edge keeps in the arena.

The input arrives row by row, in order, from a source callback (a camera); nothing holds it
whole. The first edge keeps a ring of the input rows it still reads, sized here (the one formula
the cost model, the code generator and the reference share):
- a line-buffer block (or a single window layer) computes its first layer row by row: the ring
  holds one window of input rows (k rows for a k x k layer, one for a 1x1 layer; fewer where
  the rows the block computes only have windows clipped by the padding);
- an H-cache block (tiles of t rows) computes a tile from the input rows its first layer reads
  for the whole tile: the ring holds the most input rows any tile reads;
- a single head layer (global pooling, dense) reads the input whole: the ring is every row.
The rows of consecutive windows and tiles only move down, so every row is pulled exactly once;
rows no window reads (a stride larger than the kernel) are still pulled, in order, and dropped.
"""
from __future__ import annotations

from ..errors import MsfError
from ..model import ir
from ..model.ir import Model
from .geometry import row_taps

KIND = "input"      # the scratch entry of the input ring


def check(model: Model) -> None:
    """The input ring serves the first layer only: no other layer may read the network input."""
    if model.stream_input and model.readers().get(0, [0]) != [0]:
        raise MsfError("a streamed input cannot be read by a layer other than the first (a "
                       "residual skip or a branch reads the network input)",
                       source=model.source or model.name, where="input")
    if model.stream_input and model.layers and model.layers[0].op in ir.UPSAMPLE_OPS:
        raise MsfError(f"a streamed input cannot feed an upsampling layer "
                       f"({model.layers[0].op}) first: put a layer before it or buffer the "
                       "input", source=model.source or model.name, where="layers[0]")


def window_rows(model: Model, computed: int | None = None) -> int:
    """Input rows one output row of the first layer reads (a whole input for a head layer), the
    most over its first `computed` output rows (all by default: a block whose later strides
    never ask for the last rows computes fewer, and a padded first window reads fewer rows)."""
    layer = model.layers[0]
    if layer.op in ir.HEAD_OPS:
        return model.input_shape[0]
    return int(row_taps(layer)[:computed].max()) if layer.has_window else 1


def input_ring(model: Model, rows: int) -> list[dict]:
    """The scratch entry of an edge reading the streamed input through a ring of `rows` rows
    (none for a buffered input)."""
    if not model.stream_input:
        return []
    _, w, c = model.input_shape
    return [{"kind": KIND, "tensor": 0, "rows": rows, "cols": w, "bytes": rows * w * c}]

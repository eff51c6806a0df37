"""The `exact` cost model: the arena bytes and MACs our generated code really uses.

Every single layer is an edge, and every fusion block once per cache scheme (schemes/: the
H-cache, tiles of several rows, the line buffer, the channel split of inverted-residual
triples), as parallel edges the solvers choose between. What all of them share:
- Padding taps are skipped, so rows and columns are clipped to the tensor, and MACs count only
  real taps (docs/design.md, cost models; geometry.py).
- Pixel ops (softmax over the channels, element-wise activations) are 1 x 1 windows: they fuse
  like any spatial layer, need one column or row of their input and count no MACs.
- A block may end with global average pooling (int32 accumulators) and a dense layer after it, so
  the last feature map is never stored whole (blocks.py).
- A graph is branched: a layer may read any earlier tensor. Every tensor made before an edge
  and read during or after it stays alive in the arena (a cut keeps it until its last reader);
  an add writes its output in place over a skip tensor made before the edge that nothing reads
  after it. No tensor made inside a block may be read after the block.
- The network input and output live in the caller's buffers (workspace excludes them), unless
  streamed: a streamed input keeps the rows the first edge reads in a ring (stream_input.py),
  a streamed output stages one pixel.
Buffers are packed byte-exact (no alignment padding): the int32 sums are read and written with
memcpy, so every arena byte of the peak edge is really written and measurable by painting.
"""
from __future__ import annotations

import math

import numpy as np

from .. import progress
from ..errors import MsfError
from ..model import ir
from ..model.ir import Model
from . import blocks, reuse, schemes, stream_input
from .edge import Edge
from .geometry import (input_span, layer_macs,
                       unfused_macs)   # unfused_macs: a cost model's interface

NAME = "exact"


def _check(model: Model) -> None:
    for i, layer in enumerate(model.layers):
        if layer.op not in ir.ALL_OPS:
            raise MsfError(f"unsupported op '{layer.op}'", source=model.source or model.name,
                           where=f"layers[{i}]")
        if layer.op in ir.WHOLE_OPS and ((model.stream_input and model.input_of(i) == 0) or
                                         (model.stream_output and i == model.n_layers - 1)):
            raise MsfError(f"a {layer.op} layer moves whole tensors: it cannot read a streamed "
                           "input or write a streamed output", source=model.source or model.name,
                           where=f"layers[{i}]")
    bad = ir.graph_error(model)
    if bad:
        raise MsfError(bad[1], source=model.source or model.name, where=f"layers[{bad[0]}]")


def _single(model: Model, i: int) -> Edge:
    ring = stream_input.input_ring(model, stream_input.window_rows(model)) if i == 0 else []
    ram, detail = blocks.edge_ram(model, i, i, ring, _upsampling_shift(model, i))
    return Edge(i, i, ram, layer_macs(model.layers[i]), "single", detail)


def _upsampling_shift(model: Model, i: int) -> int | None:
    """An upsampling layer's kernel writes its output row after row, output row r reading
    input rows from live[r] on, which only move down: its output may start before its input
    ends, over the input rows no later row reads (reuse.py; a nearest x2 then takes its output
    and one input row). None: no overlap."""
    layer = model.layers[i]
    if layer.op not in ir.UPSAMPLE_OPS or not reuse.possible(model, i, i):
        return None
    (h, _, _), (oh, _, _) = layer.in_shape, layer.out_shape
    rows = np.arange(oh)
    first_read = np.minimum(input_span(layer, rows, rows, 0)[0], h)
    live = np.minimum.accumulate(first_read[::-1])[::-1]     # read by row r or a later one
    return reuse.max_shift(model, i, i, live, np.arange(1, oh + 1))


def edges(model: Model, names: tuple[str, ...] | None = None,
          ram_cap: float = math.inf) -> list[Edge]:
    """Every single layer, and every fusion block under every registered cache scheme (of
    `names`, default all) and its parameters (parallel edges) of RAM <= `ram_cap`."""
    _check(model)
    stream_input.check(model)
    out = [_single(model, i) for i in range(model.n_layers)]
    if ram_cap <= 0:
        return out
    fams = blocks.families(model, ram_cap)
    step = progress.task("costing fusion blocks (cache scheme)", total=len(schemes.REGISTRY))
    for i, scheme in enumerate(schemes.REGISTRY):
        step.update(i, f"{scheme.NAME}, {len(out)} edges")
        if names is None or scheme.NAME in names:
            walk = _Walk(fams, step, i, f"{scheme.NAME}, {len(out)} edges")
            out += [e for e in scheme.edges(model, walk) if e.ram <= ram_cap]
    step.close()
    return out


class _Walk(list):
    """The families as a scheme walks them, each shown on the costing step's line: one
    scheme may cost for seconds on a deep model."""

    def __init__(self, fams: list, step: progress.Task, done: int, note: str):
        super().__init__(fams)
        self.step, self.done, self.note = step, done, note

    def __iter__(self):
        for k, fam in enumerate(super().__iter__()):
            self.step.update(self.done, f"{self.note}, block end {k + 1}/{len(self)}")
            yield fam


def edge_layer_pixels(model: Model, e: Edge) -> dict[int, int]:
    """Layer -> output pixels (all channels) the edge e computes, recomputation included: the
    rows and columns its scheme's schedule runs of each spatial layer; a head layer once. Over
    the unfused pixels it is each layer's recompute factor (benchmarks set time against it)."""
    layers = model.layers
    pixels = {l: layers[l].out_shape[0] * layers[l].out_shape[1]
              for l in range(e.first, e.last + 1)}
    end = e.last
    while end > e.first and layers[end].op in ir.HEAD_OPS:
        end -= 1
    if end == e.first:                        # one spatial layer (and a head): every row once
        return pixels
    return {**pixels, **schemes.get(e.scheme).layer_pixels(model, e, end)}

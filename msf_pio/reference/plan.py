"""A plan run by the reference: every fusion block through the executor of its cache scheme
(schemes/), single layers whole."""
from __future__ import annotations

import numpy as np

from ..model import ir
from ..model.ir import Model
from ..fusion.reuse import DETAIL as OVERLAP
from .executor import initial_state, run_layer
from .overlap import SharedRegion
from .schemes import executor_of, line_buffer
from .stream_input import StreamedInput


def run_plan(model: Model, blocks, x: np.ndarray, source=None,
             state: dict | None = None) -> np.ndarray:
    """The network output of a plan: line-buffer blocks row by row, H-cache blocks (tiles of
    one or more rows; channel-split triples a channel group at a time) column by column,
    through rings of the edge's sizes; single layers whole.
    A streamed input (model.stream_input) is pulled from source(row) (default: x's rows) into
    the first edge's input ring. A streaming model runs from `state` (run_model's)."""
    tensors = {0: np.asarray(x) if x is not None else None}
    state = initial_state(model) if state is None else state
    if model.stream_input:
        tensors[0] = StreamedInput(source or (lambda y: x[y]), model.input_shape,
                                   input_ring_rows(blocks[0]))
    for e in blocks:
        run_edge(model, e, tensors, state)
    if model.stream_input:
        tensors[0].pull(model.input_shape[0])         # rows no window reads: pulled, dropped
    if model.outputs:                                 # several: packed, as msf_model_run does
        return np.concatenate([tensors[t].reshape(-1) for t in model.output_tensors])
    return tensors[model.n_layers]


def input_ring_rows(edge) -> int:
    """Rows of the streamed input's ring of a first edge."""
    return next(b["rows"] for b in edge.detail["scratch"] if b["kind"] == "input")


def shared_region(model: Model, e, shift: int | None = None) -> SharedRegion | None:
    """The checked region of an edge whose output overlaps its input (None if it does not);
    `shift` overrides the edge's."""
    shift = e.detail.get(OVERLAP) if shift is None else shift
    return None if shift is None else \
        SharedRegion(model.tensor_shape(e.first), model.tensor_shape(e.last + 1), shift)


def run_edge(model: Model, e, tensors: dict, state: dict | None = None) -> None:
    """Adds tensor e.last + 1 to `tensors`. A single window layer on a streamed input runs row
    by row (as the C runtime does), a head layer on it reads every row."""
    streamed = isinstance(tensors.get(e.first), StreamedInput)
    if streamed and not e.fused and model.layers[e.first].op in ir.SPATIAL_OPS:
        tensors[e.first + 1], _ = line_buffer.run_block(model, e.first, e.last, {}, tensors)
    elif streamed and not e.fused:
        tensors[e.first + 1] = run_layer(model, e.first, {0: tensors[0].whole()})
    elif e.fused:
        tensors[e.last + 1] = executor_of(e).run_edge(model, e, tensors, shared_region(model, e))
    else:
        tensors[e.first + 1] = run_layer(model, e.first, tensors, state)

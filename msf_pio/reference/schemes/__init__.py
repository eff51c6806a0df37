"""The reference's executors of fusion blocks, one module each, found through the cache scheme
registry (msf_pio/fusion/schemes/): a scheme names the executor that runs it (its EXECUTOR, the
module's name here). An executor module has run_edge(model, edge, tensors, shared), which
returns the block's output from the block input and the older tensors it reads, through rings
of the edge's sizes (reading outside them raises RingError), `shared` checking an output
written over the input."""
from __future__ import annotations

from types import ModuleType

from ...fusion import schemes
from . import channel_split, h_cache, line_buffer

EXECUTORS = {m.__name__.rpartition(".")[2]: m for m in (h_cache, line_buffer, channel_split)}


def executor_of(e) -> ModuleType:
    """The executor of the fusion block edge e."""
    return EXECUTORS[schemes.get(e.scheme).EXECUTOR]

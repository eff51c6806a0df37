"""An edge of the fusion graph: one layer (first == last) or the fusion block of layers first..last."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Edge:
    first: int                 # first layer index (the edge leaves tensor `first`)
    last: int                  # last layer index (the edge enters tensor `last + 1`)
    ram: int                   # peak RAM bytes while this edge runs (its cost model's definition)
    macs: int                  # MACs it executes
    scheme: str = "single"     # "single", or a cache scheme's name (schemes/)
    detail: dict = field(default_factory=dict, compare=False, hash=False)
    tile_rows: int = 1         # output rows per tile (h-cache: 1; tiles: more; channel-split: any)

    @property
    def src(self) -> int:
        return self.first

    @property
    def dst(self) -> int:
        return self.last + 1

    @property
    def fused(self) -> bool:
        return self.last > self.first

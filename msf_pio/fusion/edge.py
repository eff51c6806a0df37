"""An edge of the fusion graph: one layer (first == last) or the fusion block of layers first..last."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field


class LazyDetail(Mapping):
    """An edge's detail made when first read: the solvers never read it, and a graph of tens of
    thousands of blocks would otherwise hold a list of rings per block."""

    def __init__(self, make: Callable[[], dict]):
        self._make: Callable[[], dict] | None = make
        self._detail: dict = {}

    def _get(self) -> dict:
        if self._make is not None:
            self._detail, self._make = self._make(), None
        return self._detail

    def __getitem__(self, key):
        return self._get()[key]

    def __iter__(self) -> Iterator:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __repr__(self) -> str:
        return repr(self._get())

    def __reduce__(self):              # pickled or copied as the plain dict it stands for
        return dict, (dict(self._get()),)


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

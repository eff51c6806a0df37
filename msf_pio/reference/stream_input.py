"""A streamed network input in the reference: tensor 0 pulled row by row, in order, from a
source into a ring of the first edge's input rows (msf_pio/fusion/stream_input.py sizes it).

Reading a row the ring no longer holds raises RingError, so a run checks the cost model's ring
size; `pulled` records the rows in the order they were asked for (each once, in order).
"""
from __future__ import annotations

import numpy as np

from .regions import RingError


class StreamedInput:
    """Row-sliceable like the input tensor (x[r0:r1] or x[r0:r1, c0:c1]), backed by a ring."""

    def __init__(self, source, shape: tuple[int, int, int], capacity: int):
        self.source, self.shape, self.capacity = source, tuple(shape), capacity
        self.ring: dict[int, np.ndarray] = {}
        self.pulled: list[int] = []

    def pull(self, row: int) -> None:
        """Pulls the rows up to `row` (clipped to the input) the ring does not hold yet."""
        while len(self.pulled) <= min(row, self.shape[0] - 1):
            y = len(self.pulled)
            self.ring[y] = np.asarray(self.source(y), dtype=np.int8).reshape(self.shape[1:])
            self.ring.pop(y - self.capacity, None)
            self.pulled.append(y)

    def __getitem__(self, key):
        rows, rest = (key[0], key[1:]) if isinstance(key, tuple) else (key, ())
        lo, hi = rows.start or 0, min(rows.stop, self.shape[0]) - 1
        self.pull(hi)
        missing = [r for r in range(lo, hi + 1) if r not in self.ring]
        if missing:
            raise RingError(f"input rows {missing} not in its ring of {self.capacity} rows")
        return np.stack([self.ring[r] for r in range(lo, hi + 1)])[(slice(None), *rest)]

    def whole(self) -> np.ndarray:
        return self[0:self.shape[0]]

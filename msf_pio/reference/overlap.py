"""A fusion block's output written over its input (msf_pio/fusion/reuse.py), checked byte by byte.

Written from the definition, not from the cost model's formula: the input A and the output B are
row-major HWC bytes in one region, B starting `shift` bytes after A. Every pixel the block writes
of B marks the bytes of A it lands on; reading a marked byte of A raises RingError, so a run
through the reference proves the shift the cost model allows never destroys a value still read.
"""
from __future__ import annotations

import numpy as np

from .regions import RingError


class SharedRegion:
    def __init__(self, in_shape: tuple[int, int, int], out_shape: tuple[int, int, int],
                 shift: int):
        self.in_shape, self.out_shape, self.shift = in_shape, out_shape, shift
        self.written = np.zeros(int(np.prod(in_shape)), dtype=bool)   # A's bytes under B

    @staticmethod
    def _bytes(shape, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        _, w, c = shape
        rows, cols, ch = np.ix_(np.arange(r0, r1 + 1), np.arange(c0, c1 + 1), np.arange(c))
        return ((rows * w + cols) * c + ch).reshape(-1)

    def wrote(self, r0: int, r1: int, c0: int, c1: int) -> None:
        """The block wrote output rows r0..r1 x columns c0..c1."""
        at = self._bytes(self.out_shape, r0, r1, c0, c1) + self.shift
        self.written[at[(at >= 0) & (at < self.written.size)]] = True

    def read(self, r0: int, r1: int, c0: int, c1: int) -> None:
        """The block reads input rows r0..r1 x columns c0..c1: none may lie under the output."""
        if self.written[self._bytes(self.in_shape, r0, r1, c0, c1)].any():
            raise RingError(f"input rows {r0}..{r1}, columns {c0}..{c1} read after the output "
                            f"({self.shift} bytes after the input) was written over them")

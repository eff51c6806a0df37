"""Option values shared by the CLI and the PlatformIO build (RAM sizes, the MAC overhead bound):
below both, so neither imports the other."""
from __future__ import annotations

import math
import re

from .errors import MsfError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib)?\s*$", re.IGNORECASE)
_UNITS = {None: 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 1000 ** 2, "mib": 1024 ** 2}


def parse_ram_limit(text: str, where: str = "--ram-limit") -> float:
    """Bytes from '65536', '64kB' (1000 B), '64KiB' (1024 B) or 'inf'."""
    if str(text).strip().lower() == "inf":
        return math.inf
    m = _SIZE.match(str(text))
    if not m:
        raise MsfError(f"must be a number of bytes such as 65536, 64kB or 64KiB, got {text!r}",
                       where=where)
    value = float(m.group(1)) * _UNITS[(m.group(2) or "b").lower()]
    if value <= 0:
        raise MsfError(f"must be positive, got {text!r}", where=where)
    return int(value)


def parse_max_overhead(text: str, where: str = "--max-overhead") -> float:
    try:
        value = float(text)
    except ValueError:
        raise MsfError(f"must be a number >= 1 or 'inf', got {text!r}", where=where) from None
    if math.isnan(value) or value < 1:
        raise MsfError(f"must be >= 1 (F = 1 is the unfused model), got {text!r}", where=where)
    return value

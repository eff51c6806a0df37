"""Option values shared by the CLI and the PlatformIO build (RAM sizes, the MAC overhead bound):
below both, so neither imports the other."""
from __future__ import annotations

import math
import re

from .errors import MsfError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib)?\s*$", re.IGNORECASE)
_SECTION = re.compile(r"^\.?[A-Za-z_][A-Za-z0-9_.]{0,62}$")
_UNITS = {None: 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 1000 ** 2, "mib": 1024 ** 2}


def parse_ram_limit(text: str, where: str = "--ram-limit") -> float:
    """Bytes from '65536', '64kB' (1000 B), '64KiB' (1024 B) or 'inf'."""
    if str(text).strip().lower() == "inf":
        return math.inf
    m = _SIZE.match(str(text))
    if not m:
        raise MsfError(f"must be a number of bytes such as 65536, 64kB or 64KiB, got {text!r}",
                       where=where)
    number, unit = m.group(1), _UNITS[(m.group(2) or "b").lower()]
    whole, _, fraction = number.partition(".")
    value = int(whole) * unit + (int(fraction) * unit // 10 ** len(fraction) if fraction else 0)
    if fraction and (int(fraction) * unit) % 10 ** len(fraction):
        raise MsfError(f"must be a whole number of bytes, got {text!r}", where=where)
    if value <= 0:
        raise MsfError(f"must be positive, got {text!r}", where=where)
    return value


def parse_code_budget(text: str, where: str = "--code-budget") -> float:
    """Bytes of code the shape-specialised kernels may take: '0' (none), '39KiB', 'inf'."""
    if str(text).strip() in ("0", "0B", "0b"):
        return 0
    return parse_ram_limit(text, where)


def parse_max_overhead(text: str, where: str = "--max-overhead") -> float:
    try:
        value = float(text)
    except ValueError:
        raise MsfError(f"must be a number >= 1 or 'inf', got {text!r}", where=where) from None
    if math.isnan(value) or value < 1:
        raise MsfError(f"must be >= 1 (F = 1 is the unfused model), got {text!r}", where=where)
    return value


# The option names of each front end, for messages: the CLI's flags, platformio.ini's keys.
CLI_NAMES = {"objective": "--objective", "max_overhead": "--max-overhead",
             "ram_limit": "--ram-limit", "cost_model": "--cost-model", "schemes": "--schemes"}
INI_NAMES = {k: f"custom_msf_{k}" for k in CLI_NAMES}


def check_plan_options(objective: str, max_overhead: float, ram_limit: float | None,
                       cost_model: str, schemes, names: dict = CLI_NAMES) -> None:
    """Options that would be silently ignored together fail instead: one rule for the CLI and
    the build (`names` gives the option names the user wrote)."""
    if objective != "min_ram" and not math.isinf(max_overhead):
        raise MsfError(f"applies to the min_ram objective only (P1's Fmax), not to "
                       f"{objective}", where=names["max_overhead"])
    if objective == "min_macs" and (ram_limit is None or math.isinf(ram_limit)):
        raise MsfError(f"min_macs (P2: fewest MACs within a RAM limit) needs "
                       f"{names['ram_limit']}", where=names["objective"])
    if schemes is not None and cost_model != "exact":
        raise MsfError(f"cache schemes are choices of the exact cost model; the {cost_model} "
                       f"cost model has the paper's H-cache only", where=names["schemes"])


def parse_input_shape(text: str, where: str = "--input-shape") -> tuple[int, int, int]:
    """'H,W,C' (e.g. '96,96,3'; '1,1,N' for a vector input) -> (H, W, C)."""
    try:
        dims = tuple(int(v) for v in str(text).split(","))
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) < 1:
        raise MsfError(f"must be H,W,C, three positive integers such as 96,96,3, got {text!r}",
                       where=where)
    return dims


def parse_section_name(text: str, where: str = "custom_msf_weights_section") -> str:
    """A linker section name such as .qspi_weights or ExtFlashSection: a C identifier with dots
    (one may lead), at most 64 characters; it becomes C text in a section attribute."""
    name = str(text).strip()
    if not _SECTION.match(name):
        raise MsfError(f"must be a linker section name such as .qspi_weights (letters, digits, "
                       f"_ and ., not starting with a digit, at most 64), got {text!r}",
                       where=where)
    return name

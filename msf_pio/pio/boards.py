"""Board facts (boards.yaml, else the board manifest) and the RAM a firmware needs beside the
arena: what the build checks a plan against, and the defines the board files compile with."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import MsfError

FACTS = Path(__file__).with_name("boards.yaml")
DEFAULT_STACK = 4096        # a board with no stack figure: keep 4 KB free for it
DEFAULT_FRAMEWORK_RAM = 1024


@dataclass(frozen=True)
class BoardFacts:
    board: str
    flash: int | None               # bytes the firmware may occupy
    ram: int | None                 # bytes of RAM the linker gives static data and the stack
    framework_ram: int              # the framework's and the board file's own static RAM
    stack: int                      # RAM kept free for the stack
    defines: dict = field(default_factory=dict)
    link_symbols: dict = field(default_factory=dict)   # --defsym for the linker script
    rom_length: int | None = None   # freedom-e-sdk: the linker script's code region
    flash_region: str | None = None  # what `flash` is when not the whole part (ESP-IDF's app
                                     # partition)
    cpu_hz: int | None = None       # the core clock the board file sets up
    twin: str | None = None         # the emulated board whose latency profile predicts this one
    weights_flash: int | None = None  # memory-mapped external memory for the weights
                                      # (custom_msf_weights_section), bytes

    def stack_for(self, predicted: int | None) -> int:
        """The stack to keep: the plan's predicted stack, never less than the board's reserve."""
        return max(self.stack, predicted or 0)

    def ram_budget(self, io_bytes: int, predicted_stack: int | None = None) -> int | None:
        """Arena bytes left once the framework, the stack and the model's I/O buffers are in."""
        if not self.ram:
            return None
        return self.ram - self.framework_ram - self.stack_for(predicted_stack) - io_bytes

    def ram_breakdown(self, arena: int, io_bytes: int, predicted_stack: int | None = None) -> str:
        stack = self.stack_for(predicted_stack)
        total = arena + io_bytes + stack + self.framework_ram
        return (f"arena {arena} B + I/O buffers {io_bytes} B + stack {stack} B + "
                f"framework {self.framework_ram} B = {total} B")


def _table() -> dict:
    return yaml.safe_load(FACTS.read_text())


def twin_of(board: str) -> str:
    """The emulated board whose latency profile predicts `board` (itself if it has none)."""
    return str((_table().get(board) or {}).get("twin", board))


def board_facts(board: str, manifest_get, app_partition: tuple[str, int] | None = None
                ) -> BoardFacts:
    """Facts of `board`; `manifest_get(key, default)` reads its PlatformIO manifest. Where both
    give a size, the smaller wins (the manifest may be narrowed with board_upload.*). An ESP-IDF
    firmware gets its app partition, not the whole flash: `app_partition` (description, bytes)."""
    entry = _table().get(board) or {}

    def size(key, manifest_key):
        sizes = [int(v) for v in (entry.get(key), manifest_get(manifest_key, 0)) if v]
        return min(sizes) if sizes else None

    try:
        stack = int(entry.get("stack") or manifest_get("build.stack_size", 0) or DEFAULT_STACK)
        flash, region = size("flash", "upload.maximum_size"), None
        if app_partition and (flash is None or app_partition[1] < flash):
            region, flash = app_partition
        return BoardFacts(
            board=board,
            flash=flash,
            flash_region=region,
            ram=size("ram", "upload.maximum_ram_size"),
            framework_ram=int(entry.get("framework_ram", DEFAULT_FRAMEWORK_RAM)),
            stack=stack,
            defines=dict(entry.get("defines") or {}),
            link_symbols=dict(entry.get("link_symbols") or {}),
            rom_length=int(entry["rom_length"]) if "rom_length" in entry else None,
            cpu_hz=int(entry["cpu_hz"]) if "cpu_hz" in entry else None,
            twin=str(entry["twin"]) if "twin" in entry else None,
            weights_flash=size("weights_flash", "upload.maximum_weights_size"))
    except (TypeError, ValueError) as exc:
        raise MsfError(f"bad board facts: {exc}", source=str(FACTS), where=board) from None


def app_partition(csv_text: str, name: str = "") -> tuple[str, int] | None:
    """The app partition an ESP-IDF firmware is flashed into, from a partition table CSV (name,
    type, subtype, offset, size, flags), as platform-espressif32 picks it: the partition `name`
    (board_build.app_partition_name) if the table has it, else the first app partition of
    subtype factory or ota_0. Returns (name, bytes), or None if there is none."""
    def size(text):
        text = text.strip()
        unit = {"K": 1024, "M": 1024 * 1024}.get(text[-1:].upper(), 1)
        return int(text[:-1] if unit > 1 else text, 0) * unit

    rows = [[c.strip() for c in line.split(",")] for line in csv_text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    apps = [r for r in rows if len(r) >= 5 and r[1] in ("app", "0")]
    chosen = ([r for r in apps if name and r[0] == name]
              + [r for r in apps if r[2] in ("factory", "ota_0")])
    return (chosen[0][0], size(chosen[0][4])) if chosen else None


def c_defines(facts: BoardFacts) -> list:
    """The board's defines as SCons CPPDEFINES (strings quoted for the shell)."""
    out = [("MSF_CPU_HZ", f"{facts.cpu_hz}u")] if facts.cpu_hz else []
    for name, value in facts.defines.items():
        text = str(value)
        out.append((name, text.replace('"', '\\"')) if text.startswith('"') else (name, text))
    return out

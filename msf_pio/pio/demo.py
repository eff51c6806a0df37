"""`msf-pio demo`: build the demo firmware for an emulated board with PlatformIO, run it in
QEMU and report measured against predicted RAM and latency (the README's first command)."""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import MsfError
from . import bootstrap
from .project import make_project, pio, result_lines

FIELD = re.compile(r"(\w+)=(\S+)")


def demo_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "msf-pio" / "demo"


def run_demo(board: str = "qemu_f767zi", model: str | None = None, log=print) -> dict:
    core = bootstrap.core_dir()
    bootstrap.install_tool_scons(core, log=lambda _m: None)
    project = make_project(demo_dir(), **({"model": model} if model else {}))
    log(f"building examples/msf_demo for {board} (copy in {project}) and running it in QEMU ...")
    code, out = pio(core, project, "run", "-e", board, "-t", "upload")
    plan_line = next((l for l in out.splitlines() if l.startswith("msf-pio: ")), "")
    lines = result_lines(out)
    if code or not lines:
        error = plan_line if plan_line.startswith("msf-pio: error") else out[-2500:]
        raise MsfError(f"the demo build or run failed on {board}:\n{error}")
    size = [l.strip() for l in out.splitlines() if l.startswith(("RAM:", "Flash:"))]
    return {"plan_line": plan_line, "result_line": lines[0], "size": size,
            "fields": dict(FIELD.findall(lines[0]))}


def render(result: dict) -> str:
    f = result["fields"]
    arena, pred = int(f["arena"]), int(f["arena_pred"])
    crc_ok = f["crc"] == f["crc_ref"]
    unit = ("instructions (QEMU -icount counts instructions, not cycles; "
            f"{f['clock']})") if f["board"].startswith("qemu_") else f"cycles ({f['clock']})"
    return "\n".join([
        result["plan_line"],
        *result["size"],
        result["result_line"],
        "",
        f"report: {f['model']} plan {f['plan']} on {f['board']}",
        f"  arena (workspace) measured {arena} B, predicted {pred} B: "
        f"{'equal' if arena == pred else 'DIFFERENT'}",
        f"  stack high-water {f['stack']} B; RAM measured (arena + stack) {f['ram']} B",
        f"  latency {int(f['cycles']):,} {unit} = {int(f['us']) / 1000:.1f} ms at the real "
        f"part's clock ({int(f['hz']) / 1e6:g} MHz); {int(f['macs']):,} MACs",
        f"  output CRC {f['crc']} vs host reference {f['crc_ref']}: "
        f"{'bit-exact' if crc_ok else 'MISMATCH'}",
        "DEMO OK" if f["status"] == "ok" and crc_ok and arena == pred else "DEMO FAILED",
    ])

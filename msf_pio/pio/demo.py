"""`msf-pio demo`: build the demo firmware for an emulated board with PlatformIO, run it in
QEMU and report measured against predicted RAM and latency (the README's first command)."""
from __future__ import annotations

import os
import re
from pathlib import Path

from .. import progress
from ..errors import MsfError
from . import bootstrap, monitor
from .project import make_project, pio, result_lines


def demo_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "msf-pio" / "demo"


def run_demo(board: str = "qemu_f767zi", model: str | None = None, log=print) -> dict:
    core = bootstrap.core_dir()
    bootstrap.install_tool_scons(core, log=lambda _m: None)
    project = make_project(demo_dir(), **({"model": model} if model else {}))
    log(f"building examples/msf_demo for {board} (copy in {project}) and running it in QEMU ...")
    with progress.task(f"demo: pio run -e {board} -t upload", ticking=True):
        code, out = pio(core, project, "run", "-e", board, "-t", "upload")
    return result(project, board, code, out)


def result(project: Path, board: str, code: int, out: str) -> dict:
    """What `pio run -e BOARD -t upload` of a demo project showed: its result line, the
    record with the edges' cycles, the build's plan.json and PlatformIO's static RAM figure."""
    lines = result_lines(out)
    if code or not lines:
        error = next((l for l in out.splitlines() if l.startswith("msf-pio: error")), out[-2500:])
        raise MsfError(f"the demo build or run failed on {board}:\n{error}")
    static = re.search(r"^RAM:.*\(used (\d+) bytes", out, re.M)
    plan = monitor.load_plan(project / ".pio" / "build" / board / "msf_generated" / "plan.json")
    return {"result_line": lines[0], "record": monitor.parse_lines(out.splitlines())[0],
            "plan": plan, "static_ram": int(static[1]) if static else None}


def ok(result: dict) -> bool:
    """The run's output is the host's, its arena the predicted one and its status ok."""
    return not monitor.problems(result["record"], result["plan"])


def render(result: dict) -> str:
    return "\n".join([
        result["result_line"], "",
        monitor.render_summary(result["record"], result["plan"], result["static_ram"]), "",
        "DEMO OK" if ok(result) else "DEMO FAILED: " + "; ".join(
            monitor.problems(result["record"], result["plan"]))])

"""Planner speed (issue 20): every objective and the Pareto frontier per model, and the scaling
of planning time with depth on chains of inverted-residual blocks, each a whole `msf-pio`
process as a user runs it (imports, model load, graph, solve), with its wall time, CPU time
(user + system: steadier than wall time on a shared machine) and peak RSS (per model: the
largest of its commands').

Targets: <= 2 s per objective and for `pareto` on every zoo model and MobileNetV2 1.0 at 224;
a 300-layer chain (75 blocks) <= 10 s; time grows near-linearly with depth (the exponent fitted
to the chains' CPU times <= 1.3).

Run: python benchmarks/planner_speed.py [--models all|NAME,...] [--chains 10,20,...]
     [--save DIR] [--timeout S] [--pio BOARD [--flash BYTES]]
`--save DIR` keeps every plan's JSON; benchmarks/plan_diff.py compares two such folders (the
same plans before and after a change to the planner).
`--pio BOARD` times instead the generation step of a PlatformIO build (target <= 3 s per zoo
model): per model and objective a copy of the demo project, `pio run -e BOARD -t idedata`
(PlatformIO configures the env and its libraries, so msf-pio's library script quantizes, plans
and generates, and compiles nothing), and the build log's "generated in W s (C s CPU)": wall
and CPU seconds of the whole step (quantizing, planning for the board's RAM, C, reference
output), the budget the board leaves (custom_msf_ram_limit = auto).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BOARD = "qemu_f767zi"
# (name, arguments): every objective; P1 at several F max; the frontier
COMMANDS = [
    ("vanilla", ["solve", "--objective", "vanilla"]),
    ("heuristic", ["solve", "--objective", "heuristic"]),
    ("p1:1.0", ["solve", "--max-overhead", "1.0"]),
    ("p1:1.1", ["solve", "--max-overhead", "1.1"]),
    ("p1:1.3", ["solve", "--max-overhead", "1.3"]),
    ("p1:inf", ["solve"]),
    ("p2:64kB", ["solve", "--objective", "min_macs", "--ram-limit", "64kB"]),
    ("lat:64kB", ["solve", "--objective", "min_latency", "--ram-limit", "64kB"]),
    ("pareto", ["pareto"]),
]
CHAIN_BLOCKS = (10, 20, 40, 80, 160, 320)


def chain_spec(blocks: int) -> str:
    """The issue's chain: inverted-residual blocks of 8 channels at 16x16, expansion 2."""
    return (f"name: chain{blocks}\ninput: {{shape: [16, 16, 8]}}\nweights: {{random: 1}}\n"
            f"layers:\n  - {{op: inverted_residual, out: 8, expand: 2, kernel: 3, stride: 1, "
            f"repeat: {blocks}}}\n")


def run(args: list[str], timeout: float, out: Path | None = None) -> dict:
    """One `msf-pio` process: wall and CPU seconds, peak RSS (kB), exit status."""
    start = time.perf_counter()
    with open(out or os.devnull, "w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "msf_pio.cli", *args], stdout=sink,
                                stderr=subprocess.PIPE)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                return {"timeout": True, "wall": timeout}
            time.sleep(0.01)
    err = proc.stderr.read().decode().strip()
    return {"timeout": False, "wall": time.perf_counter() - start,
            "cpu": usage.ru_utime + usage.ru_stime, "rss_kb": usage.ru_maxrss,
            "status": os.waitstatus_to_exitcode(status), "error": err.splitlines()[-1:]}


def fmt(r: dict) -> str:
    if r["timeout"]:
        return f"> {r['wall']:.0f} s"
    return f"{r['cpu']:6.2f} cpu {r['wall']:6.2f} wall"


def models_section(names: list[str], save: Path | None, timeout: float) -> None:
    print(f"seconds per command (CPU = user + system; wall), every solve with --board {BOARD}")
    print(f"{'model':20s} " + " ".join(f"{c:>10s}" for c, _ in COMMANDS) +
          f" {'peak RSS MB':>12s}")
    worst = 0.0
    tmp = tempfile.TemporaryDirectory()
    for name in names:
        if name.startswith("chain:"):        # chain:75 is the issue's 300-layer chain
            path = Path(tmp.name) / f"chain{name[6:]}.yaml"
            path.write_text(chain_spec(int(name[6:])))
            name = str(path)
        stem = Path(name).stem if name.endswith((".yaml", ".yml", ".onnx", ".tflite")) \
            else name
        cells = []
        for label, args in COMMANDS:
            extra = ["--board", BOARD] if args[0] == "solve" else []
            out = save / f"{stem}__{label.replace(':', '_')}.json" if save else None
            r = run([*args, name, *extra, "--json"], timeout, out)
            if not r["timeout"] and r["status"] not in (0, 1):
                print(f"  {stem} {label}: exit {r['status']}: {r['error']}")
            cells.append(r)
            worst = max(worst, r.get("cpu", r["wall"]))
        rss = max((r["rss_kb"] for r in cells if not r["timeout"]), default=0) / 1024
        print(f"{stem:20s} " + " ".join(
            f"{'>' + format(r['wall'], '.0f') if r['timeout'] else format(r['cpu'], '.2f'):>10s}"
            for r in cells) + f" {rss:12.1f}", flush=True)
    print(f"worst: {worst:.2f} s CPU (target <= 2 s, ratio {worst / 2:.2f})")


def chains_section(blocks: list[int], timeout: float) -> None:
    print("chains of inverted-residual blocks (4 layers each), solve --max-overhead 1.3")
    print(f"{'blocks':>6s} {'layers':>6s} {'CPU s':>8s} {'wall s':>8s} {'peak RSS MB':>12s}")
    points = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in blocks:
            path = Path(tmp) / f"chain{n}.yaml"
            path.write_text(chain_spec(n))
            r = run(["solve", str(path), "--max-overhead", "1.3", "--json"], timeout)
            if r["timeout"]:
                print(f"{n:6d} {4 * n:6d} {'> ' + str(int(timeout)):>8s}", flush=True)
                break
            print(f"{n:6d} {4 * n:6d} {r['cpu']:8.2f} {r['wall']:8.2f} "
                  f"{r['rss_kb'] / 1024:12.1f}", flush=True)
            points.append((n, r["cpu"]))
    if len(points) >= 2:
        n, t = np.log(np.array(points, dtype=float)).T
        slope = np.polyfit(n, t, 1)[0]
        print(f"fitted exponent (CPU time ~ blocks^k): k = {slope:.2f} (target <= 1.3)")


PIO_OBJECTIVES = ("min_ram", "min_latency")
GENERATED = re.compile(r"msf-pio: \S+ (\S+) .*generated in ([\d.]+) s \(([\d.]+) s CPU\)")


def pio_section(names: list[str], board: str, flash: int | None = None) -> None:
    from msf_pio.pio import bootstrap
    from msf_pio.pio.project import make_project, pio, widen_flash
    core = bootstrap.core_dir()
    bootstrap.install_tool_scons(core, log=lambda _m: None)
    print(f"generation inside `pio run -e {board}` (-t idedata), seconds CPU (wall), the "
          "board's budget")
    print(f"{'model':20s} " + " ".join(f"{o:>24s}" for o in PIO_OBJECTIVES))
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if name.startswith("chain:"):
                path = Path(tmp) / f"chain{name[6:]}.yaml"
                path.write_text(chain_spec(int(name[6:])))
                name = str(path)
            stem = Path(name).stem if name.endswith((".yaml", ".yml", ".onnx", ".tflite")) \
                else name
            cells = []
            for objective in PIO_OBJECTIVES:
                project = make_project(Path(tmp) / f"{stem}-{objective}", model=name,
                                       objective=objective)
                if flash:
                    widen_flash(project, flash)
                code, out = pio(core, project, "run", "-e", board, "-t", "idedata")
                found = GENERATED.search(out)
                if not found:
                    error = [l for l in out.splitlines() if "error" in l.lower()]
                    print(f"  {stem} {objective}: exit {code}: "
                          f"{error[0] if error else out.strip()[-300:]}")
                    cells.append(f"{'failed':>24s}")
                    continue
                label, wall, cpu = found.group(1), float(found.group(2)), float(found.group(3))
                worst = max(worst, cpu)
                cells.append(f"{label[:10]:>10s} {cpu:5.2f} ({wall:5.2f})")
            print(f"{stem:20s} " + " ".join(cells), flush=True)
    print(f"worst: {worst:.2f} s CPU (target <= 3 s, ratio {worst / 3:.2f})")


def main(argv=None) -> None:
    from msf_pio.model.zoo import zoo_names
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="all",
                    help="all (the zoo), none, or zoo names / spec paths / chain:BLOCKS, comma "
                    "separated")
    ap.add_argument("--chains", default=",".join(map(str, CHAIN_BLOCKS)),
                    help="chain lengths in blocks, comma separated ('' for none)")
    ap.add_argument("--save", type=Path, help="keep every plan's JSON in this folder")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per process")
    ap.add_argument("--pio", metavar="BOARD",
                    help="time the generation step of `pio run -e BOARD` per model instead")
    ap.add_argument("--flash", type=int, metavar="BYTES",
                    help="with --pio: the emulated board's flash (4194304 holds "
                    "mbv2-w1.0-r224's weights on qemu_f767zi)")
    args = ap.parse_args(argv)
    names = zoo_names() if args.models == "all" else \
        [] if args.models == "none" else args.models.split(",")
    if args.pio:
        pio_section(names, args.pio, args.flash)
        return
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
    if names:
        models_section(names, args.save, args.timeout)
    if args.chains:
        chains_section([int(n) for n in args.chains.split(",")], args.timeout)


if __name__ == "__main__":
    main()

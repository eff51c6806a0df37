"""Where a plan's instructions go on an emulated Arm board, function by function.

Builds the model's firmware (benchmarks/firmware/main.c, as kernel_instructions.py does) and
runs it under QEMU with the translated blocks logged (`-d in_asm,exec,nochain`: every block's
instructions once, then every execution of a block); each execution adds the block's
instruction count to the function (from the ELF's symbol table) holding its first address.
The whole run is counted (start-up and the CRC too); the model's own functions are the msf_*
and kernel helpers. The log streams through a FIFO, so nothing large is written to disk.

Run: python benchmarks/function_profile.py MODEL [--board qemu_f767zi]
     [--max-overhead 1.3 | --objective vanilla] [--top 30]
"""
from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_instructions import project_for  # noqa: E402
from msf_pio.pio import bootstrap  # noqa: E402
from msf_pio.pio.project import pio  # noqa: E402

BOARDS = Path(__file__).resolve().parents[1] / "msf_pio" / "pio" / "platform" / "boards"
EXEC = re.compile(rb"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")
INSN = re.compile(rb"^0x([0-9a-f]+):")


def qemu_command(board: str, elf: Path) -> list[str]:
    """The board's QEMU command (its JSON's emulator section, as the platform runs it)."""
    emu = json.loads((BOARDS / f"{board}.json").read_text())["emulator"]
    return [emu["system"], *emu["args"], "-display", "none", "-monitor", "none",
            "-serial", "stdio", "-kernel", str(elf)]


def symbols(elf: Path):
    """(sorted start addresses, names) of the ELF's functions (Thumb bit cleared)."""
    out = subprocess.run(["arm-none-eabi-nm", "-S", "--defined-only", str(elf)],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            rows.append((int(parts[0], 16) & ~1, parts[3]))
    rows.sort()
    return [a for a, _ in rows], [n for _, n in rows]


EXECUTORS = {"msf_run_edge": "h-cache", "msf_run_h_cache": "h-cache",
             "msf_run_channel_split": "channel-split", "msf_run_line_buffer": "line-buffer"}


def profile(log_lines, starts, names) -> Counter:
    """Instructions executed per (executor, function): a block is charged to the executor
    (EXECUTORS) whose code ran last before it, which its kernels return to."""
    size, runs, current, context = {}, Counter(), None, "-"
    edge, edges = -1, Counter()                 # msf_run_edge calls so far; per edge
    edge_entry = starts[names.index("msf_run_edge")] if "msf_run_edge" in names else -1
    where = {}                                 # block start -> (its function, executor or None)
    for line in log_lines:
        m = EXEC.match(line)
        if m:
            pc = int(m.group(1), 16)
            if pc not in where:
                i = bisect.bisect_right(starts, pc) - 1
                name = names[i] if i >= 0 else "?"
                where[pc] = (name, EXECUTORS.get(name))
            name, executor = where[pc]
            context = executor or context
            edge += pc == edge_entry
            runs[(context, name, pc)] += 1
            edges[(edge, name, pc)] += 1
            continue
        m = INSN.match(line)
        if m:
            pc = int(m.group(1), 16)
            if current is None:
                current = pc
                size[pc] = 0
            size[current] += 1
        elif line.startswith(b"IN:") or line.startswith(b"----"):
            current = None
    per_edge = Counter()
    for (e, name, pc), n in edges.items():
        per_edge[e] += n * size.get(pc, 0)
        per_edge[(e, name)] += n * size.get(pc, 0)
    per, blocks, calls = Counter(), Counter(), Counter()
    entry = dict(zip(names, starts))
    for (context, name, pc), n in runs.items():
        per[(context, name)] += n * size.get(pc, 0)
        if entry.get(name) == pc:
            calls[(context, name)] += n
        blocks[(name, pc)] += n * size.get(pc, 0)
    return per, blocks, calls, per_edge


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--board", default="qemu_f767zi")
    ap.add_argument("--max-overhead", default=None)
    ap.add_argument("--objective", default=None)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--detail", default=None,
                    help="also list this function's hottest blocks with their source lines")
    ap.add_argument("--edge", type=int, action="append",
                    help="also list this edge's functions (repeatable)")
    ap.add_argument("--keep-elf", default=None, help="copy the firmware ELF to this path")
    args = ap.parse_args(argv)
    opts = {}
    if args.objective:
        opts["objective"] = args.objective
    if args.max_overhead:
        opts["max_overhead"] = args.max_overhead
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        core = str(tmp / "core")
        bootstrap.install_tool_scons(core, log=lambda _m: None)
        project = project_for(tmp, "profile", args.board, model=args.model, **opts)
        code, out = pio(core, project, "run", "-e", args.board)
        if code:
            print(out[-2000:])
            return 1
        elf = project / ".pio" / "build" / args.board / "firmware.elf"
        fifo = tmp / "log"
        os.mkfifo(fifo)
        cmd = qemu_command(args.board, elf) + [
            "-d", "in_asm,exec,nochain", "-D", str(fifo)]
        starts, names = symbols(elf)
        if args.keep_elf:
            shutil.copy(elf, args.keep_elf)
        counts: list[Counter] = []
        reader = threading.Thread(
            target=lambda: counts.append(profile(open(fifo, "rb"), starts, names)))
        reader.start()
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        reader.join()
        per, blocks, calls, per_edge = counts[0]
        detail = []
        if args.detail:
            hot = sorted(((n, pc) for (name, pc), n in blocks.items() if name == args.detail),
                         reverse=True)[:args.top]
            where = subprocess.run(["arm-none-eabi-addr2line", "-e", str(elf)]
                                   + [hex(pc) for _, pc in hot], capture_output=True,
                                   text=True).stdout.split("\n")
            detail = [(n, pc, w.rsplit("/", 1)[-1]) for (n, pc), w in zip(hot, where)]
    total = sum(per.values())
    per_fn, per_executor = Counter(), Counter()
    for (context, name), n in per.items():
        per_fn[name] += n
        per_executor[context] += n
    line = [l for l in result.stdout.splitlines() if "cycles=" in l]
    print(line[0] if line else result.stdout[-500:])
    print(f"instructions logged: {total:,}")
    for name, n in per_fn.most_common(args.top):
        print(f"{n:>13,} {100 * n / total:6.2f}%  {name}")
    print("\nper executor (a kernel charged to the executor that called it):")
    for context, n in per_executor.most_common():
        print(f"{n:>13,} {100 * n / total:6.2f}%  {context}")
    for (context, name), n in per.most_common(args.top):
        print(f"{n:>13,} {100 * n / total:6.2f}%  {context:14s} {name:24s} "
              f"{calls[(context, name)]:>9,} calls")
    print("\nper edge (instructions from one msf_run_edge call to the next):")
    print(" ".join(f"{e}:{n}" for e, n in sorted((e, n) for e, n in per_edge.items()
                                                 if isinstance(e, int))))
    for e in args.edge or []:
        print(f"\nedge {e}: {per_edge[e]:,} instructions")
        rows = sorted(((n, k[1]) for k, n in per_edge.items()
                       if isinstance(k, tuple) and k[0] == e), reverse=True)
        for n, name in rows[:args.top]:
            print(f"{n:>13,} {100 * n / per_edge[e]:6.2f}%  {name}")
    if detail:
        print(f"\n{args.detail}: hottest blocks")
    for n, pc, where in detail:
        print(f"{n:>13,} {100 * n / total:6.2f}%  {pc:#010x} {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

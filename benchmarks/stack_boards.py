"""Predicted vs measured stack on the emulated boards (issue 19: measured <= predicted).

For every emulated board, zoo model and plan (vanilla, p1:1.3, p1:inf) the demo project
(examples/msf_demo, as shipped: streamed output, arena measuring, `ram_limit = auto`) is built
through PlatformIO and run in QEMU (a plan that does not fit the board is listed as such). The
measured stack is the result line's `stack=`: the firmware paints its stack at start-up and
finds the deepest word written after the run (its model run, the arena measurement, the
report). The prediction is the build's own (msf_pio/codegen/stack.py, the board's profile in
stack_profiles.json), read from its plan.json. The builds also compile with -fstack-usage, and
the generated model's frames are checked against the profile's (the profile was calibrated on
one model; a model whose generated code took a larger frame than the profile holds for it, or
for its form of specialised kernel, would be flagged here).

Prints one row per run, the smallest margin and the count of runs over their prediction; exits
1 if any.

Run: python benchmarks/stack_boards.py [--boards a,b] [--models a,b] [--plans vanilla,..]
     [--jobs 2]                                       (~1 min per board, model and plan)
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernel_instructions import PLANS, run  # noqa: E402
from latency_boards import run_grid  # noqa: E402
from msf_pio.codegen import stack  # noqa: E402
from msf_pio.pio.project import make_project  # noqa: E402

SU_LINE = re.compile(r"^\S+:(\d+):(\d+):(\S+)\t(\d+)\t(\S+)$", re.M)


def generated_frames_within(project: Path, board: str) -> list[str]:
    """Frames of the generated model's functions larger than the profile holds."""
    prof = stack.profile(board)["functions"]
    over = []
    for su in (project / ".pio" / "build" / board).rglob("msf_model.su"):
        for _, _, name, size, _ in SU_LINE.findall(su.read_text()):
            name = name.split(".")[0] if "." in name and not name.startswith(".") else name
            known = [f["frame"] for n, f in prof.items()
                     if n.split(":")[-1].split(".")[0] == name or
                     n in stack.SPECIALISED and name.startswith(n.split(":")[-1])]
            if known and int(size) > max(known):
                over.append(f"{name} {size} > {max(known)}")
    return over


def build_and_run(core, tmp: Path, name: str, board: str, label: str):
    opts = dict(PLANS)[label]
    project = make_project(tmp / f"{name}-{label.replace(':', '_')}-{board}", model=name,
                           **opts)
    ini = project / "platformio.ini"
    ini.write_text(ini.read_text() + "\n[env]\nbuild_flags = -fstack-usage\n")
    fields, error = run(core, project, board)
    if fields is None:
        return None, error, None, []
    plan = json.loads((project / ".pio" / "build" / board / "msf_generated" /
                       "plan.json").read_text())
    return fields, None, plan, generated_frames_within(project, board)


def main(argv=None) -> int:
    results = run_grid(argv, __doc__.splitlines()[0], build_and_run)
    print("| model | board | plan | arena B | measured stack B | predicted stack B | "
          "predicted - measured | deepest edge |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    over, unfit, margins, frames = [], 0, [], []
    for (name, board, label), (r, error, plan, big) in results:
        if r is None:
            fits = not any(w in error for w in ("infeasible", "overflow", "will not fit",
                                                "has only", "plans that fit", "B of flash"))
            unfit += not fits
            print(f"| {name} | {board} | {label} | "
                  f"{'error: ' + error[:90] if fits else 'does not fit the board'} ||||")
            continue
        measured, predicted = int(r["stack"]), plan.get("predicted_stack_bytes")
        margin = predicted - measured if predicted is not None else None
        if margin is not None:
            margins.append((margin, name, board, label))
            if margin < 0:
                over.append((name, board, label))
        frames += [f"{name} {board} {label}: {f}" for f in big]
        deepest = plan.get("stack_deepest_path") or []
        top = max(deepest, key=lambda p: p[1])[0] if deepest else "-"
        print(f"| {name} | {board} | {r['plan']} | {r['arena']} | {measured:,} | "
              f"{predicted if predicted is None else format(predicted, ',')} | "
              f"{margin if margin is None else format(margin, '+,')} | "
              f"{plan.get('stack_deepest_edge', '-')} ({top}) |", flush=True)
    if margins:
        low = min(margins)
        print(f"\n{len(margins)} runs; smallest margin {low[0]:+} B ({low[1]}, {low[2]}, "
              f"{low[3]}), largest {max(margins)[0]:+} B; {len(over)} runs over their "
              f"prediction; {unfit} runs do not fit their board")
    for line in frames:
        print(f"generated frame above the profile: {line}")
    return 1 if over or frames else 0


if __name__ == "__main__":
    sys.exit(main())

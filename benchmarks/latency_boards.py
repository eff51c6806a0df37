"""Predicted vs measured latency on the emulated boards (issue 11: within 10% everywhere).

For every emulated board, zoo model and plan (vanilla, p1:1.3, p1:inf) the plan is built for
the board through PlatformIO (its RAM limit: what the board has left, `ram_limit = auto`; a plan
that does not fit is listed as such) with benchmarks/firmware/main.c timing msf_model_run
alone; QEMU counts instructions (-icount; RISC-V mcycle), so the measured figure is the result
line's `cycles=`. The prediction is the latency cost model's (msf_pio/fusion/latency.py, the
board's profile in latency_profiles.json) for the plan the solver returns for that board,
checked to be the plan built (same MACs and arena). Prints one row per run and the worst
relative error.

Run: python benchmarks/latency_boards.py [--boards a,b] [--models a,b] [--plans vanilla,..]
     [--jobs 2]                                       (~1 min per board and model)
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# the msf_pio (and so the library/) of this checkout, not an installed copy of another one
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernel_instructions import FIRMWARE, PLANS, run  # noqa: E402
from msf_pio.fusion.planner import plan_model  # noqa: E402
from msf_pio.model import zoo  # noqa: E402
from msf_pio.pio import bootstrap  # noqa: E402
from msf_pio.pio.project import make_project  # noqa: E402

BOARDS = ("qemu_f767zi", "qemu_f412zg", "qemu_hifive1b", "qemu_esp32c3", "qemu_esp32s3")


def build_and_run(core, tmp: Path, name: str, board: str, label: str):
    opts = dict(PLANS)[label]
    project = make_project(tmp / f"{name}-{label.replace(':', '_')}-{board}", model=name,
                           output="buffer", **opts)
    (project / "src" / "main.c").write_text(FIRMWARE.read_text())
    return run(core, project, board)


def run_grid(argv, description: str, build_and_run) -> list:
    """Every (model, board, plan) of the command line's --models/--boards/--plans through
    `build_and_run(core, tmp, model, board, plan)`, --jobs at a time: [(job, its result)]."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--boards", default=",".join(BOARDS))
    ap.add_argument("--models", default=",".join(zoo.zoo_names()))
    ap.add_argument("--plans", default=",".join(p for p, _ in PLANS))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    jobs = [(m, b, p) for m in args.models.split(",") for b in args.boards.split(",")
            for p in args.plans.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        core = str(tmp / "core")
        bootstrap.install_tool_scons(core, log=lambda _m: None)
        with ThreadPoolExecutor(args.jobs) as pool:
            return list(pool.map(lambda j: (j, build_and_run(core, tmp, *j)), jobs))


def main(argv=None) -> int:
    results = run_grid(argv, __doc__.splitlines()[0], build_and_run)
    print("| model | board | plan | arena B | MACs | measured instructions | predicted | "
          "pred / meas | stack B measured / predicted |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    worst, unfit = None, 0
    for (name, board, label), (r, error) in results:
        if r is None:
            fits = not any(w in error for w in ("infeasible", "overflow", "will not fit"))
            unfit += not fits
            print(f"| {name} | {board} | {label} | "
                  f"{'error: ' + error[:90] if fits else 'does not fit the board'} ||||||")
            continue
        opts = dict(PLANS)[label]
        plan, _ = plan_model(name, opts.get("objective", "min_ram"),
                             float(opts.get("max_overhead", "inf")), board=board)
        same = plan.macs == int(r["macs"]) and plan.peak_ram == int(r["arena"])
        measured, predicted = int(r["cycles"]), plan.predicted_instructions
        error_rel = predicted / measured - 1
        if same and (worst is None or abs(error_rel) > abs(worst[0])):
            worst = (error_rel, name, board, label)
        print(f"| {name} | {board} | {r['plan']} | {r['arena']} | {int(r['macs']):,} | "
              f"{measured:,} | {predicted:,} | {predicted / measured:.3f}"
              f"{'' if same else ' (solver plan differs from the build)'} | "
              f"{r['stack']} / {r['stack_pred']} |", flush=True)
    if worst:
        print(f"\nworst relative error {worst[0]:+.3f} ({worst[1]}, {worst[2]}, {worst[3]}); "
              f"{unfit} runs do not fit their board")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Predicted vs measured latency on the emulated boards (issue 11: within 10% everywhere).

For every emulated board, zoo model (zoo/large's too) and plan (vanilla, p1:1.3, p1:inf) the
plan is built for the board through PlatformIO (its RAM limit: what the board has left,
`ram_limit = auto`; a plan that does not fit is listed as such) with benchmarks/firmware/main.c
timing msf_model_run alone; QEMU counts instructions (-icount; RISC-V mcycle), so the measured
figure is the result line's `cycles=`. Weights that do not fit a board's flash go to its
external memory where it maps one (custom_msf_weights_section = .msf_weights, as
benchmarks/zoo_boards.py: qemu_f767zi's 16 MB at 0x60000000), else the model does not fit. The
prediction is the latency cost model's (msf_pio/fusion/latency.py, the board's profile in
latency_profiles.json) for the plan the solver returns for that board, checked to be the plan
built (same MACs and arena), with the arena's compaction between edges (codegen/arena.py). Prints one row per run, the worst relative error per board and
every row outside 10%.

--save FILE keeps the runs' results (a JSON line per run as it ends, so an interrupted grid
keeps what it ran); --load FILE[,FILE...] prints the table from them again without running
anything, priced by the profiles as they are now (after a recalibration).

Run: python benchmarks/latency_boards.py [--boards a,b] [--models a,b] [--plans vanilla,..]
     [--jobs 2] [--save FILE | --load FILE,...]
                                   (a few seconds per small run; the whole grid about an hour)
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Lock

# the msf_pio (and so the library/) of this checkout, not an installed copy of another one
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernel_instructions import FIRMWARE, PLANS, run  # noqa: E402
from msf_pio.codegen.arena import attach_compaction  # noqa: E402
from msf_pio.fusion.planner import plan_model  # noqa: E402
from msf_pio.model import load_model, zoo  # noqa: E402
from msf_pio.pio import bootstrap  # noqa: E402
from msf_pio.pio.project import make_project  # noqa: E402

BOARDS = ("qemu_f767zi", "qemu_f412zg", "qemu_hifive1b", "qemu_esp32c3", "qemu_esp32s3")
MANIFESTS = Path(__file__).resolve().parents[1] / "msf_pio" / "pio" / "platform" / "boards"
WEIGHTS_SECTION = ".msf_weights"


def external_weights(board: str) -> bool:
    """Whether the emulated board maps memory for a weights section (its manifest's
    upload.maximum_weights_size)."""
    manifest = json.loads((MANIFESTS / f"{board}.json").read_text())
    return bool(manifest.get("upload", {}).get("maximum_weights_size"))


def build_and_run(core, tmp: Path, name: str, board: str, label: str):
    """The run's result fields (or None and the error); weights that do not fit the board's
    flash are built again in its weights section, if it has one."""
    opts = dict(PLANS)[label]
    project = make_project(tmp / f"{name}-{label.replace(':', '_')}-{board}", model=name,
                           output="buffer", **opts)
    (project / "src" / "main.c").write_text(FIRMWARE.read_text())
    r, error = run(core, project, board)
    if r is None and "B of flash" in error and external_weights(board):
        ini = project / "platformio.ini"
        ini.write_text(ini.read_text() +
                       f"\n[env]\ncustom_msf_weights_section = {WEIGHTS_SECTION}\n")
        r, error = run(core, project, board)
    return r, error


def run_grid(argv, description: str, build_and_run, models: list[str] | None = None) -> list:
    """Every (model, board, plan) of the command line's --models (default `models`, else the
    zoo's small ones)/--boards/--plans through `build_and_run(core, tmp, model, board, plan)`,
    --jobs at a time: [(job, its result)]."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--boards", default=",".join(BOARDS))
    ap.add_argument("--models", default=",".join(models or zoo.zoo_names()))
    ap.add_argument("--plans", default=",".join(p for p, _ in PLANS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--save", help="append the runs' results to this file (JSON lines)")
    ap.add_argument("--load", help="the results of earlier --save runs (files a,b,...), "
                                   "instead of running")
    args = ap.parse_args(argv)
    if args.load:
        return [(tuple(job), tuple(result)) for name in args.load.split(",")
                for job, result in map(json.loads, Path(name).read_text().splitlines())]
    jobs = [(m, b, p) for m in args.models.split(",") for b in args.boards.split(",")
            for p in args.plans.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        core = str(tmp / "core")
        bootstrap.install_tool_scons(core, log=lambda _m: None)
        saved = Lock()

        def one(job):
            result = build_and_run(core, tmp, *job)
            if args.save:
                with saved, open(args.save, "a") as f:
                    f.write(json.dumps([job, result]) + "\n")
            return job, result

        with ThreadPoolExecutor(args.jobs) as pool:
            return list(pool.map(one, jobs))


def main(argv=None) -> int:
    results = run_grid(argv, __doc__.splitlines()[0], build_and_run, zoo.zoo_names(large=True))
    print("| model | board | plan | arena B | MACs | measured instructions | predicted | "
          "pred / meas | stack B measured / predicted |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    worst: dict = {}
    outside, unfit = [], []
    for (name, board, label), (r, error) in results:
        if r is None:
            fits = not any(w in error for w in ("infeasible", "overflow", "will not fit",
                                                "B of flash"))
            if not fits:
                unfit.append(f"{name} {board} {label}: {error[:160]}")
            print(f"| {name} | {board} | {label} | "
                  f"{'error: ' + error[:90] if fits else 'does not fit the board'} ||||||")
            continue
        opts = dict(PLANS)[label]
        plan, _ = plan_model(name, opts.get("objective", "min_ram"),
                             float(opts.get("max_overhead", "inf")), board=board)
        attach_compaction(load_model(name), plan)
        same = plan.macs == int(r["macs"]) and plan.peak_ram == int(r["arena"])
        measured, predicted = int(r["cycles"]), plan.predicted_instructions
        error_rel = predicted / measured - 1
        if same and (board not in worst or abs(error_rel) > abs(worst[board][0])):
            worst[board] = (error_rel, name, label)
        if not same or abs(error_rel) > 0.1:
            outside.append(f"{name} {board} {label}: {predicted / measured:.3f}"
                           f"{'' if same else ' (solver plan differs from the build)'}")
        print(f"| {name} | {board} | {r['plan']} | {r['arena']} | {int(r['macs']):,} | "
              f"{measured:,} | {predicted:,} | {predicted / measured:.3f}"
              f"{'' if same else ' (solver plan differs from the build)'} | "
              f"{r['stack']} / {r['stack_pred']} |", flush=True)
    for board, (error_rel, name, label) in worst.items():
        print(f"\n{board}: worst relative error {error_rel:+.3f} ({name}, {label})", end="")
    print(f"\nruns outside 10% (or not the solver's plan): {len(outside)}")
    for line in outside:
        print(f"  {line}")
    print(f"runs that do not fit their board: {len(unfit)}")
    for line in unfit:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

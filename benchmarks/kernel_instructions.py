"""Instructions per MAC of the int8 kernels on the emulated boards (issue 11's table), and of
whole networks under vanilla, p1:1.3 and p1:inf plans.

Each shape is a one-layer YAML model run through PlatformIO (`pio run -e <board> -t upload`)
under the vanilla plan, in the demo project with benchmarks/firmware/main.c as its firmware (it
times msf_model_run alone; the demo's timed region also CRCs the output); QEMU counts
instructions (-icount), so the result line's `cycles=` is the instructions msf_model_run executed. instr/MAC = cycles / the layer's nominal MACs (every kernel
tap, padding included, as CMSIS-NN's figures count). The CMSIS-NN column is the issue's figure
(Cortex-M7, -Ofast, same QEMU counting). Networks: instructions / executed MACs, and the fused
plans' instruction ratio to vanilla beside their predicted F (the MAC ratio) and their layer-mix
ratio: firmware built with -DMSF_PROFILE_EDGES times every edge; the vanilla plan's edges give
each layer's instructions per output pixel, and a fused plan's edges priced at those (the pixels
its schedule computes, exact_cost.edge_layer_pixels) give what it would take if fusion added
nothing but the recomputed pixels. A MAC ratio F weighs every layer's MACs alike; the mix ratio
weighs them by what they cost, so ratio / mix is fused execution's own overhead (per-call set-up,
bookkeeping, ring moves) and mix / F the layer mix (recomputation falling on layers that cost
more or less per MAC than the network's average). --blocks prints it per edge.

Run: python benchmarks/kernel_instructions.py [--boards qemu_f767zi,...] [--shapes-only]
     [--networks-only] [--models a,b] [--plans p1:1.3] [--blocks] [--thin]
                                                      (~1 min per board for the shapes)
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

# the msf_pio (and so the library/) of this checkout, not an installed copy of another one
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from msf_pio.fusion import exact_cost, latency, schemes  # noqa: E402
from msf_pio.fusion.planner import plan_model  # noqa: E402
from msf_pio.model import load_model  # noqa: E402
from msf_pio.pio import bootstrap  # noqa: E402
from msf_pio.pio.project import make_project, pio, result_lines, widen_flash  # noqa: E402

BOARDS = ("qemu_f767zi", "qemu_f412zg", "qemu_esp32c3")
# name -> (input HWC, layer, CMSIS-NN instr/MAC on the Cortex-M7 model from issue 11)
SHAPES = {
    "conv 3x3 s2, 3->16, 80x80": ([80, 80, 3], {"op": "conv2d", "out": 16, "kernel": 3,
                                                "stride": 2, "act": "relu6"}, 4.65),
    "pointwise 16->48, 40x40": ([40, 40, 16], {"op": "pointwise", "out": 48, "act": "relu6"},
                                3.91),
    "depthwise 3x3 s1, 48 ch, 40x40": ([40, 40, 48], {"op": "depthwise_conv2d", "kernel": 3,
                                                      "act": "relu6"}, 8.68),
    "depthwise 7x7 s2, 48 ch, 40x40": ([40, 40, 48], {"op": "depthwise_conv2d", "kernel": 7,
                                                      "stride": 2, "act": "relu6"}, 8.58),
    "pointwise 48->16, 20x20": ([20, 20, 48], {"op": "pointwise", "out": 16}, 2.24),
    "dense 1280->1000": ([1, 1, 1280], {"op": "dense", "out": 1000}, 1.91),
}
# --thin: the thin layers of mbv2-w0.35-paper's first block, where its fused plans recompute
# (few MACs per output, so a fixed per-output cost weighs more per MAC; no CMSIS-NN figure)
THIN = {
    "pointwise 5->30, 72x72": ([72, 72, 5], {"op": "pointwise", "out": 30, "act": "relu6"},
                               None),
    "pointwise 8->30, 72x72": ([72, 72, 8], {"op": "pointwise", "out": 30, "act": "relu6"},
                               None),
    "pointwise 11->5, 72x72": ([72, 72, 11], {"op": "pointwise", "out": 5}, None),
    "depthwise 3x3 s1, 11 ch, 72x72": ([72, 72, 11], {"op": "depthwise_conv2d", "kernel": 3,
                                                      "act": "relu6"}, None),
}
NETWORKS = ("mbv2-w0.35-paper", "mcunet-vww-5fps", "mbv2-w0.35-r144")
PLANS = (("vanilla", {"objective": "vanilla"}), ("p1:1.3", {"max_overhead": "1.3"}),
         ("p1:inf", {}))
FIRMWARE = Path(__file__).resolve().parent / "firmware" / "main.c"   # times msf_model_run only
FIELD = re.compile(r"(\w+)=(\S+)")
EDGE = re.compile(r"^MSF edge=(\d+) cycles=(\d+)$", re.M)     # -DMSF_PROFILE_EDGES builds


def nominal_macs(shape, layer) -> int:
    h, w, c = shape
    if layer["op"] == "dense":
        return h * w * c * layer["out"]
    k, s = layer.get("kernel", 1), layer.get("stride", 1)
    oh, ow = -(-h // s), -(-w // s)                      # padding "same"
    if layer["op"] == "depthwise_conv2d":
        return oh * ow * c * k * k
    return oh * ow * layer["out"] * k * k * c


def run(core, project: Path, board: str):
    """The result line's fields, or None and an error line."""
    code, out = pio(core, project, "run", "-e", board, "-t", "upload")
    lines = result_lines(out)
    if code or not lines:
        error = [l for l in out.splitlines() if "error" in l.lower()]
        return None, (error[0] if error else out[-300:]).strip()
    fields = dict(FIELD.findall(lines[0]))
    if fields.get("status") != "ok" or fields.get("crc") != fields.get("crc_ref"):
        return None, lines[0]
    fields["edges"] = [int(c) for _, c in sorted((int(k), c) for k, c in EDGE.findall(out))]
    fields["stack_pred"] = predicted_stack(project, board)
    return fields, None


def predicted_stack(project: Path, board: str) -> str:
    """The build's predicted stack (codegen/stack.py, for the shipped firmwares' call paths;
    the board's profile), from its plan.json; '-' for a board with no profile."""
    plan = project / ".pio" / "build" / board / "msf_generated" / "plan.json"
    return str(json.loads(plan.read_text()).get("predicted_stack_bytes", "-"))


def project_for(tmp: Path, tag: str, board: str, profile: bool = False, **options) -> Path:
    """profile: the firmware also times every edge (about 40 instructions per edge)."""
    # the firmware times the edges itself (MSF_PROFILE_EDGES): not the build's msf_profile.c
    options = {"ram_limit": "inf", "output": "buffer", "profile": "no", **options}
    project = make_project(tmp / f"{tag}-{board}", **options)
    (project / "src" / "main.c").write_text(FIRMWARE.read_text())
    # the dense layer's 1.28 MB of weights do not fit the 1 MB flash of the F412 stand-in;
    # the emulated memory does, so the benchmark lifts the flash limit (RAM stays the part's)
    widen_flash(project, 4194304)
    if profile:
        ini = project / "platformio.ini"
        ini.write_text(ini.read_text() + "build_flags = -DMSF_PROFILE_EDGES\n")
    return project


def shapes_table(core, tmp: Path, boards, jobs: int, shapes=SHAPES) -> None:
    models = {}
    for i, (name, (shape, layer, _)) in enumerate(shapes.items()):
        path = tmp / f"shape{i}.yaml"
        path.write_text(yaml.safe_dump({"name": f"shape{i}", "input": {"shape": shape},
                                        "weights": {"random": 1}, "layers": [layer]}))
        models[name] = path

    def one(job):
        name, board = job
        project = project_for(tmp, f"shape{list(shapes).index(name)}", board,
                              model=str(models[name]), objective="vanilla")
        return job, run(core, project, board)

    jobs_list = [(n, b) for n in shapes for b in boards]
    with ThreadPoolExecutor(jobs) as pool:
        results = dict(pool.map(one, jobs_list))
    head = " | ".join(f"{b} instr/MAC" for b in boards)
    print(f"| layer | nominal MACs | {head} | CMSIS-NN M7 | M7 / CMSIS-NN |")
    print("|---|---:|" + "---:|" * len(boards) + "---:|---:|")
    for name, (shape, layer, cmsis) in shapes.items():
        macs = nominal_macs(shape, layer)
        cells, m7 = [], None
        for board in boards:
            r, error = results[(name, board)]
            if r is None:
                cells.append(f"error: {error[:60]}")
                continue
            ipm = int(r["cycles"]) / macs
            cells.append(f"{ipm:.2f}")
            m7 = ipm if board == "qemu_f767zi" else m7
        ratio = f"{m7 / cmsis:.2f}x" if m7 and cmsis else "-"
        print(f"| {name} | {macs:,} | {' | '.join(cells)} | {cmsis or '-'} | {ratio} |",
              flush=True)


def solved(model, label: str, board: str):
    """The plan the build solves for `label` on `board`."""
    opts = dict(PLANS)[label]
    plan, _ = plan_model(model, opts.get("objective", "min_ram"),
                         float(opts.get("max_overhead", "inf")), board=board)
    return plan


def layer_costs(model, vanilla, edge_cycles) -> dict[int, float]:
    """Layer -> instructions per output pixel in the vanilla plan, from its edges' measured
    instructions (an edge of several layers, e.g. pooling + dense, split by MACs)."""
    cost = {}
    for e, cycles in zip(vanilla.blocks, edge_cycles):
        ls = range(e.first, e.last + 1)
        macs = [exact_cost.layer_macs(model.layers[l]) for l in ls]
        total = sum(macs)
        pixels = exact_cost.edge_layer_pixels(model, e)
        for l, m in zip(ls, macs):
            cost[l] = cycles * (m / total if total else 1 / len(ls)) / pixels[l]
    return cost


def mix_prediction(model, plan, cost) -> list[float]:
    """Per edge of `plan`: its layers' pixels (recomputation included) at the vanilla plan's
    instructions per pixel, i.e. what the edge would take if fusing added no work but the
    recomputed pixels. Their sum over vanilla's is the plan's layer-mix ratio."""
    return [sum(n * cost[l] for l, n in exact_cost.edge_layer_pixels(model, e).items())
            for e in plan.blocks]


def networks_table(core, tmp: Path, boards, models, jobs: int, plans=PLANS,
                   blocks: bool = False) -> None:
    """Every plan built with edge profiling; the layer-mix ratio sets the fused plan's edges
    against the vanilla plan's per-layer instructions (ratio / mix: fused execution's own
    overhead: per-call set-up, bookkeeping, ring moves)."""
    def one(job):
        name, board, (label, opts) = job
        project = project_for(tmp, f"{name}-{label.replace(':', '_')}", board, profile=True,
                              model=name, **opts)
        return (name, board, label), run(core, project, board)

    jobs_list = [(n, b, p) for n in models for b in boards for p in plans]
    with ThreadPoolExecutor(jobs) as pool:
        results = dict(pool.map(one, jobs_list))
    print("\n| model | board | plan | arena B | MACs | instructions | instr/MAC | "
          "predicted F | measured ratio | ratio / F | layer-mix ratio | ratio / mix | "
          "predicted instructions | pred / meas |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    details = []
    for name in models:
        model = load_model(name)
        for board in boards:
            base, cost = None, None
            for label, _ in plans:
                r, error = results[(name, board, label)]
                if r is None:
                    print(f"| {name} | {board} | {label} | error: {error[:80]} |||||||||")
                    continue
                plan = solved(model, label, board)
                cycles, macs = int(r["cycles"]), int(r["macs"])
                if base is None:                      # the first plan: vanilla
                    base = (cycles, macs, sum(r["edges"]))
                    cost = layer_costs(model, plan, r["edges"])
                mix = mix_prediction(model, plan, cost)
                f, ratio, mix_ratio = macs / base[1], cycles / base[0], sum(mix) / base[2]
                pred = plan.predicted_instructions if board in latency.boards() else None
                pcell = f"{pred:,} | {pred / cycles:.3f}" if pred else "- | -"
                print(f"| {name} | {board} | {r['plan']} | {r['arena']} | {macs:,} | "
                      f"{cycles:,} | {cycles / macs:.2f} | {f:.3f} | {ratio:.3f} | "
                      f"{ratio / f:.3f} | {mix_ratio:.3f} | {ratio / mix_ratio:.3f} | "
                      f"{pcell} |", flush=True)
                if (cycles, macs) != base[:2]:
                    details.append((name, board, r["plan"], plan, r["edges"], mix, cycles))
    if blocks:
        for name, board, label, plan, measured, mix, cycles in details:
            print(f"\n{name} {board} {label}: outside the edges (ring moves, calls) "
                  f"{cycles - sum(measured):,} instructions")
            print("| edge | layers | scheme | instructions | at vanilla's per pixel | ratio |")
            print("|---:|---|---|---:|---:|---:|")
            for k, (e, m, x) in enumerate(zip(plan.blocks, measured, mix)):
                print(f"| {k} | {e.first}-{e.last} | {schemes.label(e)}"
                      f" | {m:,} | {x:,.0f} | {m / x:.3f} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", default=",".join(BOARDS))
    ap.add_argument("--models", default=",".join(NETWORKS))
    ap.add_argument("--shapes-only", action="store_true")
    ap.add_argument("--networks-only", action="store_true")
    ap.add_argument("--plans", default=",".join(p for p, _ in PLANS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--thin", action="store_true",
                    help="the shapes table over mbv2's thin first-block layers instead")
    ap.add_argument("--blocks", action="store_true",
                    help="also every edge's instructions beside its layer-mix prediction")
    args = ap.parse_args(argv)
    boards = args.boards.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        core = str(tmp / "core")
        bootstrap.install_tool_scons(core, log=lambda _m: None)
        if not args.networks_only:
            shapes_table(core, tmp, boards, args.jobs, THIN if args.thin else SHAPES)
        if not args.shapes_only:
            plans = [p for p in PLANS if p[0] in args.plans.split(",") + ["vanilla"]]
            networks_table(core, tmp, boards, args.models.split(","), args.jobs, plans,
                           args.blocks)
    return 0


if __name__ == "__main__":
    sys.exit(main())

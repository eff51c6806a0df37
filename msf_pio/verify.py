"""`msf-pio verify`: a plan's generated C, built and run on the host, against independent
evidence: the numpy reference, the unfused plan, the exact model's arena and MAC predictions,
and a sanitizer build."""
from __future__ import annotations

import math
import zlib

import numpy as np

from . import progress
from .codegen.generate import generate
from .codegen.host import HostBuild
from .errors import MsfError
from .fusion import solvers
from .fusion.graph import build_graph
from .fusion.plan import Plan
from .fusion.planner import feasible_plan, graph_for
from .model import load_model
from .model.ir import Model
from .model.calibration import load_calibration
from .model.weights import calibration_inputs, materialize
from .reference import run_model


def seeded_input(model: Model, seed: int) -> np.ndarray:
    """A reproducible int8 input image (HWC) like the calibration images (a new seed stream),
    so that activations are in their calibrated ranges rather than saturated."""
    image = calibration_inputs(model.input_shape, 1000 + seed, n=1)[0]
    q = model.q_input
    return np.clip(np.round(image / q.scale) + q.zero_point, -128, 127).astype(np.int8)


def crc32(data: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(data, dtype=np.int8).tobytes())


def quantized_model(ref: str | Model, calibration: str | None = None,
                    input_range: tuple[float, float] | None = None) -> Model:
    """The model quantized; a float model is calibrated on the .npy/.npz file or folder
    `calibration`, else on random images in `input_range`."""
    model = ref if isinstance(ref, Model) else load_model(ref)
    batch = None
    if calibration is not None and not model.quantized:
        batch = load_calibration(calibration, model.input_shape)
    return materialize(model, batch, input_range)


def plan_for(model: Model, objective: str, max_overhead: float = math.inf,
             ram_limit: float | None = None, cost_model: str = "exact",
             board: str | None = None, schemes: tuple[str, ...] | None = None) -> Plan:
    """The plan the options ask for; `schemes` limits the cache schemes (default: all)."""
    if cost_model != "exact":
        raise MsfError("generated code follows the exact cost model (the paper model is for "
                       "comparison only)", where="cost_model")
    return feasible_plan(graph_for(model, objective, ram_limit, "exact", schemes), objective,
                         max_overhead, ram_limit, board=board)


def verify(model: Model, plan: Plan, seeds=(0,), sanitize: bool = True) -> dict:
    """Build the plan's C (plain, MAC-counting, arena-measuring, sanitizer) and the unfused
    plan's C; compare outputs and figures on every seed."""
    build = HostBuild(generate(model, plan))
    unfused_plan = solvers.vanilla(build_graph(model, "exact", ram_cap=0))   # single layers
    unfused = HostBuild(generate(model, unfused_plan))
    step = progress.task("verify: host builds and runs", total=len(seeds), ticking=True)
    try:
        runs = []
        for seed in seeds:
            step.update(note=f"seed {seed}")
            x = seeded_input(model, seed)
            out = build.run(x).output
            runs.append({
                "seed": seed,
                "output_crc32": f"0x{crc32(out):08x}",
                "matches_reference": bool(np.array_equal(out, run_model(model, x).reshape(-1))),
                "matches_unfused": bool(np.array_equal(out, unfused.run(x).output)),
                "macs_counted": build.run(x, "count").figures["macs_counted"],
                "arena_measured": build.run(x, "measure").figures["arena_measured"],
                "sanitizer_clean": (bool(np.array_equal(build.run(x, "sanitize").output, out))
                                    if sanitize else None),
            })
            step.advance()
    finally:
        step.close()
        build.close()
        unfused.close()
    result = {
        "model": model.name, "plan": plan.label, "objective": plan.objective,
        "blocks": [[e.first, e.last] for e in plan.blocks if e.fused],
        "matches_reference": all(r["matches_reference"] for r in runs),
        "matches_unfused": all(r["matches_unfused"] for r in runs),
        "arena_measured": max(r["arena_measured"] for r in runs),
        "arena_predicted": plan.peak_ram,
        "macs_counted": runs[0]["macs_counted"],
        "macs_predicted": plan.macs,
        "sanitizer_clean": all(r["sanitizer_clean"] for r in runs) if sanitize else None,
        "io_bytes": plan.io_bytes,          # the caller's buffers (none for streamed tensors)
        "runs": runs,
    }
    result["ok"] = (result["matches_reference"] and result["matches_unfused"]
                    and result["arena_measured"] == result["arena_predicted"]
                    and all(r["macs_counted"] == plan.macs for r in runs)
                    and result["sanitizer_clean"] is not False)
    return result


def render(result: dict) -> str:
    def mark(ok):
        return "ok" if ok else "MISMATCH"
    r = result
    return "\n".join([
        f"verify {r['model']} plan {r['plan']} ({len(r['blocks'])} fusion blocks), "
        f"seeds {', '.join(str(x['seed']) for x in r['runs'])}",
        f"  output == numpy reference : {mark(r['matches_reference'])}",
        f"  output == unfused plan    : {mark(r['matches_unfused'])}",
        f"  arena measured/predicted  : {r['arena_measured']} / {r['arena_predicted']} B "
        f"{mark(r['arena_measured'] == r['arena_predicted'])} (workspace; + I/O "
        f"{r['io_bytes']} B = {r['arena_measured'] + r['io_bytes']} B)",
        f"  MACs counted/predicted    : {r['macs_counted']} / {r['macs_predicted']} "
        f"{mark(r['macs_counted'] == r['macs_predicted'])}",
        f"  ASan/UBSan build          : "
        f"{'skipped' if r['sanitizer_clean'] is None else mark(r['sanitizer_clean'])}",
        f"  output crc32              : {r['runs'][0]['output_crc32']}",
        "VERIFIED" if r["ok"] else "FAILED",
    ])

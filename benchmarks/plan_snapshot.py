"""What the cost model, the planner, the code generator and the C runtime give, written down so
that a refactor can show it changed none of it.

`dump` writes a folder, one JSON file a model (a dump stopped midway goes on where it
stopped): for every zoo model (buffered, and two with a streamed input and
output) and a fixed set of small random models (tests/random_models.py's specs, drawn once and
kept in the file, plus inverted-residual models with channel-split triples), every edge of the
exact fusion graph (scheme, tile rows, RAM, MACs, scratch buffers) and its latency counts, the
paper model's edges, the Pareto frontier, the plan JSON of several objectives with the predicted
cycles on every calibrated board, and the generated C's digest; with --run-c, every plan's C
built and run on the host (output bytes, counted MACs, measured arena), and the numpy
reference's output of the small models' plans. `compare` prints what differs between two dumps.

Run: python benchmarks/plan_snapshot.py dump BEFORE_DIR [--run-c] [--quick]
     (change the code)
     python benchmarks/plan_snapshot.py dump AFTER_DIR --like BEFORE_DIR [--run-c] [--quick]
     python benchmarks/plan_snapshot.py compare BEFORE_DIR AFTER_DIR
"""
import argparse
import hashlib
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from msf_pio.codegen.generate import generate                           # noqa: E402
from msf_pio.codegen.host import HostBuild                              # noqa: E402
from msf_pio.errors import MsfError                                     # noqa: E402
from msf_pio.fusion import latency, solvers                             # noqa: E402
from msf_pio.fusion.graph import build_graph                            # noqa: E402
from msf_pio.model import load_model                                    # noqa: E402
from msf_pio.model.spec import spec_to_model                            # noqa: E402
from msf_pio.model.zoo import zoo_names                                 # noqa: E402
from msf_pio.reference.plan import run_plan                             # noqa: E402
from msf_pio.verify import quantized_model, seeded_input                # noqa: E402

STREAMED = ("mcunet-vww-5fps", "mlperf-tiny-vww")   # zoo models also run with streamed I/O
N_RANDOM = 40


def random_specs(n: int) -> list[dict]:
    """n specs of tests/random_models.py, drawn deterministically (hypothesis, derandomized)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from tests.random_models import small_specs
    specs = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(small_specs())
    def collect(spec):
        specs.append(spec)

    collect()
    return specs[:n]


def triple_specs() -> list[dict]:
    """Inverted residuals whose expansion the channel split divides into groups."""
    out = []
    for size, c, expand, stride in ((12, 8, 2, 1), (15, 8, 4, 2), (10, 16, 3, 1)):
        out.append({"name": f"triples-{size}-{c}-{expand}", "input": {"shape": [size, size, 3]},
                    "layers": [{"op": "conv2d", "out": c, "kernel": 3, "stride": 1,
                                "act": "relu6"},
                               {"op": "inverted_residual", "out": c, "expand": expand,
                                "kernel": 3, "stride": 1},
                               {"op": "inverted_residual", "out": c, "expand": expand,
                                "kernel": 5, "stride": stride},
                               {"op": "pointwise", "out": 8},
                               {"op": "global_avgpool"}, {"op": "dense", "out": 4}]})
    return out


def jsonable(x):
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return None if math.isinf(x) else float(x)
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    return x


def edge_row(e) -> list:
    return jsonable([e.first, e.last, e.scheme, e.tile_rows, e.ram, e.macs, e.detail])


def plans(graph) -> dict:
    """The plans of several objectives (plan JSON), keyed by a label."""
    least = solvers.p1_min_ram(graph)
    out = {"vanilla": solvers.vanilla(graph), "heuristic": solvers.heuristic(graph),
           "p1:inf": least, "p1:1.3": solvers.p1_min_ram(graph, 1.3),
           "p1:1.0": solvers.p1_min_ram(graph, 1.0)}
    if least.feasible:
        limit = int(least.peak_ram * 1.5)
        out[f"p2:{limit}"] = solvers.p2_min_macs(graph, limit)
        out[f"lat:{limit}"] = solvers.min_latency(graph, limit, "qemu_f767zi")
    return out


def plan_record(model, plan) -> dict:
    rec = {"json": jsonable(plan.to_json())}
    if plan.feasible:
        rec["cycles"] = {b: latency.plan_instructions(model, plan.blocks, latency.profile(b))
                         for b in latency.boards()}
    return rec


def c_digest(sources) -> str:
    return hashlib.sha256((sources.header + sources.source).encode()).hexdigest()


def run_c(model, plan, x) -> dict:
    build = HostBuild(generate(model, plan))
    try:
        counted = build.run(x, "count")
        measured = build.run(x, "measure")
        return {"output_sha256": hashlib.sha256(counted.output.tobytes()).hexdigest(),
                "macs_counted": counted.figures.get("macs_counted"),
                "arena_measured": measured.figures.get("arena_measured")}
    finally:
        build.close()


def snapshot(name: str, model, run: bool, reference: bool, all_latency: bool = True) -> dict:
    """Everything recorded of one (quantized) model."""
    print(f"  {name}", file=sys.stderr, flush=True)
    out: dict = {}
    graph = build_graph(model, "exact")
    out["edges"] = [edge_row(e) for e in graph.edges]
    if all_latency:
        out["edge_counts"] = [jsonable(latency.edge_counts(model, e.first, e.last, e.scheme,
                                                           e.tile_rows, wide, e.detail.get("g")))
                              for e in graph.edges for wide in (2, 3)]
    out["hcache_edges"] = [edge_row(e) for e in build_graph(model, "exact", ("h-cache",)).edges]
    try:
        out["paper_edges"] = [edge_row(e) for e in build_graph(model, "paper").edges]
    except MsfError as exc:          # the paper's model takes chains with residual adds only
        out["paper_edges"] = str(exc).replace(str(ROOT), "")
    out["pareto"] = [[p.peak_ram, p.macs] for p in solvers.pareto(graph)]
    ps = plans(graph)
    out["plans"] = {k: plan_record(model, p) for k, p in ps.items()}
    x = seeded_input(model, 0)
    for k, p in ps.items():
        if not p.feasible:
            continue
        rec = out["plans"][k]
        rec["c_sha256"] = c_digest(generate(model, p))
        if run and k in ("vanilla", "p1:inf", "p1:1.3", "p1:1.0"):
            rec["c_run"] = run_c(model, p, x)
        if reference:
            rec["reference_sha256"] = hashlib.sha256(
                np.ascontiguousarray(run_plan(model, p.blocks, x)).tobytes()).hexdigest()
    return out


def models(specs: dict, only: set[str], max_layers: int | None = None):
    """(label, model thunk, run C, run the reference, every edge's latency counts), the small
    models first."""
    out = []
    for i, spec in enumerate(specs["random"] + specs["triples"]):
        out.append((f"spec {i:02d} {spec.get('name', '')}",
                    lambda spec=spec: quantized_model(spec_to_model(spec)), i % 4 == 0, True,
                    True))
    zoo = sorted((n for n in zoo_names()
                  if max_layers is None or load_model(n).n_layers <= max_layers),
                 key=lambda n: load_model(n).n_layers)
    for name in zoo:
        small = load_model(name).n_layers <= 16
        out.append((name, lambda name=name: quantized_model(name), True, small, True))
        if name in STREAMED:
            for si, so in ((True, False), (True, True), (False, True)):
                label = f"{name} in={'stream' if si else 'buffer'} " \
                    f"out={'stream' if so else 'buffer'}"
                out.append((label, lambda name=name, si=si, so=so: replace(
                    quantized_model(name), stream_input=si, stream_output=so), True, False,
                    False))
    return [m for m in out if not only or m[0] in only]


def dump(args) -> None:
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    like = Path(args.like) / "specs.json" if args.like else folder / "specs.json"
    specs = json.loads(like.read_text()) if like.is_file() else \
        {"random": random_specs(N_RANDOM), "triples": triple_specs()}
    (folder / "specs.json").write_text(json.dumps(specs, sort_keys=True))
    for label, model, run, reference, every_edge in models(specs, set(args.only or []),
                                                           args.max_layers):
        path = folder / (label.replace(" ", "_").replace("=", "-") + ".json")
        if path.is_file():
            continue
        record = snapshot(label, model(), args.run_c and run, reference,
                          every_edge and not args.quick)
        path.write_text(json.dumps(record, sort_keys=True))
    print(f"wrote {folder}")


def diff(a, b, path: str, out: list, limit: int = 20) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'after' if k not in a else 'before'}")
            else:
                diff(a[k], b[k], f"{path}/{k}", out, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append(f"{path}: {json.dumps(a)[:200]} -> {json.dumps(b)[:200]}")


def compare(args) -> int:
    """What differs between two dumps (of the models both have)."""
    before, after = Path(args.before), Path(args.after)
    names = sorted({p.name for p in before.glob("*.json")} & {p.name for p in after.glob("*.json")})
    out: list[str] = []
    models = {}
    for name in names:
        a, b = (json.loads((d / name).read_text()) for d in (before, after))
        diff(a, b, name, out)
        models[name] = a
    models.pop("specs.json", None)
    records = [r for m in models.values() for r in m["plans"].values()]
    figures = (f"{len(models)} models, {sum(len(m['edges']) for m in models.values())} edges "
               f"({sum('edge_counts' in m for m in models.values())} models with every edge's "
               f"latency counts), {len(records)} plans (predicted cycles on "
               f"{max((len(r.get('cycles', {})) for r in records), default=0)} boards), "
               f"{sum('c_sha256' in r for r in records)} generated C sources, "
               f"{sum('c_run' in r for r in records)} C runs, "
               f"{sum('reference_sha256' in r for r in records)} reference runs")
    if out:
        print("\n".join(out))
        print(f"DIFFERENT ({figures})")
        return 1
    print(f"identical: {figures}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out", help="the folder to write")
    d.add_argument("--like", help="an earlier dump whose random specs to use again")
    d.add_argument("--run-c", action="store_true", help="build and run the plans' C on the host")
    d.add_argument("--only", nargs="*", help="only the models of these labels")
    d.add_argument("--max-layers", type=int, help="zoo models of at most this many layers")
    d.add_argument("--quick", action="store_true",
                   help="latency counts of the plans' edges only (not of every edge)")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = p.parse_args()
    if args.cmd == "dump":
        dump(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())

"""`msf-pio` command line (DESIGN.md section 3). User errors print one line, never a traceback."""
from __future__ import annotations

import argparse
import json
import math
import re
import sys

from .errors import MsfError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib)?\s*$", re.IGNORECASE)
_UNITS = {None: 1, "b": 1, "kb": 1000, "kib": 1024, "mb": 1000 ** 2, "mib": 1024 ** 2}


def parse_ram_limit(text: str, where: str = "--ram-limit") -> float:
    """Bytes from '65536', '64kB' (1000 B), '64KiB' (1024 B) or 'inf'."""
    if str(text).strip().lower() == "inf":
        return math.inf
    m = _SIZE.match(str(text))
    if not m:
        raise MsfError(f"must be a number of bytes such as 65536, 64kB or 64KiB, got {text!r}",
                       where=where)
    value = float(m.group(1)) * _UNITS[(m.group(2) or "b").lower()]
    if value <= 0:
        raise MsfError(f"must be positive, got {text!r}", where=where)
    return int(value)


def parse_max_overhead(text: str, where: str = "--max-overhead") -> float:
    try:
        value = float(text)
    except ValueError:
        raise MsfError(f"must be a number >= 1 or 'inf', got {text!r}", where=where) from None
    if math.isnan(value) or value < 1:
        raise MsfError(f"must be >= 1 (F = 1 is the unfused model), got {text!r}", where=where)
    return value


def _add_solve_options(p: argparse.ArgumentParser) -> None:
    from .fusion.solvers import OBJECTIVES
    p.add_argument("model", help="zoo name, YAML spec or ONNX file")
    p.add_argument("--objective", choices=OBJECTIVES, default="min_ram")
    p.add_argument("--max-overhead", default="inf", help="P1's Fmax (a number >= 1, or inf)")
    p.add_argument("--ram-limit", default=None, help="P2's Pmax in bytes (65536, 64kB, 64KiB)")
    p.add_argument("--cost-model", choices=("exact", "paper"), default="exact")


def _solve_from_args(args):
    from .fusion.planner import plan_model
    return plan_model(args.model, objective=args.objective,
                      max_overhead=parse_max_overhead(args.max_overhead),
                      ram_limit=None if args.ram_limit is None else parse_ram_limit(args.ram_limit),
                      cost_model=args.cost_model)


def cmd_solve(args) -> int:
    from .fusion.report import render_plan
    plan, hint = _solve_from_args(args)
    if args.json:
        data = plan.to_json()
        if hint:
            data["nearest_feasible"] = hint
        print(json.dumps(data, indent=2))
    else:
        print(render_plan(plan, hint))
    return 0 if plan.feasible else 1


def cmd_pareto(args) -> int:
    from .fusion import solvers
    from .fusion.graph import build_graph
    from .fusion.report import render_pareto
    from .model import load_model
    graph = build_graph(load_model(args.model), args.cost_model)
    plans = solvers.pareto(graph)
    if args.json:
        print(json.dumps([p.to_json() for p in plans], indent=2))
    else:
        print(render_pareto(graph, plans))
    if args.plot:
        from .fusion.report import plot_pareto
        plot_pareto(graph, plans, args.plot)
        print(f"wrote {args.plot}")
    return 0


def cmd_paper_table1(args) -> int:
    from .fusion import paper_table
    result = paper_table.compute()
    print(json.dumps(result, indent=2) if args.json else paper_table.render(result))
    return 0 if result["all_match"] else 1


def _codegen_plan(args):
    """Quantized model and the plan the options ask for (exact cost model)."""
    from .verify import plan_for, quantized_model
    model = quantized_model(args.model)
    plan = plan_for(model, args.objective, parse_max_overhead(args.max_overhead),
                    None if args.ram_limit is None else parse_ram_limit(args.ram_limit),
                    args.cost_model)
    return model, plan


def cmd_verify(args) -> int:
    from .verify import render, verify
    model, plan = _codegen_plan(args)
    seeds = [args.seed + i for i in range(args.seeds)]
    result = verify(model, plan, seeds, sanitize=not args.no_sanitize)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0 if result["ok"] else 1


def cmd_generate(args) -> int:
    from .codegen.generate import generate
    from .codegen.output import write_generated
    model, plan = _codegen_plan(args)
    paths = write_generated(generate(model, plan), plan, args.out)
    print(f"{plan.label}: peak RAM {plan.peak_ram} B, F={plan.overhead:.3f}; wrote "
          + ", ".join(str(p) for p in paths))
    return 0


def cmd_run(args) -> int:
    import numpy as np
    from .codegen.generate import generate
    from .codegen.host import HostBuild
    from .codegen.output import load_input, save_atomic
    model, plan = _codegen_plan(args)
    x = load_input(args.input, model)
    build = HostBuild(generate(model, plan))
    try:
        out = build.run(x).output.reshape(model.output_shape)
    finally:
        build.close()
    save_atomic(args.output, lambda f: np.save(f, out))
    print(f"{plan.label}: wrote {args.output} ({out.dtype}, shape {list(out.shape)})")
    return 0


def cmd_export(args) -> int:
    from .codegen.output import save_atomic
    from .export.tflite import tflite_bytes
    from .verify import quantized_model
    model = quantized_model(args.model)
    data = tflite_bytes(model)
    save_atomic(args.tflite, lambda f: f.write(data))
    print(f"wrote {args.tflite} ({len(data)} bytes, {model.n_layers} layers)")
    return 0


def cmd_demo(args) -> int:
    from .pio.demo import render, run_demo
    result = run_demo(args.board, args.model)
    print(render(result))
    return 0 if render(result).endswith("DEMO OK") else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="msf-pio", description="Multi-stage fusion (msf-CNN) "
                                     "plans and int8 C code for microcontroller CNNs")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("solve", help="find a fusion plan and print it")
    _add_solve_options(p)
    p.add_argument("--json", action="store_true", help="print the plan JSON")
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("pareto", help="print every non-dominated (peak RAM, MACs) plan")
    p.add_argument("model")
    p.add_argument("--cost-model", choices=("exact", "paper"), default="exact")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plot", metavar="FILE.png", help="also plot the frontier (needs matplotlib)")
    p.set_defaults(func=cmd_pareto)

    p = sub.add_parser("verify", help="build the plan's C on the host and check it against "
                       "the numpy reference, the unfused plan, and the predicted RAM and MACs")
    _add_solve_options(p)
    p.add_argument("--seed", type=int, default=0, help="first input seed")
    p.add_argument("--seeds", type=int, default=1, help="how many seeded inputs")
    p.add_argument("--no-sanitize", action="store_true", help="skip the ASan/UBSan build")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("generate", help="write msf_model.h/.c and plan.json for a plan")
    _add_solve_options(p)
    p.add_argument("--out", required=True, help="output directory")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("run", help="run the plan's generated C on the host on an input")
    _add_solve_options(p)
    p.add_argument("--input", required=True, help=".npy input: int8 HWC, or float (quantized)")
    p.add_argument("--output", required=True, help=".npy output (int8)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("export", help="write the quantized model as a .tflite")
    p.add_argument("model")
    p.add_argument("--tflite", required=True, metavar="OUT.tflite")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("demo", help="build the demo firmware for an emulated board with "
                       "PlatformIO, run it in QEMU and print the report")
    p.add_argument("--board", default="qemu_f767zi",
                   choices=("qemu_f767zi", "qemu_f412zg", "qemu_hifive1b", "qemu_esp32c3"))
    p.add_argument("--model", help="model instead of the demo's (zoo name or absolute path)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("paper-table1", help="recompute the paper's Table 1 beside its values")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_paper_table1)

    from .pio.monitor_cli import add_monitor_command
    add_monitor_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except MsfError as exc:
        print(f"msf-pio: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

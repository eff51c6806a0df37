"""`msf-pio` command line (docs/design.md). Every error is one line on stderr, never a
traceback, with the exit status of its kind (errors.py): 0 ok, 1 infeasible budget, 2 bad input
or option, 3 internal error (`msf-pio --debug ...` or MSF_PIO_DEBUG=1 shows the traceback)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from . import __version__, progress
from .errors import EXIT_BAD_INPUT, EXIT_INTERNAL, MsfError, one_line
from .text import file_stem
from .options import (check_plan_options, parse_code_budget, parse_max_overhead,  # noqa: F401
                      parse_ram_limit)


class _Parser(argparse.ArgumentParser):
    """A bad command line is one line too (argparse's own error prints the usage first)."""

    def error(self, message):
        print(f"msf-pio: error: {self.prog}: {one_line(message)} (see {self.prog} --help)",
              file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


class _HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, where it has one."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return f"{text} (default: %(default)s)".lstrip()


def _add_model_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="zoo name, YAML spec, ONNX or .tflite file")
    p.add_argument("--input-shape", metavar="H,W,C", help="the input size of a model whose file "
                   "leaves it dynamic (default: the file's)")


def _load(args):
    """The model of the command line, its dynamic input fixed at --input-shape."""
    from .model import load_model
    from .options import parse_input_shape
    shape = None if args.input_shape is None else parse_input_shape(args.input_shape)
    return load_model(args.model, shape)


def _add_solve_options(p: argparse.ArgumentParser, board: str | None = None) -> None:
    from .fusion.solvers import OBJECTIVES
    _add_model_argument(p)
    p.add_argument("--objective", choices=OBJECTIVES, default="min_ram",
                   help="min_ram (P1), min_macs (P2), min_latency, vanilla (no fusion), "
                        "heuristic (fuse the head only)")
    p.add_argument("--max-overhead", default="inf", metavar="F",
                   help="P1's Fmax (a number >= 1, or inf)")
    p.add_argument("--ram-limit", default=None, metavar="BYTES",
                   help="P2's Pmax in bytes (65536, 64kB, 64KiB) (default: no limit)")
    p.add_argument("--cost-model", choices=("exact", "paper"), default="exact",
                   help="exact: what the generated code uses; paper: the paper's model")
    p.add_argument("--board", default=board,
                   help="predict latency on this calibrated board (min_latency needs one)"
                        + ("" if board else " (default: none)"))
    p.add_argument("--code-budget", default=None, metavar="BYTES",
                   help="code the shape-specialised kernels may take (0, 39KiB, inf) "
                        "(default: 39KiB)")


def _add_schemes_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--schemes", default=None, metavar="S[,S]",
                   help="cache schemes fusion blocks may use (exact cost model): h-cache, "
                        "tiles (H-cache tiles of several rows), line-buffer, channel-split "
                        "(inverted-residual triples, the expansion g channels at a time) "
                        "(default: all)")


def _schemes(args) -> tuple[str, ...] | None:
    from .fusion import schemes
    if args.schemes is None:
        return None
    names = tuple(s.strip() for s in args.schemes.split(",") if s.strip())
    bad = [s for s in names if s not in schemes.names()]
    if bad or not names:
        raise MsfError(f"unknown cache scheme {', '.join(bad) or repr(args.schemes)} "
                       f"(expected {', '.join(schemes.names())})", where="--schemes")
    return names


def _add_io_options(p: argparse.ArgumentParser) -> None:
    """How the network input and output meet the caller: whole buffers, or streamed (input rows
    from a source callback, output pixels to a sink; the arena then holds what they need).
    A mode is `--*-mode`; `--input` is always a file, `--out` always what a command writes."""
    p.add_argument("--input-mode", choices=("buffer", "stream"), default="buffer",
                   help="network input: the caller's buffer, or rows pulled from a callback")
    p.add_argument("--output-mode", choices=("buffer", "stream"), default="buffer",
                   help="network output: the caller's buffer, or pixels handed to a callback")


def _streamed(model, args):
    """The model with the I/O modes of the command line."""
    from dataclasses import replace
    budget = getattr(args, "code_budget", None)
    return replace(model, stream_input=args.input_mode == "stream",
                   stream_output=args.output_mode == "stream",
                   code_budget=None if budget is None else parse_code_budget(budget))


def _add_calibration_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibration", metavar="FILE|DIR", help="float models: real inputs to "
                   "calibrate on (.npy/.npz images HWC or batches NHWC, or a folder of them)")
    p.add_argument("--input-range", metavar="LO,HI", help="float models without --calibration: "
                   "the range of the random calibration images (default -1,1)")


def _quantized_from_args(args):
    from .model.calibration import parse_input_range
    from .verify import quantized_model
    input_range = None if args.input_range is None else parse_input_range(args.input_range)
    with progress.task("reading and quantizing the model", ticking=True):
        return quantized_model(_load(args), args.calibration, input_range)


def _plan_options(args) -> dict:
    """The solve options, checked together before any model is read: parsed values, a board
    with a latency profile, no option that the others would make ignored."""
    options = {"objective": args.objective,
               "max_overhead": parse_max_overhead(args.max_overhead),
               "ram_limit": None if args.ram_limit is None else parse_ram_limit(args.ram_limit),
               "cost_model": getattr(args, "cost_model", "exact"),
               "schemes": _schemes(args) if hasattr(args, "schemes") else None}
    check_plan_options(**options)
    if getattr(args, "code_budget", None) is not None:
        parse_code_budget(args.code_budget)           # a bad value before the model is read
    board = getattr(args, "board", None)
    if board is not None:
        from .fusion import latency
        from .pio.boards import twin_of
        board = twin_of(board)          # a real board: its emulated twin's profile and clock
        if board not in latency.boards():
            raise MsfError(f"no latency profile for {args.board} (calibrated: "
                           f"{', '.join(latency.boards())} and the real boards they stand in "
                           "for)", where="--board")
    options["board"] = board
    return options


def _solve_from_args(args):
    from .fusion.planner import plan_model
    from .codegen import arena, stack
    options = _plan_options(args)
    model = _streamed(_load(args), args)
    plan, hint = plan_model(model, **options)
    stack.attach(model, plan, getattr(args, "board", None))   # the board's own profile
    arena.attach_compaction(model, plan)
    return plan, hint


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
    from .fusion.planner import graph_for
    from .fusion.report import render_pareto
    schemes = _schemes(args)
    check_plan_options("min_ram", float("inf"), None, args.cost_model, schemes)
    model = _load(args)
    graph = graph_for(model, "pareto", cost_model=args.cost_model, schemes=schemes)
    plans = solvers.pareto(graph)
    if args.json:
        print(json.dumps([p.to_json() for p in plans], indent=2))
    else:
        print(render_pareto(graph, plans))
    if args.out:
        from .fusion.report import plot_pareto
        frontiers = {_schemes_label(args.cost_model, schemes): plans}
        if args.cost_model == "exact" and tuple(schemes or ()) != ("h-cache",):
            # the paper's scheme alone, beside: what the other schemes gain
            only = solvers.pareto(graph_for(model, "pareto", schemes=("h-cache",)))
            frontiers[_schemes_label("exact", ("h-cache",))] = only
        plot_pareto(graph, frontiers, args.out)
        print(f"wrote {args.out}")
    return 0


def _schemes_label(cost_model: str, names: tuple[str, ...] | None) -> str:
    from .fusion import schemes
    if cost_model != "exact":
        return f"{cost_model} cost model"
    return "h-cache only" if tuple(names or ()) == ("h-cache",) else \
        ", ".join(names or schemes.names())


def cmd_report(args) -> int:
    from . import report
    from .fusion.graph import build_graph
    model = _streamed(_load(args), args)
    graph = build_graph(model, args.cost_model, _schemes(args))
    plan = solvers_solve(graph, args)
    data = report.build(graph, plan, args.board, frontier=args.board is not None)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(report.render(data))
    out = args.out or Path(f"{file_stem(model.name)}-report")   # a name is never a path
    written = report.write(data, out)
    print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr if args.json else sys.stdout)
    return 0


def solvers_solve(graph, args):
    """The plan the solve options ask for on `graph` (an infeasible one: a one-line error)."""
    from .fusion.planner import feasible_plan
    o = _plan_options(args)
    return feasible_plan(graph, o["objective"], o["max_overhead"], o["ram_limit"],
                         board=o["board"])


def cmd_paper_table1(args) -> int:
    from .fusion import paper_table
    result = paper_table.compute()
    print(json.dumps(result, indent=2) if args.json else paper_table.render(result))
    return 0 if result["all_match"] else 1


def _codegen_plan(args):
    """Quantized model and the plan the options ask for (exact cost model)."""
    from .codegen import arena, stack
    from .verify import plan_for
    o = _plan_options(args)
    model = _streamed(_quantized_from_args(args), args)
    plan = plan_for(model, o["objective"], o["max_overhead"], o["ram_limit"], o["cost_model"],
                    board=o["board"], schemes=o["schemes"])
    stack.attach(model, plan, getattr(args, "board", None))
    arena.attach_compaction(model, plan)
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
    with progress.task("generating C", ticking=True):
        paths = write_generated(generate(model, plan, stack_bytes=plan.predicted_stack), plan,
                                args.out)
    print(f"{plan.label}: peak RAM {plan.peak_ram} B, F={plan.overhead:.3f}; wrote "
          + ", ".join(str(p) for p in paths))
    return 0


def cmd_run(args) -> int:
    import numpy as np
    from .codegen.generate import generate
    from .codegen.host import HostBuild
    from .codegen.io import to_file
    from .codegen.output import load_frames, load_input, save_atomic
    model, plan = _codegen_plan(args)
    frames = load_frames(args.input, model) if model.state_bytes() else None
    if frames is None:
        x, file_io = load_input(args.input, model)
    with progress.task("run: generating and compiling the C on the host", ticking=True):
        build = HostBuild(generate(model, plan))
        try:           # the file's own types and shapes in and out (msf_model_run_io), or int8
            if frames is not None:          # a streaming model: frame after frame, in order
                outs = build.run_frames(frames[0]).output
                out = np.stack([to_file(model, y) if frames[1] else y.reshape(
                    model.output_shape) for y in outs])
            else:
                out = build.run_io(model, x) if file_io else build.run(x).output.reshape(
                    model.output_shape)
        finally:
            build.close()
    save_atomic(args.out, lambda f: np.save(f, out))
    print(f"{plan.label}: wrote {args.out} ({out.dtype}, shape {list(out.shape)})")
    return 0


def cmd_export(args) -> int:
    from .codegen.output import save_atomic
    from .export.tflite import tflite_bytes
    model = _quantized_from_args(args)
    data = tflite_bytes(model)
    save_atomic(args.out, lambda f: f.write(data))
    print(f"wrote {args.out} ({len(data)} bytes, {model.n_layers} layers)")
    return 0


def cmd_demo(args) -> int:
    from .pio.demo import ok, render, run_demo
    result = run_demo(args.board, args.model, log=lambda line: print(line, file=sys.stderr))
    print(render(result))
    return 0 if ok(result) else 1


def cmd_init(args) -> int:
    from .pio.init import add_into, init
    if args.into is not None:
        project = add_into(args.into, args.board or [], args.model, args.lib_deps)
    else:
        project = init(args.directory, args.board or ["qemu_f767zi"],
                       args.model or "mbv2-w0.35-paper", args.lib_deps)
    for path in project.files:
        print(f"wrote {project.directory / path}")
    for note in project.notes:
        print(f"note: {note}")
    if args.into is None:
        print(f"next: cd {project.directory} && pio run -t upload   (pio test: the harness)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="msf-pio", description="Multi-stage fusion (msf-CNN) plans and int8 C "
                     "code for microcontroller CNNs. Exit status: 0 ok, 1 infeasible budget, 2 "
                     "bad input or option, 3 internal error.")
    parser.add_argument("--version", action="version", version=f"msf-pio {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an internal error (also MSF_PIO_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("solve", help="find a fusion plan and print it")
    _add_solve_options(p)
    _add_schemes_option(p)
    p.add_argument("--json", action="store_true", help="print the plan JSON")
    _add_io_options(p)
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("pareto", help="print every non-dominated (peak RAM, MACs) plan")
    _add_model_argument(p)
    p.add_argument("--cost-model", choices=("exact", "paper"), default="exact",
                   help="exact: what the generated code uses; paper: the paper's model")
    _add_schemes_option(p)
    p.add_argument("--json", action="store_true", help="print the plans' JSON")
    p.add_argument("--out", metavar="FILE.png", help="also draw the frontier (needs matplotlib)")
    p.set_defaults(func=cmd_pareto)

    p = sub.add_parser("verify", help="build the plan's C on the host and check it against "
                       "the numpy reference, the unfused plan, and the predicted RAM and MACs")
    _add_solve_options(p)
    p.add_argument("--seed", type=int, default=0, help="first input seed")
    p.add_argument("--seeds", type=_positive_int, default=1, help="how many seeded inputs")
    p.add_argument("--no-sanitize", action="store_true", help="skip the ASan/UBSan build")
    _add_calibration_options(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    _add_schemes_option(p)
    _add_io_options(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("generate", help="write msf_model.h/.c and plan.json for a plan")
    _add_solve_options(p)
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write")
    _add_calibration_options(p)
    _add_schemes_option(p)
    _add_io_options(p)
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("run", help="run the plan's generated C on the host on an input")
    _add_solve_options(p)
    p.add_argument("--input", required=True, metavar="FILE.npy",
                   help="the input: as the model file takes it (its type and shape: the "
                        "output is then the file's too), or int8 HWC, or float HWC (quantized);"
                        " a streaming model's: frames along a first axis, run in order from "
                        "its initial state (one output per frame)")
    p.add_argument("--out", required=True, metavar="FILE.npy",
                   help="the output: the file's type and shape, or int8 HWC")
    _add_calibration_options(p)
    _add_schemes_option(p)
    _add_io_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("export", help="write the quantized model as a .tflite")
    _add_model_argument(p)
    p.add_argument("--out", required=True, metavar="FILE.tflite", help="the .tflite to write")
    _add_calibration_options(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("demo", help="build the demo firmware for an emulated board with "
                       "PlatformIO, run it in QEMU and print the report")
    p.add_argument("--board", default="qemu_f767zi",
                   choices=("qemu_f767zi", "qemu_f412zg", "qemu_hifive1b", "qemu_esp32c3",
                            "qemu_esp32s3"), help="the emulated board")
    p.add_argument("--model", help="model instead of the demo's (zoo name or absolute path)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("init", help="write a PlatformIO project that runs a model (or add "
                       "msf-pio to one with --into)")
    p.add_argument("directory", nargs="?", default=".", type=Path, help="the new project's folder")
    p.add_argument("--into", metavar="PROJECT", type=Path, help="add msf-pio to this existing "
                   "project: only files it lacks, and lines in its platformio.ini")
    p.add_argument("--board", action="append", help="a board env (repeatable): an emulated "
                   "qemu_f767zi, qemu_f412zg, qemu_hifive1b, qemu_esp32c3, qemu_esp32s3 or a "
                   "real nucleo_f767zi, disco_f746ng, nucleo_f412zg, esp32-s3-devkitc-1, "
                   "esp32-c3-devkitm-1, hifive1-revb (default: qemu_f767zi; none with --into)")
    p.add_argument("--model", help="zoo name, or a .yaml, .onnx or .tflite file (copied into "
                   "models/) (default: mbv2-w0.35-paper)")
    p.add_argument("--lib-deps", help="how the project gets msf-pio (a git URL, a tarball, a "
                   "registry spec) (default: the registry name; a development checkout's path "
                   "goes into the uncommitted local.ini)")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("report", help="what fusion buys and where RAM and time go: the plan "
                       "against the unfused one, a table of its edges, pictures (memory "
                       "timeline, RAM/latency frontier) and an HTML page")
    _add_solve_options(p, board="qemu_f767zi")
    _add_schemes_option(p)
    _add_io_options(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", metavar="DIR", type=Path,
                   help="the folder for the pictures, report.html, edges.csv and report.json "
                        "(default: MODEL-report)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("paper-table1", help="recompute the paper's Table 1 beside its values")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.set_defaults(func=cmd_paper_table1)

    from .pio.monitor_cli import add_monitor_command
    add_monitor_command(sub)
    for action in sub._choices_actions:        # each command's own help: its summary, defaults
        command = sub.choices[action.dest]
        command.formatter_class = _HelpFormatter
        command.description = command.description or action.help
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except MsfError as exc:
        print(f"msf-pio: error: {one_line(exc)}", file=sys.stderr)
        return exc.status
    except BrokenPipeError:
        # the reader went away (`| head`): what it wanted was written; stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("msf-pio: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line, the traceback on request
        if args.debug or os.environ.get("MSF_PIO_DEBUG"):
            raise
        print(f"msf-pio: internal error: {type(exc).__name__}: {one_line(exc, 300)} (a bug: "
              "please report it; `msf-pio --debug ...` shows the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())

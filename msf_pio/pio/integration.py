"""PlatformIO build integration: `custom_msf_*` options -> generated model sources.

Called from the library script (library_script.py) before any source is collected: the C goes to
the build directory (never the project's src/ or lib/), its include folder onto the include
path of every source, and its sources into the program.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .. import __version__, progress
from ..options import (INI_NAMES, check_plan_options, parse_max_overhead, parse_ram_limit,
                       parse_section_name)
from ..errors import InfeasibleBudget, MsfError, one_line
from ..text import printable
from ..fusion.solvers import OBJECTIVES
from ..codegen.output import save_atomic
from .boards import BoardFacts, app_partition, board_facts, c_defines

GENERATED_DIR = "msf_generated"
STACK_SYMBOL = "__stack_size"       # link_symbols entry sized from the predicted stack
LIB_NAME = "msf_model"
PACKAGE_DIR = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Options:
    model: str
    objective: str
    max_overhead: float
    ram_limit: float | None         # None: `auto`, what the board has left for the arena
    cost_model: str
    output: str
    measure: bool = False           # arena painting compiled in (test, emulated or asked)
    calibration: str | None = None  # float models: .npy/.npz file or folder of real inputs
    input_range: tuple | None = None  # float models without calibration data: input range
    input: str = "buffer"           # buffer | stream (rows pulled from a source callback)
    profile: bool = False           # every edge timed: msf_profile_print() prints the cycles
    input_shape: tuple | None = None  # H, W, C of a model file whose input is dynamic
    weights_section: str | None = None  # linker section of the weight arrays (external flash)
    weights_size: int | None = None     # bytes of the memory that section is mapped to
    code_budget: float | None = None    # code of the specialised kernels (None: the default)

    def key(self) -> dict:
        return {k: (str(v) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


# Every custom_msf_* option the build reads; any other custom_msf_ key is a typo or an option
# of another msf-pio version, and stops the build naming the closest of these.
OPTIONS = ("custom_msf_model", "custom_msf_objective", "custom_msf_max_overhead",
           "custom_msf_ram_limit", "custom_msf_cost_model", "custom_msf_output",
           "custom_msf_input", "custom_msf_measure", "custom_msf_profile",
           "custom_msf_calibration", "custom_msf_input_range", "custom_msf_input_shape",
           "custom_msf_weights_section", "custom_msf_weights_size", "custom_msf_code_budget")


def check_option_names(keys, where: str) -> None:
    """An unknown custom_msf_* key fails, naming the closest known one."""
    import difflib
    for key in keys:
        if key.startswith("custom_msf_") and key not in OPTIONS:
            close = difflib.get_close_matches(key, OPTIONS, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(OPTIONS)}"
            raise MsfError(f"unknown msf-pio option ({hint})", source=where, where=key)


def read_options(get, facts: BoardFacts, project_dir: Path, env_name: str,
                 measure_by_default: bool = False, keys=()) -> Options:
    """`get(name, default)` reads one option of [env:NAME], `keys` are all the env's option
    names; errors name the file and option. custom_msf_measure = auto measures in the builds
    that check RAM: `pio test` builds and the emulated boards; a user's release firmware
    carries no painting code."""
    where = f"platformio.ini [env:{env_name}]"
    check_option_names(keys, where)

    def fail(option, message):
        return MsfError(message, source=where, where=option)

    model = (get("custom_msf_model", "") or "").strip()
    if not model:
        raise fail("custom_msf_model", "is required: a zoo name, a .yaml spec, an .onnx or a "
                                                ".tflite file")
    path = project_dir / model
    if path.suffix in (".yaml", ".yml", ".onnx", ".tflite"):
        if not path.is_file():
            raise fail("custom_msf_model", f"no such model file: {path}")
        model = str(path)
    objective = (get("custom_msf_objective", "min_ram") or "min_ram").strip()
    if objective not in OBJECTIVES:
        raise fail("custom_msf_objective", f"must be one of {', '.join(OBJECTIVES)}, "
                                           f"got {objective!r}")
    try:
        max_overhead = parse_max_overhead(get("custom_msf_max_overhead", "inf") or "inf",
                                          "custom_msf_max_overhead")
        limit = (get("custom_msf_ram_limit", "auto") or "auto").strip()
        output = (get("custom_msf_output", "buffer") or "buffer").strip()
        stream_in = (get("custom_msf_input", "buffer") or "buffer").strip()
        if limit == "auto":
            if not facts.ram:
                raise fail("custom_msf_ram_limit", "auto needs the board's RAM size "
                                                   "(upload.maximum_ram_size)")
            ram_limit = None          # the board's budget, known once the model's I/O is
        else:
            ram_limit = parse_ram_limit(limit, "custom_msf_ram_limit")
    except MsfError as exc:
        raise fail(exc.where, str(exc).split(": ", 1)[-1]) from None
    cost_model = (get("custom_msf_cost_model", "exact") or "exact").strip()
    if cost_model not in ("exact", "paper"):
        raise fail("custom_msf_cost_model", f"must be exact or paper, got {cost_model!r}")
    if output not in ("buffer", "stream"):
        raise fail("custom_msf_output", f"must be buffer or stream, got {output!r}")
    if stream_in not in ("buffer", "stream"):
        raise fail("custom_msf_input", f"must be buffer or stream, got {stream_in!r}")
    measure = (get("custom_msf_measure", "auto") or "auto").strip()
    if measure not in ("auto", "yes", "no"):
        raise fail("custom_msf_measure", f"must be auto, yes or no, got {measure!r}")
    profile = (get("custom_msf_profile", "no") or "no").strip()
    if profile not in ("yes", "no"):
        raise fail("custom_msf_profile", f"must be yes or no, got {profile!r}")
    calibration = (get("custom_msf_calibration", "") or "").strip() or None
    if calibration is not None:
        if not (project_dir / calibration).exists():
            raise fail("custom_msf_calibration", f"no such file or folder: "
                                                 f"{project_dir / calibration}")
        calibration = str(project_dir / calibration)
    from ..model.calibration import parse_input_range
    from ..options import parse_code_budget, parse_input_shape

    def optional(option: str, parse):
        """An option's value parsed, None when unset; a bad value: one line naming it."""
        text = (get(option, "") or "").strip()
        try:
            return parse(text, option) if text else None
        except MsfError as exc:
            raise fail(exc.where, str(exc).split(": ", 1)[-1]) from None

    input_range = optional("custom_msf_input_range", parse_input_range)
    try:
        check_plan_options(objective, max_overhead,           # auto: the board's budget
                           facts.ram if limit == "auto" else ram_limit, cost_model, None,
                           INI_NAMES)
    except MsfError as exc:
        raise fail(exc.where, str(exc).split(": ", 1)[-1]) from None
    input_shape = optional("custom_msf_input_shape", parse_input_shape)
    section, section_size = _weights_section(get, facts, fail)
    code_budget = optional("custom_msf_code_budget", parse_code_budget)
    return Options(model, objective, max_overhead, ram_limit, cost_model, output,
                   measure == "yes" or (measure == "auto" and measure_by_default),
                   calibration, input_range, stream_in, profile == "yes", input_shape,
                   section, section_size, code_budget)


def _weights_section(get, facts: BoardFacts, fail) -> tuple[str | None, int | None]:
    """custom_msf_weights_section and the size of the memory it is mapped to:
    custom_msf_weights_size, else the board's (boards.yaml weights_flash or the manifest's
    upload.maximum_weights_size). A size without a section would be silently ignored."""
    text = (get("custom_msf_weights_section", "") or "").strip()
    size_text = (get("custom_msf_weights_size", "") or "").strip()
    if not text:
        if size_text:
            raise fail("custom_msf_weights_size", "applies to custom_msf_weights_section only "
                                                  "(the weights are in the board's flash)")
        return None, None
    try:
        section = parse_section_name(text)
        size = (parse_ram_limit(size_text, "custom_msf_weights_size") if size_text
                else facts.weights_flash)
    except MsfError as exc:
        raise fail(exc.where, str(exc).split(": ", 1)[-1]) from None
    if size is None or math.isinf(size):
        raise fail("custom_msf_weights_size", f"is required with custom_msf_weights_section "
                                              f"on {facts.board}: the bytes of the memory "
                                              f"your linker script maps {section} to")
    return section, int(size)


def _source_digest() -> str:
    """The generator's own code: a new msf-pio regenerates."""
    h = hashlib.sha256(__version__.encode())
    for path in sorted(PACKAGE_DIR.rglob("*.py")) + sorted(PACKAGE_DIR.rglob("*.yaml")) + \
            sorted(PACKAGE_DIR.rglob("*.json")):             # the boards' profiles
        if "/pio/" not in str(path):
            h.update(path.read_bytes())
    return h.hexdigest()


def _inputs_digest(options: Options, facts: BoardFacts) -> str:
    """Model file(s), options, board facts and generator: what the generated sources depend on."""
    h = hashlib.sha256(json.dumps([options.key(), facts.__dict__], sort_keys=True).encode())
    path = Path(options.model)
    if path.is_file():
        h.update(path.read_bytes())
        try:
            import yaml
            spec = yaml.safe_load(path.read_text()) if path.suffix in (".yaml", ".yml") else {}
            for ref in (spec.get("weights") or {}).values() if isinstance(spec, dict) else []:
                if isinstance(ref, str) and (path.parent / ref).is_file():
                    h.update((path.parent / ref).read_bytes())
        except Exception:  # an unreadable spec fails later, with its own message
            pass
    if options.calibration:          # the calibration data's bytes, file or folder
        cal = Path(options.calibration)
        for f in sorted(cal.rglob("*")) if cal.is_dir() else [cal]:
            if f.is_file():
                h.update(f.read_bytes())
    h.update(_source_digest().encode())
    return h.hexdigest()


def generate_library(options: Options, build_dir: Path, facts: BoardFacts,
                     f_cpu: int) -> tuple[Path, dict, bool]:
    """Generate (or keep) the msf_model library under build_dir; returns its folder of
    libraries, the plan summary and whether anything was regenerated. Crash-safe: every file
    is written whole or not at all, the stamp last, holding the files' hashes, so a build
    torn by a kill or a full disk regenerates instead of failing; two builds of one env at
    once take turns (a lock on the folder)."""
    root = build_dir / GENERATED_DIR
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / ".lock"):
        stamp_path = root / "stamp.json"
        digest = _inputs_digest(options, facts)
        stamp = _read_stamp(stamp_path)
        if stamp and stamp["digest"] == digest and _intact(root, stamp["files"]):
            return root, stamp["summary"], False
        summary = _generate(options, root, facts, f_cpu)
        files = {str(p.relative_to(root)): _sha256(p) for p in _generated_files(root)}
        _write_if_changed(stamp_path, json.dumps({"digest": digest, "files": files,
                                                  "summary": summary}, indent=2))
    return root, summary, True


def _generated_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / LIB_NAME).rglob("*") if p.is_file()) + [root / "plan.json"]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_stamp(path: Path) -> dict | None:
    """The stamp of the last complete generation, or None (missing, torn, or of an older
    msf-pio that kept no hashes)."""
    try:
        stamp = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(stamp, dict) and isinstance(stamp.get("files"), dict) and \
        isinstance(stamp.get("summary"), dict) and isinstance(stamp.get("digest"), str)
    return stamp if ok else None


def _intact(root: Path, files: dict) -> bool:
    """Every generated file is there with the bytes the stamp recorded."""
    try:
        return bool(files) and all(_sha256(root / rel) == h for rel, h in files.items())
    except OSError:
        return False


class _locked:
    """An exclusive lock on `path` for the block (POSIX flock; Windows: msvcrt)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        self.file = open(self.path, "a+b")
        try:
            import fcntl
            fcntl.flock(self.file.fileno(), fcntl.LOCK_EX)
        except ImportError:       # Windows
            import msvcrt
            self.file.seek(0)
            while True:
                try:
                    msvcrt.locking(self.file.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:     # LK_LOCK gives up after 10 s: keep waiting
                    continue
        return self

    def __exit__(self, *exc):
        self.file.close()           # closing releases the lock
        return False


def _generate(options: Options, root: Path, facts: BoardFacts, f_cpu: int) -> dict:
    from ..codegen.flash import estimate as flash_estimate
    from ..codegen.generate import generate, weight_bytes as layer_weight_bytes
    from ..codegen.arena import attach_compaction
    from ..codegen.stack import predict as predict_stack
    from ..fusion import schemes, solvers
    from ..fusion.kernel_counts import budget_used, code_budget as code_budget_value
    from ..fusion.graph import build_graph
    from ..fusion.planner import feasible_plan, graph_for
    from ..model import load_model
    from ..reference import run_model
    from ..verify import crc32, quantized_model, seeded_input
    from .golden import golden_sources

    board = facts.board
    step = progress.task(f"{board}: model, plan and code", total=4, ticking=True)
    step.update(0, "quantizing the model")
    model = quantized_model(load_model(options.model, options.input_shape),
                            options.calibration, options.input_range)
    model = replace(model, stream_output=options.output == "stream",
                    stream_input=options.input == "stream", code_budget=options.code_budget)
    io_bytes = 0 if model.stream_output else model.output_bytes()
    ram_limit = options.ram_limit
    if ram_limit is None:
        ram_limit = facts.ram_budget(io_bytes)
    step.update(1, "planning")
    graph = graph_for(model, options.objective, ram_limit, options.cost_model)

    def solve(limit, stack_bytes):
        context = f" for {board}" if options.ram_limit is not None else (
            f" for {board} ({facts.ram} B of RAM less I/O buffers {io_bytes} B, stack "
            f"{facts.stack_for(stack_bytes)} B and framework {facts.framework_ram} B)")
        plan = feasible_plan(graph, options.objective, options.max_overhead, limit,
                             context=context, board=facts.twin or board)   # latency
        if options.cost_model == "paper":      # run the paper's choice, with exact arena sizes
            exact = {(e.first, e.last): e
                     for e in build_graph(model, "exact", schemes=("h-cache",)).edges}
            plan = replace(plan, blocks=[exact[(e.first, e.last)] for e in plan.blocks],
                           cost_model="exact")
        return plan, predict_stack(model, plan, board)

    plan, stack = solve(ram_limit, None)
    # auto: the budget keeps the plan's predicted stack where the board's reserve is smaller;
    # a plan with less arena may take another stack, so plan again until the stack it was
    # planned for holds it
    planned_for = None
    for _ in range(4):
        if options.ram_limit is not None or stack is None or \
                facts.stack_for(stack.bytes) <= facts.stack_for(planned_for):
            break
        planned_for = stack.bytes
        ram_limit = facts.ram_budget(io_bytes, planned_for)
        plan, stack = solve(ram_limit, planned_for)
    stack_bytes = stack.bytes if stack else None
    plan.predicted_stack = stack_bytes
    attach_compaction(model, plan)
    step.update(2, "generating C")
    sources = generate(model, plan, measure=options.measure, stack_bytes=stack_bytes,
                       weights_section=options.weights_section)
    weight_bytes = sum(map(layer_weight_bytes, model.layers))
    if options.weights_section and weight_bytes > options.weights_size:
        raise InfeasibleBudget(f"the weights need {weight_bytes} B, the memory of section "
                               f"{options.weights_section} has {options.weights_size} B",
                               source=f"model {model.name}")
    # the internal flash: the constant data (less the weights in their own section) and code
    needs = flash_estimate(model, plan, sources.source)
    internal = needs.total - (needs.weights if options.weights_section else 0)
    if facts.flash and internal > facts.flash:
        where = f"{board}'s {facts.flash_region}" if facts.flash_region else board
        data = needs.data - needs.weights if options.weights_section else needs.data
        hint = ("" if options.weights_section else " (custom_msf_weights_section places the "
                "weights in external memory)")
        raise InfeasibleBudget(f"the model needs {internal} B of flash (constant data {data} "
                               f"B, code about {needs.code} B), {where} has {facts.flash} B"
                               f"{hint}", source=f"model {model.name}")
    budget = facts.ram_budget(io_bytes, stack_bytes)
    if budget is not None and plan.peak_ram > budget:
        least = feasible_plan(graph, "min_ram").peak_ram
        fits = (f"the least-RAM plan (min_ram, max_overhead inf) needs an arena of {least} B"
                if least > budget else "min_ram with custom_msf_ram_limit = auto fits")
        raise InfeasibleBudget(f"{board} has {facts.ram} B of RAM; the {plan.label} plan needs "
                       f"{facts.ram_breakdown(plan.peak_ram, io_bytes, stack_bytes)}; plans "
                       f"that fit have an "
                       f"arena of at most {budget} B ({fits})", source=f"model {model.name}")
    step.update(3, "reference output")
    x = seeded_input(model, 0)
    y = run_model(model, x).reshape(-1)
    step.update(4, "")
    step.close()
    lib = root / LIB_NAME
    golden_h, golden_c = golden_sources(x, y, board, int(ram_limit if ram_limit is not None
                                                           and not math.isinf(ram_limit)
                                                           else facts.ram or 0))
    files = {
        "include/msf_model.h": sources.header, "src/msf_model.c": sources.source,
        "include/msf_golden.h": golden_h, "src/msf_golden.c": golden_c}
    if options.profile:
        files["src/msf_profile.c"] = PROFILE_C
    elif (lib / "src" / "msf_profile.c").is_file():
        (lib / "src" / "msf_profile.c").unlink()
    for name, text in files.items():
        _write_if_changed(lib / name, text)
    summary = {
        "model": model.name, "plan": plan.label, "objective": plan.objective,
        "cost_model": options.cost_model, "output": options.output, "input": options.input,
        "peak_ram_bytes": plan.peak_ram, "macs": plan.macs, "overhead": round(plan.overhead, 4),
        "blocks": [[e.first, e.last, schemes.label(e)] for e in plan.blocks if e.fused],
        "ram_limit": None if ram_limit is None or math.isinf(ram_limit) else int(ram_limit),
        "ram_total_bytes": plan.peak_ram + io_bytes + facts.stack_for(stack_bytes) +
        facts.framework_ram,
        "predicted_stack_bytes": stack_bytes,                 # codegen/stack.py (None: no
        "stack_bytes": facts.stack_for(stack_bytes),          # profile) and what is kept
        "board_ram": facts.ram,
        "board_flash": facts.flash, "flash_region": facts.flash_region,
        "weight_bytes": int(weight_bytes), "board": board, "f_cpu": f_cpu,
        "weights_section": options.weights_section, "weights_size": options.weights_size,
        # codegen/flash.py: constant data (of which in MSF_WEIGHTS) counted, code estimated
        "flash_data_bytes": needs.data, "flash_weights_bytes": needs.weights,
        "flash_code_bytes": needs.code,
        # fusion/kernel_counts.choose: the specialised kernels' budget and what they take of it
        "code_budget_bytes": code_budget_value(model), "code_budget_used": budget_used(model),
        "reference_crc32": f"0x{crc32(y):08x}",
        "input_bytes": int(np.prod(model.input_shape)),
        "output_bytes": model.output_bytes(),
        "predicted_cycles": plan.predicted_instructions,      # latency cost model (issue 11)
        "cpu_hz": facts.cpu_hz,
        # a release firmware runs the model once before its first result line; a measuring
        # one twice more (arena painting); `pio test`'s firmware twice more again
        "runs_before_report": 3 if options.measure else 1,
    }
    plan_json = {"generator": "Generated by msf-pio", **plan.to_json(),
                 "unfused_peak_ram_bytes": solvers.vanilla(graph).peak_ram,
                 **({"stack_deepest_edge": stack.edge,
                     "stack_deepest_path": [list(p) for p in stack.path]} if stack else {}),
                 **{k: summary[k] for k in ("reference_crc32", "board", "f_cpu",
                                            "weight_bytes", "flash_data_bytes",
                                            "flash_code_bytes", "code_budget_bytes",
                                            "code_budget_used")}}
    _write_if_changed(root / "plan.json", json.dumps(plan_json, indent=2) + "\n")
    return summary


# custom_msf_profile = yes: the generated msf_model_run calls msf_profile_edge() around every
# edge of a plain run (not the arena-painting ones); this keeps each edge's cycles of the last
# run for msf_profile_print(). The library's stub prints nothing in builds that do not profile.
PROFILE_C = """/* Generated by msf-pio (custom_msf_profile = yes): every edge's cycles. */
#include "msf/board.h"
#include "msf/runtime.h"
#include "msf_model.h"

static uint64_t msf_edge_cycles[MSF_MODEL_EDGES];
static uint64_t msf_edge_start;

void msf_profile_edge(uint32_t edge, int done)
{
    uint64_t now = msf_board_cycles();
    if (done) {
        msf_edge_cycles[edge] = now - msf_edge_start;
    } else {
        msf_edge_start = now;
    }
}

void msf_profile_print(void)
{
    for (uint32_t k = 0; k < MSF_MODEL_EDGES; k++) {
        msf_board_put_dec("MSF edge=", k);
        msf_board_put_dec(" cycles=", msf_edge_cycles[k]);
        msf_board_puts("\\n");
    }
}
"""


def _write_if_changed(path: Path, text: str) -> None:
    """Unchanged files keep their time stamps, so SCons recompiles nothing; a changed one is
    written whole or not at all (a temporary file, then a rename)."""
    data = text.encode()
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    save_atomic(path, lambda f: f.write(data))


def describe(summary: dict, regenerated: bool, seconds: float, cpu: float | None = None) -> str:
    blocks = " ".join(f"[{a}-{b} {scheme}]" for a, b, scheme in summary["blocks"]) or "none"
    cpu_text = "" if cpu is None else f" ({cpu:.2f} s CPU)"     # steadier on a busy machine
    what = f"generated in {seconds:.2f} s{cpu_text}" if regenerated else \
        f"model and options unchanged, nothing regenerated ({seconds:.2f} s)"
    return (f"msf-pio: {printable(summary['model'])} {summary['plan']} ({summary['cost_model']}): "
            f"predicted peak RAM {summary['peak_ram_bytes']} B (arena), "
            f"F={summary['overhead']:.3f}, " + _latency_text(summary)
            + (f"predicted stack {summary['predicted_stack_bytes']} B "
               f"({summary['stack_bytes']} B kept), " if summary.get("predicted_stack_bytes")
               else "")
            + _flash_text(summary) + f"fusion blocks {blocks}; {what}")


def _flash_text(summary: dict) -> str:
    """The flash estimate (codegen/flash.py) and the specialised kernels' share of their code
    budget."""
    if summary.get("flash_code_bytes") is None:
        return ""
    budget = summary.get("code_budget_bytes")
    used = (f" (specialised kernels {summary['code_budget_used']} B of a "
            f"{'unlimited' if budget is None else f'{budget} B'} budget)"
            if "code_budget_used" in summary else "")
    return (f"flash: code about {summary['flash_code_bytes']} B{used}, constant data "
            f"{summary['flash_data_bytes']} B, ")


def first_result_seconds(summary: dict) -> float | None:
    """Predicted seconds from reset to the firmware's first result line: its runs of the model
    at one cycle per predicted instruction (the framework's own start-up not counted)."""
    cycles, hz = summary.get("predicted_cycles"), summary.get("cpu_hz")
    if not cycles or not hz:
        return None
    return summary.get("runs_before_report", 1) * cycles / hz


def _latency_text(summary: dict) -> str:
    cycles = summary.get("predicted_cycles")
    if not cycles:
        return ""
    first = first_result_seconds(summary)
    if first is None:
        return f"predicted latency {cycles} cycles, "
    return (f"predicted latency {cycles} cycles = {cycles / summary['cpu_hz'] * 1000:.0f} ms at "
            f"{summary['cpu_hz'] / 1e6:g} MHz, first result {first:.1f} s after start-up "
            f"({summary['runs_before_report']} run(s)), ")


def configure(env, lib_builder=None) -> None:
    """The library script's entry point (`env` is msf-pio's library environment, `lib_builder`
    the library builder running the script): read the options, generate, compile the model into
    the program and show its headers to the project's src/ and test/ (a library's include path
    is shared with its dependents).

    A builder may construct the library more than once per build: platform-espressif32's
    espidf builder constructs every library builder once for include paths only, then discards
    them and constructs them again. The model is generated (and its summary printed) once per
    build; every construction gets the include path and the board's defines; the model's sources
    are compiled when PlatformIO builds the library, by that builder, with its flags."""
    from SCons.Script import DefaultEnvironment  # pylint: disable=import-error
    program = DefaultEnvironment()
    start, cpu_start = time.perf_counter(), time.process_time()
    progress.configure("lines", sys.stdout)     # the build log: plain periodic lines
    board = env.BoardConfig()
    project_dir = Path(env.subst("$PROJECT_DIR"))
    env_name = env.subst("$PIOENV")
    measuring = "test" in env.GetBuildType() or env.PioPlatform().name == "msf-qemu"
    try:
        facts = board_facts(env.subst("$BOARD"), board.get, espidf_app_partition(env))
        configure_board(env, facts)
        if not (env.GetProjectOption("custom_msf_model", "") or "").strip():
            if "MSF_GENERATED" not in program:
                print(f"msf-pio: [env:{env_name}] declares no custom_msf_model: board support "
                      "only, no model generated")
                link_stack(facts, None)
            program["MSF_GENERATED"] = None
            return
        if program.get("MSF_GENERATED"):                 # constructed again in this build
            root = program["MSF_GENERATED"]
        else:
            options = read_options(lambda k, d: env.GetProjectOption(k, d), facts, project_dir,
                                   env_name, measure_by_default=measuring,
                                   keys=env.GetProjectConfig().options(env=env_name))
            f_cpu = int(str(board.get("build.f_cpu", "0")).rstrip("L") or 0)
            root, summary, regenerated = generate_library(
                options, Path(env.subst("$BUILD_DIR")), facts, f_cpu)
            program["MSF_GENERATED"], program["MSF_PROFILE"] = root, options.profile
            link_stack(facts, summary.get("predicted_stack_bytes"))
            print(describe(summary, regenerated, time.perf_counter() - start,
                           time.process_time() - cpu_start))
    except MsfError as exc:
        print(f"msf-pio: error: {one_line(exc)}")
        env.Exit(1)
        return
    except Exception as exc:     # a bug: one line, not an SCons stack dump
        if os.environ.get("MSF_PIO_DEBUG"):
            raise
        print(f"msf-pio: error: internal error: {type(exc).__name__}: {one_line(exc, 300)} (a "
              "bug: please report it; MSF_PIO_DEBUG=1 shows the traceback)")
        env.Exit(1)
        return
    lib = root / LIB_NAME
    env.Append(CPPPATH=[str(lib / "include")])
    if program.get("MSF_PROFILE"):   # the hooks in msf_model.c, the library's stub left out
        env.Append(CPPDEFINES=["MSF_PROFILE_EDGES"])

    def compile_model():
        env.BuildSources(str(Path(env.subst("$BUILD_DIR")) / "msf_model"), str(lib / "src"))

    if lib_builder is None:
        compile_model()
    else:
        _when_built(lib_builder, compile_model)


def _when_built(lib_builder, action) -> None:
    """Run `action` once, when PlatformIO builds `lib_builder` (before the program is linked);
    a library builder that is only constructed, never built, runs nothing."""
    build = lib_builder.build

    def build_then_action(*args, **kwargs):
        libs = build(*args, **kwargs)
        if not getattr(lib_builder, "msf_model_compiled", False):
            lib_builder.msf_model_compiled = True
            action()
        return libs

    lib_builder.build = build_then_action


def espidf_app_partition(env) -> tuple[str, int] | None:
    """The app partition of an espidf build: platform-espressif32's espidf builder flashes the
    partition table of `board_build.partitions` (ESP-IDF's partitions_singleapp.csv, a 1 MB app,
    by default), which it sets as $PARTITIONS_TABLE_CSV before any library is constructed."""
    from SCons.Script import DefaultEnvironment  # pylint: disable=import-error
    if "espidf" not in env.subst("$PIOFRAMEWORK"):
        return None
    csv = Path(DefaultEnvironment().subst("$PARTITIONS_TABLE_CSV") or "")
    if not csv.is_file():
        return None
    name = env.BoardConfig().get("build.app_partition_name", "")
    found = app_partition(csv.read_text(), name)
    return (f"app partition {found[0]} ({csv.name})", found[1]) if found else None


def configure_board(env, facts: BoardFacts) -> None:
    """The board file's framework switch and facts (the library's defines), and what the
    program's link needs: the part's sizes for PlatformIO's size check, the linker script."""
    from SCons.Script import DefaultEnvironment  # pylint: disable=import-error
    program = DefaultEnvironment()
    board = env.BoardConfig()
    frameworks = [f.strip() for f in env.subst("$PIOFRAMEWORK").split(",") if f.strip()]
    defines = [f"MSF_FRAMEWORK_{f.upper().replace('-', '_')}" for f in frameworks]
    baud = env.GetProjectOption("monitor_speed", "115200") or "115200"
    env.Append(CPPDEFINES=defines + c_defines(facts) + [("MSF_CONSOLE_BAUD", int(baud))])
    for key, value in (("upload.maximum_size", facts.flash),      # PlatformIO's size check
                       ("upload.maximum_ram_size", facts.ram)):   # then uses the part's own
        if value:
            board.update(key, value)
    program.AppendUnique(LINKFLAGS=[f"-Wl,--defsym,{name}={value}"
                                    for name, value in facts.link_symbols.items()
                                    if name != STACK_SYMBOL])
    if facts.rom_length and "freedom-e-sdk" in frameworks:
        program.Replace(LDSCRIPT_PATH=_freedom_ldscript(env, facts.rom_length))


def link_stack(facts: BoardFacts, predicted: int | None) -> None:
    """The stack segment a linker script sizes from a symbol (freedom-e-sdk's __stack_size):
    the board's reserve, or the plan's predicted stack where larger (16-byte aligned)."""
    if STACK_SYMBOL not in facts.link_symbols:
        return
    from SCons.Script import DefaultEnvironment  # pylint: disable=import-error
    size = max(int(str(facts.link_symbols[STACK_SYMBOL]), 0), -(-(predicted or 0) // 16) * 16)
    DefaultEnvironment().AppendUnique(LINKFLAGS=[f"-Wl,--defsym,{STACK_SYMBOL}={size:#x}"])


def _freedom_ldscript(env, rom_length: int) -> str:
    """The SDK's linker script for the board with its code region at the flash's real size."""
    import re
    board = env.BoardConfig()
    sdk = Path(env.PioPlatform().get_package_dir("framework-freedom-e-sdk"))
    name = board.get("build.freedom-e-sdk.ldscript", "metal.default.lds")
    variant = board.get("build.freedom-e-sdk.variant", f"sifive-{env.subst('$BOARD')}")
    text, n = re.subn(r"(rom \([^)]*\) : ORIGIN = 0x[0-9a-fA-F]+, LENGTH = )0x[0-9a-fA-F]+",
                      rf"\g<1>{rom_length:#x}", (sdk / "bsp" / variant / name).read_text())
    if n != 1:
        raise MsfError("cannot find the rom region to resize", source=str(sdk / "bsp" / variant / name))
    path = Path(env.subst("$BUILD_DIR")) / f"msf-{name}"
    _write_if_changed(path, text)
    return str(path)

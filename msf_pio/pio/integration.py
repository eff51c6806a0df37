"""PlatformIO build integration: `custom_msf_*` options -> generated model sources.

Called from the pre script (prebuild.py) before anything is compiled: the model's C goes to
the build directory (never the project's src/ or lib/), its include folder onto the include
path of every source, and its sources into the program.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .. import __version__
from ..cli import parse_max_overhead, parse_ram_limit
from ..errors import MsfError
from ..fusion.solvers import OBJECTIVES

GENERATED_DIR = "msf_generated"
LIB_NAME = "msf_model"
RESERVE = 4096          # RAM left for the stack and the firmware's own data under `auto`
PACKAGE_DIR = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Options:
    model: str
    objective: str
    max_overhead: float
    ram_limit: float | None
    cost_model: str
    output: str

    def key(self) -> dict:
        return {k: (str(v) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def read_options(get, board_ram: int | None, project_dir: Path, env_name: str) -> Options:
    """`get(name, default)` reads one option of [env:NAME]; errors name the file and option."""
    where = f"platformio.ini [env:{env_name}]"

    def fail(option, message):
        return MsfError(message, source=where, where=option)

    model = (get("custom_msf_model", "") or "").strip()
    if not model:
        raise fail("custom_msf_model", "is required: a zoo name, a .yaml spec or an .onnx file")
    path = project_dir / model
    if path.suffix in (".yaml", ".yml", ".onnx"):
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
        if limit == "auto":
            if not board_ram:
                raise fail("custom_msf_ram_limit", "auto needs the board's RAM size "
                                                   "(upload.maximum_ram_size)")
            ram_limit = board_ram - RESERVE
        else:
            ram_limit = parse_ram_limit(limit, "custom_msf_ram_limit")
    except MsfError as exc:
        raise fail(exc.where, str(exc).split(": ", 1)[-1]) from None
    cost_model = (get("custom_msf_cost_model", "exact") or "exact").strip()
    if cost_model not in ("exact", "paper"):
        raise fail("custom_msf_cost_model", f"must be exact or paper, got {cost_model!r}")
    output = (get("custom_msf_output", "buffer") or "buffer").strip()
    if output not in ("buffer", "stream"):
        raise fail("custom_msf_output", f"must be buffer or stream, got {output!r}")
    return Options(model, objective, max_overhead, ram_limit, cost_model, output)


def _source_digest() -> str:
    """The generator's own code: a new msf-pio regenerates."""
    h = hashlib.sha256(__version__.encode())
    for path in sorted(PACKAGE_DIR.rglob("*.py")) + sorted(PACKAGE_DIR.rglob("*.yaml")):
        if "/pio/" not in str(path):
            h.update(path.read_bytes())
    return h.hexdigest()


def _inputs_digest(options: Options) -> str:
    """Model file(s), options and generator: what the generated sources depend on."""
    h = hashlib.sha256(json.dumps(options.key(), sort_keys=True).encode())
    path = Path(options.model)
    if path.is_file():
        h.update(path.read_bytes())
        try:
            import yaml
            spec = yaml.safe_load(path.read_text()) if path.suffix != ".onnx" else {}
            for ref in (spec.get("weights") or {}).values() if isinstance(spec, dict) else []:
                if isinstance(ref, str) and (path.parent / ref).is_file():
                    h.update((path.parent / ref).read_bytes())
        except Exception:  # an unreadable spec fails later, with its own message
            pass
    h.update(_source_digest().encode())
    return h.hexdigest()


def generate_library(options: Options, build_dir: Path, board: str, f_cpu: int,
                     flash_limit: int | None) -> tuple[Path, dict, bool]:
    """Generate (or keep) the msf_model library under build_dir; returns its folder of
    libraries, the plan summary and whether anything was regenerated."""
    root = build_dir / GENERATED_DIR
    stamp_path = root / "stamp.json"
    digest = _inputs_digest(options)
    if stamp_path.is_file():
        stamp = json.loads(stamp_path.read_text())
        if stamp.get("digest") == digest and (root / LIB_NAME / "library.json").is_file():
            return root, stamp["summary"], False
    summary = _generate(options, root, board, f_cpu, flash_limit)
    stamp_path.write_text(json.dumps({"digest": digest, "summary": summary}, indent=2))
    return root, summary, True


def _generate(options: Options, root: Path, board: str, f_cpu: int,
              flash_limit: int | None) -> dict:
    from ..codegen.generate import generate
    from ..fusion.graph import build_graph
    from ..fusion.planner import feasible_plan
    from ..model import load_model
    from ..model.weights import materialize
    from ..reference import run_model
    from ..verify import crc32, seeded_input
    from .golden import golden_sources

    model = materialize(load_model(options.model))
    model = replace(model, stream_output=options.output == "stream")
    graph = build_graph(model, options.cost_model)
    plan = feasible_plan(graph, options.objective, options.max_overhead, options.ram_limit,
                         context=f" for {board}")
    if options.cost_model == "paper":      # run the paper's choice, with exact arena sizes
        exact = {(e.first, e.last): e for e in build_graph(model, "exact").edges}
        plan = replace(plan, blocks=[exact[(e.first, e.last)] for e in plan.blocks],
                       cost_model="exact")
    sources = generate(model, plan)
    weight_bytes = sum(l.weights.w.size + 9 * l.weights.bias.size
                       for l in model.layers if l.weights is not None)
    if flash_limit and weight_bytes > flash_limit:
        raise MsfError(f"the weights need {weight_bytes} B of flash, the board has "
                       f"{flash_limit} B", source=f"model {model.name}")
    x = seeded_input(model, 0)
    y = run_model(model, x).reshape(-1)
    lib = root / LIB_NAME
    golden_h, golden_c = golden_sources(x, y)
    files = {
        "include/msf_model.h": sources.header, "src/msf_model.c": sources.source,
        "include/msf_golden.h": golden_h, "src/msf_golden.c": golden_c,
        "library.json": json.dumps({"name": LIB_NAME, "version": "0.0.0",
                                    "description": "msf-pio generated model (do not edit)",
                                    "build": {"includeDir": "include", "srcDir": "src"}},
                                   indent=2) + "\n"}
    for name, text in files.items():
        _write_if_changed(lib / name, text)
    summary = {
        "model": model.name, "plan": plan.label, "objective": plan.objective,
        "cost_model": options.cost_model, "output": options.output,
        "peak_ram_bytes": plan.peak_ram, "macs": plan.macs, "overhead": round(plan.overhead, 4),
        "blocks": [[e.first, e.last] for e in plan.blocks if e.fused],
        "ram_limit": None if options.ram_limit is None or math.isinf(options.ram_limit)
        else int(options.ram_limit),
        "weight_bytes": int(weight_bytes), "board": board, "f_cpu": f_cpu,
        "reference_crc32": f"0x{crc32(y):08x}",
        "input_bytes": int(np.prod(model.input_shape)),
        "output_bytes": int(np.prod(model.output_shape)),
    }
    plan_json = {"generator": "Generated by msf-pio", **plan.to_json(),
                 **{k: summary[k] for k in ("reference_crc32", "board", "f_cpu")}}
    _write_if_changed(root / "plan.json", json.dumps(plan_json, indent=2) + "\n")
    return summary


def _write_if_changed(path: Path, text: str) -> None:
    """Unchanged files keep their time stamps, so SCons recompiles nothing."""
    if path.is_file() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def describe(summary: dict, regenerated: bool, seconds: float) -> str:
    blocks = " ".join(f"[{a}-{b}]" for a, b in summary["blocks"]) or "none"
    what = f"generated in {seconds:.2f} s" if regenerated else \
        f"model and options unchanged, nothing regenerated ({seconds:.2f} s)"
    return (f"msf-pio: {summary['model']} {summary['plan']} ({summary['cost_model']}): "
            f"predicted peak RAM {summary['peak_ram_bytes']} B (arena), "
            f"F={summary['overhead']:.3f}, fusion blocks {blocks}; {what}")


def configure(env) -> None:
    """The pre-script entry point: read options, generate, point the library finder at it."""
    start = time.perf_counter()
    board = env.BoardConfig()
    project_dir = Path(env.subst("$PROJECT_DIR"))
    env_name = env.subst("$PIOENV")
    try:
        options = read_options(lambda k, d: env.GetProjectOption(k, d),
                               int(board.get("upload.maximum_ram_size", 0) or 0),
                               project_dir, env_name)
        f_cpu = int(str(board.get("build.f_cpu", "0")).rstrip("L") or 0)
        flash = int(board.get("upload.maximum_size", 0) or 0) or None
        root, summary, regenerated = generate_library(
            options, Path(env.subst("$BUILD_DIR")), env.subst("$BOARD"), f_cpu, flash)
    except MsfError as exc:
        print(f"msf-pio: error: {exc}")
        env.Exit(1)
        return
    print(describe(summary, regenerated, time.perf_counter() - start))
    from .monitor import install_filter
    install_filter(project_dir)     # for monitor_filters = msf; a user's own file is kept
    ram_limit = summary["ram_limit"] or int(board.get("upload.maximum_ram_size", 0) or 0)
    lib = root / LIB_NAME
    env.Append(CPPPATH=[str(lib / "include"), str(PACKAGE_DIR.parent / "library" / "include")],
               CPPDEFINES=["MSF_MEASURE_ARENA", ("MSF_BOARD_NAME", f'\\"{env.subst("$BOARD")}\\"'),
                           ("MSF_CPU_HZ", f_cpu), ("MSF_RAM_LIMIT", ram_limit)])
    # the generated sources are part of the program (the runtime comes from lib_deps)
    env.BuildSources(str(Path(env.subst("$BUILD_DIR")) / "msf_model"), str(lib / "src"))

"""Calibrates the stack predictor (msf_pio/codegen/stack.py): per board, the call graph and
frames of the firmwares msf-pio ships, as PlatformIO compiles and links them for it.

For every board (the emulated ones; the real stm32cube and freedom-e-sdk boards with --real),
the demo project is built through PlatformIO with -fcallgraph-info=su in a few
firmware variants: the demo (streamed output through its check callback, arena measuring), the
demo with a streamed input and a whole output, its `pio test` harness, and the `msf-pio init`
main.c. GCC's call graphs give the frames and calls of everything compiled (runtime, board
file, generated model, main); the linked firmware's disassembly gives the rest (the C library's
start-up and mem* functions, libgcc); msf_pio/pio/stack_graph.py joins them. The variants'
graphs are merged (largest frame, every call) and stored with the library's compile flags in
msf_pio/codegen/stack_profiles.json; tests/test_stack.py compiles the runtime again with
those flags and fails when the stored frames or calls are stale.

A firmware links only the kernels its plan runs (the generated model's own dispatch replaces
the runtime's weak every-op one), so the calibration covers every kernel and executor itself:
the runtime's weak dispatch joins the model's in the graph, every entry point a model may
reach is linked (--undefined), so their library calls are in the disassembly, and the
schedule's whole-tensor kernels are roots; a runtime function or a call missing from the
graph stops the calibration. The generator's specialised kernels are compiled for a range of
shapes (KERNEL_SHAPES): each form is stored as one function at its largest frame.

Run: python benchmarks/calibrate_stack.py [--boards a,b] [--jobs 2]     (~1 min per board)
     python benchmarks/calibrate_stack.py --boards hifive1-revb,nucleo_f412zg,... --real DIR
     (DIR: the folder with pkgs/ that scripts/real_boards.py reads)
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from msf_pio.codegen import kernel_data, specialise, stack  # noqa: E402
from msf_pio.pio import bootstrap, stack_graph  # noqa: E402
from msf_pio.pio.project import make_project, pio  # noqa: E402

BOARDS = ("qemu_f767zi", "qemu_f412zg", "qemu_hifive1b", "qemu_esp32c3", "qemu_esp32s3")
MANIFESTS = REPO / "msf_pio" / "pio" / "platform" / "boards"
TEMPLATE_MAIN = REPO / "msf_pio" / "pio" / "template" / "main.c"
MODEL = "tiny"      # the runtime's frames do not depend on the model; the generated entry's
                    # do not either (a straight sequence of calls): the smallest model builds
                    # fast, and every kernel is linked whatever the model runs (every_entry)
VARIANTS = {        # name -> (custom_msf_* options, main.c or None for the demo's, pio test)
    "demo": ({"output": "stream", "input": "buffer"}, None, False),
    "demo-stream-input": ({"output": "buffer", "input": "stream"}, None, False),
    "demo-test": ({"output": "stream", "input": "buffer"}, None, True),
    "init-main": ({"output": "buffer", "input": "buffer", "measure": "no"}, TEMPLATE_MAIN,
                  False),
}
ARCH = {   # objdump, stack alignment (the ABI's)
    "arm": ("arm-none-eabi-objdump", 8),
    "riscv": ("riscv64-unknown-elf-objdump", 16),
    "xtensa": ("xtensa-lx106-elf-objdump", 16),
}
# Cortex-M4F/M7 with the FPU on (the C start-up enables it): an exception stacks the extended
# frame, 26 words, plus 4 bytes of alignment
FPU_FRAME = 108
# per framework: the interrupts the firmware enables (handler -> the bytes the hardware stacks
# before it) and its fault handlers (a fault ends the run: never on top of a measured stack)
FRAMEWORKS = {
    "qemu-arm": ({"arm_systick_isr": FPU_FRAME}, ("arm_hardfault_isr", "msf_qemu_arm_hardfault")),
    "qemu-riscv": ({}, ("trap",)),
    "qemu-xtensa": ({}, ("msf_qemu_xtensa_exception",)),
    "stm32cube": ({"SysTick_Handler": FPU_FRAME}, ("HardFault_Handler", "Default_Handler")),
    "freedom-e-sdk": ({}, ()),
}
# real boards (scripts/real_boards.py lays out their platforms offline): arch, framework
REAL = {"nucleo_f767zi": ("arm", "stm32cube"), "disco_f746ng": ("arm", "stm32cube"),
        "nucleo_f412zg": ("arm", "stm32cube"), "hifive1-revb": ("riscv", "freedom-e-sdk")}
VECTOR = re.compile(r"(_Handler|_IRQHandler|_handler)$")   # exception vectors, not callbacks
RUNTIME = REPO / "library" / "src"


def unit_of(path: str) -> str:
    """The predictor's unit of a runtime source file: kernels/<op>_s8.c -> op,
    schemes/<executor>.c -> the executor (a scheme's EXECUTOR); "" for what every edge runs."""
    p = Path(path)
    if p.parent.name == "kernels" and p.name.endswith("_s8.c") and p.name != "requant_s8.c":
        return p.name[:-len("_s8.c")]
    return p.stem if p.parent.name == "schemes" and p.suffix == ".c" else ""


def every_entry() -> list[str]:
    """The runtime's entry points a model may reach: what its two dispatch templates call under
    an op's or a scheme's bit (library/src/edge.h, executor.h) and the schedule's whole-tensor
    kernels."""
    names = set(stack.WHOLE_KERNELS)
    for header, template in (("edge.h", "msf_layer_column_of"), ("executor.h", "msf_run_edge_of")):
        text = (RUNTIME / header).read_text()
        body = text[text.index(f"void {template}("):]
        names |= set(re.findall(r"if \(\(?(?:ops|schemes|heads) & [^{]*\{\s+(\w+)\(",
                                body[:body.index("\n}\n")]))
    return sorted(names)


def build_variant(core, tmp: Path, board: str, variant: str, packages: Path | None):
    options, main, test = VARIANTS[variant]
    project = make_project(tmp / f"{board}-{variant}", model=MODEL, **options)
    if packages:              # a real board: its platform and framework laid out offline
        sys.path.insert(0, str(REPO / "scripts"))
        import real_boards
        (project / "msf_offline.ini").write_text(real_boards.offline_ini(packages / "pkgs",
                                                                         tmp))
        text = (project / "platformio.ini").read_text()
        (project / "platformio.ini").write_text(text.replace(
            "[platformio]\n", "[platformio]\nextra_configs = msf_offline.ini\n", 1))
    if main:
        (project / "src" / "main.c").write_text(main.read_text())
    ini = project / "platformio.ini"
    # every kernel and executor linked, whatever the calibration model runs: the disassembly
    # then holds the library functions (libgcc's, the C library's) any of them calls
    keep = " ".join(f"-Wl,--undefined={name}" for name in every_entry())
    ini.write_text(ini.read_text() + f"\n[env]\nbuild_flags = -fcallgraph-info=su {keep}\n")
    args = (["test", "-e", board, "--without-uploading", "--without-testing"] if test
            else ["run", "-e", board])
    code, out = pio(core, project, *args)
    if code:
        raise RuntimeError(f"{board} {variant}: build failed\n{out[-2000:]}")
    return project


def library_flags(core, project: Path, board: str) -> tuple[str, list[str], str]:
    """The compiler and the flags PlatformIO gives the library's sources
    (compile_commands.json), less outputs, the build's own include paths and the call-graph
    flags added here; include paths inside this repository are kept, as {repo}/..."""
    code, out = pio(core, project, "run", "-e", board, "-t", "compiledb")
    if code:
        raise RuntimeError(out[-2000:])
    commands = json.loads((project / "compile_commands.json").read_text())
    entry = next(c for c in commands if c["file"].endswith("library/src/executor.c"))
    args = entry.get("arguments") or shlex.split(entry["command"])
    flags, skip = [], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a in ("-o", "-c"):
            skip = a == "-o"
        elif a.startswith("-I"):
            path = Path(a[2:])
            if path.is_absolute() and REPO in path.parents and "library" not in path.parts:
                flags.append("-I{repo}/" + str(path.relative_to(REPO)))
        elif a.startswith(("-fcallgraph-info", "-fstack-usage", "-DPLATFORMIO=")) or \
                a == entry["file"]:
            continue
        else:
            flags.append(a)
    return Path(args[0]).name, flags, args[0]


# The shapes whose specialised kernels bound the frame of any (stack.SPECIALISED): windows,
# input channels, strides, requantization modes, clamps and odd output channel counts across
# the zoo's range
KERNEL_SHAPES = [specialise.ConvShape(kh, kw, cin, s, s, kw // 2, mode, full, even)
                 for kh, kw in ((1, 1), (3, 3), (5, 5), (10, 4)) for cin in (1, 3, 8, 16, 64, 256)
                 for s in (1, 2) for mode in (0, 1, 2, 3) for full in (False, True)
                 for even in (True, False) if even or mode == 3
                 if (kh + s) * kernel_data.conv_row(kw, cin, s) <= kernel_data.CONV_BUFFER - 4] + \
                [specialise.DepthwiseShape(c, full) for c in (4, 8, 16, 64, 256)
                 for full in (False, True)]


def specialised_forms(compiler: str, flags: list[str], tmp: Path) -> dict:
    """Per form of the generator's specialised kernels (stack.SPECIALISED: the prefix of their
    names in the generated msf_model.c), the largest frame and every call of the KERNEL_SHAPES'
    instances, compiled as the board's generated code is: {prefix: Function}."""
    src = tmp / "msf_model.c"
    names = [s.name for s in KERNEL_SHAPES]
    src.write_text("\n".join([
        '#include "msf/kernels.h"', "", "MSF_KERNEL_SPEED", "",
        *specialise.definitions(KERNEL_SHAPES),
        "typedef void (*kernel_t)(const msf_layer_t *, const msf_view_t *, const msf_view_t *,",
        "                         int32_t, int32_t, int32_t, void *);",
        f"const kernel_t msf_kernels[{len(names)}] = {{{', '.join(names)}}};", ""]))
    cmd = [compiler, *[f.replace("{repo}", str(REPO)) for f in flags],
           f"-I{REPO / 'library' / 'include'}", "-fcallgraph-info=su", "-c", str(src),
           "-o", str(tmp / "msf_model.o")]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    graph = stack_graph.read_callgraph([tmp / "msf_model.ci"])

    def own(name: str) -> tuple[int, set]:
        """An instance's frame with the deepest chain of the instances it calls in turn (a
        folded 3x3 depthwise kernel calls its unclamped twin on RV32), and its other calls."""
        fn, deepest, calls = graph[name], 0, set()
        for callee in fn.calls:
            if callee in graph:
                d, c = own(callee)
                deepest, calls = max(deepest, d), calls | c
            else:
                calls.add(callee)
        return fn.frame + deepest, calls

    forms = {}
    for name, fn in graph.items():
        form = next((p for p in stack.SPECIALISED if name.startswith(p)), None)
        if form and name.split(":")[-1] in names:
            f = forms.setdefault(form, stack_graph.Function(0, unit=stack.SPECIALISED[form]))
            frame, calls = own(name)
            f.frame = max(f.frame, frame)
            f.dynamic |= fn.dynamic
            f.calls |= calls
    compiled = {n.split(":")[-1] for n in graph}
    assert set(names) <= compiled and set(forms) == set(stack.SPECIALISED), \
        "a specialised kernel was not compiled"
    return forms


def arch_and_framework(board: str) -> tuple[str, str]:
    if board in REAL:
        return REAL[board]
    arch = json.loads((MANIFESTS / f"{board}.json").read_text())["build"]["arch"]
    return arch, f"qemu-{arch}"


def entry_function(elf: Path, arch: str, linked: dict) -> str:
    """The function holding the ELF's entry point (reset)."""
    readelf = ARCH[arch][0].replace("objdump", "readelf")
    header = subprocess.run([readelf, "-h", str(elf)], capture_output=True, text=True,
                            check=True).stdout
    entry = int(re.search(r"Entry point address:\s+(0x[0-9a-f]+)", header).group(1), 16)
    nm = subprocess.run([ARCH[arch][0].replace("objdump", "nm"), "-n", str(elf)],
                        capture_output=True, text=True, check=True).stdout
    best = None
    for line in nm.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTW" and parts[2] in linked:
            addr = int(parts[0], 16) & ~1
            if addr <= entry and (best is None or addr >= best[0]):
                best = (addr, parts[2])
    return best[1]


def every_call(graph: dict) -> None:
    """The runtime's weak dispatch (edge.c's msf_layer_column, executor.c's msf_run_edge: every
    op's kernel and every executor) joined to the generated model's definitions of the same
    functions (only the calibration model's kernels), so the profile holds every call a model
    can make. GCC titles a weak definition with its file, as a static one; the calls name it
    plainly."""
    plain = {c for fn in graph.values() for c in fn.calls}
    for name in [n for n in graph if ":" in n]:
        base = name.split(":", 1)[1]
        if base in plain and str(RUNTIME) in graph[name].unit:
            weak = graph.pop(name)
            fn = graph.setdefault(base, stack_graph.Function(0, unit=weak.unit))
            fn.frame = max(fn.frame, weak.frame)
            fn.dynamic |= weak.dynamic
            fn.calls |= weak.calls


def board_graph(project: Path, board: str):
    arch, framework = arch_and_framework(board)
    build = project / ".pio" / "build" / board
    graph = stack_graph.read_callgraph(sorted(build.rglob("*.ci")))
    every_call(graph)
    runtime = {n for n, fn in graph.items() if unit_of(fn.unit) and ":" not in n}
    for fn in graph.values():
        fn.unit = unit_of(fn.unit) if str(RUNTIME) in fn.unit else ""
    interrupts, faults = FRAMEWORKS[framework]
    linked = stack_graph.disassembled_functions(build / "firmware.elf", ARCH[arch][0], arch)
    entry = entry_function(build / "firmware.elf", arch, linked)
    vectors = tuple(faults) + tuple(n for n in linked if VECTOR.search(n))
    # the kernels the generated schedule calls itself, whether or not this model has their ops
    whole = [name for name in stack.WHOLE_KERNELS if name in graph]
    dropped = set()
    full = stack_graph.complete(graph, linked, [entry, *interrupts, *whole], vectors=vectors,
                                dropped=dropped)
    # every kernel and executor a model may run is on the graph, and every call they make
    # (a library function the calibration firmware did not link would be dropped here)
    missing = sorted(runtime - set(full))
    # (a branch to an offset from a non-function symbol is a weak undefined call guarded off:
    # freedom-e-sdk's start-up to an absent _fini)
    # (GCC's call graph may name a library call the optimised code does not make: a linked
    # function's own calls are its disassembly's, every callee of which is linked)
    lost = sorted(f"{a} -> {b}" for a, b in dropped if re.fullmatch(r"[\w.$]+", b) and
                  a.split(":")[-1] not in linked)
    if missing or lost:
        raise RuntimeError(f"{board}: the calibration firmware does not cover "
                           f"{', '.join(missing + lost)}")
    return entry, full


def calibrate(core, tmp: Path, board: str, jobs: int, packages: Path | None = None) -> dict:
    arch, framework = arch_and_framework(board)
    with ThreadPoolExecutor(jobs) as pool:
        projects = dict(zip(VARIANTS, pool.map(
            lambda v: build_variant(core, tmp, board, v, packages if board in REAL else None),
            VARIANTS)))
    graphs, entries = [], set()
    for variant, project in projects.items():
        entry, graph = board_graph(project, board)
        entries.add(entry)
        graphs.append(graph)
    if len(entries) != 1:
        raise RuntimeError(f"{board}: the variants start in different functions {entries}")
    merged = stack_graph.merge(graphs)
    stack_graph.check_acyclic(merged)
    compiler, flags, path = library_flags(core, projects["demo"], board)
    version = subprocess.run([compiler, "--version"], capture_output=True,
                             text=True).stdout.split("\n")[0]
    align, interrupts = ARCH[arch][1], FRAMEWORKS[framework][0]
    (tmp / board).mkdir(exist_ok=True)
    # each form of specialised kernel as one function the generated code calls through its
    # layers' pointers, at its largest frame and with every call of its instances
    forms = specialised_forms(path, flags, tmp / board)
    for name, fn in forms.items():
        unknown = fn.calls - set(merged)
        if unknown:
            raise RuntimeError(f"{board}: {name}* calls {', '.join(sorted(unknown))}, which the "
                               "calibration firmware does not hold")
        merged[name] = fn
        merged[stack.INDIRECT].calls.add(name)
    for name, fn in merged.items():       # the calibration model's own instances too
        fn.unit = next((u for p, u in stack.SPECIALISED.items() if name.startswith(p)), fn.unit)
    stack_graph.check_acyclic(merged)
    specialised = max(fn.frame for fn in forms.values())
    return {
        "framework": framework,
        "compiler": compiler,
        "version": version,
        "cflags": flags,
        "stack_align": align,
        "entry": entries.pop(),
        "interrupts": interrupts,
        "specialised": specialised,
        "functions": {name: {"frame": fn.frame, "calls": sorted(fn.calls),
                             **({"dynamic": True} if fn.dynamic else {}),
                             **({"unit": fn.unit} if fn.unit else {})}
                      for name, fn in sorted(merged.items())},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", default=",".join(BOARDS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", help="build in this folder and keep it")
    ap.add_argument("--real", metavar="PACKAGES", type=Path,
                    help="also the real boards' envs: the folder with pkgs/ that "
                         f"scripts/real_boards.py reads ({', '.join(REAL)} with --boards)")
    args = ap.parse_args(argv)
    profiles = json.loads(stack.PROFILES.read_text()) if stack.PROFILES.is_file() else {}
    boards = args.boards.split(",")
    for board in boards:
        if board in REAL and not args.real:
            raise SystemExit(f"{board}: a real board needs --real PACKAGES")
    # the builds predict their plan's stack from the stored profiles: a board's stale profile
    # (the C changed) is left out while it is calibrated, and put back if calibrating fails
    stale = {b: profiles.pop(b) for b in boards if b in profiles}
    stack.PROFILES.write_text(stack.dump_profiles(profiles))
    try:
        with tempfile.TemporaryDirectory() as scratch:
            tmp = Path(args.keep or scratch)
            core = str(tmp / "core")
            bootstrap.install_tool_scons(core, log=lambda _m: None)
            for board in boards:
                profiles[board] = calibrate(core, tmp, board, args.jobs, args.real)
                fns = profiles[board]["functions"]
                print(f"{board}: {len(fns)} functions, entry {profiles[board]['entry']}, "
                      f"largest frame {max(f['frame'] for f in fns.values())} B", flush=True)
    finally:
        profiles.update({b: p for b, p in stale.items() if b not in profiles})
        stack.PROFILES.write_text(stack.dump_profiles(profiles))
    print(f"wrote {stack.PROFILES.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

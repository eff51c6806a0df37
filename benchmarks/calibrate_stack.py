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
                    # do not either (a straight sequence of calls): the smallest model builds fast
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
    ini.write_text(ini.read_text() + "\n[env]\nbuild_flags = -fcallgraph-info=su\n")
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
# input channels, strides, requantization modes and clamps across the zoo's range
KERNEL_SHAPES = [specialise.ConvShape(kh, kw, cin, s, s, kw // 2, mode, full)
                 for kh, kw in ((1, 1), (3, 3), (5, 5), (10, 4)) for cin in (1, 3, 8, 16, 64, 256)
                 for s in (1, 2) for mode in (0, 1, 2, 3) for full in (False, True)
                 if (kh + s) * kernel_data.conv_row(kw, cin, s) <= kernel_data.CONV_BUFFER - 4] + \
                [specialise.DepthwiseShape(c, full) for c in (4, 8, 16, 64, 256)
                 for full in (False, True)]


def specialised_frame(compiler: str, flags: list[str], tmp: Path) -> int:
    """The largest frame of the KERNEL_SHAPES' specialised kernels, compiled as the board's
    generated code is."""
    src = tmp / "specialised.c"
    names = [s.name for s in KERNEL_SHAPES]
    src.write_text("\n".join([
        '#include "msf/kernels.h"', "", "MSF_KERNEL_SPEED", "",
        *specialise.definitions(KERNEL_SHAPES),
        "typedef void (*kernel_t)(const msf_layer_t *, const msf_view_t *, const msf_view_t *,",
        "                         int32_t, int32_t, int32_t, void *);",
        f"const kernel_t msf_kernels[{len(names)}] = {{{', '.join(names)}}};", ""]))
    cmd = [compiler, *[f.replace("{repo}", str(REPO)) for f in flags],
           f"-I{REPO / 'library' / 'include'}", "-fstack-usage", "-c", str(src),
           "-o", str(tmp / "specialised.o")]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    frames = [int(line.split("\t")[1]) for line in (tmp / "specialised.su").read_text().splitlines()
              if line.split("\t")[0].rsplit(":", 1)[-1] in names]
    assert len(frames) == len(names), "a specialised kernel was not compiled"
    return max(frames)


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


def board_graph(project: Path, board: str):
    arch, framework = arch_and_framework(board)
    build = project / ".pio" / "build" / board
    graph = stack_graph.read_callgraph(sorted(build.rglob("*.ci")))
    for fn in graph.values():
        fn.unit = unit_of(fn.unit) if str(RUNTIME) in fn.unit else ""
    interrupts, faults = FRAMEWORKS[framework]
    linked = stack_graph.disassembled_functions(build / "firmware.elf", ARCH[arch][0], arch)
    entry = entry_function(build / "firmware.elf", arch, linked)
    vectors = tuple(faults) + tuple(n for n in linked if VECTOR.search(n))
    full = stack_graph.complete(graph, linked, [entry, *interrupts], vectors=vectors)
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
    specialised = specialised_frame(path, flags, tmp / board)
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

"""Flash of msf-pio's runtime and generated model beside TFLite Micro's interpreter and kernels,
per .tflite model, on Cortex-M4.

TFLite Micro side: its library built by its own Makefile from a checkout of its public sources
(https://github.com/tensorflow/tflite-micro; the Makefile's third-party downloads, flatbuffers,
gemmlowp, ruy and CMSIS's Cortex-M device headers, already in
tensorflow/lite/micro/tools/make/downloads/: this script does not download anything), target
cortex_m_generic, TARGET_ARCH=cortex-m4, BUILD_TYPE=release (error strings stripped), every
part at -Os; then per model a firmware whose main registers only the model's builtin ops
(MicroMutableOpResolver), allocates the tensors and invokes the interpreter once, linked with
--gc-sections (picolibc). Reported: the .text and .rodata the link keeps from TFLite Micro's
library objects (the interpreter, allocator, flatbuffer reading and the registered kernels;
the C and C++ runtime libraries and the main excluded), and the model's flatbuffer (weights
and graph, in the main's .rodata).

msf-pio side: the model's firmware on --board (the benchmark firmware, vanilla plan, or the
least-RAM plan when vanilla does not fit), the code and constant data of the runtime's and the
generated model's objects (benchmarks/mlperf_tiny.py's flash(): board support, C library and
main excluded), beside the build's own flash figures (codegen/flash.py: constant data counted,
code estimated) and its predicted stack.

--zoo: also the zoo's models, exported to .tflite by msf-pio's exporter (the same int8 graph
and weights TFLite Micro then runs).

--units: instead, the code of every runtime file and of the generated specialised kernels on
qemu_f767zi, qemu_esp32c3 and qemu_esp32s3 (firmwares of the four MLPerf Tiny files in
--models), and of the kernel files whose layers all run specialised kernels what the linker
kept: the sizes codegen/flash.py's code estimate takes (the largest of the three).

--cmsis-nn DIR: also TFLite Micro built with its CMSIS-NN kernels (OPTIMIZED_KERNEL_DIR=cmsis_nn,
CMSIS_NN_PATH=DIR, a checkout of https://github.com/ARM-software/CMSIS-NN; CMSIS from the
checkout's downloads/ folder, nothing fetched), the configuration a Cortex-M deployment uses:
its code and constant data beside.

Run: python benchmarks/tflm_size.py --tflm DIR --models DIR [--zoo] [--board qemu_f412zg]
     [--cmsis-nn DIR]
     python benchmarks/tflm_size.py --units --models DIR
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_instructions import project_for  # noqa: E402
from mlperf_tiny import SECTION, SECTION_WRAPPED, flash, linked_sections  # noqa: E402
from msf_pio.codegen import flash as flash_model  # noqa: E402
from msf_pio.export.tflite import export_tflite  # noqa: E402
from msf_pio.model.zoo import zoo_names  # noqa: E402
from msf_pio.pio import bootstrap  # noqa: E402
from msf_pio.pio.project import pio  # noqa: E402

GEN = "gen/cortex_m_generic_cortex-m4_release_gcc"
LIB = f"{GEN}/lib/libtensorflow-microlite.a"
# with --cmsis-nn: the same build with TFLite Micro's CMSIS-NN kernels (OPTIMIZED_KERNEL_DIR;
# CMSIS and CMSIS-NN already in the checkout's downloads/ folder)
LIB_CMSIS_NN = "gen/cortex_m_generic_cortex-m4_release_cmsis_nn_gcc/lib/libtensorflow-microlite.a"
MAKE = ["make", "-f", "tensorflow/lite/micro/tools/make/Makefile", "TARGET=cortex_m_generic",
        "TARGET_ARCH=cortex-m4", "BUILD_TYPE=release", "CORE_OPTIMIZATION_LEVEL=-Os",
        "KERNEL_OPTIMIZATION_LEVEL=-Os", "THIRD_PARTY_KERNEL_OPTIMIZATION_LEVEL=-Os",
        "microlite"]
# the library's own flags for this target (make -n), less the warnings
FLAGS = ["-fno-rtti", "-fno-exceptions", "-fno-threadsafe-statics", "-fno-unwind-tables",
         "-fno-asynchronous-unwind-tables", "-ffunction-sections", "-fdata-sections",
         "-DTF_LITE_STATIC_MEMORY", "-DNDEBUG", "-DTF_LITE_STRIP_ERROR_STRINGS", "-std=c++17",
         "-mcpu=cortex-m4+nofp", "-mthumb", "-mfloat-abi=soft", "-funsigned-char", "-Os"]
DOWNLOADS = "tensorflow/lite/micro/tools/make/downloads"
INCLUDES = [".", f"{DOWNLOADS}/gemmlowp", f"{DOWNLOADS}/flatbuffers/include", f"{DOWNLOADS}/ruy"]
LINK = ["--specs=picolibc.specs", "--crt0=hosted", "-Wl,--gc-sections",
        "-Wl,--defsym=__flash=0x08000000", "-Wl,--defsym=__flash_size=0x400000",
        "-Wl,--defsym=__ram=0x20000000", "-Wl,--defsym=__ram_size=0x100000"]
# builtin operator -> MicroMutableOpResolver method
RESOLVER = {"CONV_2D": "AddConv2D", "DEPTHWISE_CONV_2D": "AddDepthwiseConv2D",
            "AVERAGE_POOL_2D": "AddAveragePool2D", "MAX_POOL_2D": "AddMaxPool2D",
            "FULLY_CONNECTED": "AddFullyConnected", "SOFTMAX": "AddSoftmax",
            "RESHAPE": "AddReshape", "ADD": "AddAdd", "MUL": "AddMul", "PAD": "AddPad",
            "MEAN": "AddMean", "QUANTIZE": "AddQuantize", "DEQUANTIZE": "AddDequantize",
            "LOGISTIC": "AddLogistic", "HARD_SWISH": "AddHardSwish",
            "CONCATENATION": "AddConcatenation", "RELU": "AddRelu", "RELU6": "AddRelu6"}
BENCHMARKS = ("vww_96_int8.tflite", "pretrainedResnet_quant.tflite", "kws_ref_model.tflite",
              "ad01_int8.tflite")


def builtin_ops(path: Path) -> list[str]:
    from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as fb
    names = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}
    model = fb.Model.GetRootAs(path.read_bytes(), 0)
    codes = [model.OperatorCodes(i) for i in range(model.OperatorCodesLength())]
    return sorted({names[max(c.BuiltinCode(), c.DeprecatedBuiltinCode())] for c in codes})


def main_cc(model: bytes, ops: list[str]) -> str:
    missing = [op for op in ops if op not in RESOLVER]
    if missing:
        raise SystemExit(f"no resolver method known for {', '.join(missing)}")
    data = ",".join(str(b) for b in model)
    adds = "\n".join(f"    resolver.{RESOLVER[op]}();" for op in ops)
    return f"""#include <string.h>
#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/schema/schema_generated.h"

alignas(16) static const unsigned char model[] = {{{data}}};
alignas(16) static uint8_t arena[512 * 1024];

extern "C" void _exit(int) {{ for (;;) {{}} }}   // no operating system to return to

int main()
{{
    static tflite::MicroMutableOpResolver<{len(ops)}> resolver;
{adds}
    static tflite::MicroInterpreter interpreter(tflite::GetModel(model), resolver, arena,
                                                sizeof arena);
    if (interpreter.AllocateTensors() != kTfLiteOk) return 1;
    TfLiteTensor *in = interpreter.input(0);
    memset(in->data.raw, 0, in->bytes);
    if (interpreter.Invoke() != kTfLiteOk) return 2;
    return interpreter.output(0)->data.raw[0];
}}
"""


def tflm_flash(tflm: Path, path: Path, work: Path, lib: str = LIB) -> dict[str, int]:
    """The bytes the firmware keeps of TFLite Micro's library `lib` (code, constant data) and
    the model's flatbuffer."""
    work.mkdir(parents=True, exist_ok=True)
    src = work / "main.cc"
    src.write_text(main_cc(path.read_bytes(), builtin_ops(path)))
    elf, mapfile = work / "tflm.elf", work / "tflm.map"
    cmd = ["arm-none-eabi-g++", *FLAGS, *(f"-I{tflm / i}" for i in INCLUDES), str(src),
           str(tflm / lib), *LINK, f"-Wl,-Map={mapfile}", "-o", str(elf)]
    built = subprocess.run(cmd, capture_output=True, text=True)
    if built.returncode:
        raise SystemExit(f"{path.name}: the TFLite Micro firmware did not link:\n"
                         f"{built.stderr[-2000:]}")
    text = mapfile.read_text()
    sizes = {"code": 0, "data": 0, "model": 0}
    for kind, size, obj in linked_sections(text):
        if "libtensorflow-microlite.a(" in obj:
            sizes["code" if kind == "text" else "data"] += int(size, 16)
    nm = subprocess.run(["arm-none-eabi-nm", "-S", "-C", str(elf)], capture_output=True,
                        text=True, check=True).stdout
    sizes["model"] = next(int(line.split()[1], 16) for line in nm.splitlines()
                          if line.endswith(" model"))
    return sizes


def build(core: str, tmp: Path, path: Path, board: str):
    """(plan, project) of msf-pio's firmware for the model, or (plan, error)."""
    for plan, opts in (("vanilla", {"objective": "vanilla"}), ("p1:inf", {})):
        project = project_for(tmp, f"{path.stem}-{plan.replace(':', '_')}", board,
                              ram_limit="auto", model=str(path), **opts)
        code, out = pio(core, project, "run", "-e", board)
        if code == 0:
            return plan, project
        if not any(w in out for w in ("RAM", "infeasible")):
            return plan, out.strip().splitlines()[-1][:80]
    return plan, out.strip().splitlines()[-1][:80]


def ours(core: str, tmp: Path, path: Path, board: str):
    """(plan, sizes) of msf-pio's firmware for the model: its code and constant data, the
    build's estimate of them and its predicted stack; or (plan, error)."""
    plan, project = build(core, tmp, path, board)
    if isinstance(project, str):
        return plan, project
    sizes = flash(project, board)
    facts = json.loads((project / ".pio" / "build" / board / "msf_generated" /
                        "plan.json").read_text())
    sizes.update(est_code=facts["flash_code_bytes"], est_data=facts["flash_data_bytes"],
                 stack=facts.get("predicted_stack_bytes"))
    return plan, sizes


UNIT_BOARDS = ("qemu_f767zi", "qemu_esp32c3", "qemu_esp32s3")
RUNTIME_OBJECT = re.compile(r"/lib[0-9a-f]+/[^/]+/(?!board/)(.+)\.o$")


def units(core: str, tmp: Path, files: list[Path], jobs: int) -> None:
    """Per runtime file, its whole code (every function, linked or not: the link map lists the
    discarded ones too), and per kind of specialised kernel its largest instance, per board."""
    jobs_list = [(p, b) for p in files for b in UNIT_BOARDS]
    with ThreadPoolExecutor(jobs) as pool:
        built = list(pool.map(lambda j: build(core, tmp, j[0], j[1]), jobs_list))
    code: dict[str, dict[str, int]] = {}
    for (path, board), (_, project) in zip(jobs_list, built):
        if isinstance(project, str):
            print(f"{path.name} on {board}: {project}")
            continue
        text = (project / ".pio" / "build" / board / "firmware.map").read_text()
        whole: dict[str, int] = {}
        for kind, size, obj in SECTION.findall(text) + SECTION_WRAPPED.findall(text):
            m = RUNTIME_OBJECT.search(obj)
            if kind == "text" and m:
                whole[m.group(1)] = whole.get(m.group(1), 0) + int(size, 16)
        for unit, size in whole.items():
            row = code.setdefault(unit, {})
            row[board] = max(row.get(board, 0), size)
        # a kernel file whose layers all run specialised kernels: the code the linker kept
        source = (project / ".pio" / "build" / board / "msf_generated" / "msf_model" / "src" /
                  "msf_model.c").read_text()
        kept: dict[str, int] = {}
        for kind, size, obj in linked_sections(text):
            m = RUNTIME_OBJECT.search(obj)
            if kind == "text" and m:
                kept[m.group(1)] = kept.get(m.group(1), 0) + int(size, 16)
        for unit, (bit, callers, _) in flash_model.SPECIAL_ONLY.items():
            if unit in kept and f"MSF_BIT({bit})" not in source and not any(
                    f"MSF_BIT(MSF_{c.upper()})" in source for c in callers):
                row = code.setdefault(f"{unit} (specialised only)", {})
                row[board] = max(row.get(board, 0), kept[unit])
        for kind, prefix in (("MSF_CONV2D_KERNEL", "msf_conv_"), ("MSF_DW3X3_KERNEL", "msf_dw3x3_")):
            sizes = [int(size, 16) for size, name in re.findall(
                r"^\s+\.text\.(?:\S+\.)?" + prefix + r"\S*\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+)",
                text, re.M)]
            row = code.setdefault(kind, {})
            row[board] = max([row.get(board, 0), *sizes])
    print("| code of | " + " | ".join(UNIT_BOARDS) + " | largest | codegen/flash.py |")
    print("|---|" + "---:|" * (len(UNIT_BOARDS) + 2))
    for unit in sorted(code):
        row = code[unit]
        stored = flash_model.UNIT_CODE.get(unit, flash_model.SPECIALISED.get(unit, ""))
        if unit.endswith(" (specialised only)"):
            stored = flash_model.SPECIAL_ONLY[unit.split(" ")[0]][2]
        print(f"| {unit} | " + " | ".join(f"{row.get(b, 0):,}" for b in UNIT_BOARDS) +
              f" | {max(row.values()):,} | {stored} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tflm", type=Path, help="TFLite Micro checkout")
    ap.add_argument("--models", type=Path, help="folder of .tflite files")
    ap.add_argument("--zoo", nargs="*", help="also these zoo models (none named: the zoo's)")
    ap.add_argument("--board", default="qemu_f412zg")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--units", action="store_true", help="the code of every runtime file")
    ap.add_argument("--cmsis-nn", type=Path, metavar="DIR",
                    help="also TFLite Micro with its CMSIS-NN kernels from this CMSIS-NN "
                         "checkout (offline build)")
    args = ap.parse_args(argv)
    if args.models is None and args.zoo is None:
        raise SystemExit("--models DIR or --zoo is needed")
    if args.units:
        with tempfile.TemporaryDirectory() as tmp:
            core = str(Path(tmp) / "core")
            bootstrap.install_tool_scons(core, log=lambda _m: None)
            units(core, Path(tmp), [args.models / f for f in BENCHMARKS
                                    if (args.models / f).is_file()], args.jobs)
        return 0
    if args.tflm is None:
        raise SystemExit("--tflm DIR is needed (a TFLite Micro checkout)")
    if shutil.which("arm-none-eabi-g++") is None:
        raise SystemExit("needs arm-none-eabi-g++")
    root = Path(shutil.which("arm-none-eabi-gcc")).parent
    # the Makefile runs its examples' generator scripts with `python3` (numpy, Pillow): this one
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    builds = [(LIB, [])] + ([(LIB_CMSIS_NN, ["OPTIMIZED_KERNEL_DIR=cmsis_nn",
                                             f"CMSIS_NN_PATH={args.cmsis_nn.resolve()}"])]
                            if args.cmsis_nn else [])
    for lib, extra in builds:
        if not (args.tflm / lib).is_file():
            subprocess.run([*MAKE, *extra, f"TARGET_TOOLCHAIN_ROOT={root}/", f"-j{args.jobs}"],
                           cwd=args.tflm, check=True, env=env)
    files = [] if args.models is None else (
        [args.models / f for f in BENCHMARKS if (args.models / f).is_file()] or
        sorted(args.models.glob("*.tflite")))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.zoo is not None:
            from msf_pio.verify import quantized_model
            for name in args.zoo or zoo_names():
                export_tflite(quantized_model(name), tmp / f"{name}.tflite")
                files.append(tmp / f"{name}.tflite")
        ops = [", ".join(builtin_ops(p)) for p in files]      # before the exports go
        core = str(tmp / "core")
        bootstrap.install_tool_scons(core, log=lambda _m: None)
        with ThreadPoolExecutor(args.jobs) as pool:
            mine = list(pool.map(lambda p: ours(core, tmp, p, args.board), files))
        theirs = [tflm_flash(args.tflm, p, tmp / f"tflm-{p.stem}") for p in files]
        cmsis = [tflm_flash(args.tflm, p, tmp / f"cmsis-{p.stem}", LIB_CMSIS_NN)
                 if args.cmsis_nn else None for p in files]
    print(f"| model | ops | msf-pio plan ({args.board}) | msf-pio code B (estimate) | "
          "msf-pio data B (counted) | msf-pio stack B (predicted) | TFLM code B | TFLM data B | "
          "TFLM flatbuffer B | code msf-pio / TFLM | code + data msf-pio / TFLM (+ flatbuffer) |"
          + (" TFLM+CMSIS-NN code B | data B | code msf-pio / TFLM+CMSIS-NN | code + data "
             "msf-pio / TFLM+CMSIS-NN (+ flatbuffer) |" if args.cmsis_nn else ""))
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|" +
          ("---:|---:|---:|---:|" if args.cmsis_nn else ""))
    for path, op_names, (plan, size), t, c in zip(files, ops, mine, theirs, cmsis):
        if isinstance(size, str):
            print(f"| {path.name} | {op_names} | error: {size} | | | | {t['code']:,} | "
                  f"{t['data']:,} | {t['model']:,} | | |" + (" | | | |" if c else ""))
            continue
        total, their_total = size["code"] + size["data"], t["code"] + t["data"] + t["model"]
        more = ""
        if c:
            more = (f" {c['code']:,} | {c['data']:,} | {size['code'] / c['code']:.2f} | "
                    f"{total / (c['code'] + c['data'] + c['model']):.2f} |")
        print(f"| {path.name} | {op_names} | {plan} | {size['code']:,} ({size['est_code']:,}) | "
              f"{size['data']:,} ({size['est_data']:,}) | {size['stack']} | "
              f"{t['code']:,} | {t['data']:,} | {t['model']:,} | "
              f"{size['code'] / t['code']:.2f} | {total / their_total:.2f} |" + more, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

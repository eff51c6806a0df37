"""The four MLPerf Tiny models on the emulated boards beside ST X-CUBE-AI 9.0's cycles.

For each model (the MLPerf Tiny reference .tflite files of --models DIR, their own weights, and
the zoo's architectures with seeded weights) and board: the instructions of one inference
(benchmarks/firmware/main.c times msf_model_run; QEMU -icount), under the vanilla plan, or on a
board whose RAM cannot hold it the least-RAM plan that fits; the stack the run used; the flash
of the code (the msf-pio runtime and the generated model: their functions) and of the data
(weights, per-channel records and the schedule's tables), from the firmware's link map; and
whether the emulated board's output is the host reference's bytes (the firmware's CRC check).
A .tflite file is also run on the host against TFLite Micro's interpreter on the same file
(benchmarks/real_models.py's comparison, two seeded inputs).

X-CUBE-AI 9.0: MLPerf Tiny v1.2 closed division, NUCLEO-L4R5ZI (Cortex-M4, single issue, at
120 MHz), the medians of mlcommons/tiny_results_v1.2: VWW 88.928 ms, IC 165.125 ms, KWS
43.187 ms, AD 5.261 ms; its cycles bound its instructions from above.

The files stay outside this repository: https://github.com/mlcommons/tiny,
benchmark/training/{visual_wake_words,image_classification,keyword_spotting,anomaly_detection}.

Run: python benchmarks/mlperf_tiny.py --models DIR [--boards qemu_f412zg,...] [--zoo]
     [--jobs 2]                              (about a minute per model and board)
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_instructions import project_for, run  # noqa: E402
from msf_pio.pio import bootstrap  # noqa: E402

BOARDS = ("qemu_f412zg", "qemu_f767zi", "qemu_esp32c3", "qemu_hifive1b", "qemu_esp32s3")
# benchmark -> (reference file, zoo architecture, X-CUBE-AI 9.0 ms at 120 MHz)
MODELS = {
    "vww": ("vww_96_int8.tflite", "mlperf-tiny-vww", 88.928),
    "ic": ("pretrainedResnet_quant.tflite", "mlperf-tiny-ic", 165.125),
    "kws": ("kws_ref_model.tflite", "mlperf-tiny-kws", 43.187),
    "ad": ("ad01_int8.tflite", "mlperf-tiny-ad", 5.261),
}
XCUBE_HZ = 120e6
# the link map's input sections: size, object file; on one line, or (a long section name) the
# name on its own line and the rest on the next (the first pattern must not span lines, or it
# counts those twice)
SECTION = re.compile(r"^ \.(text|rodata)\S*[ \t]+0x[0-9a-f]+[ \t]+0x([0-9a-f]+)[ \t]+(\S+\.o)\b",
                     re.M)
SECTION_WRAPPED = re.compile(r"^ \.(text|rodata)\S*\n\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+\.o)\b",
                             re.M)


def linked_sections(text: str) -> list[tuple[str, str, str]]:
    """(kind, hex size, object) of the code and constant data a link map's firmware holds: the
    map's memory map only (its list of input sections --gc-sections discarded comes before)."""
    text = text[text.find("Linker script and memory map"):]
    return SECTION.findall(text) + SECTION_WRAPPED.findall(text)


def flash(project: Path, board: str) -> dict[str, int]:
    """Bytes of the runtime's and the generated model's code and constant data in the
    firmware (the board support, the C library, the benchmark's main and its golden input
    excluded)."""
    text = (project / ".pio" / "build" / board / "firmware.map").read_text()
    sizes = {"code": 0, "data": 0}
    for kind, size, obj in linked_sections(text):
        runtime = re.search(r"/lib[0-9a-f]+/[^/]+/", obj) and "/board/" not in obj
        if runtime or obj.endswith("/msf_model/msf_model.o"):
            sizes["code" if kind == "text" else "data"] += int(size, 16)
    return sizes


def tflm_bytes(path: Path) -> str:
    """'2/2' when the generated C gives TFLite Micro's bytes on both seeded inputs."""
    from real_models import evaluate
    row = evaluate(path, [], float("inf"))
    check = row.get("check", row.get("import", ""))
    m = re.search(r"C == TFLM (\d+/\d+)", check)
    return m.group(1) if m else check[:60]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, help="folder of the MLPerf Tiny .tflite files")
    ap.add_argument("--zoo", action="store_true", help="also the zoo architectures")
    ap.add_argument("--boards", default=",".join(BOARDS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-tflm", action="store_true", help="skip the host TFLite Micro check")
    args = ap.parse_args(argv)
    entries = []                                     # (benchmark, label, model argument)
    for bench, (file, zoo, _) in MODELS.items():
        if args.models and (args.models / file).is_file():     # the files the folder has
            entries.append((bench, file, str(args.models / file)))
        if args.zoo or not args.models:
            entries.append((bench, zoo, zoo))
    boards = args.boards.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        core = str(tmp / "core")
        bootstrap.install_tool_scons(core, log=lambda _m: None)

        def one(job):
            (bench, label, model), board = job
            tag = f"{bench}-{label.split('.')[0]}"
            for plan, opts in (("vanilla", {"objective": "vanilla"}), ("p1:inf", {})):
                project = project_for(tmp, f"{tag}-{plan.replace(':', '_')}", board,
                                      ram_limit="auto", model=model, **opts)
                r, error = run(core, project, board)
                if r is not None or not any(w in error for w in ("RAM", "infeasible")):
                    return job, plan, r, error, flash(project, board) if r else None
            return job, plan, r, error, None

        jobs = [(e, b) for e in entries for b in boards]
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(one, jobs))
        exact = {} if args.no_tflm else {
            label: tflm_bytes(Path(model)) for _, label, model in entries
            if model.endswith(".tflite")}
    print("| model | board | plan | instructions | X-CUBE-AI cycles | ratio | bit-exact "
          "(board CRC, TFLM) | stack B measured / predicted | code B | data B |")
    print("|---|---|---|---:|---:|---:|---|---:|---:|---:|")
    for ((bench, label, _), board), plan, r, error, size in results:
        cycles = round(MODELS[bench][2] * 1e-3 * XCUBE_HZ)
        if r is None:
            print(f"| {label} | {board} | {plan} | error: {error[:80]} ||||||")
            continue
        inst = int(r["cycles"])
        print(f"| {label} | {board} | {plan} | {inst:,} | {cycles:,} | {inst / cycles:.3f} | "
              f"{r['status']}, {exact.get(label, '-')} | {r['stack']} / {r['stack_pred']} | "
              f"{size['code']:,} | {size['data']:,} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Executed instructions per MAC of the C kernels on the host (x86-64, gcc -O2 as HostBuild
compiles), counted by valgrind's callgrind: conv 3x3, conv 1x1 and depthwise 3x3, each alone
(a single-layer model, one plain layer pass) and inside a fused block (1x1 -> dw 3x3 -> 1x1, an
inverted residual without its Add, vanilla and min_ram plans).

Counting: `--toggle-collect=msf_model_run` collects only inside the model's entry point, so the
harness (file I/O, process start) costs nothing; what is left besides the kernels (the edge
executor, window set-up) shows in the `model` rows and in the near-zero-MAC baseline. Per kernel
in a block, the inclusive cost of its function (msf_conv2d_column: both 1x1 layers,
msf_depthwise_column) over the MACs the plan executes in those layers (with recomputation).

Run: python benchmarks/instructions_per_mac.py        (needs gcc and valgrind; ~10-20 s)
"""
from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
import time

import numpy as np

from msf_pio.codegen.generate import generate
from msf_pio.codegen.host import HostBuild
from msf_pio.fusion.geometry import block_schedule
from msf_pio.fusion.schemes.line_buffer import row_sweep
from msf_pio.model.spec import spec_to_model
from msf_pio.model.weights import materialize
from msf_pio.verify import plan_for, seeded_input

KERNEL_FN = {"conv2d": "msf_conv2d_column", "depthwise_conv2d": "msf_depthwise_column"}

SINGLE = {   # name -> (input HWC, layer spec); 0.6-2.4 M MACs each
    "conv 3x3": ([32, 32, 16], {"op": "conv2d", "out": 16, "kernel": 3, "act": "relu6"}),
    "conv 1x1": ([32, 32, 32], {"op": "pointwise", "out": 32, "act": "relu6"}),
    "dw 3x3": ([32, 32, 64], {"op": "depthwise_conv2d", "kernel": 3, "act": "relu6"}),
}
BLOCK = ([32, 32, 16], [{"op": "pointwise", "out": 64, "act": "relu6"},
                        {"op": "depthwise_conv2d", "kernel": 3, "act": "relu6"},
                        {"op": "pointwise", "out": 16, "act": "none"}])
BASELINE = ([1, 1, 1], [{"op": "pointwise", "out": 1}])           # 1 MAC: the fixed overhead


def model_of(name: str, input_shape, layers):
    spec = {"name": name, "input": {"shape": input_shape}, "weights": {"random": 1},
            "layers": layers}
    return materialize(spec_to_model(spec, source=f"<{name}>"))


def callgrind(build: HostBuild, x: np.ndarray, tag: str) -> tuple[int, dict[str, int]]:
    """(instructions inside msf_model_run, inclusive instructions per function)."""
    exe = build.binary("plain")
    inp, out = build.dir / f"cg_{tag}.in", build.dir / f"cg_{tag}.out"
    prof = build.dir / f"callgrind_{tag}.out"
    inp.write_bytes(np.ascontiguousarray(x, dtype=np.int8).tobytes())
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={prof}",
                    "--toggle-collect=msf_model_run", str(exe), str(inp), str(out)],
                   check=True, capture_output=True, text=True)
    text = prof.read_text()
    total = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
    annotate = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100",
                               str(prof)], check=True, capture_output=True, text=True).stdout
    functions = {}
    for line in annotate.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(?:\S*:)?(\w+)\b", line)
        if m:
            functions.setdefault(m.group(2), int(m.group(1).replace(",", "")))
    return int(total.group(1)), functions


def measure(model, objective: str, fmax: float = math.inf):
    """(plan, instructions in msf_model_run, per-function inclusive instructions)."""
    plan = plan_for(model, objective, fmax)
    build = HostBuild(generate(model, plan))
    try:
        x = seeded_input(model, 0)
        counted = build.run(x, "count").figures["macs_counted"]
        assert counted == plan.macs, (counted, plan.macs)
        total, functions = callgrind(build, x, plan.label.replace(":", "_"))
    finally:
        build.close()
    return plan, total, functions


def per_layer_macs(model, plan) -> list[int]:
    """MACs each layer executes under the plan (H-cache blocks recompute rows)."""
    macs = [0] * model.n_layers
    for e in plan.blocks:
        if not e.fused:
            macs[e.first] = e.macs
            continue
        sched = row_sweep(model, e.last, e.first) if e.scheme == "line-buffer" else \
            block_schedule(model, e.last, e.first, e.tile_rows)
        for l in range(e.first, e.last + 1):
            macs[l] = sched.layer_macs[l]
    assert sum(macs) == plan.macs
    return macs


def row(kernel, plan, macs, instructions):
    ipm = instructions / macs if macs else float("nan")
    return f"{kernel:<22} {plan:<33} {macs:>10,} {instructions:>13,} {ipm:>9.2f}"


def main() -> int:
    for tool in ("gcc", "valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            print(f"needs {tool} on PATH", file=sys.stderr)
            return 1
    start = time.perf_counter()
    print("instructions per MAC, x86-64 host, gcc -O2, valgrind callgrind "
          "(collected inside msf_model_run)")
    print(f"{'kernel':<22} {'plan':<33} {'MACs':>10} {'instructions':>13} {'instr/MAC':>9}")
    print("-" * 91)

    base_model = model_of("baseline", *BASELINE)
    _, base, _ = measure(base_model, "vanilla")
    print(row("baseline (1 MAC)", "vanilla: whole msf_model_run", 1, base))

    for name, (shape, layer) in SINGLE.items():
        model = model_of(name.replace(" ", ""), shape, [layer])
        plan, total, functions = measure(model, "vanilla")
        fn = KERNEL_FN[model.layers[0].op]
        h, w, c = shape
        print(row(name, f"single layer {h}x{w}x{c}->{model.layers[0].out_shape[2]}",
                  plan.macs, functions[fn]))
        print(row("", "  whole msf_model_run", plan.macs, total))

    model = model_of("block", *BLOCK)
    for objective, fmax in (("vanilla", math.inf), ("min_ram", math.inf), ("min_ram", 1.3)):
        plan, total, functions = measure(model, objective, fmax)
        blocks = [f"{e.first}-{e.last}" for e in plan.blocks if e.fused] or ["none"]
        label = f"{plan.label} fused {','.join(blocks)} F={plan.overhead:.2f}"
        macs = per_layer_macs(model, plan)
        pw = macs[0] + macs[2]
        print(row("conv 1x1 (2 in block)", label, pw, functions["msf_conv2d_column"]))
        print(row("dw 3x3 (in block)", label, macs[1], functions["msf_depthwise_column"]))
        print(row("block 1x1-dw3x3-1x1", label, plan.macs, total))
        print(row("", f"  per unfused MAC (peak {plan.peak_ram} B)", plan.unfused_macs, total))
    print(f"\nbaseline subtracted: none needed (collection is inside msf_model_run; its fixed "
          f"cost is the {base} instructions of the baseline row); {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

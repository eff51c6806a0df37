"""Real pretrained .tflite models (files from public packages, kept outside this repository)
through msf-pio as a new user would bring them: import, solve, generate C, run it on the host
and compare with TFLite Micro's interpreter on the same file.

For each file: the import result (or its one-line error), then under vanilla, p1:1.3 and p1:inf
the peak RAM, F, whether the generated C gives TFLite Micro's bytes on two seeded inputs, and the
measured arena against the predicted one. A file whose graph opens with a TRANSPOSE NCHW -> NHWC
gets its input transposed for TFLite Micro (msf-pio reads H x W x C); a float-edged file
(QUANTIZE in, DEQUANTIZE out) is fed the dequantized input and its output requantized.

Run: python benchmarks/real_models.py FILE.tflite [FILE ...] [--max-macs 1e9]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from msf_pio.codegen.generate import generate  # noqa: E402
from msf_pio.codegen.host import HostBuild  # noqa: E402
from msf_pio.errors import MsfError  # noqa: E402
from msf_pio.fusion import solvers  # noqa: E402
from msf_pio.fusion.graph import build_graph  # noqa: E402
from msf_pio.model import load_model  # noqa: E402
from msf_pio.verify import seeded_input  # noqa: E402


def tflm_output(data: bytes, model, x: np.ndarray) -> np.ndarray:
    """TFLite Micro on the file: fed x (transposed for an NCHW file, dequantized for a float
    input), its output as int8 (requantized with the model's output scale if it is float)."""
    from tflite_micro.python.tflite_micro import runtime
    interp = runtime.Interpreter.from_bytes(data, arena_size=1 << 26)
    details = interp.get_input_details(0)
    shape = tuple(details["shape"])
    if len(shape) == 4 and shape[1:] != x.shape:                       # NCHW file
        x = x.transpose(2, 0, 1)
    x = x.reshape(shape)
    if details["dtype"] == np.float32:
        q = model.q_input
        x = ((x.astype(np.float32) - q.zero_point) * np.float32(q.scale))
    interp.set_input(x, 0)
    interp.invoke()
    y = interp.get_output(0).reshape(-1)
    if y.dtype == np.float32:
        q = model.layers[-1].q_out
        y = np.clip(np.round(y / np.float32(q.scale)) + q.zero_point, -128, 127).astype(np.int8)
    return y


def evaluate(path: Path, max_macs: float) -> list[str]:
    try:
        model = load_model(str(path))
    except MsfError as exc:
        return [f"{path.name}: not imported: {exc}"]
    data = path.read_bytes()
    ops = sorted({l.op for l in model.layers})
    lines = [f"{path.name}: {len(model.layers)} layers {model.input_shape} -> "
             f"{model.output_shape}, ops {', '.join(ops)}"]
    graph = build_graph(model, "exact")
    vanilla = solvers.vanilla(graph)
    if vanilla.macs > max_macs:
        return lines + [f"  skipped: {vanilla.macs} MACs > --max-macs"]
    inputs = [seeded_input(model, s) for s in (0, 1)]
    expected = [tflm_output(data, model, x) for x in inputs]
    for label, plan in (("vanilla", vanilla), ("p1:1.3", solvers.p1_min_ram(graph, 1.3)),
                        ("p1:inf", solvers.p1_min_ram(graph))):
        build = HostBuild(generate(model, plan))
        try:
            same = sum(np.array_equal(build.run(x).output.reshape(-1), ref)
                       for x, ref in zip(inputs, expected))
            arena = build.run(inputs[0], "measure").figures["arena_measured"]
        finally:
            build.close()
        lines.append(f"  {label:8s} peak RAM {plan.peak_ram:>8} B  F={plan.overhead:.3f}  "
                     f"TFLM bytes {same}/{len(inputs)}  arena measured {arena} "
                     f"({'==' if arena == plan.peak_ram else '!='} predicted)")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--max-macs", type=float, default=math.inf)
    args = ap.parse_args()
    for path in args.files:
        print("\n".join(evaluate(path, args.max_macs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

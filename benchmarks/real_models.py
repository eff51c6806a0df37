"""Real pretrained model files (from public packages and repositories, kept outside this
repository) through msf-pio as a user brings them: import (or its one-line error), the peak RAM
of the vanilla, F <= 1.3 and F = inf plans, and
- an int8 file: the generated C of the least-RAM plan on the file's own input type and shape
  (msf_model_run_io) against TFLite Micro on the same file (bit-exact outputs), its arena
  measured against the predicted one;
- a stateful streaming file (microWakeWord): the same over a sequence of frames, the state
  carried from one run to the next (TFLite Micro's interpreter keeps its resource variables
  across invoke());
- a float file: quantized post-training on real inputs (--data: .npy batches NHWC, the first
  half calibrates; --data-affine A,B feeds A * x + B, a model's own normalisation), the int8
  model's top-1 agreement with the float original (TFLite Micro's float interpreter on the
  file) over the other half; the generated C checked on two of them. A float ONNX file (a map
  out, e.g. a text detector's probability map): the int8 model's output against onnxruntime's
  float one over --eval N of the other half (Pearson correlation, largest error), and the C of
  the least-RAM plan against TFLite Micro on the exported int8 model on each (bit-exact).

Run: python benchmarks/real_models.py DIR_OR_FILES... [--data FILE.npy ...] [--max-macs 2e8]
     [--input-shape H,W,C] [--data-affine A,B] [--eval N] [--threshold T]
Prints a markdown table.
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
from msf_pio.codegen.io import from_file, io_of, to_file  # noqa: E402
from msf_pio.errors import MsfError  # noqa: E402
from msf_pio.options import parse_input_shape  # noqa: E402
from msf_pio.fusion import solvers  # noqa: E402
from msf_pio.fusion.exact_cost import unfused_macs  # noqa: E402
from msf_pio.fusion.graph import build_graph  # noqa: E402
from msf_pio.model import load_model  # noqa: E402
from msf_pio.model.weights import materialize  # noqa: E402
from msf_pio.reference import run_model  # noqa: E402

DTYPES = {"int8": np.int8, "uint8": np.uint8, "float32": np.float32}


def tflm(data: bytes, x: np.ndarray, outputs: int = 1) -> np.ndarray:
    """TFLite Micro on the file, its outputs flattened one after another."""
    from tflite_micro.python.tflite_micro import runtime
    interp = runtime.Interpreter.from_bytes(data, arena_size=1 << 27)
    interp.set_input(x, 0)
    interp.invoke()
    return np.concatenate([np.asarray(interp.get_output(k)).reshape(-1)
                           for k in range(outputs)])


def tflm_frames(data: bytes, frames: list[np.ndarray]) -> list[np.ndarray]:
    """TFLite Micro on a streaming file, frame after frame on one interpreter."""
    from tflite_micro.python.tflite_micro import runtime
    interp = runtime.Interpreter.from_bytes(data, arena_size=1 << 27)
    out = []
    for x in frames:
        interp.set_input(x, 0)
        interp.invoke()
        out.append(np.asarray(interp.get_output(0)).reshape(-1).copy())
    return out


def tensors_match_tflm(model, data: bytes, frames: list[np.ndarray]) -> tuple[int, int]:
    """(layers whose output equals TFLite Micro's tensor of the same name on every frame,
    layers compared): the reference frame after frame against TFLM keeping every tensor,
    the state carried by both. A wake-word model's one output probability is 0 on most
    random frames; its inner tensors are not."""
    from tflite_micro.python.tflite_micro import runtime
    from msf_pio.reference.executor import initial_state, run_layer
    interp = runtime.Interpreter.from_bytes(
        data, arena_size=1 << 27,
        intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors)
    names = [t.name.decode() for t in
             runtime.convert_bytearray_to_object(data).subgraphs[0].tensors]
    compared = [l for l, layer in enumerate(model.layers) if names.count(layer.name) == 1]
    same, state = set(compared), initial_state(model)
    for x in frames:
        interp.set_input(x, 0)
        interp.invoke()
        tensors = {0: from_file(model, x)}
        for l in range(model.n_layers):
            tensors[l + 1] = run_layer(model, l, tensors, state)
            if l in same and not np.array_equal(tensors[l + 1].reshape(-1), interp.GetTensor(
                    names.index(model.layers[l].name), 0)["tensor_data"].reshape(-1)):
                same.discard(l)
    return len(same), len(compared)


def logits_match(model, frames: list[np.ndarray]) -> int:
    """Frames on which the C of the model cut before its last pixel ops (the logistic of a
    wake-word model, 0 on most frames) gives the reference's bytes, the state carried."""
    from dataclasses import replace
    from msf_pio.model import ir
    from msf_pio.reference.executor import initial_state
    end = model.n_layers
    while end > 1 and model.layers[end - 1].op in ir.PIXEL_OPS:
        end -= 1
    cut = replace(model, layers=model.layers[:end], outputs=None, output_io=None)
    state = initial_state(cut)
    ref = [run_model(cut, x, state).reshape(-1) for x in frames]
    build = HostBuild(generate(cut, solvers.p1_min_ram(build_graph(cut, "exact"))))
    try:
        ours = build.run_frames(np.stack(frames)).output
    finally:
        build.close()
    return sum(np.array_equal(a, b) for a, b in zip(ours, ref))


def file_inputs(model, n: int, seed: int = 0) -> list[np.ndarray]:
    """Inputs in the file's own type and shape, spread over its range."""
    i, _ = io_of(model)
    rng = np.random.default_rng(seed)
    if i.dtype == "float32":
        q = model.q_input
        lo, hi = (-128 - q.zero_point) * q.scale, (127 - q.zero_point) * q.scale
        return [rng.uniform(lo, hi, i.dims).astype(np.float32) for _ in range(n)]
    info = np.iinfo(DTYPES[i.dtype])
    return [rng.integers(info.min, info.max + 1, i.dims).astype(DTYPES[i.dtype])
            for _ in range(n)]


def real_data(paths: list[Path], shape) -> np.ndarray | None:
    for p in paths:
        x = np.load(p)
        if tuple(x.shape[1:]) == tuple(shape):
            return x.astype(np.float32)
    return None


def onnx_float_check(path: Path, model, x: np.ndarray, build, tflite: bytes,
                     threshold: float | None = None) -> str:
    """The int8 model (reference) against onnxruntime's float output on `x`, and the C of
    the plan against TFLite Micro on the exported model on each (a detector's map is constant
    on an image it finds nothing in: those that are not are counted)."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    ours, ref = [], []
    for xi in x:
        ref.append(session.run(None, {name: xi.transpose(2, 0, 1)[None]})[0].reshape(-1))
        ours.append(to_file(model, run_model(model, from_file(model, xi.transpose(2, 0, 1)[None])))
                    .reshape(-1))
    ours, ref = np.concatenate(ours), np.concatenate(ref)
    corr = float(np.corrcoef(ours, ref)[0, 1])
    err = float(np.abs(ours - ref).max())
    q = model.layers[-1].q_out
    mask = ""
    if threshold is not None:      # a detector's map binarised as its post-processing does
        a, b = ours > threshold, ref > threshold
        mask = (f", pixels > {threshold}: IoU {(a & b).sum() / max(1, (a | b).sum()):.3f} "
                f"({b.sum()} in the float map, {a.sum()} in the int8 one)")
    same = varied = 0
    for xi in x:
        x8 = from_file(model, xi.transpose(2, 0, 1)[None])
        out = build.run(x8).output.reshape(-1)
        same += int(np.array_equal(out, tflm(tflite, x8[None]).reshape(-1)))
        varied += int(len(np.unique(out)) > 1)
    return (f"int8 vs onnxruntime float over {len(x)} inputs: correlation {corr:.4f}, max "
            f"|error| {err:.4f} (output LSB {q.scale:.4g}, float range {ref.min():.3f}.."
            f"{ref.max():.3f}){mask}; C == TFLM on the export {same}/{len(x)} (outputs not constant: "
            f"{varied})")


def evaluate(path: Path, data: list[Path], max_macs: float,
             input_shape: tuple[int, int, int] | None = None,
             affine: tuple[float, float] = (1.0, 0.0), n_eval: int = 8,
             threshold: float | None = None) -> dict:
    row = {"file": path.name}
    try:
        model = load_model(str(path), input_shape)
    except MsfError as exc:
        row["import"] = str(exc).replace(str(path), path.name)
        return row
    raw = path.read_bytes()
    row["import"] = (f"ok: {model.n_layers} layers, {'int8' if model.quantized else 'float'}, "
                     f"in {io_of(model)[0].dtype} {list(io_of(model)[0].dims)}")
    accuracy, x, float_file = None, None, not model.quantized
    if float_file:
        x = real_data(data, model.input_shape)
        if x is not None:
            x = (affine[0] * x + affine[1]).astype(np.float32)
    onnx_float = float_file and x is not None and path.suffix == ".onnx"
    if not model.quantized and x is None:       # no real inputs: random ones calibrate
        model = materialize(model)
    elif onnx_float:
        half = len(x) // 2
        model = materialize(model, x[:half])
    elif not model.quantized:
        half = len(x) // 2
        model = materialize(model, x[:half])
        agree = 0
        for xi in x[half:]:
            ours = to_file(model, run_model(model, from_file(model, xi)))
            ref = tflm(raw, xi.reshape(io_of(model)[0].dims), len(model.output_tensors))
            agree += int(np.argmax(ours) == np.argmax(ref))
        accuracy = (agree, len(x) - half)
    macs = unfused_macs(model)
    if macs > max_macs:
        row["check"] = f"skipped: {macs:.3g} MACs > --max-macs"
        return row
    graph = build_graph(model, "exact")
    plans = {"vanilla": solvers.vanilla(graph), "p1:1.3": solvers.p1_min_ram(graph, 1.3),
             "p1:inf": solvers.p1_min_ram(graph)}
    for label, plan in plans.items():
        row[label] = f"{plan.peak_ram:,} B (F {plan.overhead:.2f})"
    build = HostBuild(generate(model, plans["p1:inf"]))
    try:
        if onnx_float:
            from msf_pio.export.tflite import tflite_bytes
            check = onnx_float_check(path, model, x[half:half + n_eval], build,
                                     tflite_bytes(model), threshold)
            x8 = from_file(model, x[-1].transpose(2, 0, 1)[None])
        elif x is None and float_file:       # no real data: the C against the reference
            xs = file_inputs(model, 2)
            same = sum(np.array_equal(build.run_io(model, xi), to_file(
                model, run_model(model, from_file(model, xi)))) for xi in xs)
            check = f"float, PTQ on random images (no real data): C == reference {same}/2"
            x8 = from_file(model, xs[0])
        elif x is None and model.state_bytes():   # a streaming model: frames in sequence
            xs = file_inputs(model, 50)
            ours = build.run_frames(np.stack([from_file(model, xi) for xi in xs])).output
            same = sum(np.array_equal(to_file(model, o).reshape(-1), t)
                       for o, t in zip(ours, tflm_frames(raw, xs)))
            layers = tensors_match_tflm(model, raw, xs)
            logits = logits_match(model, [from_file(model, xi) for xi in xs])
            check = (f"{len(xs)} frames in sequence (state {model.state_bytes():,} B): "
                     f"C == TFLM {same}/{len(xs)}, every frame's tensors == TFLM's in "
                     f"{layers[0]}/{layers[1]} layers, C's logits == reference "
                     f"{logits}/{len(xs)}")
            x8 = from_file(model, xs[0])
        elif x is None:                    # int8: the file's bytes, in its own types
            xs = file_inputs(model, 2)
            same = sum(np.array_equal(build.run_io(model, xi).reshape(-1),
                                      tflm(raw, xi, len(model.output_tensors))) for xi in xs)
            check = f"C == TFLM {same}/{len(xs)}"
            x8 = from_file(model, xs[0])
        else:
            x = real_data(data, model.input_shape)
            same = sum(np.array_equal(build.run(from_file(model, xi)).output,
                                      run_model(model, from_file(model, xi)).reshape(-1))
                       for xi in x[-2:])
            check = (f"top-1 agreement {accuracy[0]}/{accuracy[1]} "
                     f"({100 * accuracy[0] / accuracy[1]:.1f}%), C == reference {same}/2")
            x8 = from_file(model, x[-1])
        arena = build.run(x8, "measure").figures["arena_measured"]
        ok = arena == plans["p1:inf"].peak_ram
        row["check"] = f"{check}; arena {arena:,} B {'==' if ok else '!='} predicted"
    finally:
        build.close()
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--data", nargs="*", type=Path, default=[],
                    help="real inputs (.npy, N x H x W x C floats) for float models")
    ap.add_argument("--max-macs", type=float, default=math.inf)
    ap.add_argument("--input-shape", type=parse_input_shape,
                    help="H,W,C of files whose input size is dynamic")
    ap.add_argument("--data-affine", default="1,0",
                    help="A,B: float models read A * x + B of the --data images")
    ap.add_argument("--eval", type=int, default=8,
                    help="inputs a float ONNX file's int8 output is compared on")
    ap.add_argument("--threshold", type=float,
                    help="a float ONNX map's IoU above this value (a detector's binarisation)")
    args = ap.parse_args()
    affine = tuple(float(v) for v in args.data_affine.split(","))
    files = sorted(f for p in args.paths for f in ([p] if p.is_file() else
                                                    [*p.glob("*.tflite"), *p.glob("*.onnx")]))
    cols = ("file", "import", "vanilla", "p1:1.3", "p1:inf", "check")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for f in files:
        row = evaluate(f, args.data, args.max_macs, args.input_shape, affine, args.eval,
                       args.threshold)
        print("| " + " | ".join(row.get(c, "") for c in cols) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

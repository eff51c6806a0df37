"""Calibrates the latency cost model (msf_pio/fusion/latency.py) on the emulated boards.

Runs a set of small one-layer models and fused blocks (small enough for the 16 KB board) through
PlatformIO on every emulated board under vanilla and fused plans (P1 at F 1.3 and at any F; P2
within the RAM of a line-buffer plan), with benchmarks/firmware/main.c
timing msf_model_run alone (QEMU -icount: instructions), and fits, per board, the
instructions-per-count coefficients of latency.FEATURES by non-negative least squares on
relative errors. Writes msf_pio/fusion/latency_profiles.json and prints the fit's residuals.

Run: python benchmarks/calibrate_latency.py [--boards a,b] [--jobs 2]
     (all five boards, 108-115 runs each: 23 min at --jobs 2)
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout's, and tests/

from kernel_instructions import project_for, run  # noqa: E402
from msf_pio.codegen.arena import compaction_counts  # noqa: E402
from msf_pio.fusion import latency  # noqa: E402
from msf_pio.fusion.planner import plan_model  # noqa: E402
from msf_pio.model import load_model  # noqa: E402
from msf_pio.pio import bootstrap  # noqa: E402
from tests.tflite_builder import streaming_net  # noqa: E402

BOARDS = ("qemu_f767zi", "qemu_f412zg", "qemu_hifive1b", "qemu_esp32c3", "qemu_esp32s3")
IR = {"op": "inverted_residual"}
# name -> (input HWC, layers); every one runs vanilla, the multi-layer ones p1:inf too
MODELS = {
    "pw16-32": ([12, 12, 16], [{"op": "pointwise", "out": 32}]),
    "pw48-16-odd": ([9, 9, 48], [{"op": "pointwise", "out": 16}]),
    "pw8-24-odd": ([15, 15, 8], [{"op": "pointwise", "out": 24, "act": "relu6"}]),
    "conv3-s1": ([11, 11, 8], [{"op": "conv2d", "out": 16, "kernel": 3}]),
    "conv3-s2": ([24, 24, 3], [{"op": "conv2d", "out": 16, "kernel": 3, "stride": 2}]),
    "conv3-s1-c32": ([8, 8, 32], [{"op": "conv2d", "out": 8, "kernel": 3}]),
    # dense convolutions across input and output channels, so the window work per pixel
    # (expanded taps, inner-loop set-ups) parts from the work per MAC: few inputs (2, 1 under
    # a rectangular strided window clipped at the sides), many (16, 40, 64)
    "conv3-16-24": ([14, 14, 16], [{"op": "conv2d", "out": 24, "kernel": 3}]),
    "conv3-40-48-s2": ([12, 12, 40], [{"op": "conv2d", "out": 48, "kernel": 3, "stride": 2}]),
    "conv3-c64": ([7, 7, 64], [{"op": "conv2d", "out": 40, "kernel": 3}]),
    # a window longer than the conv kernel's buffer holds for two pixels: gathered in parts
    "conv3-c128": ([5, 5, 128], [{"op": "conv2d", "out": 20, "kernel": 3}]),
    "conv3-c2": ([14, 14, 2], [{"op": "conv2d", "out": 24, "kernel": 3}]),
    # overlapping windows a few taps apart (kernel_counts.COMMONED_ROW) against farther ones:
    # a stem over three channels, 12 channels (36 taps)
    "conv3-c3": ([16, 16, 3], [{"op": "conv2d", "out": 16, "kernel": 3}]),
    "conv3-c12": ([12, 12, 12], [{"op": "conv2d", "out": 16, "kernel": 3}]),
    "conv8x3-s2-c1": ([29, 12, 1], [{"op": "conv2d", "out": 32, "kernel": [8, 3],
                                      "stride": 2}]),
    # pointwise layers over many input channels (a lone last row) and to many outputs, so
    # the per-pixel gather of the input channels parts from the work per MAC
    "pw64-24-odd": ([7, 7, 64], [{"op": "pointwise", "out": 24}]),
    "pw24-120": ([6, 6, 24], [{"op": "pointwise", "out": 120}]),
    "pw96-96": ([5, 5, 96], [{"op": "pointwise", "out": 96}]),
    # pointwise over many input channels in blocks of three pixels (MobileNet's deep layers)
    "pw128-128": ([6, 6, 128], [{"op": "pointwise", "out": 128}]),
    "pw64-64": ([9, 6, 64], [{"op": "pointwise", "out": 64}]),
    "dw3-s1": ([12, 12, 32], [{"op": "depthwise_conv2d", "kernel": 3}]),
    # few and many channels: a folded depthwise pixel's own cost apart from its outputs'
    "dw3-c8": ([24, 24, 8], [{"op": "depthwise_conv2d", "kernel": 3}]),
    "dw3-c128": ([6, 6, 128], [{"op": "depthwise_conv2d", "kernel": 3}]),
    "dw3-s2": ([16, 16, 32], [{"op": "depthwise_conv2d", "kernel": 3, "stride": 2}]),
    "dw5-s1": ([10, 10, 24], [{"op": "depthwise_conv2d", "kernel": 5}]),
    "dw7-s2": ([14, 14, 24], [{"op": "depthwise_conv2d", "kernel": 7, "stride": 2}]),
    "add": ([12, 12, 16], [{"op": "pointwise", "out": 16}, {"op": "add", "from": "input"}]),
    "maxpool": ([12, 12, 16], [{"op": "max_pool", "kernel": 2}]),
    "avgpool": ([12, 12, 16], [{"op": "avg_pool", "kernel": 3, "stride": 2, "padding": "same"}]),
    "avgpool-wide": ([10, 6, 32], [{"op": "avg_pool", "kernel": [10, 6]}]),   # one long window
    "gap-dense": ([6, 6, 32], [{"op": "global_avgpool"}, {"op": "dense", "out": 10}]),
    "dense": ([1, 1, 256], [{"op": "dense", "out": 64}]),
    # dense alone: long and short rows, so its per-MAC and per-output costs part (MLPerf
    # Tiny's autoencoder is dense layers only)
    "dense-640": ([1, 1, 640], [{"op": "dense", "out": 128}]),
    "dense-to-8": ([1, 1, 128], [{"op": "dense", "out": 128}, {"op": "dense", "out": 8}]),
    "ir-s1": ([12, 12, 8], [{**IR, "out": 8, "expand": 3, "kernel": 3, "stride": 1}]),
    "ir-s2": ([16, 16, 8], [{**IR, "out": 16, "expand": 4, "kernel": 3, "stride": 2},
                            {**IR, "out": 16, "expand": 3, "kernel": 5, "stride": 1}]),
    # fused dense convolutions (column rings of 8 and 16 channels), and a stem, depthwise and
    # pointwise that p1:1.3 streams through a line buffer (lone pixels over 32 channels)
    "conv-conv": ([12, 12, 8], [{"op": "conv2d", "out": 16, "kernel": 3},
                                {"op": "conv2d", "out": 16, "kernel": 3}]),
    "conv-dw-pw": ([13, 6, 4], [{"op": "conv2d", "out": 32, "kernel": 3, "stride": 2},
                                {"op": "depthwise_conv2d", "kernel": 3},
                                {"op": "pointwise", "out": 32}]),
    "pw-dw-pw-c8": ([16, 16, 4], [{"op": "pointwise", "out": 8},
                                   {"op": "depthwise_conv2d", "kernel": 3},
                                   {"op": "pointwise", "out": 8}]),
    "ir-head": ([10, 10, 8], [{**IR, "out": 16, "expand": 4, "kernel": 3, "stride": 2},
                              {"op": "pointwise", "out": 32}, {"op": "global_avgpool"},
                              {"op": "dense", "out": 10}]),
    # the upsampling kernels (whole tensors): transposed convs over few and more input
    # channels (MACs apart from the per-tap loop), nearest resizes of few and many channels
    # (the per-pixel copy apart from its bytes)
    "tconv3-s2": ([8, 8, 8], [{"op": "transpose_conv", "out": 8, "kernel": 3, "stride": 2}]),
    "tconv4-s2-c16": ([6, 6, 16], [{"op": "transpose_conv", "out": 12, "kernel": 4,
                                    "stride": 2}]),
    "resize-c8": ([8, 8, 8], [{"op": "resize_nearest"}]),
    "resize3-c32": ([6, 6, 32], [{"op": "resize_nearest", "scale": 3}]),
    # two output channels: the per-pixel search for the first taps apart from the outputs'
    "tconv2-s2-c2": ([16, 16, 8], [{"op": "transpose_conv", "out": 2, "kernel": 2,
                                    "stride": 2}]),
    # the per-value kernels of fixed-point math: hard-swish; a squeeze-and-excite block
    # (global pool, 1x1 convs of one pixel, logistic gate, broadcast product) as MobileNetV3's;
    # logistic after a conv (SSDLite's heads); softmax over a dense layer's classes
    "hswish": ([12, 12, 32], [{"op": "hard_swish"}]),
    "ir-se": ([8, 8, 16], [{**IR, "out": 16, "expanded": 48, "kernel": 3, "stride": 1,
                            "act": "hard_swish", "se": 16}]),
    "pw-logistic": ([6, 6, 16], [{"op": "pointwise", "out": 32}, {"op": "logistic"}]),
    "dense-softmax": ([1, 1, 64], [{"op": "dense", "out": 12}, {"op": "softmax"}]),
    # a global pool of few pixels and many channels: its division per channel
    "gap-c288": ([3, 3, 288], [{"op": "global_avgpool"}, {"op": "dense", "out": 10}]),
    # line buffers (p2:lb) with wide rings (their slides) over a strided stem's lone pixels
    "lb-stem-dw-pw": ([48, 48, 4], [{"op": "conv2d", "out": 32, "kernel": 3, "stride": 2},
                                    {"op": "depthwise_conv2d", "kernel": 3},
                                    {"op": "pointwise", "out": 16}]),
    "lb-stem-ir": ([40, 40, 3], [{"op": "conv2d", "out": 16, "kernel": 3, "stride": 2},
                                 {**IR, "out": 16, "expand": 6, "kernel": 3, "stride": 1}]),
    # p1:1.3 splits the second triple's channels in groups of 8, tiles of two rows and a
    # lone last one (the projection's int32 sums)
    "ir-split": ([10, 10, 16], [{**IR, "out": 16, "expand": 6, "kernel": 3, "stride": 1},
                                {**IR, "out": 24, "expand": 6, "kernel": 3, "stride": 2}]),
    # a strided triple split in groups of 8: tiles of two rows (p1:1.3) and of one (p1:inf)
    "ir-split-s2": ([12, 12, 16], [{**IR, "out": 16, "expand": 6, "kernel": 3, "stride": 2}]),
    # a triple to few outputs split in groups of 8: one-row tiles (p1:inf) and four-row ones
    # (p1:1.3), the executor's own kernel calls apart from their MACs
    "ir-split-c8": ([10, 10, 16], [{**IR, "out": 8, "expand": 6, "kernel": 3, "stride": 1}]),
    # and to many outputs (EfficientNet's deep triples): the sums' MACs, one-row tiles and
    # two-row ones (pairs)
    "ir-split-c64": ([4, 4, 32], [{**IR, "out": 64, "expand": 6, "kernel": 3, "stride": 1}]),
    "ir-split-c96": ([4, 4, 48], [{**IR, "out": 96, "expand": 4, "kernel": 3, "stride": 1}]),
    # and over many expanded channels (the sums' MACs per output as EfficientNet's 480-1152)
    "ir-split-e384": ([3, 3, 64], [{**IR, "out": 48, "expand": 6, "kernel": 3, "stride": 1}]),
    "ir-split-e576": ([2, 2, 96], [{**IR, "out": 32, "expand": 6, "kernel": 3, "stride": 1}]),
    # a DS-CNN (MLPerf Tiny's KWS, narrower): P1's line buffers write over their inputs, which
    # slide up before each (the arena's compaction: memmove bytes)
    "ds-cnn": ([49, 10, 1], [{"op": "conv2d", "out": 16, "kernel": [10, 4], "stride": 2,
                              "act": "relu"}] +
               [{"op": "depthwise_conv2d", "kernel": 3, "act": "relu"},
                {"op": "pointwise", "out": 16, "act": "relu"}] * 4 +
               [{"op": "avg_pool", "kernel": [25, 5]}, {"op": "dense", "out": 12}]),
    # the same over 8 channels: the slides' bytes a larger share of the run
    "ds-cnn-c8": ([49, 10, 1], [{"op": "conv2d", "out": 8, "kernel": [10, 4], "stride": 2,
                                 "act": "relu"}] +
                  [{"op": "depthwise_conv2d", "kernel": 3, "act": "relu"},
                   {"op": "pointwise", "out": 8, "act": "relu"}] * 4 +
                  [{"op": "avg_pool", "kernel": [25, 5]}, {"op": "dense", "out": 12}]),
    # a 1x1 and a 3x3 conv staged pixel by pixel into a head (p1): lone pixels, their output
    # channels in wide blocks (kernel_counts.lone_blocks) over many input channels
    "pw-head": ([4, 4, 96], [{"op": "pointwise", "out": 192}, {"op": "global_avgpool"},
                             {"op": "dense", "out": 10}]),
    "conv-head": ([6, 6, 32], [{"op": "conv2d", "out": 48, "kernel": 3},
                               {"op": "global_avgpool"}, {"op": "dense", "out": 10}]),
    # few output channels (a pixel block's own set-up apart from its channel pairs' blocks)
    # over input channels not a multiple of four (the inner loop's padding slots), as in
    # MobileNetV2 x0.35; a depthwise layer over channels not in groups of four (the kernel for
    # any shape's scalar loop), and a triple of such channels in an H-cache block
    "pw30-8": ([10, 10, 30], [{"op": "pointwise", "out": 8}]),
    "pw11-5-odd": ([12, 12, 11], [{"op": "pointwise", "out": 5}]),
    "pw5-30": ([12, 12, 5], [{"op": "pointwise", "out": 30}]),
    "conv3-16-4": ([10, 10, 16], [{"op": "conv2d", "out": 4, "kernel": 3}]),
    "dw3-c11": ([14, 14, 11], [{"op": "depthwise_conv2d", "kernel": 3}]),
    "ir-odd": ([14, 14, 5], [{**IR, "out": 8, "expanded": 30, "kernel": 3, "stride": 2},
                             {**IR, "out": 8, "expanded": 48, "kernel": 3, "stride": 1}]),
    # upsampling inside line buffers (every plan but vanilla): its column kernel called per
    # pixel, a nearest resize and a transposed conv (U-Net's decoder) and a transposed conv
    # alone
    "lb-resize-dw-tconv": ([10, 10, 8], [{"op": "resize_nearest"},
                                         {"op": "depthwise_conv2d", "kernel": 3},
                                         {"op": "transpose_conv", "out": 2, "kernel": 2,
                                          "stride": 2, "padding": "valid"}]),
    "lb-tconv-pw": ([8, 8, 8], [{"op": "transpose_conv", "out": 8, "kernel": 3, "stride": 2},
                                {"op": "pointwise", "out": 8}]),
}
# models with no YAML form, as .tflite files: a streaming model's stream and crop layers (bytes
# moved), its 128 features in rings of 24 new rows
FILES = {"stream-crop": lambda: streaming_net(1, frame_rows=24, features=128)}
PLANS = {"vanilla": {"objective": "vanilla"}, "p1:inf": {}, "p1:1.3": {"max_overhead": "1.3"},
         # P2 within the RAM of the model's line-buffer plan: line buffers, which P1 rarely
         # picks in models this small (the RAM limit is the model's own)
         "p2:lb": {"objective": "min_macs"}}


def nnls(a: np.ndarray, b: np.ndarray, iterations: int = 200) -> np.ndarray:
    """Lawson-Hanson non-negative least squares (numpy only)."""
    n = a.shape[1]
    x, passive = np.zeros(n), np.zeros(n, bool)
    for _ in range(iterations):
        grad = a.T @ (b - a @ x)
        if passive.all() or grad[~passive].max(initial=0) <= 1e-10 * np.abs(grad).max():
            break
        passive[np.argmax(np.where(passive, -np.inf, grad))] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > 1e-12
    return x


def counts_of(model, plan, wide: int) -> dict[str, int]:
    """The plan's counts, the arena's compaction, and the first run's restore of a streaming
    model's state (the firmware times one run, the first)."""
    total: dict[str, int] = {"copy.bytes": model.state_bytes()}
    for c in compaction_counts(model, plan):     # the arena's compaction between edges
        total["memmove.bytes"] = total.get("memmove.bytes", 0) + c["memmove.bytes"]
    for e in plan.blocks:
        for k, v in latency.edge_counts(model, e.first, e.last, e.scheme, e.tile_rows,
                                        wide, e.detail.get("g")).items():
            total[k] = total.get(k, 0) + v
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", default=",".join(BOARDS))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    boards = args.boards.split(",")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        core = str(tmp / "core")
        bootstrap.install_tool_scons(core, log=lambda _m: None)
        jobs = []
        files = {name: (".tflite", make()) for name, make in FILES.items()}
        files.update({name: (".yaml", yaml.safe_dump({"name": name, "input": {"shape": shape},
                                                      "weights": {"random": 1},
                                                      "layers": layers}).encode())
                      for name, (shape, layers) in MODELS.items()})
        for name, (suffix, data) in files.items():
            path = tmp / f"{name}{suffix}"
            path.write_bytes(data)
            model = load_model(str(path))
            built = set()           # the model's plans so far: one already built is not again
            for label, opts in PLANS.items():
                if label != "vanilla" and model.n_layers == 1:
                    continue
                if label == "p2:lb":
                    lb, _ = plan_model(model, schemes=("line-buffer",))
                    opts = {**opts, "ram_limit": str(lb.peak_ram)}
                plan, _ = plan_model(model, opts.get("objective", "min_ram"),
                                     float(opts.get("max_overhead", "inf")),
                                     ram_limit=opts.get("ram_limit") and int(opts["ram_limit"]))
                if label != "vanilla" and not any(e.fused for e in plan.blocks):
                    continue
                if label == "p2:lb" and not any(e.scheme == "line-buffer" for e in plan.blocks):
                    continue
                blocks = tuple((e.first, e.last, e.scheme, e.tile_rows, e.ram, e.detail.get("g"))
                               for e in plan.blocks)
                if blocks in built:
                    continue
                built.add(blocks)
                jobs += [(name, label, str(path), opts,
                          counts_of(model, plan, latency.wide(b)), b,
                          (plan.macs, plan.peak_ram)) for b in boards]

        def one(job):
            name, label, path, opts, counts, board, _ = job
            project = project_for(tmp, f"{name}-{label.replace(':', '_')}", board, model=path,
                                  **opts)
            return job, run(core, project, board)

        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(one, jobs))
    out = json.loads(latency.PROFILES.read_text()) if latency.PROFILES.is_file() else {}
    for board in boards:
        rows = [(job, int(r["cycles"])) for job, (r, err) in results
                if job[5] == board and r is not None and
                job[6] == (int(r["macs"]), int(r["arena"]))]
        failed = [(job[0], job[1], err or "not the plan counted (MACs, arena)")
                  for job, (r, err) in results if job[5] == board and
                  (r is None or job[6] != (int(r["macs"]), int(r["arena"])))]
        for f in failed:
            print(f"{board}: {f[0]} {f[1]} failed: {f[2][:100]}")
        a = np.array([[job[4].get(k, 0) for k in latency.FEATURES] for job, _ in rows], float)
        y = np.array([c for _, c in rows], float)
        coef = nnls(a / y[:, None], np.ones_like(y))
        pred = a @ coef
        print(f"\n{board}: {len(rows)} runs, worst relative error "
              f"{np.max(np.abs(pred / y - 1)):.3f}")
        for (job, measured), p in zip(rows, pred):
            print(f"  {job[0]:<16} {job[1]:<8} measured {measured:>10} predicted {p:>12.0f} "
                  f"{p / measured - 1:+.3f}")
        out[board] = {"coefficients": {k: round(float(v), 4) for k, v in
                                       zip(latency.FEATURES, coef)},
                      "runs": len(rows), "worst_relative_error": round(float(
                          np.max(np.abs(pred / y - 1))), 4)}
    latency.PROFILES.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    print(f"\nwrote {latency.PROFILES} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

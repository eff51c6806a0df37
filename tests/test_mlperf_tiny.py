"""The MLPerf Tiny reference architectures of the zoo (seeded random weights), exported with
`msf-pio export`, imported back and run as generated C under the vanilla and least-RAM plans:
TFLite Micro's bytes on the same .tflite, the predicted arena and MACs measured."""
import subprocess
import sys

import numpy as np
import pytest

from msf_pio.codegen.generate import generate
from msf_pio.codegen.host import HostBuild
from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.model import ir, load_model
from msf_pio.verify import quantized_model, seeded_input

from .test_reference_tflm import tflm_run
from .test_tflite_import import assert_same_quantized_model

MLPERF_TINY = {   # zoo name -> (input shape, output shape, op kinds)
    "mlperf-tiny-vww": ((96, 96, 3), (1, 1, 2), {ir.CONV, ir.DEPTHWISE, ir.GLOBAL_AVGPOOL,
                                                 ir.DENSE, ir.SOFTMAX}),
    "mlperf-tiny-ad": ((1, 1, 640), (1, 1, 640), {ir.DENSE}),
    # ResNet-8: shortcut convs read a stack input two layers back (a branched graph)
    "mlperf-tiny-ic": ((32, 32, 3), (1, 1, 10), {ir.CONV, ir.ADD, ir.GLOBAL_AVGPOOL, ir.DENSE,
                                                 ir.SOFTMAX}),
    "mlperf-tiny-kws": ((49, 10, 1), (1, 1, 12), {ir.CONV, ir.DEPTHWISE, ir.AVG_POOL, ir.DENSE,
                                                  ir.SOFTMAX}),
}


@pytest.mark.parametrize("name", sorted(MLPERF_TINY))
def test_mlperf_tiny_round_trip_is_bit_exact_with_tflm(name, tmp_path):
    shape, out_shape, ops = MLPERF_TINY[name]
    path = tmp_path / f"{name}.tflite"
    proc = subprocess.run([sys.executable, "-m", "msf_pio.cli", "export", name, "--out",
                           str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    model = load_model(str(path))
    assert (model.input_shape, model.output_shape) == (shape, out_shape)
    assert {l.op for l in model.layers} == ops
    assert_same_quantized_model(quantized_model(name), model)
    data = path.read_bytes()
    inputs = [seeded_input(model, s) for s in (0, 1)]
    expected = [tflm_run(data, x).reshape(-1) for x in inputs]
    graph = build_graph(model, "exact")
    plans = [solvers.vanilla(graph), solvers.p1_min_ram(graph, 1.3), solvers.p1_min_ram(graph)]
    for plan in plans:
        build = HostBuild(generate(model, plan))
        try:
            for seed, (x, ref) in enumerate(zip(inputs, expected)):
                assert np.array_equal(build.run(x).output, ref), f"{plan.label}, input {seed}"
            assert build.run(inputs[0], "measure").figures["arena_measured"] == plan.peak_ram
            assert build.run(inputs[0], "count").figures["macs_counted"] == plan.macs
        finally:
            build.close()
    if name == "mlperf-tiny-ic":      # the shortcut convs really branch, and blocks span them
        assert sum(model.input_of(l) != l for l in range(model.n_layers)) == 2
        assert plans[2].peak_ram < plans[1].peak_ram < plans[0].peak_ram / 4
    if name == "mlperf-tiny-kws":     # the 10x4 stem and the 24x5 pool fuse: below vanilla
        assert plans[2].peak_ram < plans[0].peak_ram
        assert any(l.kernel == (10, 4) for l in model.layers)
    if name == "mlperf-tiny-vww":     # fusion pays: least RAM far below vanilla (with row tiles,
        # F <= 1.3 already reaches the F = inf floor)
        assert plans[2].peak_ram <= plans[1].peak_ram < plans[0].peak_ram / 4

"""Generated C against independent oracles: the tflite-micro runtime on the exported .tflite,
random small CNNs with adversarial quantization under random fusion plans, and the cross
toolchains with -Werror."""
import random
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msf_pio.codegen.generate import generate
from msf_pio.errors import MsfError
from msf_pio.codegen.host import LIBRARY, HostBuild, write_sources
from msf_pio.export.tflite import tflite_bytes
from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.fusion.plan import Plan
from msf_pio.model.spec import spec_to_model
from msf_pio.reference import run_model
from msf_pio.verify import quantized_model, seeded_input

from tests.cross import CROSS
from tests.host_checks import check_plan_in_c
from tests.int8_models import (HEADS, PIXEL, POOLS, WEIGHTED, quantize_random, random_input,
                                requantizing_head, single_op_model)
from tests.random_models import small_specs
from tests.test_reference_tflm import BRANCHED, tflm_run


def random_plan(graph, rng) -> Plan:
    """A uniformly chosen edge at every cut: any path through the fusion graph."""
    path, node = [], 0
    while node != graph.output_node:
        e = rng.choice([e for e in graph.edges if e.src == node])
        path.append(e)
        node = e.dst
    return Plan.from_path(graph, path, "random")


@pytest.mark.parametrize("name", ["mbv2-w0.35-r144", "mcunet-vww-5fps"])
def test_fused_c_matches_tflm_on_zoo_models(name):
    model = quantized_model(name)
    data = tflite_bytes(model)
    graph = build_graph(model, "exact")
    for plan in (solvers.p1_min_ram(graph), solvers.p1_min_ram(graph, 1.3)):
        build = HostBuild(generate(model, plan))
        try:
            for seed in (0, 1):
                x = seeded_input(model, seed)
                assert np.array_equal(build.run(x).output, tflm_run(data, x).reshape(-1))
        finally:
            build.close()


@pytest.mark.parametrize("case", sorted({**WEIGHTED, **POOLS}))
def test_single_op_c_matches_tflm(case):
    shape, layers = {**WEIGHTED, **POOLS}[case]
    model = single_op_model(shape, layers, seed=3)
    x = random_input(model, 3)
    expected = tflm_run(tflite_bytes(model), x).reshape(-1)
    graph = build_graph(model, "exact")
    for plan in {solvers.vanilla(graph).label: solvers.vanilla(graph),
                 "min": solvers.p1_min_ram(graph)}.values():
        build = HostBuild(generate(model, plan))
        try:
            assert np.array_equal(build.run(x).output, expected)
        finally:
            build.close()


# Rectangular windows on every axis combination: strides (2, 1) and (1, 2), kernels taller and
# wider than square, a pool ending a block and an iterative head after it.
RECT_NET = ((21, 16, 3), [
    {"op": "conv2d", "out": 6, "kernel": [3, 1], "stride": [2, 1], "act": "relu"},
    {"op": "depthwise_conv2d", "kernel": [1, 5], "stride": [1, 2]},
    {"op": "conv2d", "out": 5, "kernel": [5, 3], "padding": 1, "act": "relu6"},
    {"op": "max_pool", "kernel": [2, 3], "stride": [1, 2], "padding": "same"},
    {"op": "pointwise", "out": 4},
    {"op": "avg_pool", "kernel": [3, 2]},
    {"op": "global_avgpool"}, {"op": "dense", "out": 3}])


@pytest.mark.parametrize("scheme", ["h-cache", "tiles", "line-buffer"])
def test_rectangular_windows_fused_in_every_scheme(scheme):
    """The least-RAM plan of each cache scheme fuses the rectangular windows: the C gives TFLM's
    bytes, counts the predicted MACs and measures the predicted arena (ASan/UBSan clean)."""
    shape, layers = RECT_NET
    model = single_op_model(shape, layers, seed=4)
    plan = solvers.p1_min_ram(build_graph(model, "exact", schemes=(scheme,)))
    fused = [l for e in plan.blocks if e.scheme == scheme for l in model.layers[e.first:e.last + 1]]
    assert any(l.kernel[0] != l.kernel[1] for l in fused)
    assert any(l.stride == (2, 1) for l in fused) or any(l.stride == (1, 2) for l in fused)
    data = tflite_bytes(model)
    for seed in (0, 1):
        x = random_input(model, seed)
        expected = tflm_run(data, x).reshape(-1)
        assert np.array_equal(run_model(model, x).reshape(-1), expected)
        check_plan_in_c(model, plan, x, expected, sanitize=seed == 0)


@pytest.mark.parametrize("shape,layer,where,words", [
    ((8, 14, 1), {"op": "conv2d", "out": 2, "kernel": [1, 13], "padding": "valid"},
     "layers[0].kernel", "kernel width 13 is larger than the runtime's 11"),
    ((300, 2, 1), {"op": "max_pool", "kernel": [256, 1]}, "layers[0].kernel",
     "kernel 256 is larger than the runtime's 255"),
    ((300, 2, 1), {"op": "depthwise_conv2d", "kernel": [3, 1], "stride": [256, 1]},
     "layers[0].stride", "stride 256 is larger"),
])
def test_windows_beyond_the_runtime_are_one_line_errors(shape, layer, where, words):
    """Refused when the model is read, so solve, generate, run and the build agree."""
    with pytest.raises(MsfError) as exc:
        single_op_model(shape, [layer], seed=1)
    message = str(exc.value)
    assert where in message and words in message and "\n" not in message


def test_rectangular_windows_under_random_plans():
    shape, layers = RECT_NET
    model = single_op_model(shape, layers, seed=6)
    graph = build_graph(model, "exact")
    x = random_input(model, 6)
    expected = run_model(model, x).reshape(-1)
    for seed in range(4):
        check_plan_in_c(model, random_plan(graph, random.Random(seed)), x, expected,
                        sanitize=False)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(max_layers=9), seed=st.integers(0, 2**16))
def test_random_models_random_plans(spec, seed):
    model = quantize_random(spec_to_model(spec), seed)
    graph = build_graph(model, "exact")
    plan = random_plan(graph, random.Random(seed))
    x = random_input(model, seed)
    check_plan_in_c(model, plan, x, run_model(model, x).reshape(-1), sanitize=False)


@pytest.mark.parametrize("schemes", [("h-cache",), ("tiles",), ("line-buffer",)])
def test_branched_model_c_matches_tflm(schemes):
    """A shortcut conv and a concatenation (blocks that read tensors made before them, tensors
    alive across cuts until their last reader) in C, whole and fused under each scheme: TFLM's
    bytes, the predicted MACs counted and arena measured, sanitizer-clean."""
    model = single_op_model((12, 12, 3), BRANCHED, 5)
    x = random_input(model, 5)
    expected = tflm_run(tflite_bytes(model), x).reshape(-1)
    graph = build_graph(model, "exact", schemes=schemes)
    plans = [solvers.vanilla(graph), solvers.p1_min_ram(graph, 1.3), solvers.p1_min_ram(graph)]
    # some block contains a join (add, concat) or a layer reading an older tensor
    assert any(e.fused and any(model.inputs(l) != [l] for l in range(e.first, e.last + 1))
               for p in plans for e in p.blocks)
    for plan in plans:
        check_plan_in_c(model, plan, x, expected)


@pytest.mark.parametrize("target", CROSS)
def test_generated_code_cross_compiles_warning_free(target, tmp_path):
    if shutil.which(CROSS[target][0]) is None:
        pytest.skip(f"{CROSS[target][0]} is not installed (scripts/setup.sh installs it)")
    model = quantized_model("tiny")
    write_sources(generate(model, solvers.p1_min_ram(build_graph(model, "exact"))), tmp_path)
    for flags in ([], ["-DMSF_COUNT_MACS", "-DMSF_MEASURE_ARENA"]):
        cmd = [*CROSS[target], "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-ffreestanding",
               *flags, f"-I{LIBRARY / 'include'}", f"-I{tmp_path}", "-c",
               str(tmp_path / "msf_model.c"), "-o", str(tmp_path / "m.o")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("ratio", [0.3, 4.0])
@pytest.mark.parametrize("case", sorted(HEADS))
def test_requantizing_gap_and_per_channel_dense_c_match_tflm(case, ratio):
    """A GAP requantizing to its own output scale (TFLite MEAN) and a per-channel dense, in C:
    whole (unfused) and as the iterative head of a fusion block, against TFLM."""
    shape, layers = HEADS[case]
    model = requantizing_head(single_op_model(shape, layers, seed=5), 5, ratio)
    data = tflite_bytes(model)
    graph = build_graph(model, "exact")
    plans = [solvers.vanilla(graph), solvers.p1_min_ram(graph)]
    build = [HostBuild(generate(model, plan)) for plan in plans]
    try:
        for seed in range(3):
            x = random_input(model, seed)
            expected = tflm_run(data, x).reshape(-1)
            for b in build:
                assert np.array_equal(b.run(x).output, expected)
    finally:
        for b in build:
            b.close()


@pytest.mark.parametrize("case", sorted(PIXEL))
def test_pixel_ops_c_match_tflm(case):
    """Softmax and the element-wise activations in C, alone and fused into blocks (vanilla,
    least RAM and random plans): TFLM's bytes, the predicted MACs and arena, sanitizer-clean."""
    shape, layers = PIXEL[case]
    model = single_op_model(shape, layers, seed=4)
    x = random_input(model, 4)
    expected = tflm_run(tflite_bytes(model), x).reshape(-1)
    graph = build_graph(model, "exact")
    plans = [solvers.vanilla(graph), solvers.p1_min_ram(graph),
             random_plan(graph, random.Random(1)), random_plan(graph, random.Random(2))]
    for plan in {tuple((e.first, e.last) for e in p.blocks): p for p in plans}.values():
        check_plan_in_c(model, plan, x, expected)

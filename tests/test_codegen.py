"""Generated C, built and run on the host: every plan of every zoo model (H-cache and
line-buffer blocks) gives the numpy reference's bytes (and so the unfused plan's), with the arena high-water measured by painting
equal to the exact model's prediction and the executed MACs equal to the predicted MACs."""
import numpy as np
import pytest

from msf_pio.codegen.generate import generate
from msf_pio.codegen.host import HostBuild
from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.model.zoo import zoo_names
from msf_pio.reference import run_model
from msf_pio.verify import quantized_model, seeded_input

PLANS = {
    "vanilla": lambda g: solvers.vanilla(g),
    "heuristic": lambda g: solvers.heuristic(g),
    "p1_inf": lambda g: solvers.p1_min_ram(g),
    "p1_1.0": lambda g: solvers.p1_min_ram(g, 1.0),     # line-buffer blocks
    "p1_1.3": lambda g: solvers.p1_min_ram(g, 1.3),
    "p2_64kB": lambda g: solvers.p2_min_macs(g, 64_000),
}
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def models():
    return {}


def _model(models, name):
    if name not in models:
        model = quantized_model(name)
        inputs = [seeded_input(model, s) for s in SEEDS]
        models[name] = (model, build_graph(model, "exact"), inputs,
                        [run_model(model, x).reshape(-1) for x in inputs])
    return models[name]


@pytest.mark.parametrize("plan_name", PLANS)
@pytest.mark.parametrize("name", zoo_names(scale=False))
def test_plan_is_bit_exact_and_as_predicted(models, name, plan_name):
    model, graph, inputs, refs = _model(models, name)
    plan = PLANS[plan_name](graph)
    if not plan.feasible:
        assert plan_name == "p2_64kB" and solvers.p1_min_ram(graph).peak_ram > 64_000
        pytest.skip(f"{name}: no plan fits 64 kB")
    build = HostBuild(generate(model, plan))
    try:
        for x, ref in zip(inputs, refs):
            assert np.array_equal(build.run(x).output, ref)
        x = inputs[0]
        assert build.run(x, "count").figures["macs_counted"] == plan.macs
        assert build.run(x, "measure").figures["arena_measured"] == plan.peak_ram
    finally:
        build.close()


def test_zero_code_budget_is_bit_exact(models):
    """With no code budget (custom_msf_code_budget = 0) every layer runs the kernel for any
    shape: no specialised kernel is defined, the bytes and the arena are the same."""
    from dataclasses import replace
    model, graph, inputs, refs = _model(models, "mlperf-tiny-kws")
    assert "MSF_CONV2D_KERNEL(" in generate(model, solvers.vanilla(graph)).source
    model = replace(model, code_budget=0)
    for plan in (solvers.vanilla(graph), solvers.p1_min_ram(graph, 1.3)):
        source = generate(model, plan)
        assert "MSF_CONV2D_KERNEL(" not in source.source
        assert "MSF_DW3X3_KERNEL(" not in source.source
        build = HostBuild(source)
        try:
            assert np.array_equal(build.run(inputs[0]).output, refs[0])
            assert build.run(inputs[0], "measure").figures["arena_measured"] == plan.peak_ram
        finally:
            build.close()


@pytest.mark.parametrize("name", ["tiny", "mcunet-vww-5fps"])
def test_sanitizer_build_is_clean(models, name):
    model, graph, inputs, refs = _model(models, name)
    for plan in (solvers.p1_min_ram(graph), solvers.p1_min_ram(graph, 1.3),
                 solvers.p1_min_ram(graph, 1.0)):
        build = HostBuild(generate(model, plan))
        try:
            assert np.array_equal(build.run(inputs[0], "sanitize").output, refs[0])
        finally:
            build.close()


def test_profiled_build_times_every_edge(models):
    """-DMSF_PROFILE_EDGES: the hook opens and closes every edge in plan order in the plain run
    and not in the two arena-painting passes of a measuring build (their time is the
    painting's), and neither changes the bytes or the measured arena."""
    model, graph, inputs, refs = _model(models, "mcunet-vww-5fps")
    plan = solvers.p1_min_ram(graph, 1.3)
    build = HostBuild(generate(model, plan))
    try:
        run = build.run(inputs[0], "profile")
        assert np.array_equal(run.output, refs[0])
        assert run.figures["edges_profiled"] == len(plan.blocks)
        assert run.figures["profile_in_order"] == 1
        assert run.figures["arena_measured"] == plan.peak_ram
    finally:
        build.close()


def test_generation_is_deterministic():
    sources = []
    for _ in range(2):
        model = quantized_model("mcunet-vww-5fps")
        plan = solvers.p1_min_ram(build_graph(model, "exact"), 1.3)
        s = generate(model, plan)
        sources.append((s.header, s.source))
    assert sources[0] == sources[1]


@pytest.mark.parametrize("name", ["tiny", "mbv2-w0.35-paper", "mcunet-vww-5fps"])
def test_streamed_output(models, name):
    """A streamed output costs one output pixel of arena and gives the same bytes."""
    import dataclasses
    model, _, inputs, refs = _model(models, name)
    model = dataclasses.replace(model, stream_output=True)
    graph = build_graph(model, "exact")
    for plan in (solvers.vanilla(graph), solvers.p1_min_ram(graph)):
        last = plan.blocks[-1]
        assert last.ram >= model.output_shape[2]          # the staged pixel is counted
        build = HostBuild(generate(model, plan))
        try:
            assert np.array_equal(build.run(inputs[0]).output, refs[0])
            assert build.run(inputs[0], "measure").figures["arena_measured"] == plan.peak_ram
        finally:
            build.close()

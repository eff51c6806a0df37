"""The line-buffer scheme three ways: the cost model's rings and MACs (msf_pio/fusion/
line_buffer.py), the numpy reference that runs the schedule through rings of exactly those rows
(msf_pio/reference/schemes/line_buffer.py) and the C runtime (library/src/schemes/line_buffer.c)."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.model.spec import spec_to_model
from msf_pio.reference import run_layer, run_model
from msf_pio.reference.schemes.line_buffer import RingError, run_block
from msf_pio.fusion.reuse import DETAIL as OVERLAP
from msf_pio.reference.plan import run_plan, shared_region
from msf_pio.verify import quantized_model, seeded_input
from tests.host_checks import check_plan_in_c
from tests.random_models import small_specs
from tests.test_exact_cost import assert_layer_pixels, pixel_macs


def rings_of(edge):
    return {b["tensor"]: b["rows"] for b in edge.detail["scratch"] if b["kind"] == "ring"}


def check_blocks(model, x):
    """Every line-buffer edge: the reference through its rings (and with its output over its
    input, if the edge allows it) gives the unfused tensor, the rows it computes cost the edge's
    MACs, any ring one row smaller is too small, and the output one byte further over the input
    destroys an input byte still read (when a row still read bounds the shift, every layer
    computes all its rows and the last layer does not read the input itself: rows nobody reads
    and an add reading its skip row before writing it are not counted by the cost model's row
    steps, which makes the shift safe but not the largest)."""
    tensors = {0: x}
    for i in range(model.n_layers):
        tensors[i + 1] = run_layer(model, i, tensors)
    for e in build_graph(model, "exact").edges:
        if e.scheme != "line-buffer":
            continue
        rings = rings_of(e)
        out, rows = run_block(model, e.first, e.last, rings, tensors, shared_region(model, e))
        assert np.array_equal(out, tensors[e.last + 1])
        assert_layer_pixels(model, e, {(l, 0, 0): n * model.layers[l].out_shape[1]
                                       for l, n in rows.items()})
        shift = e.detail.get(OVERLAP)
        tail = model.layers[e.last]
        whole = all(n == model.layers[l].out_shape[0] for l, n in rows.items())
        if shift is not None and tail.skip != e.first and whole and \
                shift < model.tensor_bytes(e.first) - model.tensor_bytes(e.last + 1):
            with pytest.raises(RingError):
                run_block(model, e.first, e.last, rings, tensors,
                          shared_region(model, e, shift + 1))
        end = max(rows)
        spatial = sum(pixel_macs(model.layers[l], r, c) for l, n in rows.items()
                      for r in range(n) for c in range(model.layers[l].out_shape[1]))
        head = sum(pixel_macs(model.layers[l], 0, 0) for l in range(end + 1, e.last + 1))
        assert e.macs == spatial + head
        for t, n in rings.items():
            with pytest.raises(RingError):
                run_block(model, e.first, e.last, {**rings, t: n - 1}, tensors)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(max_layers=9))
def test_random_blocks_through_the_reference(spec):
    model = quantized_model(spec_to_model(spec))
    check_blocks(model, seeded_input(model, 0))


def test_tiny_blocks_through_the_reference():
    model = quantized_model("tiny")
    check_blocks(model, seeded_input(model, 0))


@pytest.mark.parametrize("name", ["mbv2-w0.35-paper", "mcunet-vww-5fps"])
def test_zoo_plans_through_the_reference(name):
    """Plans of line-buffer blocks and H-cache blocks (F = 1, no tiles) give the unfused
    output."""
    model = quantized_model(name)
    x = seeded_input(model, 0)
    graph = build_graph(model, "exact", schemes=("h-cache", "line-buffer"))
    ref = run_model(model, x)
    for fmax in (1.0, 1.3):
        plan = solvers.p1_min_ram(graph, fmax)
        assert "line-buffer" in {e.scheme for e in plan.blocks}
        assert np.array_equal(run_plan(model, plan.blocks, x), ref)


def test_f_one_needs_no_recomputation():
    """At F = 1 every fusion block is a line buffer (tiles aside), and it beats every
    H-cache-only plan."""
    model = quantized_model("mn2-vww5-paper")
    graph = build_graph(model, "exact", schemes=("h-cache", "line-buffer"))
    plan = solvers.p1_min_ram(graph, 1.0)
    assert plan.overhead <= 1.0
    assert all(e.scheme in ("single", "line-buffer") for e in plan.blocks)
    hcache = solvers.p1_min_ram(build_graph(model, "exact", schemes=("h-cache",)), 1.0)
    assert plan.peak_ram < hcache.peak_ram


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(max_layers=9))
def test_random_line_buffer_plans_in_c(spec):
    """Generated C of a random model's least-RAM plan at F = 1 (line-buffer blocks) is the
    reference's bytes, with the predicted MACs and arena high-water, sanitizer-clean."""
    model = quantized_model(spec_to_model(spec))
    plan = solvers.p1_min_ram(build_graph(model, "exact", schemes=("h-cache", "line-buffer")),
                              1.0)
    x = seeded_input(model, 0)
    check_plan_in_c(model, plan, x, run_model(model, x).reshape(-1))


def test_pareto_with_schemes_dominates_h_cache_only():
    model = quantized_model("mbv2-w0.35-paper")
    both, only = build_graph(model, "exact"), build_graph(model, "exact", schemes=("h-cache",))
    for fmax in (1.0, 1.1, 1.3, 1.5, math.inf):
        a, b = solvers.p1_min_ram(both, fmax), solvers.p1_min_ram(only, fmax)
        assert a.feasible and (not b.feasible or a.peak_ram <= b.peak_ram)


@pytest.mark.parametrize("shape", [[13, 11, 3], [9, 14, 2]])
def test_row_kernels_in_c(shape):
    """A line-buffer block runs its 1x1 layers (pointwise convs, add, activations, concat) and
    its depthwise layers a whole row per kernel call (line_buffer.c): on an input taller than
    wide and one wider than tall, with depthwise windows clipped at both sides (pairs of columns
    broken at the edges, stride 2 over an odd width), channel counts off the kernels' four
    lanes and a per-element PReLU (which stays pixel by pixel), the C is the reference's bytes
    with the predicted MACs and arena."""
    spec = {"name": "rows", "input": {"shape": shape}, "layers": [
        {"op": "conv2d", "out": 6, "kernel": 3, "act": "relu"},
        {"op": "pointwise", "out": 10},
        {"op": "hard_swish"},
        {"op": "depthwise_conv2d", "kernel": 5, "act": "relu6"},
        {"op": "depthwise_conv2d", "kernel": 3, "stride": 2, "act": "relu6"},
        {"op": "prelu", "slopes": "pixel"},
        {"op": "leaky_relu"},
        {"op": "inverted_residual", "out": 10, "expand": 2, "kernel": 3, "stride": 1},
        {"op": "depthwise_conv2d", "kernel": 3, "act": "relu"},
        {"op": "pointwise", "out": 3, "input": 7},
        {"op": "concat", "from": 8},
        {"op": "pointwise", "out": 5},
    ]}
    model = quantized_model(spec_to_model(spec))
    plan = solvers.p1_min_ram(build_graph(model, "exact", schemes=("h-cache", "line-buffer")),
                              1.0)
    fused = [range(e.first, e.last + 1) for e in plan.blocks if e.scheme == "line-buffer"]
    kinds = {(model.layers[l].op, model.layers[l].kernel) for r in fused for l in r}
    for kind in (("depthwise_conv2d", (5, 5)), ("depthwise_conv2d", (3, 3)),
                 ("conv2d", (1, 1)), ("add", (1, 1)), ("hard_swish", (1, 1)),
                 ("leaky_relu", (1, 1)), ("prelu", (1, 1)), ("concat", (1, 1))):
        assert kind in kinds, kind
    x = seeded_input(model, 0)
    check_plan_in_c(model, plan, x, run_model(model, x).reshape(-1))

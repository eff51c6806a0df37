"""The H-cache in tiles of t output rows (t = 1: msf-CNN's H-cache; t > 1: the `tiles` scheme)
three ways: the cost model's rings and MACs (msf_pio/fusion/exact_cost.py), the numpy reference
that runs the schedule tile by tile, column by column through rings of exactly those sizes
(msf_pio/reference/schemes/h_cache.py) and the C runtime (library/src/schemes/h_cache.c)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.fusion.plan import Plan
from msf_pio.model import ir
from msf_pio.model.spec import spec_to_model
from msf_pio.reference import run_layer, run_model
from msf_pio.reference.plan import run_plan, shared_region
from msf_pio.reference.regions import ring_sizes
from msf_pio.reference.schemes.h_cache import RingError, run_block
from msf_pio.verify import quantized_model, seeded_input
from tests.host_checks import check_plan_in_c
from tests.random_models import small_specs
from tests.test_exact_cost import assert_layer_pixels, pixel_macs


def check_blocks(model, x, schemes=("h-cache", "tiles")):
    """Every H-cache and tiles edge (or those of other `schemes` the H-cache's executor runs):
    the reference through its rings (and with its output over its input, if the edge allows it)
    gives the unfused tensor, the pixels it computes cost the edge's MACs, and any ring one row
    or one column smaller is too small. Returns the edges checked."""
    tensors = {0: x}
    for i in range(model.n_layers):
        tensors[i + 1] = run_layer(model, i, tensors)
    checked = []
    for e in build_graph(model, "exact").edges:
        if e.scheme not in schemes:
            continue
        checked.append(e)
        rings = ring_sizes(e)
        out, computed = run_block(model, e.first, e.last, e.tile_rows, rings, tensors,
                                  shared_region(model, e))
        assert np.array_equal(out, tensors[e.last + 1])
        end = max(l for l, _, _ in computed)
        spatial = sum(n * pixel_macs(model.layers[l], r, c) for (l, r, c), n in computed.items())
        head = sum(pixel_macs(model.layers[l], 0, 0) for l in range(end + 1, e.last + 1))
        assert e.macs == spatial + head
        assert_layer_pixels(model, e, computed)
        for t, (rows, cols) in rings.items():
            if rows == 0:                # a depthwise output over its input's ring
                continue
            for smaller in ((rows - 1, cols), (rows, cols - 1))[rows == 1:]:
                with pytest.raises(RingError):
                    run_block(model, e.first, e.last, e.tile_rows, {**rings, t: smaller},
                              tensors)
    return checked


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(max_layers=8))
def test_random_blocks_through_the_reference(spec):
    model = quantized_model(spec_to_model(spec))
    check_blocks(model, seeded_input(model, 0))


def test_tiny_blocks_through_the_reference():
    model = quantized_model("tiny")
    check_blocks(model, seeded_input(model, 0))


@pytest.mark.parametrize("name", ["mbv2-w0.35-paper", "mcunet-vww-5fps"])
def test_zoo_plans_through_the_reference(name):
    """Least-RAM plans at F = 1.0, 1.3 and 1.5 (tiles, line buffers, H-caches mixed), each
    block through the schedule of its scheme, give the unfused output."""
    model = quantized_model(name)
    x = seeded_input(model, 0)
    graph = build_graph(model, "exact")
    ref = run_model(model, x)
    schemes = set()
    for fmax in (1.0, 1.3, 1.5):
        plan = solvers.p1_min_ram(graph, fmax)
        schemes |= {e.scheme for e in plan.blocks}
        assert np.array_equal(run_plan(model, plan.blocks, x), ref)
    assert "tiles" in schemes


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(max_layers=9))
def test_random_tiled_plans_in_c(spec):
    """Generated C of a random model's least-RAM plan of tiles (and single layers) is the
    reference's bytes, with the predicted MACs and arena high-water, sanitizer-clean."""
    model = quantized_model(spec_to_model(spec))
    check_in_c(model, solvers.p1_min_ram(build_graph(model, "exact", schemes=("tiles",))))


def check_in_c(model, plan):
    x = seeded_input(model, 0)
    check_plan_in_c(model, plan, x, run_model(model, x).reshape(-1))


@pytest.mark.parametrize("tile_rows", [2, 3])
def test_tiled_blocks_with_a_head_in_c(tile_rows):
    """A tiled block ending in global pooling and dense stages a column of the tile's rows
    (the last tile shorter for t = 2 on 3 rows): every such block of mcunet-vww-5fps, the
    rest of the plan single layers."""
    model = quantized_model("mcunet-vww-5fps")
    graph = build_graph(model, "exact", schemes=("tiles",))
    heads = [e for e in graph.edges if e.scheme == "tiles" and e.tile_rows == tile_rows
             and model.layers[e.last].op == ir.DENSE]
    assert heads
    for e in heads[:1]:
        path = [graph.single_edge(l) for l in range(e.first)] + [e]
        check_in_c(model, Plan.from_path(graph, path, "vanilla"))


def test_tiles_trade_ram_for_recomputation():
    """Between the line buffer (F = 1) and one-row tiles, tiles lower the least RAM at the
    overheads of the paper's Table 1."""
    model = quantized_model("mbv2-w0.35-paper")
    both = build_graph(model, "exact", schemes=("h-cache", "line-buffer"))
    every = build_graph(model, "exact")
    for fmax in (1.1, 1.3, 1.5):
        with_tiles = solvers.p1_min_ram(every, fmax)
        assert with_tiles.peak_ram < solvers.p1_min_ram(both, fmax).peak_ram
        assert "tiles" in {e.scheme for e in with_tiles.blocks}

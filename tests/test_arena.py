"""Arena layouts: live buffers never overlap, and the arena is exactly the plan's peak RAM."""
import itertools

import pytest
from hypothesis import HealthCheck, given, settings

from msf_pio.codegen.arena import plan_arena
from msf_pio.fusion import solvers
from msf_pio.fusion.geometry import arena_tensor_bytes
from msf_pio.fusion.graph import build_graph
from msf_pio.fusion.reuse import DETAIL as OVERLAP
from msf_pio.model import load_model
from msf_pio.model.spec import spec_to_model
from msf_pio.model.zoo import zoo_names
from tests.random_models import small_specs


def check_layout(model, plan):
    layout = plan_arena(model, plan)
    assert layout.size == plan.peak_ram
    last_reader = model.last_reader()
    where = {}                                 # tensor -> offset where it was last written
    for e, el in zip(plan.blocks, layout.edges):
        for mv in el.moves:
            assert where[mv.tensor] == mv.src
            where[mv.tensor] = mv.dst
        spans = []
        for t, off in el.offsets.items():
            n = arena_tensor_bytes(model, t)
            if t <= e.first:
                assert where.get(t, off) == off        # the data is where the edge reads it
            spans.append((off, off + n, f"tensor {t}"))
            where[t] = off
        off = el.scratch_offset
        for b in el.scratch:
            spans.append((off, off + b["bytes"], b["kind"]))
            off += b["bytes"]
        # every buffer the edge touches is present
        needed = {e.first, e.last + 1} | {t for t, r in last_reader.items() if t < e.first <= r}
        for t in needed:
            assert t in el.offsets or arena_tensor_bytes(model, t) == 0 or \
                e.detail.get("in_place")
        shift = e.detail.get(OVERLAP)
        if shift is not None:   # the output at most `shift` bytes after the input (reuse.py)
            assert el.offsets[e.last + 1] - el.offsets[e.first] <= shift
        overlapping = {f"tensor {e.first}", f"tensor {e.last + 1}"} if shift is not None else set()
        spans = sorted(s for s in spans if s[1] > s[0])
        for a, b in itertools.combinations(spans, 2):
            shared = e.detail.get("in_place") and a[:2] == b[:2]   # add output over its skip
            assert a[1] <= b[0] or b[1] <= a[0] or shared or {a[2], b[2]} == overlapping, (a, b)
        assert all(0 <= s[0] and s[1] <= layout.size for s in spans)
        assert el.high_water == e.ram


@pytest.mark.parametrize("name", zoo_names())
def test_zoo_plans(name):
    model = load_model(name)
    graph = build_graph(model, "exact")
    plans = [solvers.vanilla(graph), solvers.heuristic(graph), solvers.p1_min_ram(graph),
             solvers.p1_min_ram(graph, 1.3)] + solvers.pareto(graph)
    for plan in plans:
        check_layout(model, plan)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs())
def test_random_models(spec):
    model = spec_to_model(spec)
    graph = build_graph(model, "exact")
    for plan in solvers.pareto(graph) + [solvers.vanilla(graph)]:
        check_layout(model, plan)

"""A new cache scheme is one new file and one registry line: the toy scheme of tests/
toy_scheme.py (tiles of exactly three rows, on the H-cache's executors), registered here, is
costed, planned, named in the plan JSON and the reports, priced by the latency model, run by
the numpy reference and by the C runtime, and accepted by the command line, with nothing else
touched. Its figures are checked against independent counts, as the built-in schemes' are."""
import json

import numpy as np
import pytest

from msf_pio.cli import main
from msf_pio.fusion import latency, schemes, solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.fusion.report import render_plan
from msf_pio.model.spec import spec_to_model
from msf_pio.reference import run_model
from msf_pio.reference.plan import run_plan
from msf_pio.verify import quantized_model, seeded_input
from tests import toy_scheme
from tests.host_checks import check_plan_in_c
from tests.test_h_cache import check_blocks

SPEC = {"name": "toy", "input": {"shape": [14, 13, 3]},
        "layers": [{"op": "conv2d", "out": 8, "kernel": 3, "stride": 1, "act": "relu6"},
                   {"op": "inverted_residual", "out": 8, "expand": 2, "kernel": 3, "stride": 1},
                   {"op": "depthwise_conv2d", "kernel": 3, "stride": 2, "act": "relu"},
                   {"op": "pointwise", "out": 6},
                   {"op": "global_avgpool"}, {"op": "dense", "out": 4}]}


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(schemes, "REGISTRY", schemes.REGISTRY + (toy_scheme,))   # the one line
    model = quantized_model(spec_to_model(SPEC))
    return model, seeded_input(model, 0)


def test_unregistered_no_edge_has_the_toy_scheme():
    graph = build_graph(quantized_model(spec_to_model(SPEC)), "exact")
    assert toy_scheme.NAME not in {e.scheme for e in graph.edges}


def test_toy_edges_through_the_reference(toy):
    """Every toy edge as every H-cache edge is checked: the reference through its rings gives
    the unfused tensor, the pixels it computes cost the edge's MACs (counted tap by tap), any
    ring a row or a column smaller is too small; and its latency counts are those of the
    H-cache's tiles of three rows (the executor it runs on)."""
    model, x = toy
    edges = check_blocks(model, x, (toy_scheme.NAME,))
    assert len({(e.first, e.last) for e in edges}) >= 10 and {e.tile_rows for e in edges} == {3}
    assert any(e.last > e.first + 1 and model.layers[e.last].op == "dense" for e in edges)
    for e in edges:
        assert latency.edge_counts(model, e.first, e.last, e.scheme, e.tile_rows) == \
            latency.edge_counts(model, e.first, e.last, "tiles", 3)


def test_toy_plan_in_json_reports_reference_and_c(toy):
    """The least-RAM plan of the toy scheme alone: its blocks named in the plan JSON and the
    report, its latency predicted; bit-exact in the reference and in C, where the MACs counted
    and the arena measured are the predicted ones."""
    model, x = toy
    plan = solvers.p1_min_ram(build_graph(model, "exact", (toy_scheme.NAME,)))
    plan.predict_latency(model, "qemu_f767zi")
    blocks = plan.to_json()["blocks"]
    assert toy_scheme.NAME in {b["scheme"] for b in blocks} <= {"single", toy_scheme.NAME}
    assert all(b["tile_rows"] == 3 for b in blocks if b["scheme"] == toy_scheme.NAME)
    assert plan.predicted_instructions > 0 and toy_scheme.NAME in render_plan(plan)
    expected = run_model(model, x).reshape(-1)
    assert np.array_equal(run_plan(model, plan.blocks, x).reshape(-1), expected)
    check_plan_in_c(model, plan, x, expected, sanitize=False)


def test_toy_scheme_on_the_command_line(toy, capsys):
    assert main(["solve", "mlperf-tiny-vww", "--schemes", toy_scheme.NAME, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert toy_scheme.NAME in {b["scheme"] for b in plan["blocks"]}

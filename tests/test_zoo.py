"""Every zoo model loads and solves under every objective in both cost models."""
import math

import pytest

from msf_pio.errors import MsfError
from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.model import load_model
from msf_pio.model.zoo import zoo_names

ZOO = zoo_names()
OBJECTIVES = [("vanilla", {}), ("heuristic", {}), ("min_ram", {}),
              ("min_ram", {"max_overhead": 1.3}), ("min_macs", {"ram_limit": 64_000})]


def test_zoo_has_the_issue_models():
    assert {"mbv2-w0.35-paper", "mn2-vww5-paper", "mn2-320k-paper", "mbv2-w0.35-r144",
            "mcunet-320kb", "mcunet-vww-5fps", "tiny", "mlperf-tiny-vww",
            "mlperf-tiny-ad", "mlperf-tiny-ic"} <= set(ZOO)


@pytest.mark.parametrize("cost_model", ["exact", "paper"])
@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_solves_every_objective(name, cost_model):
    model = load_model(name)
    if cost_model == "paper" and any(model.input_of(l) != l for l in range(model.n_layers)):
        with pytest.raises(MsfError, match="paper cost model takes chains with residual adds"):
            build_graph(model, cost_model)        # ResNet's shortcut convs: no paper formula
        return
    graph = build_graph(model, cost_model)
    vanilla = solvers.vanilla(graph)
    assert vanilla.overhead == 1.0
    for objective, opts in OBJECTIVES:
        plan = solvers.solve(graph, objective, **opts)
        if not plan.feasible:
            assert objective == "min_macs"      # 64 kB can be too small for a big model
            assert solvers.p1_min_ram(graph).peak_ram > 64_000
            continue
        layers = [i for e in plan.blocks for i in range(e.first, e.last + 1)]
        assert layers == list(range(model.n_layers))          # a path covers every layer once
        # the paper's block formula undercounts a block ending in a stride-2 window with
        # TFLite's asymmetric SAME padding (mlperf-tiny-vww: F = 0.987); the exact model never
        assert plan.overhead >= (1.0 if cost_model == "exact" else 0.98)
        assert plan.peak_ram <= vanilla.peak_ram
        if objective == "min_ram":
            assert plan.overhead <= opts.get("max_overhead", math.inf)
        if objective == "min_macs":
            assert plan.peak_ram <= 64_000


def test_official_models_shapes():
    """Architecture facts of the official configs (shared/models) and the issue's VWW model."""
    mbv2 = load_model("mbv2-w0.35-r144")
    assert mbv2.input_shape == (144, 144, 3) and mbv2.output_shape == (1, 1, 1000)
    assert len(mbv2.residuals()) == 10
    mcunet = load_model("mcunet-320kb")
    assert mcunet.input_shape == (176, 176, 3) and len(mcunet.residuals()) == 11
    vww = load_model("mcunet-vww-5fps")
    assert vww.input_shape == (80, 80, 3) and vww.output_shape == (1, 1, 2)
    assert vww.layers[-3].out_shape == (3, 3, 160) and len(vww.residuals()) == 8


def test_mlperf_tiny_shapes():
    """MLPerf Tiny VWW (MobileNetV1 0.25x, 96x96x3, softmax) and AD (640-...-8-...-640)."""
    vww = load_model("mlperf-tiny-vww")
    assert vww.input_shape == (96, 96, 3) and vww.output_shape == (1, 1, 2)
    assert vww.layers[-4].out_shape == (3, 3, 256) and vww.layers[-1].op == "softmax"
    assert sum(l.op == "depthwise_conv2d" for l in vww.layers) == 13
    ad = load_model("mlperf-tiny-ad")
    assert [l.cout for l in ad.layers] == [128] * 4 + [8] + [128] * 4 + [640]
    assert ad.input_shape == (1, 1, 640) and {l.op for l in ad.layers} == {"dense"}

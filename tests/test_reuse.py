"""Buffer reuse (msf_pio/fusion/reuse.py): a fusion block's output written over the input rows
it has read. Every zoo model's least-RAM plans run with it through the numpy reference (which
checks no input byte is read after being written over) and in C (bytes, counted MACs, the
arena high-water measured by painting == the cost model's prediction, ASan/UBSan)."""
import math

import numpy as np
import pytest

from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.fusion.reuse import DETAIL as OVERLAP, region_bytes
from msf_pio.model import load_model
from msf_pio.model.zoo import zoo_names
from msf_pio.reference import run_model
from msf_pio.reference.plan import run_plan
from msf_pio.verify import quantized_model, seeded_input
from tests.host_checks import check_plan_in_c


@pytest.mark.parametrize("name", zoo_names(scale=False))
def test_zoo_plans_with_reuse(name):
    model = quantized_model(name)
    graph = build_graph(model, "exact")
    x = seeded_input(model, 0)
    ref = run_model(model, x)
    for fmax in (1.0, math.inf):
        plan = solvers.p1_min_ram(graph, fmax)
        assert np.array_equal(run_plan(model, plan.blocks, x), ref)
        check_plan_in_c(model, plan, x, ref.reshape(-1), sanitize=fmax == 1.0)


def test_overlap_lowers_the_peak_of_the_paper_models():
    """Each paper model's least-RAM plan at F <= 1.3 has edges whose output overlaps its input,
    and every such edge counts the two tensors as the region, not their sum."""
    for name in ("mbv2-w0.35-paper", "mn2-vww5-paper", "mn2-320k-paper"):
        model = load_model(name)
        plan = solvers.p1_min_ram(build_graph(model, "exact"), 1.3)
        shared = [e for e in plan.blocks if OVERLAP in e.detail]
        assert shared
        for e in shared:
            a, b = model.tensor_bytes(e.first), model.tensor_bytes(e.last + 1)
            scratch = sum(s["bytes"] for s in e.detail.get("scratch", []))
            assert e.ram == region_bytes(a, b, e.detail[OVERLAP]) + scratch < a + b + scratch

"""The channel-split scheme of inverted-residual triples three ways: the cost model's buffers and
MACs (msf_pio/fusion/schemes/channel_split.py), the numpy reference running the schedule a tile
and a channel group at a time through rings of exactly those sizes (msf_pio/reference/schemes/
channel_split.py) and the C runtime (library/src/schemes/channel_split.c): bit-exact with the
unfused model, the MACs counted and the arena high-water measured equal to the predictions."""
import json
import re
import subprocess
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msf_pio import numerics as nm_
from msf_pio.codegen import kernel_data
from msf_pio.codegen.generate import generate, group_layer, weight_bytes
from msf_pio.codegen.host import LIBRARY, write_sources
from msf_pio.fusion import latency, solvers
from msf_pio.fusion.geometry import layer_macs
from msf_pio.fusion.graph import build_graph
from msf_pio.fusion.plan import Plan
from msf_pio.fusion.schemes import channel_split
from msf_pio.model import ir
from msf_pio.model.spec import spec_to_model
from msf_pio.reference import run_layer, run_model
from msf_pio.reference.plan import run_plan, shared_region
from msf_pio.reference.regions import RingError, ring_sizes
from msf_pio.reference.schemes.channel_split import run_block
from msf_pio.verify import quantized_model, seeded_input
from tests.cross import CROSS
from tests.host_checks import check_plan_in_c
from tests.test_exact_cost import assert_layer_pixels, pixel_macs

ISSUE_8_ROW = 8_880          # mn2-vww5-paper at F max 1.3: half the paper's 17,760 B
SMALL_GROUPS = (1, 2, 3, 4, 8)


def unfused_tensors(model, x):
    tensors = {0: x}
    for i in range(model.n_layers):
        tensors[i + 1] = run_layer(model, i, tensors)
    return tensors


def check_edge(model, e, tensors):
    """The reference through the edge's buffers gives the unfused tensor, computes the edge's
    MACs, and any buffer one row or one column smaller is too small."""
    rings = ring_sizes(e)
    g = e.detail["g"]
    out, computed = run_block(model, e.first, e.tile_rows, g, rings, tensors,
                              shared_region(model, e))
    assert np.array_equal(out, tensors[e.last + 1])
    assert e.macs == sum(n * pixel_macs(model.layers[l], r, c)
                         for (l, r, c), n in computed.items())
    assert_layer_pixels(model, e, computed)
    for t, (rows, cols) in rings.items():
        for smaller in ((rows - 1, cols), (rows, cols - 1))[rows == 1:][:1 if cols == 1 else 2]:
            with pytest.raises(RingError):
                run_block(model, e.first, e.tile_rows, g, {**rings, t: smaller}, tensors)
    # every byte of the arena is accounted for: the expansion ring and the depthwise column
    # hold g channels, the sums one tile of the output in int32
    _, wo, co = model.tensor_shape(e.last + 1)
    scratch = {b["kind"] + str(b["tensor"]): b["bytes"] for b in e.detail["scratch"]}
    (er, ec), (dr, _) = rings[e.first + 1], rings[e.first + 2]
    assert scratch == {f"ring{e.first + 1}": er * ec * g, f"ring{e.first + 2}": dr * g,
                       f"sums{e.first + 3}": 4 * dr * wo * co}


@st.composite
def triple_specs(draw):
    """A small model with one or two inverted residuals (expansion 2..6, a 3x3 or 5x5
    depthwise, stride 1 or 2), maybe a stem conv in front and a head behind."""
    size = draw(st.integers(8, 14))
    layers = []
    if draw(st.booleans()):
        layers.append({"op": "conv2d", "out": draw(st.integers(1, 6)), "kernel": 3,
                       "stride": draw(st.sampled_from([1, 2])), "act": "relu6"})
    for _ in range(draw(st.integers(1, 2))):
        layers.append({"op": "inverted_residual", "out": draw(st.integers(1, 6)),
                       "expand": draw(st.sampled_from([2, 3, 4, 6])),
                       "kernel": draw(st.sampled_from([3, 5])),
                       "stride": draw(st.sampled_from([1, 2]))})
    if draw(st.booleans()):
        layers += [{"op": "global_avgpool"}, {"op": "dense", "out": 3}]
    return {"name": "random", "input": {"shape": [size, size, draw(st.integers(1, 3))]},
            "layers": layers}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=triple_specs(), data=st.data())
def test_random_triples_reference_and_c(spec, data):
    """Every channel-split edge of a random model (groups down to one channel, every tile
    height) through the reference; a plan of single layers and one split edge per triple (its
    group and tile height drawn) in C, sanitizer-clean."""
    model = quantized_model(spec_to_model(spec))
    x = seeded_input(model, 0)
    tensors = unfused_tensors(model, x)
    edges = channel_split.split_edges(model, SMALL_GROUPS)
    assert edges                              # every spec has a triple with C_exp >= 2
    for e in edges:
        check_edge(model, e, tensors)
    graph = build_graph(model, "exact", ("h-cache",))
    path, layer = [], 0
    for first in sorted({e.first for e in edges}):
        path += [graph.single_edge(l) for l in range(layer, first)]
        path.append(data.draw(st.sampled_from([e for e in edges if e.first == first])))
        layer = first + 3
    path += [graph.single_edge(l) for l in range(layer, model.n_layers)]
    plan = Plan.from_path(graph, path, "vanilla")
    expected = run_model(model, x).reshape(-1)
    assert np.array_equal(run_plan(model, plan.blocks, x).reshape(-1), expected)
    check_plan_in_c(model, plan, x, expected)


@pytest.fixture(scope="module")
def mn2():
    model = quantized_model("mn2-vww5-paper")
    x = seeded_input(model, 0)
    return model, build_graph(model, "exact"), x, run_model(model, x).reshape(-1)


def test_mn2_vww5_meets_issue_8_at_f_1_3(mn2):
    """The least-RAM plan at F max 1.3 meets issue 8's row with channel-split triples; it runs
    bit-exact through the reference and in C (MACs counted, arena measured, sanitizers), and
    the plan JSON names the scheme, group and tile height of each."""
    model, graph, x, expected = mn2
    plan = solvers.p1_min_ram(graph, 1.3)
    assert plan.peak_ram <= ISSUE_8_ROW and plan.overhead <= 1.3
    split = [e for e in plan.blocks if e.scheme == "channel-split"]
    assert split
    without = solvers.p1_min_ram(build_graph(model, "exact", ("h-cache", "tiles", "line-buffer")),
                                 1.3)
    assert without.peak_ram > ISSUE_8_ROW    # the row needs the split
    blocks = json.loads(json.dumps(plan.to_json()))["blocks"]
    for b in blocks:
        if b["scheme"] == "channel-split":
            assert b["g"] in channel_split.GROUPS and b["tile_rows"] >= 1
    assert sum(b["scheme"] == "channel-split" for b in blocks) == len(split)
    assert np.array_equal(run_plan(model, plan.blocks, x).reshape(-1), expected)
    check_plan_in_c(model, plan, x, expected)


def test_mn2_vww5_split_edges_through_the_reference(mn2):
    """The split edges of one triple of each stride, every tile height and group."""
    model, graph, x, _ = mn2
    tensors = unfused_tensors(model, x)
    edges = [e for e in graph.edges if e.scheme == "channel-split"]
    firsts = {model.layers[e.first + 1].stride_h: e.first for e in edges}
    assert sorted(firsts) == [1, 2]
    for e in edges:
        if e.first in firsts.values():
            check_edge(model, e, tensors)


def test_latency_counts_the_groups(mn2):
    """The split runs the tiles' schedule once per group on the group's layers: every column
    call n times, the expand's and depthwise's outputs once over all groups, the project's
    pixels into the sums (msf_conv2d_sums_column: its MACs, rows in pairs then a lone one),
    the sums requantized once per output, and the edge's MACs."""
    model, graph, _, _ = mn2
    e = next(e for e in graph.edges if e.scheme == "channel-split" and e.tile_rows > 1)
    tiles = latency.edge_counts(model, e.first, e.last, "tiles", e.tile_rows)
    split = latency.edge_counts(model, e.first, e.last, e.scheme, e.tile_rows, group=e.detail["g"])
    n = model.layers[e.first].cout // e.detail["g"]
    # the executor's own calls of the group's kernels, priced apart from the H-cache's descent
    assert split["split.calls"] == tiles["calls"] * n and "calls" not in split
    assert split["depthwise.outputs"] == tiles["depthwise.outputs"]
    # the expand's outputs once, as under the tiles; the project's into the sums instead
    out = model.tensor_bytes(e.last + 1)
    assert tiles["conv1x1.outputs"] - split["conv1x1.outputs"] == out == split["sums.outputs"]
    project = model.layers[e.last]
    h, w, _ = project.out_shape
    rows = [min(e.tile_rows, h - y) for y in range(0, h, e.tile_rows)]
    assert split["sums.macs_single"] == sum(r % 2 for r in rows) * w * project.cin * project.cout
    assert split["sums.macs_pair"] + split["sums.macs_single"] == layer_macs(project)
    assert sum(v for k, v in split.items() if ".macs" in k) == e.macs


@pytest.mark.parametrize("target", CROSS)
def test_split_plan_cross_compiles_warning_free(mn2, target, tmp_path):
    if shutil.which(CROSS[target][0]) is None:
        pytest.skip(f"{CROSS[target][0]} is not installed (scripts/setup.sh installs it)")
    model, graph, _, _ = mn2
    plan = solvers.p1_min_ram(graph, 1.3)
    # custom_msf_weights_section: every array the flash check counts goes to that section
    write_sources(generate(model, plan, weights_section=".msf_weights"), tmp_path)
    for flags in ([], ["-DMSF_COUNT_MACS", "-DMSF_MEASURE_ARENA"]):
        cmd = [*CROSS[target], "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-ffreestanding",
               *flags, f"-I{LIBRARY / 'include'}", f"-I{tmp_path}", "-c",
               str(tmp_path / "msf_model.c"), "-o", str(tmp_path / "m.o")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    # flash holds every weight once: the object's weight arrays (a layer's own w, a split
    # edge's per-group ewg/dwg/pwg) add up to the model's weights, each laid out once as its
    # kernel reads it (kernel_data: pairs of filters, groups of four channels; a group's own)
    nm = subprocess.run([CROSS[target][0].replace("gcc", "nm"), "-S", str(tmp_path / "m.o")],
                        capture_output=True, text=True, check=True).stdout
    held = sum(int(f[1], 16) for f in map(str.split, nm.splitlines())
               if len(f) == 4 and re.fullmatch(r"(w|ewg|dwg|pwg)\d+", f[3]))
    split = {e.first: e.detail["g"] for e in plan.blocks if e.scheme == "channel-split"}
    assert split
    laid_out = lambda layer, rq: kernel_data.layer_data(layer, rq)["weights"].nbytes
    want = 0
    for i, layer in enumerate(model.layers):
        if layer.weights is None or layer.op not in (ir.CONV, ir.DEPTHWISE, ir.DENSE):
            continue
        first = next((f for f in split if f <= i <= f + 2), None)
        if first is None:
            want += laid_out(layer, nm_.requantization(model, i))
        elif i == first + 2:                          # the projection's input channels: OHWI
            want += layer.weights.w.size
        else:
            want += sum(laid_out(*group_layer(model, i, c, split[first]))
                        for c in range(0, layer.cout, split[first]))
    assert held == want
    size = CROSS[target][0].replace("gcc", "size")
    sections = subprocess.run([size, "-A", str(tmp_path / "m.o")], capture_output=True,
                              text=True, check=True).stdout
    placed = sum(int(f[1]) for f in map(str.split, sections.splitlines())
                 if f and f[0] == ".msf_weights")
    assert placed == sum(map(weight_bytes, model.layers))

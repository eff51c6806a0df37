"""The latency cost model (msf_pio/fusion/latency.py): its counts come from the same schedule as
the MAC prediction, the min_latency objective minimises them under a RAM limit, and solve, the
plan JSON and the monitor report them. (Its accuracy against the emulated boards is measured by
benchmarks/kernel_instructions.py, not asserted here.)"""
import json
import math
from fractions import Fraction
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msf_pio.cli import main
from msf_pio.errors import MsfError
from msf_pio.codegen import arena, kernel_data
from msf_pio.fusion import kernel_counts, latency, solvers
from msf_pio.fusion.geometry import layer_macs
from msf_pio.fusion.graph import build_graph
from msf_pio.model import load_model
from msf_pio.model.spec import spec_to_model
from msf_pio.model.zoo import zoo_names
from msf_pio.pio import monitor

from tests.random_models import small_specs

PLANS = {"vanilla": lambda g: solvers.vanilla(g),
         "p1:1.3": lambda g: solvers.p1_min_ram(g, 1.3),
         "p1:inf": lambda g: solvers.p1_min_ram(g, math.inf)}


def totals(model, plan) -> dict:
    out: dict = {}
    for e in plan.blocks:
        for k, v in latency.edge_counts(model, e.first, e.last, e.scheme, e.tile_rows,
                                        group=e.detail.get("g")).items():
            out[k] = out.get(k, 0) + v
    return out


@pytest.mark.parametrize("name", zoo_names())
def test_counted_macs_are_the_plans(name):
    model = load_model(name)
    graph = build_graph(model)
    for label, solve in PLANS.items():
        plan = solve(graph)
        counts = totals(model, plan)
        assert set(counts) <= set(latency.FEATURES), label
        assert sum(v for k, v in counts.items() if ".macs" in k) == plan.macs, label
        assert counts["edge.count"] == len(plan.blocks)


def test_single_layer_counts():
    model = load_model("tiny")
    graph = build_graph(model)
    layer = model.layers[0]
    counts = latency.edge_counts(model, 0, 0)
    oh, ow, oc = layer.out_shape
    assert counts["calls"] == ow                    # whole columns, one call each
    assert sum(v for k, v in counts.items() if k.endswith(".outputs")) == oh * ow * oc
    assert graph.edges                              # (the graph builds with the same model)


@pytest.fixture
def board():
    if "qemu_f767zi" not in latency.boards():
        pytest.skip("no calibrated profile (benchmarks/calibrate_latency.py)")
    return "qemu_f767zi"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(max_layers=12), streamed=st.sampled_from([(0, 0), (1, 0), (0, 1)]),
       wide=st.sampled_from([kernel_counts.WIDE_DSP, kernel_counts.WIDE_RV32]))
def test_count_table_is_every_edges_counts(spec, streamed, wide):
    """The blocks of a family share their layers' counts in count_table (what min_latency
    prices): every row is the edge's own edge_counts."""
    model = replace(spec_to_model(spec), stream_input=bool(streamed[0]),
                    stream_output=bool(streamed[1]))
    try:
        graph = build_graph(model)
    except MsfError:                     # a stream the model cannot have
        return
    table = latency.count_table(model, graph.edges, wide)
    for e, row in zip(graph.edges, table):
        counts = latency.edge_counts(model, e.first, e.last, e.scheme, e.tile_rows, wide,
                                     e.detail.get("g"))
        assert set(counts) <= set(latency.FEATURES)
        assert row.tolist() == [counts.get(f, 0) for f in latency.FEATURES], e


def test_min_latency_is_the_least_predicted_time_within_the_limit(board):
    model = load_model("mbv2-w0.35-paper")
    graph = build_graph(model)
    limit = 64000
    fast = solvers.solve(graph, "min_latency", ram_limit=limit, board=board)
    assert fast.feasible and fast.peak_ram <= limit
    for other in (solvers.solve(graph, "min_macs", ram_limit=limit, board=board),
                  solvers.solve(graph, "min_ram", 1.3, board=board)):
        if other.feasible and other.peak_ram <= limit:
            assert fast.predicted_instructions <= other.predicted_instructions


def exact_costs(model, edges, board):
    """Predicted cycles of every edge as a Fraction: the counts times the coefficients."""
    coefficients = latency.profile(board)
    table = latency.count_table(model, edges, coefficients.wide)
    prices = [Fraction(coefficients.get(f, 0.0)) for f in latency.FEATURES]
    return [sum(int(n) * c for n, c in zip(row, prices)) for row in table]


def least_time_then_ram(graph, cost, limit):
    """(cost, peak) of the plan of least predicted time, among those the least peak RAM:
    node by node, the least (cost, peak) pair of the paths reaching it (a least-cost path's
    prefix is a least-cost path, and of those the least peak leaves the least peak)."""
    best = {0: (Fraction(0), 0)}
    for v in range(1, graph.n_nodes):
        pairs = [(best[e.src][0] + c, max(best[e.src][1], e.ram))
                 for e, c in zip(graph.edges, cost)
                 if e.dst == v and e.src in best and e.ram <= limit]
        if pairs:
            best[v] = min(pairs)
    return best.get(graph.output_node)


@pytest.mark.parametrize("name, limit", [("mbv2-w0.35-paper", 65536),
                                         ("mbv2-w1.0-r224", 262144)])
def test_min_latency_ties_go_to_the_least_ram(name, limit, board):
    """Plans of the same counts cost the same time whatever the order their costs are added
    in: min_latency's plan is the least (predicted time, peak RAM) pair, summed as fractions.
    (Summed as floats, mbv2-w1.0-r224's plan at 256 kB took 227,616 B where another of the
    same exact time needs 227,344 B; rounded per edge, mbv2-w0.35-paper's at 64 kB took
    48,155 B for 47,499 B.)"""
    model = load_model(name)
    graph = build_graph(model, ram_cap=limit)
    cost = exact_costs(model, graph.edges, board)
    plan = solvers.solve(graph, "min_latency", ram_limit=limit, board=board)
    index = {id(e): k for k, e in enumerate(graph.edges)}
    assert (sum(cost[index[id(e)]] for e in plan.blocks), plan.peak_ram) == \
        least_time_then_ram(graph, cost, limit)


def test_min_latency_needs_a_board():
    graph = build_graph(load_model("tiny"))
    with pytest.raises(Exception, match="board"):
        solvers.solve(graph, "min_latency", ram_limit=10**6)


def test_solve_reports_latency(capsys, board):
    assert main(["solve", "tiny", "--board", board]) == 0
    out = capsys.readouterr()[0]
    assert f"predicted latency on {board}:" in out and " ms at " in out
    assert main(["solve", "tiny", "--board", board, "--json"]) == 0
    plan = json.loads(capsys.readouterr()[0])
    assert plan["board"] == board and plan["predicted_cycles"] > 0 and plan["predicted_us"] > 0


def test_monitor_shows_predicted_against_measured():
    line = ("MSF model=tiny plan=p1:inf board=qemu_f767zi clock=systick hz=216000000 cycles=1100 "
            "us=5 arena=10 arena_pred=10 stack=100 ram=110 ram_pred=10 macs=5 crc=0x00000001 "
            "crc_ref=0x00000001 status=ok")
    record = monitor.parse_line(line)
    plan = {"board": "qemu_f767zi", "predicted_cycles": 1000, "macs": 5}
    assert "cycles 1100 vs predicted 1000 (+10.0%)" in monitor.verdict_line(record, plan)
    assert "cycles pred" in monitor.render_report([record], plan)
    assert "cycles pred" not in monitor.render_report([record], None)


@pytest.mark.parametrize("shape, conv", [
    ([49, 10, 1], {"out": 8, "kernel": [10, 4], "stride": 2}),     # MLPerf Tiny's KWS stem
    ([9, 7, 64], {"out": 6, "kernel": 3}),                 # chunks of three pixels
    ([11, 8, 3], {"out": 5, "kernel": [3, 5], "stride": [2, 1], "padding": "valid"}),
    ([6, 6, 2], {"out": 3, "kernel": 1}),                  # a column of six: two blocks
    ([5, 5, 200], {"out": 4, "kernel": 3}),                # a window gathered in parts
    ([7, 5, 8], {"out": 7, "kernel": 3}),                  # short stride-1 kernel rows
])
def test_conv_counts_are_the_kernels_chunks(tmp_path, shape, conv):
    """A single dense convolution's pixels in blocks of three, pairs and lone ones, and the
    taps it expands, against conv2d_s8.h's driver replayed from the layer's stack buffer
    (msf_layer_t.scratch as the generator sets it): output rows in chunks of
    ((scratch / 2 - 4) / row - kh) / sh + 1 (a multiple of the step past it), each chunk's
    input rows expanded once, its pixels three at a time in the shape's specialised kernel (the
    one layer of a model is among kernel_counts.specialised), two at a time in the kernel for
    any shape (past LIMIT shapes), then a pair or a lone one."""
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps({"name": "m", "input": {"shape": shape}, "weights": {"random": 1},
                                "layers": [{"op": "conv2d", **conv}]}))
    model = load_model(str(path))
    layer = model.layers[0]
    # specialised when it gains anything: a window gathered in parts runs pairs either way
    assert kernel_counts.specialised(model) == ({0} if kernel_counts.conv_fits(layer) else set())
    cls = latency.kernel_class(layer)
    (kh, kw), (sh, _) = layer.kernel, layer.stride
    oh, ow, cout = layer.out_shape
    row = kw * layer.cin + (kw * layer.cin * sh) % 2
    scratch = kernel_data.scratch_bytes(layer, False)
    macs = layer_macs(layer)
    for step, wide in ((3, kernel_counts.WIDE_DSP), (2, kernel_counts.WIDE_RV32)):
        px = {3: 0, 2: 0, 1: 0}
        taps = 0
        if (kh + sh) * row > kernel_data.CONV_BUFFER - 4:           # per pixel pair, in parts
            assert scratch == 2 * kernel_data.CONV_BUFFER
            px[2], px[1] = oh // 2 * 2, oh % 2
        else:
            chunk = ((scratch // 2 - 4) // row - kh) // sh + 1
            chunk = chunk - chunk % step if chunk > step else chunk
            for p in range(0, oh, chunk):
                q = min(oh, p + chunk)
                taps += ((q - 1 - p) * sh + kh) * kw * layer.cin
                r = p + (q - p) // 3 * 3 if step == 3 else p
                px[3] += r - p
                px[2] += (q - r) // 2 * 2
                px[1] += (q - r) % 2
        counts = latency.edge_counts(model, 0, 0, wide=wide) if step == 3 else \
            kernel_counts.spatial_counts(layer, macs, ow, [oh], ow, True, wide, special=False)
        # a lone pixel's channels: `wide` pairs per block while 2 wide channels are left, then
        # pairs (msf_conv_channels); in parts, per chunk of 16 channels while `wide` pairs are
        # left (pairs_partial)
        lone_blocks = lone_wide = 0
        if scratch < 2 * kernel_data.CONV_BUFFER:
            for c in range(0, cout - 2 * wide + 1, 2 * wide):
                lone_blocks, lone_wide = lone_blocks + 1, lone_wide + 2 * wide
            lone_blocks += -(-(cout - lone_wide) // 2)
        for c in range(0, cout, 16) if scratch == 2 * kernel_data.CONV_BUFFER else ():
            count = min(16, cout - c)
            j = 0
            while j + wide <= -(-count // 2):
                lone_blocks, lone_wide, j = lone_blocks + 1, lone_wide + min(2 * wide, count - 2 * j), j + wide
            lone_blocks += -(-count // 2) - j
        assert counts[f"{cls}.taps"] == taps * ow
        assert counts[f"{cls}.blocks"] == \
            (px[3] // 3 + px[2] // 2) * ow * -(-cout // 2) + px[1] * ow * lone_blocks
        # blocks of three over windows a few taps apart (kernel_counts.COMMONED_ROW)
        near = kh > sh and sh * row <= kernel_counts.COMMONED_ROW
        assert counts.get("conv.macs_near" if near else f"{cls}.macs_triple", 0) == \
            round(macs * px[3] / oh)
        assert counts.get(f"{cls}.macs_triple" if near else "conv.macs_near", 0) == 0
        assert counts[f"{cls}.macs_pair"] == round(macs * px[2] / oh)
        assert counts[f"{cls}.macs_wide"] == round(macs * px[1] / oh * lone_wide / cout)
        assert sum(counts.get(f"{cls}.macs_{k}", 0)
                   for k in ("triple", "near", "pair", "single", "wide")) == macs


def test_boards_with_dsp_are_the_cortex_m4_and_m7():
    assert [b for b in latency.boards() if latency.profile(b).dsp] == ["qemu_f412zg",
                                                                       "qemu_f767zi"]


@pytest.mark.parametrize("name, memmoves, copies", [
    # python benchmarks/function_profile.py mlperf-tiny-kws --max-overhead 1.3 (main 29984e4):
    # rings of one row, so every slide moves nothing
    ("mlperf-tiny-kws", 96, 100),
    # python benchmarks/function_profile.py ssdlite-mbv2-96 --max-overhead 1.3 (main e030d94,
    # the same plan): 1,161,834 instructions in the line buffers' memmoves
    ("ssdlite-mbv2-96", 382, 318),
])
def test_line_buffer_slides_and_row_calls_are_the_calls_measured(name, memmoves, copies):
    """A line buffer's ring slides (msf_ring_admit: one memmove each, line_buffer.ring_slides)
    and its row calls of a transposed layer (msf_block_row: one memcpy of the layer's record)
    over the P1 plan at F 1.3 (RAM unlimited, as function_profile.py builds it), against the
    calls of memmove and memcpy that QEMU counted in the line-buffer executor on qemu_f767zi."""
    model = load_model(name)
    graph = build_graph(model)
    plan = solvers.p1_min_ram(graph, 1.3)
    counts: dict = {}
    for e in plan.blocks:
        for k, v in latency.edge_counts(model, e.first, e.last, e.scheme, e.tile_rows,
                                        group=e.detail.get("g")).items():
            counts[k] = counts.get(k, 0) + v
    assert any(e.scheme == "line-buffer" for e in plan.blocks)
    assert counts["ring.slides"] == memmoves and counts["ring.row_calls"] == copies


def test_upsampling_calls_in_a_line_buffer_are_the_calls_measured():
    """A line buffer runs its upsampling layers pixel by pixel, a call of the layer's column
    kernel each (line_buffer.c's MSF_BY_PIXEL), priced apart from other kernels' calls: over
    unet-tiny-64's P1 plan (RAM unlimited, as function_profile.py builds it) against the calls
    of msf_transpose_conv_column and msf_resize_nearest_column that QEMU counted on qemu_f767zi
    (python benchmarks/function_profile.py unet-tiny-64, main 943c205: 4,352 and 1,024)."""
    model = load_model("unet-tiny-64")
    plan = solvers.p1_min_ram(build_graph(model), math.inf)
    counts = totals(model, plan)
    assert [e.scheme for e in plan.blocks if any(
        model.layers[l].op in ("resize_nearest", "transpose_conv")
        for l in range(e.first, e.last + 1))] == ["line-buffer", "line-buffer"]
    assert counts["transpose_conv.calls"] == 4352 and counts["resize.calls"] == 1024


def test_compaction_is_the_memmoves_measured():
    """The arena's compaction between edges (codegen/arena.py), priced per byte once the arena
    is laid out: over mlperf-tiny-kws's P1 plan (RAM unlimited, as function_profile.py builds
    it) the edges it precedes against the memmove calls QEMU counted outside the executors on
    qemu_f767zi (python benchmarks/function_profile.py mlperf-tiny-kws, main 943c205: 4 calls,
    160,057 instructions: 5.0 per byte of the 32,000 moved)."""
    model = load_model("mlperf-tiny-kws")
    plan = solvers.p1_min_ram(build_graph(model), math.inf)
    moved = [c["memmove.bytes"] for c in arena.compaction_counts(model, plan)]
    assert sum(1 for b in moved if b) == 4 and sum(moved) == 32000
    plan.predict_latency(model, "qemu_f767zi")
    before = plan.predicted_instructions
    arena.attach_compaction(model, plan)
    price = latency.profile("qemu_f767zi").get("memmove.bytes", 0.0)
    assert plan.predicted_instructions - before == round(price * 32000)
    assert sum(plan.edge_cycles) == pytest.approx(plan.predicted_instructions, abs=len(moved))

"""`msf-pio report`: the plan against the unfused one and its edges, each figure checked against
an independent count (the quantized model's parameter arrays, the vanilla plan solved apart, the
latency model's whole-plan prediction), and pictures whose legends cover no curve."""
import json
import re
import subprocess

import pytest

from msf_pio import report
from msf_pio.cli import main
from msf_pio.codegen.generate import _layer_params
from msf_pio.codegen.host import LIBRARY
from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.fusion.planner import plan_model
from msf_pio.model import load_model
from msf_pio.verify import quantized_model

BOARD = "qemu_f767zi"


@pytest.fixture(scope="module")
def tiny():
    model = load_model("tiny")
    graph = build_graph(model, "exact")
    plan = solvers.solve(graph, "min_ram", 1.3, board=BOARD)
    return model, graph, plan, report.build(graph, plan, BOARD)


def test_edges_add_up_to_the_plan_and_the_unfused_plan_is_solved_apart(tiny):
    model, graph, plan, data = tiny
    edges = data["edges"]
    assert [(r["first"], r["last"]) for r in edges] == [(e.first, e.last) for e in plan.blocks]
    assert sum(r["macs"] for r in edges) == plan.macs == data["plan"]["macs"]
    assert max(r["ram_bytes"] for r in edges) == plan.peak_ram
    assert sum(r["predicted_cycles"] for r in edges) == \
        pytest.approx(plan.predicted_instructions, abs=len(edges))
    vanilla, _ = plan_model("tiny", objective="vanilla", board=BOARD)
    assert data["unfused"]["peak_ram_bytes"] == vanilla.peak_ram
    assert data["unfused"]["macs"] == vanilla.macs == plan.unfused_macs
    assert data["unfused"]["predicted_cycles"] == \
        pytest.approx(vanilla.predicted_instructions, abs=model.n_layers)
    assert data["plan"]["overhead"] == pytest.approx(plan.macs / vanilla.macs)


def test_the_plans_latency_is_the_builds_with_the_arena_compaction():
    """KWS's least-RAM plan slides tensors in the arena between edges: the report's figure is
    the one solve / generate / the build predict (codegen/arena.attach_compaction), and the
    hint compares the frontier with the plan's cycles without the moves the frontier omits."""
    from msf_pio.codegen import arena
    model = load_model("mlperf-tiny-kws")
    graph = build_graph(model, "exact")
    plan = solvers.solve(graph, "min_ram", float("inf"), board=BOARD)
    data = report.build(graph, plan, BOARD)
    edges_alone = plan.predicted_instructions
    arena.attach_compaction(model, plan)
    moved = plan.predicted_instructions - edges_alone
    assert moved > 0 and data["plan"]["compaction_cycles"] == pytest.approx(moved, abs=8)
    assert data["plan"]["predicted_cycles"] == pytest.approx(plan.predicted_instructions, abs=8)
    assert [r["predicted_cycles"] for r in data["edges"]] == \
        pytest.approx(plan.edge_cycles, abs=1)
    text = report.render(data)
    assert f"{data['plan']['compaction_cycles']:,} cycles of arena compaction" in text
    best = min(f["predicted_cycles"] for f in data["frontier"]
               if f["peak_ram_bytes"] <= plan.peak_ram)
    assert best >= 0.99 * (data["plan"]["predicted_cycles"] - moved) \
        and "the fastest plan predicts" not in text


def test_weight_bytes_are_the_arrays_the_generator_writes(tiny):
    """The weights in the kernels' layout (int8, int16 for depthwise) and one msf_channel_t
    record per channel: the parameter arrays codegen emits for the layers with weights, counted
    on the quantized model, with the record's size read from the C compiler."""
    _, _, _, data = tiny
    q = quantized_model("tiny", None, None)
    probe = subprocess.run(["gcc", f"-I{LIBRARY / 'include'}", "-x", "c", "-", "-o", "/dev/null",
                            "-c"], input='#include "msf/requant.h"\n'
                            "char size[sizeof(msf_channel_t)];\n"
                            "_Static_assert(sizeof(msf_channel_t) == 16, \"record\");\n",
                            capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    sizes = {"int8_t": 1, "int16_t": 2, "msf_channel_t": 16}
    emitted = []
    for i, layer in enumerate(q.layers):
        arrays = _layer_params(q, i)[0]
        found = [re.match(r"static const (\w+) (w|ch)\d+\[(\d+)\]", a) for a in arrays]
        emitted.append(sum(sizes[m.group(1)] * int(m.group(3)) for m in found
                           if m and layer.weights is not None))
    per_edge = [sum(emitted[r["first"]:r["last"] + 1]) for r in data["edges"]]
    assert per_edge == [r["weight_bytes"] for r in data["edges"]]
    assert data["plan"]["weight_bytes"] == data["unfused"]["weight_bytes"] == sum(emitted) > 0


def test_the_frontier_is_a_frontier_and_bounds_the_chosen_plan(tiny):
    _, _, _, data = tiny
    points = data["frontier"]
    rams = [p["peak_ram_bytes"] for p in points]
    cycles = [p["predicted_cycles"] for p in points]
    assert rams == sorted(rams) and cycles == sorted(cycles, reverse=True)
    for key in ("plan", "unfused"):               # nothing beats the frontier at its RAM
        p = data[key]
        best = min(c for r, c in zip(rams, cycles) if r <= p["peak_ram_bytes"])
        assert best <= p["predicted_cycles"]


def test_pictures_keep_their_legends_off_the_curves(tiny):
    _, _, plan, data = tiny
    record = {"model": "tiny", "plan": plan.label, "board": BOARD,
              "edge_cycles": [c + 7 for c in plan.edge_cycles]}
    figures = (lambda d: report.memory_figure(d), lambda d: report.frontier_figure(d),
               lambda d: report.edges_figure(record, plan.to_json()))
    for make in figures:
        fig = make(data)
        fig.canvas.draw()
        ax = fig.axes[0]
        legend = ax.get_legend().get_window_extent()
        assert not legend.overlaps(ax.get_window_extent())
        assert not legend.overlaps(ax.xaxis.get_tightbbox())       # nor the layer names
        report._pyplot().close(fig)


def test_cli_report_writes_the_table_and_the_pictures(capsys, tmp_path):
    out = tmp_path / "r"
    assert main(["report", "tiny", "--max-overhead", "1.3", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "unfused" in text and "this plan" in text and "F = " in text and "conv0" in text
    for name in report.PICTURES:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "report.html").read_text()
    assert all(f'src="{n}"' in page for n in report.PICTURES)
    rows = (out / "edges.csv").read_text().splitlines()
    saved = json.loads((out / "report.json").read_text())
    assert len(rows) == len(saved["edges"]) + 1
    assert main(["report", "tiny", "--max-overhead", "1.3", "--json", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["edges"] == saved["edges"]


def test_report_of_an_infeasible_budget_is_one_line(capsys, tmp_path):
    code = main(["report", "tiny", "--objective", "min_macs", "--ram-limit", "10",
                 "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and "infeasible" in err and len(err.strip().splitlines()) == 1  # status 1


def test_flash_counts_the_arrays_at_their_sizes_on_the_32_bit_targets(tmp_path):
    """codegen/flash.py counts a generated model's constant arrays at the sizes its types have
    on the 32-bit targets: asked of the Cortex-M compiler."""
    import shutil
    from msf_pio.codegen.flash import TYPE_BYTES
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc not installed (scripts/setup.sh installs it)")
    checks = "".join(f"_Static_assert(sizeof({t}) == {n}, \"{t}\");\n"
                     for t, n in TYPE_BYTES.items())
    probe = subprocess.run(["arm-none-eabi-gcc", f"-I{LIBRARY / 'include'}", "-x", "c", "-",
                            "-o", str(tmp_path / "sizes.o"), "-c"],
                           input='#include "msf/runtime.h"\n' + checks,
                           capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr

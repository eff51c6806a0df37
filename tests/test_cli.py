"""The msf-pio command line: plan JSON contract, exit codes, one-line errors."""
import json
import subprocess
import sys

import pytest

from msf_pio.cli import main
from msf_pio.fusion.exact_cost import SCHEMES

KEYS = {"model", "cost_model", "objective", "max_overhead", "ram_limit", "feasible",
        "peak_ram_bytes", "macs", "unfused_macs", "overhead", "blocks"}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_solve_json_contract_paper(capsys):
    code, out, _ = run(capsys, "solve", "mbv2-w0.35-paper", "--objective", "min_ram",
                       "--max-overhead", "1.3", "--cost-model", "paper", "--json")
    plan = json.loads(out)
    assert code == 0 and KEYS <= set(plan)
    assert plan["peak_ram_bytes"] == 21288 and plan["unfused_macs"] == 18909490
    assert plan["max_overhead"] == 1.3 and plan["feasible"] is True
    assert round(plan["overhead"], 3) == 1.298
    assert plan["macs"] == sum(b["macs"] for b in plan["blocks"])
    assert plan["peak_ram_bytes"] == max(b["ram_bytes"] for b in plan["blocks"])
    assert plan["blocks"][0]["first"] == 0 and plan["blocks"][-1]["last"] == 52
    for a, b in zip(plan["blocks"], plan["blocks"][1:]):
        assert b["first"] == a["last"] + 1
        assert set(a) >= {"first", "last", "scheme", "ram_bytes", "macs"}


def test_solve_text(capsys):
    code, out, _ = run(capsys, "solve", "tiny", "--objective", "min_macs", "--ram-limit", "2kB")
    assert code == 0 and "peak RAM" in out and "F=" in out


def test_infeasible_budget_exits_nonzero_and_names_nearest_plan(capsys):
    code, out, _ = run(capsys, "solve", "mn2-320k-paper", "--objective", "min_macs",
                       "--ram-limit", "16kB", "--cost-model", "paper", "--json")
    plan = json.loads(out)
    assert code == 1 and plan["feasible"] is False
    assert plan["nearest_feasible"]["peak_ram_bytes"] == 42643     # the P1(inf) plan
    code, out, _ = run(capsys, "solve", "mn2-320k-paper", "--objective", "min_macs",
                       "--ram-limit", "16000", "--cost-model", "paper")
    assert code == 1 and "INFEASIBLE" in out and "42643 B" in out


@pytest.mark.parametrize("argv,words", [
    (["solve", "tiny", "--ram-limit", "-5", "--objective", "min_macs"], "--ram-limit"),
    (["solve", "tiny", "--ram-limit", "lots"], "--ram-limit"),
    (["solve", "tiny", "--max-overhead", "-1"], "--max-overhead"),
    (["solve", "tiny", "--max-overhead", "0.9"], "--max-overhead"),
    (["solve", "nope.yaml"], "nope.yaml"),
    (["solve", "tiny", "--schemes", "v-cache"], "--schemes"),
])
def test_bad_options_are_one_line_errors(capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == 2 and words in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_pareto_and_plot(capsys, tmp_path):
    png = tmp_path / "frontier.png"
    code, out, _ = run(capsys, "pareto", "mn2-320k-paper", "--cost-model", "paper",
                       "--plot", str(png))
    assert code == 0 and "17 plans" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = run(capsys, "pareto", "tiny", "--json")
    plans = json.loads(out)
    rams = [p["peak_ram_bytes"] for p in plans]
    macs = [p["macs"] for p in plans]
    assert rams == sorted(rams) and macs == sorted(macs, reverse=True)


def test_pareto_plot_draws_all_schemes_beside_h_cache_only(capsys, tmp_path, monkeypatch):
    from msf_pio.fusion import report
    drawn = {}
    monkeypatch.setattr(report, "plot_pareto",
                        lambda graph, frontiers, path: drawn.update(frontiers))
    every = ", ".join(SCHEMES)
    code, _, _ = run(capsys, "pareto", "mbv2-w0.35-paper", "--plot", str(tmp_path / "f.png"))
    assert code == 0 and set(drawn) == {every, "h-cache only"}
    best = {label: min(p.peak_ram for p in plans) for label, plans in drawn.items()}
    least_f = {label: min(p.overhead for p in plans) for label, plans in drawn.items()}
    assert best["h-cache only"] >= best[every]
    assert least_f[every] == 1.0
    drawn.clear()
    code, _, _ = run(capsys, "pareto", "tiny", "--schemes", "h-cache", "--plot",
                     str(tmp_path / "g.png"))
    assert code == 0 and set(drawn) == {"h-cache only"}


def test_codegen_commands_take_schemes(capsys, tmp_path):
    code, _, _ = run(capsys, "generate", "tiny", "--schemes", "h-cache", "--out", str(tmp_path))
    blocks = json.loads((tmp_path / "plan.json").read_text())["blocks"]
    assert code == 0 and {b["scheme"] for b in blocks} <= {"single", "h-cache"}
    code, _, _ = run(capsys, "generate", "tiny", "--schemes", "tiles", "--max-overhead", "1.3",
                     "--out", str(tmp_path))
    blocks = json.loads((tmp_path / "plan.json").read_text())["blocks"]
    assert code == 0 and {b["scheme"] for b in blocks} == {"single", "tiles"}
    for argv in (["verify", "tiny"], ["run", "tiny", "--input", "x.npy", "--output", "y.npy"]):
        code, _, err = run(capsys, *argv, "--schemes", "v-cache")
        assert code == 2 and "--schemes" in err and len(err.strip().splitlines()) == 1


def test_paper_table1_command(capsys):
    code, out, _ = run(capsys, "paper-table1", "--json")
    result = json.loads(out)
    assert code == 0 and result["all_match"] and len(result["cells"]) == 39


def test_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "msf_pio.cli", "solve", "tiny"],
                         capture_output=True, text=True, check=True).stdout
    assert "model tiny" in out


def test_solve_names_the_scheme_of_each_block(capsys):
    """F = 1 leaves line-buffer blocks and tiles of one tile (their height in tile_rows);
    --schemes h-cache keeps the paper's scheme alone."""
    code, out, _ = run(capsys, "solve", "mcunet-vww-5fps", "--max-overhead", "1", "--json")
    blocks = [b for b in json.loads(out)["blocks"] if b["first"] < b["last"]]
    assert code == 0 and {b["scheme"] for b in blocks} == {"line-buffer", "tiles"}
    assert all(b["tile_rows"] > 1 for b in blocks if b["scheme"] == "tiles")
    code, out, _ = run(capsys, "solve", "mcunet-vww-5fps", "--max-overhead", "1.3",
                       "--schemes", "h-cache")
    assert code == 0 and "line-buffer" not in out and "tiles" not in out and "h-cache" in out
    code, out, _ = run(capsys, "solve", "mcunet-vww-5fps", "--max-overhead", "1.3",
                       "--schemes", "tiles")
    assert code == 0 and "tiles t=" in out and "line-buffer" not in out

"""The msf-pio command line: plan JSON contract, exit codes, one-line errors."""
import json
import subprocess
import sys

import pytest

from msf_pio.cli import main
from msf_pio.fusion.schemes import names as scheme_names

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
                       "--out", str(png))
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
    every = ", ".join(scheme_names())
    code, _, _ = run(capsys, "pareto", "mbv2-w0.35-paper", "--out", str(tmp_path / "f.png"))
    assert code == 0 and set(drawn) == {every, "h-cache only"}
    best = {label: min(p.peak_ram for p in plans) for label, plans in drawn.items()}
    least_f = {label: min(p.overhead for p in plans) for label, plans in drawn.items()}
    assert best["h-cache only"] >= best[every]
    assert least_f[every] == 1.0
    drawn.clear()
    code, _, _ = run(capsys, "pareto", "tiny", "--schemes", "h-cache", "--out",
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
    for argv in (["verify", "tiny"], ["run", "tiny", "--input", "x.npy", "--out", "y.npy"]):
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


def test_version_is_library_json_for_the_package_too(capsys):
    """One version: library.json's, for `--version`, the package and PlatformIO's library."""
    from importlib.metadata import version
    from pathlib import Path
    manifest = json.loads((Path(__file__).parents[1] / "library.json").read_text())["version"]
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out == f"msf-pio {manifest}\n"
    assert version("msf-pio") == manifest          # setup.cfg read the same file


def _commands():
    from msf_pio.cli import build_parser
    sub = next(a for a in build_parser()._actions if a.choices and "solve" in a.choices)
    return sub.choices


def test_help_shows_every_default(capsys):
    """An option with a default names it in its help; flags and options without one do not
    pretend to have one."""
    for name, parser in _commands().items():
        text = " ".join(parser.format_help().split())
        for action in parser._actions:
            if action.default in (None, False) or action.help is None or \
                    not action.option_strings or action.dest == "help":
                continue
            assert f"(default: {action.default})" in text or \
                f"default: {action.default}" in text, (name, action.dest)


def test_one_spelling_per_concept():
    """--input is only ever a file (run), the modes are --*-mode, and what a command writes is
    --out; none of the old spellings is left."""
    for name, parser in _commands().items():
        flags = {f for a in parser._actions for f in a.option_strings}
        assert not flags & {"--output", "--tflite", "--plot", "--csv"}, name
        if "--input" in flags:
            action = next(a for a in parser._actions if "--input" in a.option_strings)
            assert name == "run" and action.metavar == "FILE.npy"
        for mode in ("--input-mode", "--output-mode"):
            if mode in flags:
                action = next(a for a in parser._actions if mode in a.option_strings)
                assert action.choices == ("buffer", "stream")


def test_tables_name_layers_short_and_json_keeps_the_files_names(capsys, tmp_path):
    from .tflite_builder import foreign_net
    net = tmp_path / "net.tflite"
    net.write_bytes(foreign_net())
    code, out, _ = run(capsys, "solve", str(net), "--objective", "vanilla")
    assert code == 0 and "stem/relu6" not in out and "dw/relu" not in out
    assert all(f"{name} " in out for name in ("conv0", "dwconv1", "conv2", "add3", "maxpool4"))
    code, out, _ = run(capsys, "solve", str(net), "--objective", "vanilla", "--json")
    blocks = json.loads(out)["blocks"]
    assert code == 0 and blocks[0]["names"] == ["stem/relu6"] and blocks[3]["names"] == ["add"]

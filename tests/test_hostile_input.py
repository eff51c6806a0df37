"""Hostile but realistic input (issue 19): limits checked before any work, one validation for
every command, options never silently ignored, crash-safe generation. Each bad input ends in
one line naming the file and the field, with the exit status of errors.py."""
import json
import threading
from pathlib import Path

import pytest

from msf_pio import cli
from msf_pio.errors import InfeasibleBudget, MsfError
from msf_pio.model import load_model
from msf_pio.model.limits import MAX_LAYERS
from msf_pio.pio.boards import board_facts
from msf_pio.pio.integration import Options, generate_library, read_options

FACTS = board_facts("qemu_f767zi", lambda key, default=None: {
    "upload.maximum_ram_size": 524288, "upload.maximum_size": 2097152}.get(key, default))
NET = "input: {shape: [16, 16, 3]}\nlayers:\n  - {op: conv2d, out: 8, kernel: 3}\n"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))


def spec(tmp_path: Path, text: str, name: str = "net.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text,where,words", [
    (BOMB + "name: *i\n" + NET, None, "expands to more than"),
    ("name: x\n" + NET.replace("kernel: 3}", "kernel: 3, act: *i}").replace(
        "input:", BOMB + "input:"), None, "expands to more than"),
    ("[" * 200 + "]" * 200, None, "nested deeper than"),
    (NET + "  - {op: inverted_residual, out: 8, repeat: 100000}\n", "layers[1].repeat",
     "over the limit of 1024"),
    (NET + "  - {op: inverted_residual, out: 8, expand: 2, repeat: 1024}\n" * 2, "layers[",
     f"more than {MAX_LAYERS} layers"),
    (NET.replace("[16, 16, 3]", "[100000, 100000, 3]"), "input.shape", "limited to 8192"),
    (NET.replace("out: 8", "out: 100000000"), "layers[0].out", "over the limit"),
    (NET.replace("out: 8", "out: 100000000000000000000000000"), "layers[0].out",
     "over the limit"),
    (NET.replace("[16, 16, 3]", "[8192, 8192, 64]"), "input.shape", "beyond any"),
    (NET.replace("out: 8", "out: 60000").replace("[16, 16, 3]", "[600, 600, 3]"), "layers[0]",
     "larger than 67108864 B"),
])
def test_limits_before_any_work(tmp_path, capsys, text, where, words):
    path = spec(tmp_path, text)
    for command in (["solve", path], ["generate", path, "--out", str(tmp_path / "g")],
                    ["verify", path], ["run", path, "--input", "x.npy", "--out", "y.npy"]):
        assert cli.main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"msf-pio: error: {path}: "), err
        assert words in err and (where is None or where in err), err
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("data,words", [
    (b"\xff\xfe\x00binary" * 10, "not UTF-8 text (byte 0)"),
    ("name: caf\u00e9\n".encode("latin-1") + NET.encode(), "not UTF-8 text (byte 9)"),
    (b"\x08" + NET.encode(), "malformed YAML"),
    (b"x" * (2 << 20), "a YAML spec is at most"),
    (NET.replace("out: 8,", "out: 8, out: 9,").encode(), "duplicate key 'out'"),
    (("weights: {npz: nope.npz}\n" + NET).encode(), "weights.npz: no such file"),
])
def test_unreadable_specs(tmp_path, capsys, data, words):
    path = tmp_path / "net.yaml"
    path.write_bytes(data)
    assert cli.main(["solve", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err


def test_exit_status_contract(tmp_path, capsys, monkeypatch):
    """0 ok, 1 infeasible budget (naming the nearest feasible plan), 2 bad input, 3 internal
    error in one line (with --debug: the traceback)."""
    out = tmp_path / "g"
    assert cli.main(["generate", "tiny", "--out", str(out)]) == 0
    capsys.readouterr()
    assert cli.main(["generate", "tiny", "--objective", "min_macs", "--ram-limit", "100",
                     "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nearest feasible" in err
    assert cli.main(["solve", "no-such-model"]) == 2

    def boom(*args, **kwargs):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr("msf_pio.fusion.planner.plan_model", boom)
    capsys.readouterr()
    assert cli.main(["solve", "tiny"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: ZeroDivisionError: a bug" in err
    with pytest.raises(ZeroDivisionError):
        cli.main(["--debug", "solve", "tiny"])


def test_infeasible_is_its_own_kind():
    assert issubclass(InfeasibleBudget, MsfError) and InfeasibleBudget("x").status == 1


@pytest.mark.parametrize("argv,where,words", [
    (["solve", "tiny", "--objective", "min_macs"], "--objective", "needs --ram-limit"),
    (["solve", "tiny", "--objective", "vanilla", "--max-overhead", "1.2"], "--max-overhead",
     "min_ram objective only"),
    (["solve", "tiny", "--cost-model", "paper", "--schemes", "tiles"], "--schemes",
     "exact cost model"),
    (["solve", "tiny", "--ram-limit", "1.5"], "--ram-limit", "whole number of bytes"),
    (["solve", "tiny", "--board", "nosuchboard"], "--board", "qemu_f767zi"),
    (["verify", "tiny", "--seeds", "0"], "--seeds", "whole number >= 1"),
    (["pareto", "tiny", "--cost-model", "paper", "--schemes", "h-cache"], "--schemes",
     "exact cost model"),
])
def test_no_option_silently_ignored(capsys, argv, where, words):
    try:
        code = cli.main(argv)
    except SystemExit as exc:       # argparse's own errors, one line too
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and where in err and words in err, err


def test_unknown_platformio_option_names_the_closest(tmp_path):
    values = {"custom_msf_model": "tiny", "custom_msf_ram_limt": "64kB"}
    with pytest.raises(MsfError) as err:
        read_options(lambda k, d: values.get(k, d), FACTS, tmp_path, "qemu_f767zi",
                     keys=list(values) + ["board", "platform"])
    assert "custom_msf_ram_limt" in str(err.value) and "did you mean custom_msf_ram_limit" \
        in str(err.value)
    values = {"custom_msf_model": "tiny", "custom_msf_objective": "min_macs",
              "custom_msf_ram_limit": "inf"}
    with pytest.raises(MsfError, match="custom_msf_objective: min_macs"):
        read_options(lambda k, d: values.get(k, d), FACTS, tmp_path, "qemu_f767zi")


def test_torn_generation_regenerates(tmp_path):
    """A stamp or a generated file cut short (a kill, a full disk) is noticed by its hash and
    regenerated; an intact one is kept."""
    options = Options("tiny", "min_ram", float("inf"), None, "exact", "buffer")
    root, _, fresh = generate_library(options, tmp_path, FACTS, 216000000)
    assert fresh and not generate_library(options, tmp_path, FACTS, 216000000)[2]
    source = root / "msf_model" / "src" / "msf_model.c"
    whole = source.read_bytes()
    source.write_bytes(whole[:len(whole) // 2])
    assert generate_library(options, tmp_path, FACTS, 216000000)[2]
    assert source.read_bytes() == whole
    stamp = root / "stamp.json"
    stamp.write_text(stamp.read_text()[:50])
    assert generate_library(options, tmp_path, FACTS, 216000000)[2]
    assert json.loads(stamp.read_text())["files"]
    assert not list(root.rglob(".msf-*"))          # no temporary file left behind


def test_concurrent_builds_take_turns(tmp_path):
    """Two generations of one build folder at once: one generates, the other waits and finds
    the result (never a half-written file between them)."""
    options = Options("tiny", "min_ram", float("inf"), None, "exact", "buffer")
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        generate_library(options, tmp_path, FACTS, 216000000)[2])) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, True]

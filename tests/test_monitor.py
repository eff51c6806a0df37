"""The serial monitor: result-line parsing, verdicts against the plan, CSV/JSON export, the
PlatformIO monitor filter (with and without msf_pio importable) and `msf-pio monitor`."""
import argparse
import io
import json
import shutil
import sys

import pytest
import serial

from msf_pio.errors import MsfError
from msf_pio.pio import monitor
from msf_pio.pio.monitor_cli import add_monitor_command

LINE = ("MSF model=mbv2-w0.35 plan=p1:1.3 board=qemu_f767zi clock=systick hz=40000000 "
        "cycles=79872000 us=1996800 arena=7788 arena_pred=7788 stack=412 ram=8200 ram_pred=7788 "
        "macs=5868888 crc=0x1234ABCD crc_ref=0x1234abcd status=ok")
RECORD = {"model": "mbv2-w0.35", "plan": "p1:1.3", "board": "qemu_f767zi", "clock": "systick",
          "hz": 40000000, "cycles": 79872000, "us": 1996800, "arena": 7788, "arena_pred": 7788,
          "stack": 412, "ram": 8200, "ram_pred": 7788, "macs": 5868888, "crc": "0x1234abcd",
          "crc_ref": "0x1234abcd", "status": "ok"}
PLAN = {"model": "mbv2-w0.35", "macs": 5868888, "reference_crc32": "0x1234ABCD"}
OK_VERDICT = "  -> RAM 7788/7788 B ok (+412 B stack), 1996.8 ms, crc ok"


def line(**changes):
    """LINE with some fields' values replaced."""
    fields = dict(t.split("=", 1) for t in LINE.split()[1:])
    return "MSF " + " ".join(f"{k}={changes.get(k, v)}" for k, v in fields.items())


LOG = "\n".join(["boot: rst:0x1", "MSF hello cycles=10 stack=3 status=ok", LINE,
                 line(arena=7790, status="mismatch"), "MSF exit=0"]) + "\n"


# --- parsing ---------------------------------------------------------------------------------

def test_parse_good_line_typed():
    assert monitor.parse_line(LINE) == RECORD
    assert monitor.parse_line("\x00\xffnoise" + LINE + "\r") == RECORD
    assert monitor.parse_line(line(clock="mcycle", status="fail"))["status"] == "fail"


@pytest.mark.parametrize("text", ["", "boot", "MSF exit=0", "MSF hello cycles=1 status=ok",
                                  "MSF model="])
def test_noise_is_not_a_result(text):
    assert monitor.parse_line(text) is None


def test_every_truncation_is_rejected():
    assert all(monitor.parse_line(LINE[:n]) is None for n in range(len(LINE)))


@pytest.mark.parametrize("bad", [line(cycles="-5"), line(us="1.5"), line(arena=""),
                                 line(crc="0x1234abc"), line(crc_ref="0x1234abcg"),
                                 line(crc="1234abcdef"), line(clock="rdtsc"), line(status="OK"),
                                 line(hz="240MHz"), LINE.replace(" hz=40000000", ""),
                                 line(model=""), LINE + " extra=1", LINE.replace(" us=", " us:"),
                                 LINE.replace("arena=7788 arena_pred=7788",
                                              "arena_pred=7788 arena=7788")])
def test_bad_values_are_rejected(bad):
    assert monitor.parse_line(bad) is None


def test_profiling_lines_go_with_the_next_result_only():
    records = monitor.parse_lines(["MSF edge=1 cycles=700", "MSF edge=0 cycles=300", LINE,
                                   "noise MSF edge=x cycles=1", line(us=5)])
    assert records[0]["edge_cycles"] == [300, 700] and "edge_cycles" not in records[1]


def test_summary_sets_the_plan_beside_the_unfused_one_and_prediction_beside_measurement():
    plan = {**PLAN, "unfused_peak_ram_bytes": 7788 * 25, "unfused_macs": 5868888 // 2,
            "board": "qemu_f767zi", "predicted_cycles": 80000000, "io_bytes": 1000,
            "blocks": [{"layers": "conv0..conv9", "scheme": "h-cache", "predicted_cycles": 50},
                       {"layers": "dense10", "scheme": "single", "predicted_cycles": 40}]}
    record = monitor.parse_lines(["MSF edge=0 cycles=60", "MSF edge=1 cycles=40", LINE])[0]
    text = monitor.render_summary(record, plan, static_ram=23000)
    rows = {l.split("  ")[0].strip(): l for l in text.splitlines()}
    assert "194,700 B" in rows["arena (peak RAM)"] and "25.0x less" in rows["arena (peak RAM)"]
    assert "F = 2.000" in rows["MACs"] and "100.0% more multiply-accumulates" in text
    assert rows["arena"].split()[1:] == ["7,788", "B", "7,788", "B", "equal"]
    assert "2,000.0 ms" in rows["latency"] and "1,996.8 ms" in rows["latency"]
    assert "-0.2%" in rows["latency"]                           # 79,872,000 / 80,000,000 - 1
    assert "23,000 B" in rows["static RAM"] and "bit-exact" in rows["output CRC"]
    edges = text[text.index("cycles per edge:"):].splitlines()
    assert edges[2].split() == ["0", "conv0..conv9", "h-cache", "50", "60", "+20.0%"]
    assert edges[3].split() == ["1", "dense10", "single", "40", "40", "+0.0%"]
    bad = monitor.render_summary(monitor.parse_line(line(arena=7790, crc="0x00000000")), plan)
    assert "DIFFERENT (+2 B)" in bad and "MISMATCH" in bad


def test_parse_lines_keeps_results_in_order():
    records = monitor.parse_lines(LOG.splitlines())
    assert [r["arena"] for r in records] == [7788, 7790]


# --- verdicts --------------------------------------------------------------------------------

def test_ok_verdict():
    assert monitor.problems(RECORD) == [] and monitor.problems(RECORD, PLAN) == []
    assert monitor.verdict_line(RECORD, PLAN) == OK_VERDICT


def test_arena_mismatch():
    rec = dict(RECORD, arena=7800)
    assert monitor.problems(rec) == ["arena 7800 B != predicted 7788 B"]
    assert "RAM 7800/7788 B MISMATCH" in monitor.verdict_line(rec)


def test_release_line_has_no_measured_arena():
    """A release build does not paint the arena: arena=- and ram=- parse to None, the arena is
    not held against the prediction, and the verdict says it was not measured."""
    rec = monitor.parse_line(line(arena="-", ram="-"))
    assert rec == dict(RECORD, arena=None, ram=None)
    assert monitor.problems(rec, PLAN) == []
    assert monitor.verdict_line(rec, PLAN).startswith(
        "  -> RAM not measured (release build; pio test measures it), predicted 7788 B")
    assert monitor.parse_line(line(stack="-")) is None and monitor.parse_line(line(arena="")) is None
    assert "-" in monitor.render_report([rec], PLAN).splitlines()[1].split()
    assert "not measured: release build" in monitor.render_summary(rec, PLAN)


def test_crc_mismatch_against_firmware_reference():
    rec = dict(RECORD, crc="0xdeadbeef", status="mismatch")
    assert monitor.problems(rec) == ["board status=mismatch",
                                     "crc 0xdeadbeef != firmware reference 0x1234abcd"]
    assert monitor.verdict_line(rec).endswith("crc MISMATCH, board status=mismatch")


def test_crc_and_macs_mismatch_against_plan_json():
    plan = dict(PLAN, reference_crc32="0x00000001", macs=5868889)
    assert monitor.problems(RECORD) == []
    assert monitor.problems(RECORD, plan) == ["crc 0x1234abcd != plan.json reference 0x00000001",
                                              "macs 5868888 != plan.json macs 5868889"]
    assert monitor.verdict_line(RECORD, plan).endswith("crc MISMATCH, macs MISMATCH")


def test_load_plan(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    assert monitor.load_plan(path) == PLAN
    for text in ("{", "[]", json.dumps({"reference_crc32": "1234"})):
        path.write_text(text)
        with pytest.raises(MsfError, match="plan.json"):
            monitor.load_plan(path)


def test_report_table():
    records = monitor.parse_lines(LOG.splitlines())
    report = monitor.render_report(records, PLAN)
    assert "1996.8" in report and "79872000 systick" in report and "0.073" in report
    assert "arena 7790 B != predicted 7788 B" in report
    assert report.endswith("2 result(s): 1 not ok")
    # like beside like: the measured arena beside the predicted one, and what the run used
    # (arena + stack) with no "prediction" beside it (the line's ram_pred is the arena's)
    header, first = report.splitlines()[0].split(), report.splitlines()[1].split()
    assert header[3:7] == ["arena", "pred", "stack", "arena+stack"] and "RAM" not in header
    assert int(first[6]) == records[0]["arena"] + records[0]["stack"] == records[0]["ram"]
    assert monitor.render_report([]) == "no MSF result lines"


# --- export ----------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_export_round_trip(tmp_path, fmt):
    records = monitor.parse_lines(LOG.splitlines() + [line(arena="-", ram="-")])
    path = tmp_path / f"results.{fmt}"
    getattr(monitor, f"write_{fmt}")(records, path, PLAN)
    back = getattr(monitor, f"read_{fmt}")(path)
    assert [{k: r[k] for k in monitor.FIELDS} for r in back] == records
    assert [r["verdict"] for r in back] == ["ok", "board status=mismatch; "
                                            "arena 7790 B != predicted 7788 B", "ok"]


# --- PlatformIO monitor filter ---------------------------------------------------------------

@pytest.fixture(params=["msf_pio", "standalone"])
def msf_filter(request, monkeypatch, tmp_path):
    """A maker of fresh filters of the class PlatformIO loads from a project's monitor/, in a
    project whose build left a plan.json; 'standalone' hides msf_pio as PlatformIO's Python."""
    from platformio.device.monitor.filters.base import load_monitor_filter
    from serial.tools import miniterm
    if request.param == "standalone":
        monkeypatch.setitem(sys.modules, "msf_pio.pio.monitor", None)
    (tmp_path / "platformio.ini").write_text("[env:qemu_f767zi]\nboard = qemu_f767zi\n")
    plan = tmp_path / ".pio" / "build" / "qemu_f767zi" / "msf_generated" / "plan.json"
    plan.parent.mkdir(parents=True)
    plan.write_text(json.dumps(dict(PLAN, macs=1)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(miniterm, "TRANSFORMATIONS", dict(miniterm.TRANSFORMATIONS))
    (tmp_path / "monitor").mkdir()          # where `msf-pio init` puts it
    shutil.copyfile(monitor.FILTER_SOURCE, tmp_path / "monitor" / "filter_msf.py")
    options = {"project_dir": str(tmp_path), "environment": "qemu_f767zi"}
    load_monitor_filter(str(tmp_path / "monitor" / "filter_msf.py"), options)
    loaded = miniterm.TRANSFORMATIONS["msf"]
    return lambda: type(loaded)(options)


def test_filter_appends_verdicts_whatever_the_chunking(msf_filter):
    text = LOG.replace("\n", "\r\n") + LINE[:40]
    verdicts = [OK_VERDICT + ", macs MISMATCH",
                "  -> RAM 7790/7788 B MISMATCH (+412 B stack), 1996.8 ms, crc ok, "
                "macs MISMATCH, board status=mismatch"]
    lines = text.split("\r\n")
    expected = "\r\n".join(lines[:3] + verdicts[:1] + lines[3:4] + verdicts[1:] + lines[4:])
    for cut in range(0, len(text), 7):
        for cut2 in (cut + 1, cut + 250):
            chunks = [text[:cut], text[cut:cut2], text[cut2:]]
            rx = msf_filter()().rx  # miniterm calls the registered instance for its filter
            assert "".join(rx(c) for c in chunks) == expected
    assert msf_filter().NAME == "msf" and msf_filter().tx("x\r\n") == "x\r\n"


def test_standalone_filter_agrees_with_monitor(monkeypatch, tmp_path):
    from platformio.compat import load_python_module
    monkeypatch.setitem(sys.modules, "msf_pio.pio.monitor", None)
    module = load_python_module("filter_msf_standalone", str(monitor.FILTER_SOURCE))
    assert module.parse_line is not monitor.parse_line
    samples = [LINE, line(arena=1), line(crc="0xFFFFFFFF", status="fail"), line(stack=0),
               line(clock="ccount", us=5), line(clock="esp", hz=0), line(arena="-", ram="-"),
               line(arena="-"), line(stack="-"), LINE[:-1], line(cycles="x"), line(crc="0x1"), "boot"]
    for text in samples:
        assert module.parse_line(text) == monitor.parse_line(text), text
        rec = monitor.parse_line(text)
        for plan in (None, PLAN, dict(PLAN, macs=0), {"reference_crc32": "0x00000000"}):
            if rec is not None:
                assert module.verdict_line(rec, plan) == monitor.verdict_line(rec, plan)


def test_demo_project_ships_the_filter_itself():
    """examples/msf_demo/monitor/filter_msf.py is what `pio device monitor` loads for the real
    boards' envs (their platforms have no msf filter): the filter's source, not a path to it."""
    demo = monitor.FILTER_SOURCE.parents[4] / "examples" / "msf_demo" / "monitor" / "filter_msf.py"
    assert demo.read_bytes() == monitor.FILTER_SOURCE.read_bytes()


# --- msf-pio monitor -------------------------------------------------------------------------

def run_cli(capsys, *argv):
    """`msf-pio monitor ARGV` as cli.main runs it: exit status, stdout, stderr."""
    parser = argparse.ArgumentParser(prog="msf-pio")
    add_monitor_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["monitor", *argv])
    try:
        code = args.func(args)
    except MsfError as exc:
        print(f"msf-pio: error: {exc}", file=sys.stderr)
        code = 2
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def logs(tmp_path):
    good = tmp_path / "good.log"
    good.write_text("boot\n" + LINE + "\r\n" + line(us=5000) + "\nMSF exit=0\n" + LINE[4:40])
    bad = tmp_path / "bad.log"
    bad.write_text(LOG)
    return good, bad


def test_cli_log_file(capsys, logs, tmp_path):
    good, bad = logs
    code, out, err = run_cli(capsys, "--log", str(good), "--out", str(tmp_path / "r.csv"),
                             "--out", str(tmp_path / "r.json"))
    assert code == 0 and err == ""
    assert out.count(OK_VERDICT) == 1 and "boot\n" in out and out.endswith("all ok\n")
    assert len(monitor.read_csv(tmp_path / "r.csv")) == 2
    assert monitor.read_json(tmp_path / "r.json")[1]["us"] == 5000
    code, out, _ = run_cli(capsys, "--log", str(bad), "--quiet")
    assert code == 1 and "boot" not in out and out.endswith("2 result(s): 1 not ok\n")


def test_cli_in_a_project_takes_the_plan_that_result_ran(capsys, logs, tmp_path, monkeypatch):
    """Without --plan, in a project: the built plan.json of the env named as the result's board,
    only when it is the plan the result ran (a rebuilt plan is left out, not checked against)."""
    good, _ = logs
    built = tmp_path / ".pio/build/qemu_f767zi/msf_generated"
    built.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    for plan, used in ((PLAN, True), (dict(PLAN, macs=PLAN["macs"] + 1), False)):
        (built / "plan.json").write_text(json.dumps(dict(plan, unfused_peak_ram_bytes=99999,
                                                         unfused_macs=4000000)))
        code, out, err = run_cli(capsys, "--log", str(good), "--quiet")
        assert code == 0 and ("99,999 B" in out) == used and ("plan.json" in err) == used


def test_cli_malformed_result_line_fails_the_run(capsys, tmp_path):
    """A result line cut short (a reset mid-line) or garbled is named, and beside good lines
    the run still fails: it is not 'all ok'."""
    for bad in (LINE[:60], line(crc="0xZZ"), LINE.replace(" us=", " us ")):
        log = tmp_path / "cut.log"
        log.write_text(LINE + "\n" + bad + "\n" + LINE + "\n")
        code, out, err = run_cli(capsys, "--log", str(log))
        assert code == 1 and out.count("MALFORMED result line") == 1, bad
        assert "1 malformed result line(s)" in err and out.count(OK_VERDICT) == 2


def test_cli_long_lines_are_bounded_and_linear(capsys, tmp_path):
    """A line without an end (noise, a stuck UART) is read once and kept to MAX_LINE bytes: 8 MB
    of it, then a good result line, reads in one pass; an overlong result line is malformed."""
    log = tmp_path / "noise.log"
    log.write_bytes(b"x" * (8 << 20) + b"\n" + LINE.encode() + b"\n" +
                    LINE.encode() + b" " + b"y" * 5000 + b"\n")
    code, out, err = run_cli(capsys, "--log", str(log))
    assert code == 1 and out.count(OK_VERDICT) == 1
    assert f"[line cut: {(8 << 20) - monitor.MAX_LINE} more bytes]" in out
    assert "1 malformed result line(s)" in err
    assert max(len(l) for l in out.splitlines()) < monitor.MAX_LINE + 100


def test_cli_json_prints_the_records_and_nothing_else(capsys, logs):
    good, bad = logs
    code, out, _ = run_cli(capsys, "--log", str(bad), "--json")
    records = json.loads(out)
    assert code == 1 and [r["verdict"] == "ok" for r in records] == [True, False]
    assert records == monitor.export_rows(monitor.parse_lines(bad.read_text().splitlines()), None)


def test_cli_plan_and_count(capsys, logs, tmp_path):
    good, _ = logs
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(dict(PLAN, reference_crc32="0x00000000")))
    code, out, _ = run_cli(capsys, "-q", "--log", str(good), "--plan", str(plan))
    assert code == 1 and "!= plan.json reference 0x00000000" in out
    plan.write_text(json.dumps(PLAN))
    assert run_cli(capsys, "-q", "--log", str(good), "--plan", str(plan))[0] == 0
    assert run_cli(capsys, "-q", "--log", str(good), "--count", "1")[0] == 0
    code, _, err = run_cli(capsys, "-q", "--log", str(good), "--count", "3")
    assert code == 1 and "input ended after 2 of 3 results" in err


def test_cli_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(LINE.encode() + b"\n")))
    assert run_cli(capsys, "-q", "--log", "-")[0] == 0
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"boot\nMSF exit=0\n")))
    code, out, _ = run_cli(capsys, "-q", "--log", "-")
    assert code == 1 and "no MSF result lines" in out


OPEN_URL = serial.serial_for_url
PRINTER = "import sys,time; print('boot'); print(sys.argv[1], flush=True); "


def test_cli_run_command(capsys):
    code, out, _ = run_cli(capsys, "--run", "--", sys.executable, "-c", PRINTER + "print('end')",
                           LINE)
    assert code == 0 and OK_VERDICT in out and "end\n" in out
    code, _, err = run_cli(capsys, "--run", "--", sys.executable, "-c", PRINTER + "sys.exit(3)",
                           LINE)
    assert code == 1 and "command exited with status 3" in err


def test_cli_run_stops_at_count_or_timeout(capsys):
    slow = [sys.executable, "-c", PRINTER + "time.sleep(30)", LINE]
    assert run_cli(capsys, "-q", "--count", "1", "--run", "--", *slow)[0] == 0
    # The deadline counts from the start, so it must outlast the child's interpreter start on
    # a loaded CI machine (0.5 s did not, once); the child then sleeps far past it.
    code, out, err = run_cli(capsys, "-q", "--timeout", "5", "--run", "--", *slow)
    assert code == 1 and "1 result(s): all ok" in out and "timeout after 5 s" in err


def loop_port(monkeypatch, data: bytes):
    """Make the CLI's port a pyserial loop:// port that already holds ``data``."""
    port = OPEN_URL("loop://", timeout=0.1)
    port.write(data)
    monkeypatch.setattr(serial, "serial_for_url", lambda url, **kw: port)


def test_cli_serial_port(capsys, monkeypatch):
    loop_port(monkeypatch, b"\x00boot\r\n" + (LINE + "\r\n").encode() * 2)
    code, out, _ = run_cli(capsys, "--port", "loop://", "--count", "2")
    assert code == 0 and out.count(OK_VERDICT) == 2
    loop_port(monkeypatch, (line(crc="0x00000000") + "\r\n").encode())
    code, out, err = run_cli(capsys, "-q", "--port", "loop://", "--timeout", "0.3")
    assert code == 1 and "firmware reference" in out and err == ""


@pytest.mark.parametrize("argv, message", [
    (["--log", "/nonexistent/x.log"], "cannot read log"),
    (["--run"], "--run needs a command"),
    (["--log", "x", "--", "echo"], "a command needs --run"),
    (["--log", "x", "--count", "0"], "--count: must be positive"),
    (["--run", "--", "/nonexistent/cmd"], "cannot run command"),
    (["--port", "/nonexistent/tty"], "cannot open serial port"),
    (["--log", "x", "--plan", "/nonexistent/plan.json"], "cannot read plan JSON"),
    (["--log", "x", "--out", "r.txt"], "--out: must end in .csv, .json or .png"),
])
def test_cli_errors_are_one_line(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1 and out == ""


def test_cli_needs_one_source(capsys):
    with pytest.raises(SystemExit) as exc:
        run_cli(capsys, "--log", "x", "--port", "y")
    assert exc.value.code == 2

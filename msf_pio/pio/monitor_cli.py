"""`msf-pio monitor`: read the firmware's serial output from a port, a log file or a command
(e.g. ``pio run -e qemu_f767zi -t upload``), check every MSF result line, print the report.

Exit status: 0 when every result was ok, 1 when one was not (or none came, --count was not
reached, or the command failed), 2 on usage and I/O errors.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..errors import MsfError
from . import monitor

_EOF = object()


def add_monitor_command(subparsers) -> None:
    """Register ``monitor`` on the msf-pio sub-command parser."""
    p = subparsers.add_parser("monitor", help="check the firmware's MSF result lines from a "
                              "serial port, a log or a command's output and print the report")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--port", help="serial port or pyserial URL (e.g. /dev/ttyACM0)")
    src.add_argument("--log", metavar="FILE", help="captured serial output ('-' for stdin)")
    src.add_argument("--run", action="store_true",
                     help="run the command given after '--' and read its output")
    p.add_argument("--baud", type=int, default=115200, help="the serial port's rate, with --port")
    p.add_argument("--plan", metavar="plan.json",
                   help="also check the CRC and MACs against this plan JSON (default: in a "
                        "project, .pio/build/BOARD/msf_generated/plan.json when it is the plan "
                        "the result ran)")
    p.add_argument("--out", metavar="FILE", action="append",
                   help="also write the results to FILE.csv or FILE.json, or draw the last "
                        "result's cycles per edge in FILE.png (repeatable)")
    p.add_argument("--json", action="store_true",
                   help="print the results as JSON instead of the report")
    p.add_argument("--count", type=int, help="stop after N result lines")
    p.add_argument("--timeout", type=float, help="stop after S seconds")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print only the report, not the serial text and verdicts")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_monitor)


class _Source:
    """Bytes from a port, a file or a command, split into lines by a reader thread so that the
    caller can wait with a deadline on any of them. ``status`` (commands only) waits for the
    exit status once the output has ended."""

    def __init__(self, read, close, status=None):
        self._read, self._close, self.status = read, close, status
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        """Each byte is looked at once (a line without an end is not split again and again),
        and a line keeps at most MAX_LINE bytes: a longer one is cut, marked, and counted as
        malformed if it was a result line."""
        buf, cut = bytearray(), 0
        try:
            for chunk in iter(self._read, b""):
                start = 0
                while start <= len(chunk):
                    end = chunk.find(b"\n", start)
                    piece = chunk[start:] if end < 0 else chunk[start:end]
                    room = monitor.MAX_LINE - len(buf)
                    buf += piece[:max(room, 0)]
                    cut += max(len(piece) - max(room, 0), 0)
                    if end < 0:
                        break
                    self.lines.put(_line(buf, cut))
                    buf, cut, start = bytearray(), 0, end + 1
            if buf or cut:
                self.lines.put(_line(buf, cut))
            self.lines.put(_EOF)
        except (OSError, ValueError) as exc:  # pyserial's errors are OSErrors
            self.lines.put(exc)

    def close(self):
        self._close()


def _line(raw: bytearray, cut: int) -> str:
    text = raw.decode("ascii", "replace").rstrip("\r")
    return f"{text} [line cut: {cut} more bytes]" if cut else text


def _open_log(path: str) -> _Source:
    if path == "-":
        return _Source(lambda: sys.stdin.buffer.read1(4096), lambda: None)
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise MsfError(f"cannot read log: {exc.strerror}", source=path) from None
    return _Source(lambda: f.read1(4096), f.close)


def _open_port(port: str, baud: int) -> _Source:
    try:        # only --port needs it; --log and --command work without it
        import serial
    except ImportError:
        raise MsfError("--port needs pyserial (pip install pyserial); --log and --command "
                       "do not", source=port) from None
    try:
        ser = serial.serial_for_url(port, baudrate=baud, timeout=0.1)
    except (OSError, ValueError) as exc:
        raise MsfError(f"cannot open serial port: {exc}", source=port) from None

    def read():  # a port has no end of file: wait for bytes
        while True:
            data = ser.read(ser.in_waiting or 1)
            if data:
                return data
    return _Source(read, ser.close)


def _open_command(cmd: list[str]) -> _Source:
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, bufsize=0,
                                start_new_session=os.name == "posix")
    except OSError as exc:
        raise MsfError(f"cannot run command: {exc.strerror}", source=cmd[0]) from None

    def stop():  # the whole group: `pio run -t upload` leaves QEMU running otherwise
        if proc.poll() is None:
            if os.name == "posix":
                os.killpg(proc.pid, signal.SIGTERM)
            else:
                proc.terminate()
        proc.wait()
        proc.stdout.close()
    return _Source(lambda: proc.stdout.read(4096), stop, proc.wait)


def _check_args(args) -> list[str]:
    """The command after '--', with the option combinations checked."""
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if args.run and not cmd:
        raise MsfError("--run needs a command after '--'", where="monitor")
    if cmd and not args.run:
        raise MsfError(f"unexpected arguments {' '.join(cmd)!r} (a command needs --run)",
                       where="monitor")
    for path in args.out or ():
        if os.path.splitext(path)[1].lower() not in _WRITERS:
            raise MsfError(f"must end in .csv, .json or .png, got {path!r}", where="--out")
    for name in ("count", "timeout", "baud"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise MsfError(f"must be positive, got {value}", where=f"--{name}")
    return cmd


def _read_results(source: _Source, args, plan, echo) -> tuple[list[dict], str | None]:
    """Result records until the end of input, --count or --timeout (or Ctrl-C); and why the
    reading stopped early, when that is a failure."""
    records, results, malformed = [], monitor.Results(), 0
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    try:
        while args.count is None or len(records) < args.count:
            wait = None if deadline is None else deadline - time.monotonic()
            try:
                line = source.lines.get(timeout=None if wait is None else max(wait, 0))
            except queue.Empty:
                if args.count is not None or args.run:
                    return records, f"timeout after {args.timeout:g} s"
                break
            if line is _EOF:
                status = source.status() if source.status else 0
                if status != 0:
                    return records, f"command exited with status {status}"
                break
            if isinstance(line, Exception):
                raise MsfError(f"read failed: {line}", source=args.port or args.log)
            echo(line)
            record = results.feed(line)
            if record is not None:
                records.append(record)
                echo(monitor.verdict_line(record, plan))
            elif monitor.RESULT_START in line:     # a result line cut short or garbled
                malformed += 1
                echo("  -> MALFORMED result line (cut short or garbled): not a result")
    except KeyboardInterrupt:
        return records, "interrupted" if args.count is not None or args.run else None
    if args.count is not None and len(records) < args.count:
        return records, f"input ended after {len(records)} of {args.count} results"
    if malformed:
        return records, f"{malformed} malformed result line(s) (cut short or garbled)"
    return records, None


def _plot_edges(records, path, plan) -> None:
    from ..report import plot_edges
    if not records:
        raise MsfError("no result to draw", source=path)
    plot_edges(records[-1], plan, path)


_WRITERS = {".csv": monitor.write_csv, ".json": monitor.write_json, ".png": _plot_edges}


def _export(records, args, plan) -> None:
    for path in args.out or ():
        try:
            _WRITERS[os.path.splitext(path)[1].lower()](records, path, plan)
        except OSError as exc:
            raise MsfError(f"cannot write: {exc.strerror}", source=path) from None


def _built_plan(record: dict) -> dict | None:
    """Run in a project without --plan: the plan.json of the env named as the result's board
    (init's and the demo's envs are), when it is the plan that result ran (same model, MACs and
    reference CRC), so the report has the unfused plan and the predicted latency beside it."""
    path = Path(".pio") / "build" / record["board"] / "msf_generated" / "plan.json"
    try:
        plan = monitor.load_plan(path) if path.is_file() else None
    except MsfError:
        return None
    same = plan is not None and (plan.get("model"), plan.get("macs"),
                                 str(plan.get("reference_crc32")).lower()) == (
        record["model"], record["macs"], record["crc_ref"].lower())
    if same:
        print(f"msf-pio monitor: the plan of {path}", file=sys.stderr)
    return plan if same else None


def cmd_monitor(args) -> int:
    """Read, check, report and export; the exit status as in the module docstring."""
    cmd = _check_args(args)
    plan = monitor.load_plan(args.plan) if args.plan else None
    if args.run:
        source = _open_command(cmd)
    elif args.port:
        source = _open_port(args.port, args.baud)
    else:
        source = _open_log(args.log)

    def echo(line):
        if not (args.quiet or args.json):
            print(line, flush=True)
    try:
        records, failure = _read_results(source, args, plan, echo)
    finally:
        source.close()
    if plan is None and records:
        plan = _built_plan(records[-1])
    if args.json:
        print(json.dumps(monitor.export_rows(records, plan), indent=2))
    else:
        if records:
            print(monitor.render_summary(records[-1], plan) + "\n")
        print(monitor.render_report(records, plan))
    _export(records, args, plan)
    if not records and not failure:
        failure = "no MSF result line in the input"
    if failure:
        print(f"msf-pio monitor: {failure}", file=sys.stderr)
    bad = not records or failure or any(monitor.problems(r, plan) for r in records)
    return 1 if bad else 0

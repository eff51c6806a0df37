"""The firmware's serial result lines (DESIGN.md section 3): parse them into records, check the
measured arena and output CRC against the plan's predictions, render a report, export CSV/JSON.

A result line is ``MSF model=.. plan=.. board=.. clock=.. hz=.. cycles=.. us=.. arena=..
arena_pred=.. stack=.. ram=.. ram_pred=.. macs=.. crc=0x.. crc_ref=0x.. status=..`` (fields in
that order; ``hz`` is the rate of the ``clock`` counter, msf_board_cpu_hz()); anything else on
the wire (boot noise, other ``MSF`` lines, cut-off lines) is skipped.
"""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from ..errors import MsfError

_CRC = re.compile(r"0x[0-9a-fA-F]{8}")
CLOCKS = ("dwt", "systick", "mcycle", "ccount", "esp")  # msf_board_cycles_source()
STATUSES = ("ok", "mismatch", "fail")
# PlatformIO loads monitor filters from a project's monitor/ or a platform's: the msf-qemu
# platform ships this one, `msf-pio init` writes it into a new project.
FILTER_SOURCE = Path(__file__).parent / "platform" / "monitor" / "filter_msf.py"


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ValueError(text)
    return int(text)


def _crc(text: str) -> str:
    if not _CRC.fullmatch(text):
        raise ValueError(text)
    return text.lower()


def _choice(options):
    def convert(text: str) -> str:
        if text not in options:
            raise ValueError(text)
        return text
    return convert


def _name(text: str) -> str:
    if not text:
        raise ValueError(text)
    return text


FIELDS = {"model": _name, "plan": _name, "board": _name, "clock": _choice(CLOCKS),
          "hz": _count, "cycles": _count, "us": _count, "arena": _count, "arena_pred": _count,
          "stack": _count, "ram": _count, "ram_pred": _count, "macs": _count,
          "crc": _crc, "crc_ref": _crc, "status": _choice(STATUSES)}


def parse_line(line: str) -> dict | None:
    """The record of one result line (ints as int, CRCs as lower-case '0x%08x'), or None for
    any other line. Strict on purpose: a line cut short or garbled is not a result."""
    start = line.find("MSF model=")
    if start < 0:
        return None
    tokens = [t.partition("=") for t in line[start + 4:].split()]
    if [k for k, _, _ in tokens] != list(FIELDS) or not all(eq for _, eq, _ in tokens):
        return None
    try:
        return {k: FIELDS[k](v) for k, _, v in tokens}
    except ValueError:
        return None


def parse_lines(lines) -> list[dict]:
    """Every result record in an iterable of lines, in order."""
    return [r for r in map(parse_line, lines) if r is not None]


def load_plan(path) -> dict:
    """A plan.json written next to the generated sources (its 'reference_crc32' and 'macs' are
    what a result is checked against)."""
    try:
        plan = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise MsfError(f"cannot read plan JSON: {exc}", source=str(path)) from None
    if not isinstance(plan, dict):
        raise MsfError("not a plan JSON object", source=str(path))
    ref = plan.get("reference_crc32")
    if ref is not None and not (isinstance(ref, str) and _CRC.fullmatch(ref)):
        raise MsfError(f"reference_crc32 must be '0x' and 8 hex digits, got {ref!r}",
                       source=str(path))
    return plan


def problems(record: dict, plan: dict | None = None) -> list[str]:
    """Why a result is not ok (empty when it is): the board's own status, measured vs predicted
    arena, board CRC vs the firmware's and the plan's reference, MACs vs the plan's."""
    out = []
    if record["status"] != "ok":
        out.append(f"board status={record['status']}")
    if record["arena"] != record["arena_pred"]:
        out.append(f"arena {record['arena']} B != predicted {record['arena_pred']} B")
    if record["crc"] != record["crc_ref"]:
        out.append(f"crc {record['crc']} != firmware reference {record['crc_ref']}")
    if plan:
        ref = plan.get("reference_crc32")
        if ref is not None and record["crc"] != ref.lower():
            out.append(f"crc {record['crc']} != plan.json reference {ref.lower()}")
        if plan.get("macs") is not None and record["macs"] != plan["macs"]:
            out.append(f"macs {record['macs']} != plan.json macs {plan['macs']}")
    return out


def crc_ok(record: dict, plan: dict | None = None) -> bool:
    """The output CRC matches the firmware's reference and, if given, the plan's."""
    ref = (plan or {}).get("reference_crc32")
    return record["crc"] == record["crc_ref"] and (ref is None or record["crc"] == ref.lower())


def verdict_line(record: dict, plan: dict | None = None) -> str:
    """The one-line verdict printed under a result line (the monitor filter's format)."""
    ram = "ok" if record["arena"] == record["arena_pred"] else "MISMATCH"
    crc = "ok" if crc_ok(record, plan) else "MISMATCH"
    parts = [f"RAM {record['arena']}/{record['arena_pred']} B {ram} (+{record['stack']} B stack)",
             f"{record['us'] / 1000:.1f} ms", f"crc {crc}"]
    if plan and plan.get("macs") is not None and record["macs"] != plan["macs"]:
        parts.append("macs MISMATCH")
    predicted = predicted_cycles(record, plan)
    if predicted:
        parts.append(f"cycles {record['cycles']} vs predicted {predicted} "
                     f"({record['cycles'] / predicted - 1:+.1%})")
    if record["status"] != "ok":
        parts.append(f"board status={record['status']}")
    return "  -> " + ", ".join(parts)


def predicted_cycles(record: dict, plan: dict | None) -> int | None:
    """The latency cost model's cycles for the record's board, if plan.json has them (a
    plan solved for that board)."""
    if not plan or not plan.get("predicted_cycles") or plan.get("board") != record["board"]:
        return None
    return int(plan["predicted_cycles"])


def _table(rows: list[list[str]], right: range) -> str:
    """Rows of cells, aligned; the columns in ``right`` (numbers) to the right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) if i in right else c.ljust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip()
                     for r in rows)


def render_report(records: list[dict], plan: dict | None = None) -> str:
    """A table, one row per result: measured vs predicted arena and RAM (bytes), latency,
    cycles, MACs/cycle, CRC verdict; then a summary line."""
    if not records:
        return "no MSF result lines"
    timed = any(predicted_cycles(r, plan) for r in records)
    rows = [["model", "plan", "board", "arena", "pred", "stack", "RAM", "RAM pred", "ms",
             "cycles", *(["cycles pred"] if timed else []), "MACs/cycle", "crc", "verdict"]]
    for r in records:
        predicted = predicted_cycles(r, plan)
        rows.append([r["model"], r["plan"], r["board"], str(r["arena"]), str(r["arena_pred"]),
                     str(r["stack"]), str(r["ram"]), str(r["ram_pred"]), f"{r['us'] / 1000:.1f}",
                     f"{r['cycles']} {r['clock']}",
                     *([f"{predicted} ({r['cycles'] / predicted - 1:+.1%})" if predicted
                        else "-"] if timed else []),
                     f"{r['macs'] / r['cycles']:.3f}" if r["cycles"] else "-",
                     "ok" if crc_ok(r, plan) else "MISMATCH",
                     "; ".join(problems(r, plan)) or "ok"])
    bad = sum(1 for r in records if problems(r, plan))
    summary = f"{len(records)} result(s): " + (f"{bad} not ok" if bad else "all ok")
    return _table(rows, right=range(3, 12 if timed else 11)) + "\n" + summary


def export_rows(records, plan) -> list[dict]:
    """The records, each with its verdict ('ok' or the problems)."""
    return [{**r, "verdict": "; ".join(problems(r, plan)) or "ok"} for r in records]


def write_json(records: list[dict], path, plan: dict | None = None) -> None:
    """The records and each one's verdict ('ok' or the problems) as a JSON list."""
    Path(path).write_text(json.dumps(export_rows(records, plan), indent=2) + "\n")


def write_csv(records: list[dict], path, plan: dict | None = None) -> None:
    """The records and each one's verdict as CSV, one row per result."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*FIELDS, "verdict"])
        writer.writeheader()
        writer.writerows(export_rows(records, plan))


def read_json(path) -> list[dict]:
    """Records written by write_json."""
    return json.loads(Path(path).read_text())


def read_csv(path) -> list[dict]:
    """Records written by write_csv, with typed values again."""
    with open(path, newline="") as f:
        return [{**{k: FIELDS[k](row[k]) for k in FIELDS}, "verdict": row["verdict"]}
                for row in csv.DictReader(f)]

"""The firmware's serial result lines (docs/design.md): parse them into records, check the
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
import textwrap
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


def _measured(text: str) -> int | None:
    """A measured byte count, or None: '-' from a release build, which does not paint."""
    return None if text == "-" else _count(text)


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
          "hz": _count, "cycles": _count, "us": _count, "arena": _measured, "arena_pred": _count,
          "stack": _count, "ram": _measured, "ram_pred": _count, "macs": _count,
          "crc": _crc, "crc_ref": _crc, "status": _choice(STATUSES)}


RESULT_START = "MSF model="
MAX_LINE = 4096     # bytes of one serial line kept (a result line is about 300)


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


_EDGE = re.compile(r"MSF edge=(\d{1,5}) cycles=(\d{1,20})\s*$")


def parse_edge_line(line: str) -> tuple[int, int] | None:
    """(edge, cycles) of a profiling line ``MSF edge=<k> cycles=<n>`` (custom_msf_profile =
    yes: the firmware times every edge and prints them before its result line), or None."""
    m = _EDGE.search(line)
    return None if m is None else (int(m[1]), int(m[2]))


class Results:
    """Result records from lines fed one at a time; the profiling lines before a result line
    go with it, as its ``edge_cycles`` (edge k at index k)."""

    def __init__(self):
        self._edges: dict[int, int] = {}

    def feed(self, line: str) -> dict | None:
        edge = parse_edge_line(line)
        if edge is not None:
            self._edges[edge[0]] = edge[1]
            return None
        record = parse_line(line)
        if record is not None and self._edges:
            record["edge_cycles"] = [self._edges.get(k) for k in range(max(self._edges) + 1)]
            self._edges = {}
        return record


def parse_lines(lines) -> list[dict]:
    """Every result record in an iterable of lines, in order."""
    return [r for r in map(Results().feed, lines) if r is not None]


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
    if record["arena"] is not None and record["arena"] != record["arena_pred"]:
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
    crc = "ok" if crc_ok(record, plan) else "MISMATCH"
    if record["arena"] is None:
        ram = (f"RAM not measured (release build; pio test measures it), predicted "
               f"{record['arena_pred']} B (+{record['stack']} B stack)")
    else:
        ram = (f"RAM {record['arena']}/{record['arena_pred']} B "
               f"{'ok' if record['arena'] == record['arena_pred'] else 'MISMATCH'} "
               f"(+{record['stack']} B stack)")
    parts = [ram,
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


def _or_dash(value) -> str:
    return "-" if value is None else str(value)


def _table(rows: list[list[str]], right: range) -> str:
    """Rows of cells, aligned; the columns in ``right`` (numbers) to the right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) if i in right else c.ljust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip()
                     for r in rows)


def render_report(records: list[dict], plan: dict | None = None) -> str:
    """A table, one row per result: measured vs predicted arena (bytes), the stack and what
    the run used (arena + stack, measured only: the line's ram_pred is the predicted arena, not
    a like figure), latency, cycles, MACs/cycle, CRC verdict; then a summary line."""
    if not records:
        return "no MSF result lines"
    timed = any(predicted_cycles(r, plan) for r in records)
    rows = [["model", "plan", "board", "arena", "pred", "stack", "arena+stack", "ms",
             "cycles", *(["cycles pred"] if timed else []), "MACs/cycle", "crc", "verdict"]]
    for r in records:
        predicted = predicted_cycles(r, plan)
        rows.append([r["model"], r["plan"], r["board"], _or_dash(r["arena"]), str(r["arena_pred"]),
                     str(r["stack"]), _or_dash(r["ram"]), f"{r['us'] / 1000:.1f}",
                     f"{r['cycles']} {r['clock']}",
                     *([f"{predicted} ({r['cycles'] / predicted - 1:+.1%})" if predicted
                        else "-"] if timed else []),
                     f"{r['macs'] / r['cycles']:.3f}" if r["cycles"] else "-",
                     "ok" if crc_ok(r, plan) else "MISMATCH",
                     "; ".join(problems(r, plan)) or "ok"])
    bad = sum(1 for r in records if problems(r, plan))
    summary = f"{len(records)} result(s): " + (f"{bad} not ok" if bad else "all ok")
    return _table(rows, right=range(3, 11 if timed else 10)) + "\n" + summary


def _ms(cycles: float, hz: int) -> str:
    return f"{cycles * 1000 / hz:,.1f} ms" if hz else f"{cycles:,.0f} cycles"


def render_summary(record: dict, plan: dict | None = None, static_ram: int | None = None) -> str:
    """What a run shows, as small tables: the plan against the unfused one (from plan.json),
    predicted against measured (arena, stack, RAM, latency in one unit with the error, output
    bytes), and per edge when the firmware profiled them. `static_ram`: PlatformIO's RAM
    figure of the firmware, explained beside the others."""
    r, plan = record, plan or {}
    hz = r["hz"]
    lines = [f"{r['model']} plan {r['plan']} on {r['board']}"]
    rows = [("", "unfused", "this plan", "")]
    unfused_ram, unfused_macs = plan.get("unfused_peak_ram_bytes"), plan.get("unfused_macs")
    if unfused_ram:
        rows.append(("arena (peak RAM)", f"{unfused_ram:,} B", f"{r['arena_pred']:,} B",
                     f"{unfused_ram / max(r['arena_pred'], 1):.1f}x less"
                     if unfused_ram > r["arena_pred"] else ""))
    if unfused_macs:
        f = r["macs"] / unfused_macs
        rows.append(("MACs", f"{unfused_macs:,}", f"{r['macs']:,}", f"F = {f:.3f}"))
    if len(rows) > 1:
        lines += ["", *_table(rows, right=(1, 2)).splitlines()]
    predicted = predicted_cycles(r, plan)
    if r["arena"] is None:      # a release build: no painting
        measured_arena, arena = "-", "not measured: release build (pio test measures it)"
        measured_ram = "-"
    else:
        measured_arena, measured_ram = f"{r['arena']:,} B", f"{r['ram']:,} B"
        arena = "equal" if r["arena"] == r["arena_pred"] else \
            f"DIFFERENT ({r['arena'] - r['arena_pred']:+,} B)"
    rows = [("", "predicted", "measured", ""),
            ("arena", f"{r['arena_pred']:,} B", measured_arena, arena),
            ("stack", "-", f"{r['stack']:,} B", "high-water, painted at start-up"),
            ("arena + stack", "-", measured_ram, "what the model's run used")]
    if plan.get("io_bytes") is not None:
        rows.append(("I/O buffers", f"{plan['io_bytes']:,} B", "", "the caller's, apart"))
    if static_ram:
        rows.append(("static RAM", "", f"{static_ram:,} B", "PlatformIO's: all .data + .bss"))
    rows.append(("latency", _ms(predicted, hz) if predicted else "-", _ms(r["cycles"], hz),
                 f"{r['cycles'] / predicted - 1:+.1%}" if predicted else ""))
    rows.append(("output CRC", r["crc_ref"], r["crc"],
                 "bit-exact" if crc_ok(r, plan) else "MISMATCH"))
    lines += ["", *_table(rows, right=(1, 2)).splitlines(), ""]
    notes = []
    if unfused_macs and r["macs"] > unfused_macs:
        notes.append(f"F = MACs of this plan / MACs of the unfused model: "
                     f"{(r['macs'] / unfused_macs - 1) * 100:.1f}% more multiply-accumulates, "
                     "recomputed where tiles overlap.")
    if static_ram:
        notes.append("PlatformIO's static RAM counts all .data and .bss: the arena, the I/O "
                     "buffers, the stack region the linker reserves and the framework's data.")
    notes.append(f"Latency at {hz / 1e6:g} MHz from the {r['clock']} counter"
                 + (" (QEMU -icount: one cycle per instruction)" if r["board"].startswith("qemu")
                    else "") + ("; predicted by the board's calibrated cost model."
                                if predicted else "."))
    lines += [textwrap.fill(n, 96, subsequent_indent="  ") for n in notes]
    edges = r.get("edge_cycles")
    if edges:
        blocks = plan.get("blocks") or []
        rows = [("edge", "layers", "scheme", "predicted", "measured", "error")]
        for k, measured in enumerate(edges):
            b = blocks[k] if k < len(blocks) else {}
            pred = b.get("predicted_cycles")
            scheme = " ".join([b.get("scheme", "?")] + [f"{k}={b[k]}" for k in ("g", "tile_rows")
                                                        if k in b]).replace("tile_rows", "t")
            rows.append((str(k), b.get("layers", "?"), scheme,
                         f"{pred:,}" if pred else "-",
                         "-" if measured is None else f"{measured:,}",
                         f"{measured / pred - 1:+.1%}" if pred and measured is not None else ""))
        lines += ["", "cycles per edge:", *_table(rows, right=(0, 3, 4, 5)).splitlines()]
    return "\n".join(lines)


def export_rows(records, plan) -> list[dict]:
    """The records, each with its verdict ('ok' or the problems)."""
    return [{**r, "verdict": "; ".join(problems(r, plan)) or "ok"} for r in records]


def write_json(records: list[dict], path, plan: dict | None = None) -> None:
    """The records and each one's verdict ('ok' or the problems) as a JSON list."""
    Path(path).write_text(json.dumps(export_rows(records, plan), indent=2) + "\n")


def write_csv(records: list[dict], path, plan: dict | None = None) -> None:
    """The records and each one's verdict as CSV, one row per result."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*FIELDS, "verdict"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows({k: "-" if v is None else v for k, v in row.items()}
                         for row in export_rows(records, plan))


def read_json(path) -> list[dict]:
    """Records written by write_json."""
    return json.loads(Path(path).read_text())


def read_csv(path) -> list[dict]:
    """Records written by write_csv, with typed values again."""
    with open(path, newline="") as f:
        return [{**{k: FIELDS[k](row[k]) for k in FIELDS}, "verdict": row["verdict"]}
                for row in csv.DictReader(f)]

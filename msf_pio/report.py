"""`msf-pio report MODEL`: what fusion buys and where RAM and time go, edge by edge.

The chosen plan beside the unfused one (peak RAM, MACs and the overhead F, predicted latency,
weights in flash), a table of the plan's edges (layers, cache scheme, RAM, MACs, weight bytes,
predicted cycles on a calibrated board) and pictures: the memory timeline of both plans over
the layers, and the Pareto frontier of peak RAM against predicted latency with the chosen plan
marked, in an HTML page beside them.
"""
from __future__ import annotations

import csv
import html
import json
import textwrap
from pathlib import Path

import numpy as np

from . import progress
from .codegen.arena import compaction_instructions
from .codegen.generate import weight_bytes
from .errors import MsfError
from .text import printable
from .fusion import kernel_counts, latency, schemes, solvers
from .fusion.graph import FusionGraph
from .fusion.plan import Plan
from .fusion.report import table

PICTURES = ("memory.png", "frontier.png")
# the report's colours: the unfused plan, the chosen one, the frontier
UNFUSED, CHOSEN, FRONTIER = "#7f7f7f", "#d62728", "#1f77b4"


def edge_rows(plan: Plan, model, coefficients: dict | None) -> list[dict]:
    """One row per edge of `plan`: its layers, scheme, RAM, MACs, weight bytes, cycles (the
    arena's compaction before the edge included, as in the build's prediction)."""
    moves = ([0.0] * len(plan.blocks) if coefficients is None
             else compaction_instructions(model, plan, coefficients))
    rows = []
    for k, e in enumerate(plan.blocks):
        labels = plan.layer_labels
        rows.append({
            "edge": k, "first": e.first, "last": e.last,
            "layers": labels[e.first] if e.first == e.last else
            f"{labels[e.first]}..{labels[e.last]}",
            "names": plan.layer_names[e.first:e.last + 1],
            "scheme": schemes.label(e), "ram_bytes": e.ram, "macs": e.macs,
            "weight_bytes": sum(weight_bytes(model.layers[i]) for i in range(e.first, e.last + 1)),
            "predicted_cycles": None if coefficients is None else
            int(round(latency.edge_instructions(model, e, coefficients) + moves[k])),
            "compaction_cycles": int(round(moves[k]))})
    return rows


def _totals(plan: Plan, rows: list[dict]) -> dict:
    cycles = [r["predicted_cycles"] for r in rows]
    return {"label": plan.label, "peak_ram_bytes": plan.peak_ram, "macs": plan.macs,
            "overhead": round(plan.overhead, 6), "edges": len(rows),
            "fusion_blocks": sum(1 for r in rows if r["first"] < r["last"]),
            "weight_bytes": sum(r["weight_bytes"] for r in rows),
            "predicted_cycles": None if None in cycles else sum(cycles),
            "compaction_cycles": sum(r["compaction_cycles"] for r in rows)}


def build(graph: FusionGraph, plan: Plan, board: str | None, frontier: bool = True) -> dict:
    """The report's figures as one JSON-able dict; `frontier`: the (peak RAM, predicted
    cycles) Pareto frontier too (it predicts every edge of the graph: the slow part)."""
    model = graph.model
    if not plan.feasible:
        raise MsfError(f"no plan to report: {plan.reason}", source=f"model {model.name}")
    coefficients = latency.profile(board) if board else None
    unfused = solvers.vanilla(graph)
    rows = edge_rows(plan, model, coefficients)
    unfused_rows = edge_rows(unfused, model, coefficients)
    report = {
        "model": model.name, "cost_model": plan.cost_model, "objective": plan.objective,
        "board": board, "f_cpu": latency.f_cpu(board) if board else None,
        "io_bytes": plan.io_bytes, "input": "stream" if plan.stream_input else "buffer",
        "output": "stream" if plan.stream_output else "buffer",
        "unfused": {**_totals(unfused, unfused_rows), "layers": unfused_rows},
        "plan": {**_totals(plan, rows), "max_overhead": plan.to_json()["max_overhead"],
                 "ram_limit": plan.to_json()["ram_limit"]},
        "edges": rows,
        # the specialised kernels' code against their budget (fusion/kernel_counts.choose;
        # the whole code estimate needs the generated C: the build's summary, plan.json)
        "code_budget": {"bytes": kernel_counts.code_budget(model),
                        "used": kernel_counts.budget_used(model),
                        "shapes": len(kernel_counts.choose(model))}}
    if frontier and board:
        cost = [int(round(c)) for c in solvers.edge_cycles(graph, board)]
        index = {id(e): k for k, e in enumerate(graph.edges)}
        plans = solvers.pareto(graph, np.array(cost, dtype=np.int64))
        report["frontier"] = [{"peak_ram_bytes": p.peak_ram, "macs": p.macs,
                               "predicted_cycles": sum(cost[index[id(e)]] for e in p.blocks)}
                              for p in plans]
    return report


def _ms(report: dict, cycles: int | None) -> str:
    if cycles is None:
        return "-"
    if report["f_cpu"]:
        return f"{cycles * 1000 / report['f_cpu']:,.1f} ms"
    return f"{cycles:,} cycles"


def _fastest_within(report: dict, ram: int) -> dict | None:
    """The frontier's fastest plan whose peak RAM is at most `ram`."""
    points = [f for f in report.get("frontier", ()) if f["peak_ram_bytes"] <= ram]
    return min(points, key=lambda f: f["predicted_cycles"], default=None)


def render(report: dict) -> str:
    """The report as text: the plan against the unfused one, then the edge table."""
    u, p = report["unfused"], report["plan"]
    where = f" on {report['board']}" if report["board"] else ""
    lines = [f"{printable(report['model'])}: plan {p['label']} ({report['objective']}, "
             f"{report['cost_model']} cost model){where}", ""]
    ratio = u["peak_ram_bytes"] / p["peak_ram_bytes"] if p["peak_ram_bytes"] else 1.0
    cmp = [("", "unfused", "this plan", ""),
           ("peak RAM (arena)", f"{u['peak_ram_bytes']:,} B", f"{p['peak_ram_bytes']:,} B",
            f"{ratio:.1f}x less" if ratio > 1 else "")]
    cmp.append(("MACs", f"{u['macs']:,}", f"{p['macs']:,}", f"F = {p['overhead']:.3f}"))
    if p["predicted_cycles"] is not None:
        change = p["predicted_cycles"] / u["predicted_cycles"] - 1 if u["predicted_cycles"] else 0
        cmp.append(("predicted latency", _ms(report, u["predicted_cycles"]),
                    _ms(report, p["predicted_cycles"]), f"{change:+.0%}"))
    cmp.append(("weights (flash)", f"{u['weight_bytes']:,} B", f"{p['weight_bytes']:,} B", ""))
    code = report["code_budget"]
    budget = "no limit" if code["bytes"] is None else f"{code['bytes']:,} B"
    cmp.append(("specialised kernels (code)", "", f"{code['used']:,} B",
                f"{code['shapes']} shapes, budget {budget}"))
    cmp.append(("edges", f"{u['edges']}", f"{p['edges']} ({p['fusion_blocks']} fused)", ""))
    lines += table(cmp, right=(1, 2))
    notes = [f"F = the plan's MACs / the unfused model's: {p['overhead']:.3f} is "
             f"{(p['overhead'] - 1) * 100:.1f}% more multiply-accumulates, spent recomputing "
             "what overlapping tiles share." if p["overhead"] > 1 else
             "F = 1: no MAC is computed twice.",
             f"The caller's input and output buffers ({report['io_bytes']:,} B; input "
             f"{report['input']}, output {report['output']}) are apart from the arena."]
    if report["board"]:
        notes.append(f"Latency: cycles predicted by {report['board']}'s calibrated profile"
                     + (f" at {report['f_cpu'] / 1e6:g} MHz" if report["f_cpu"] else "")
                     + "; under QEMU a cycle is an instruction.")
    if p["compaction_cycles"]:
        notes.append(f"The plan's predicted latency includes {p['compaction_cycles']:,} cycles of "
                     "arena compaction (memmoves between edges), which the frontier's plans "
                     "leave out: it depends on the whole path, not on an edge.")
    faster = _fastest_within(report, p["peak_ram_bytes"])
    if faster and faster["predicted_cycles"] < 0.99 * (p["predicted_cycles"]
                                                       - p["compaction_cycles"]):
        notes.append(f"Within the same {p['peak_ram_bytes']:,} B the fastest plan predicts "
                     f"{_ms(report, faster['predicted_cycles'])} (objective min_latency, "
                     f"ram_limit {p['peak_ram_bytes']}).")
    lines += [""] + [textwrap.fill(n, 96, subsequent_indent="  ") for n in notes] + [""]
    cells = [("edge", "layers", "scheme", "RAM B", "MACs", "weights B", "pred. cycles")]
    for r in report["edges"]:
        cells.append((str(r["edge"]), r["layers"], r["scheme"], f"{r['ram_bytes']:,}",
                      f"{r['macs']:,}", f"{r['weight_bytes']:,}",
                      "-" if r["predicted_cycles"] is None else f"{r['predicted_cycles']:,}"))
    lines += table(cells, right=(0, 3, 4, 5, 6))
    return "\n".join(lines)


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MsfError("pictures need matplotlib (pip install 'msf-pio[plot]')") from None
    return plt


def _log_axis(axis) -> None:
    """A log axis labelled in plain numbers (5, 10, 20, 50 ...), not powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda _v, _pos: ""))


def _legend_below(ax, ncol: int) -> None:
    """Legends go under the axes, where they cannot cover a curve."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=ncol, frameon=False)


def _save(fig, path) -> None:
    fig.savefig(path, dpi=120, bbox_inches="tight")
    _pyplot().close(fig)


def plot_memory(report: dict, path) -> None:
    _save(memory_figure(report), path)


def plot_frontier(report: dict, path) -> None:
    _save(frontier_figure(report), path)


def memory_figure(report: dict):
    """Arena bytes while each layer runs: the unfused plan layer by layer, the chosen plan's
    blocks (a block holds its peak over all its layers), on a log scale."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    layers = report["unfused"]["layers"]
    n = len(layers)
    xs = list(range(n + 1))
    unfused = [r["ram_bytes"] / 1000 for r in layers]
    ax.step(xs, unfused + unfused[-1:], where="post", color=UNFUSED, lw=1.5,
            label=f"unfused: peak {report['unfused']['peak_ram_bytes'] / 1000:,.1f} kB")
    plan = [0.0] * n
    for r in report["edges"]:
        for i in range(r["first"], r["last"] + 1):
            plan[i] = r["ram_bytes"] / 1000
        if r["first"] < r["last"]:
            ax.axvspan(r["first"], r["last"] + 1, color=CHOSEN, alpha=0.06 + 0.06 * (r["edge"] % 2),
                       lw=0)
    ax.step(xs, plan + plan[-1:], where="post", color=CHOSEN, lw=2,
            label=f"plan {report['plan']['label']}: peak "
                  f"{report['plan']['peak_ram_bytes'] / 1000:,.1f} kB (shaded: fusion blocks)")
    ax.set_yscale("log")
    _log_axis(ax.yaxis)
    ax.set_xlim(0, n)
    ax.set_xlabel("layer (execution order)")
    ax.set_ylabel("arena in use (kB, log scale)")
    ax.set_title(f"{printable(report['model'])}: RAM while each layer runs")
    ax.grid(True, which="both", alpha=0.25)
    _legend_below(ax, 1)
    return fig


def frontier_figure(report: dict):
    """Peak RAM against predicted latency: the frontier of plans no other beats on both, the
    unfused plan and the chosen one."""
    plt = _pyplot()
    unit = 1000 / report["f_cpu"] if report["f_cpu"] else 1.0
    fig, ax = plt.subplots(figsize=(8, 4.2))
    pts = report["frontier"]
    ax.step([p["peak_ram_bytes"] / 1000 for p in pts], [p["predicted_cycles"] * unit for p in pts],
            where="post", color=FRONTIER, marker="o", ms=3, lw=1.2,
            label=f"Pareto frontier ({len(pts)} plans)")
    for key, colour, marker, name in (("unfused", UNFUSED, "s", "unfused"),
                                      ("plan", CHOSEN, "*", f"chosen {report['plan']['label']}")):
        p = report[key]
        ax.plot([p["peak_ram_bytes"] / 1000], [p["predicted_cycles"] * unit], marker=marker,
                color=colour, ms=14 if marker == "*" else 9, ls="none",
                label=f"{name}: {p['peak_ram_bytes'] / 1000:,.1f} kB, "
                      f"{_ms(report, p['predicted_cycles'])}")
    rams = [p["peak_ram_bytes"] for p in pts] + [report["unfused"]["peak_ram_bytes"]]
    wide = max(rams) > 4 * min(rams)           # a log axis only over a wide range
    if wide:
        ax.set_xscale("log")
        _log_axis(ax.xaxis)
    ax.set_xlabel("peak RAM: arena (kB" + (", log scale)" if wide else ")"))
    ax.set_ylabel("predicted latency (ms)" if report["f_cpu"] else "predicted cycles")
    ax.set_title(f"{printable(report['model'])} on {report['board']}: "
                 "RAM against predicted latency")
    ax.grid(True, which="both", alpha=0.25)
    _legend_below(ax, 2)
    return fig


def edges_figure(record: dict, plan: dict | None):
    """A profiled run's cycles per edge (custom_msf_profile = yes) beside the predicted ones."""
    plt = _pyplot()
    measured = record.get("edge_cycles")
    if not measured:
        raise MsfError("no MSF edge= lines before the result: build with custom_msf_profile = yes")
    blocks = (plan or {}).get("blocks") or []
    n = len(measured)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * n + 2), 4.2))
    xs = np.arange(n)
    predicted = [b.get("predicted_cycles") for b in blocks[:n]]
    if predicted and all(predicted) and len(predicted) == n:
        ax.bar(xs - 0.2, [c / 1e6 for c in predicted], 0.4, color=FRONTIER, alpha=0.5,
               label="predicted")
        ax.bar(xs + 0.2, [(c or 0) / 1e6 for c in measured], 0.4, color=CHOSEN, label="measured")
    else:
        ax.bar(xs, [(c or 0) / 1e6 for c in measured], 0.6, color=CHOSEN, label="measured")
    ax.set_xticks(xs)
    ax.set_xticklabels([b.get("layers", str(k)) for k, b in enumerate(blocks[:n])]
                       if len(blocks) >= n else [str(k) for k in range(n)],
                       rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("cycles (millions)")
    ax.set_title(f"{record['model']} {record['plan']} on {record['board']}: cycles per edge")
    ax.grid(True, axis="y", alpha=0.25)
    _legend_below(ax, 2)
    ax.get_legend().set_bbox_to_anchor((0.5, -0.35))
    return fig


def plot_edges(record: dict, plan: dict | None, path) -> None:
    _save(edges_figure(record, plan), path)


def write_csv(report: dict, path) -> None:
    keys = ("edge", "first", "last", "layers", "scheme", "ram_bytes", "macs", "weight_bytes",
            "predicted_cycles")
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(report["edges"])


def write_html(report: dict, path, pictures: list[str]) -> None:
    images = "".join(f'<p><img src="{html.escape(p)}" alt="{html.escape(p)}"></p>'
                     for p in pictures)
    Path(path).write_text(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(report['model'])}: msf-pio report</title></head>\n<body>\n"
        f"<pre>{html.escape(render(report))}</pre>\n{images}\n</body></html>\n")


def write(report: dict, directory) -> list[Path]:
    """The report's files in `directory`: report.html, edges.csv, report.json and the
    pictures (when matplotlib is there); returns them."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    with progress.task("report: pictures", total=2, ticking=True) as step:
        plot_memory(report, directory / PICTURES[0])
        written.append(directory / PICTURES[0])
        step.advance()
        if report.get("frontier"):
            plot_frontier(report, directory / PICTURES[1])
            written.append(directory / PICTURES[1])
        step.advance()
    write_csv(report, directory / "edges.csv")
    (directory / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    write_html(report, directory / "report.html", [p.name for p in written])
    return written + [directory / n for n in ("edges.csv", "report.json", "report.html")]

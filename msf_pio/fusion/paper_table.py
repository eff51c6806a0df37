"""The paper's Table 1 recomputed with the `paper` cost model, beside the published values."""
from __future__ import annotations


import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import yaml

from ..model import load_model
from . import solvers
from .graph import build_graph

TABLE_FILE = Path(__file__).with_name("paper_table1.yaml")
MODELS = ("mbv2-w0.35", "mn2-vww5", "mn2-320k")


def published(path: Path = TABLE_FILE) -> dict:
    return yaml.safe_load(path.read_text())["table1_analytic"]


def table_f(overhead: float) -> float:
    """F as the paper prints it: rounded half-up to 4 decimals, then to 3 (e.g. 1.67948 -> 1.680)."""
    four = Decimal(repr(overhead)).quantize(Decimal("0.0001"), ROUND_HALF_UP)
    return float(four.quantize(Decimal("0.001"), ROUND_HALF_UP))


def row_objective(row: str) -> tuple[str, dict]:
    """'p1_fmax_1.3' -> ('min_ram', {'max_overhead': 1.3}); 'p2_pmax_64kB' -> P2 at 64000 B."""
    if row.startswith("p1_fmax_"):
        return "min_ram", {"max_overhead": float(row[len("p1_fmax_"):])}
    if row.startswith("p2_pmax_"):
        return "min_macs", {"ram_limit": int(row[len("p2_pmax_"):-len("kB")]) * 1000}
    return row, {}


def compute(rows=None) -> dict:
    """Every cell: ours [kB, F] (None = no plan) beside the paper's, and solver wall times."""
    paper = published()
    rows = rows or list(paper)
    cells, times = [], {}
    for name in MODELS:
        start = time.perf_counter()
        graph = build_graph(load_model(f"{name}-paper"), "paper")
        for row in rows:
            objective, opts = row_objective(row)
            plan = solvers.solve(graph, objective, **opts)
            ours = [round(plan.peak_ram / 1000, 3), table_f(plan.overhead)] if plan.feasible else None
            theirs = paper[row][name]
            diff = None if ours is None or theirs is None else \
                [round(ours[0] - theirs[0], 3), round(ours[1] - theirs[1], 3)]
            cells.append({"row": row, "model": name, "ours": ours, "paper": theirs, "diff": diff,
                          "match": ours == theirs, "peak_ram_bytes": plan.peak_ram if plan.feasible
                          else None, "macs": plan.macs if plan.feasible else None})
        times[name] = time.perf_counter() - start
    return {"cells": cells, "solver_seconds": times,
            "all_match": all(c["match"] for c in cells)}


def _fmt(cell) -> str:
    return "-" if cell is None else f"{cell[0]:.3f} kB F={cell[1]:.3f}"


def render(result: dict) -> str:
    lines = [f"{'row':15s} {'model':11s} {'ours':>22s} {'paper':>22s}  diff"]
    for c in result["cells"]:
        diff = "=" if c["match"] else (f"{c['diff'][0]:+.3f} kB {c['diff'][1]:+.3f}"
                                       if c["diff"] else "MISMATCH")
        lines.append(f"{c['row']:15s} {c['model']:11s} {_fmt(c['ours']):>22s} "
                     f"{_fmt(c['paper']):>22s}  {diff}")
    n_ok = sum(c["match"] for c in result["cells"])
    total = sum(result["solver_seconds"].values())
    per = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in result["solver_seconds"].items())
    lines.append(f"{n_ok}/{len(result['cells'])} cells match the paper; "
                 f"graph + all solves: {per} (total {total:.3f} s)")
    return "\n".join(lines)




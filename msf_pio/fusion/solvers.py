"""Paths through the fusion graph: vanilla, heuristic, P1, P2 and the RAM/MAC Pareto frontier.

The central primitive is the min-MAC path using only edges whose RAM is at most a threshold T
(ties: smaller peak RAM). P1 finds the smallest T whose min-MAC path has F <= Fmax (feasibility is
monotone in T); P2 is that path at T = Pmax; the frontier is every T where the min MACs drop.
"""
from __future__ import annotations

import math

import numpy as np

from .. import progress
from ..errors import MsfError
from .edge import Edge
from .graph import FusionGraph
from .plan import Plan

_INF = np.iinfo(np.int64).max // 4


def min_mac_path(graph: FusionGraph, ram_limit: float, cost=None) -> list[Edge] | None:
    """Min-MAC path with every edge's RAM <= ram_limit; among equal MACs the smaller peak.
    `cost` (one number per edge) replaces the MACs: min_latency passes predicted instructions."""
    best: list[tuple[int, int] | None] = [None] * graph.n_nodes
    parent: list[int] = [-1] * graph.n_nodes
    best[0] = (0, 0)
    for v in range(1, graph.n_nodes):
        for k in graph.incoming[v]:
            e = graph.edges[k]
            b = best[e.src]
            if b is None or e.ram > ram_limit:
                continue
            cand = (b[0] + (e.macs if cost is None else cost[k]), max(b[1], e.ram))
            if best[v] is None or cand < best[v]:
                best[v], parent[v] = cand, k
    if best[-1] is None:
        return None
    path, v = [], graph.output_node
    while v:
        e = graph.edges[parent[v]]
        path.append(e)
        v = e.src
    return path[::-1]


def min_macs_by_threshold(graph: FusionGraph, thresholds: np.ndarray,
                          cost: np.ndarray | None = None) -> np.ndarray:
    """Min path MACs (or `cost`, one integer per edge) for every RAM threshold at once
    (vectorized over thresholds)."""
    cost = graph.macs if cost is None else cost
    best = np.full((graph.n_nodes, len(thresholds)), _INF, dtype=np.int64)
    best[0] = 0
    for v in range(1, graph.n_nodes):
        row = best[v]
        for k in graph.incoming[v]:
            cand = best[graph.src[k]] + cost[k]
            cand[thresholds < graph.ram[k]] = _INF
            np.minimum(row, cand, out=row)
    return np.minimum(best[-1], _INF)


def _plan(graph: FusionGraph, path: list[Edge] | None, objective: str, **opts) -> Plan:
    return Plan.from_path(graph, path, objective, **opts)


def vanilla(graph: FusionGraph) -> Plan:
    path = [graph.single_edge(i) for i in range(graph.model.n_layers)]
    return _plan(graph, path, "vanilla")


def heuristic(graph: FusionGraph) -> Plan:
    """MCUNetV2-like: fuse only the head (any block from the input), then single layers."""
    singles = [graph.single_edge(i) for i in range(graph.model.n_layers)]
    # suffix_peak[j] = peak RAM of the single layers j..end
    suffix_peak = [0] * (len(singles) + 1)
    for j in range(len(singles) - 1, -1, -1):
        suffix_peak[j] = max(singles[j].ram, suffix_peak[j + 1])
    suffix_macs = np.concatenate([np.cumsum([e.macs for e in singles][::-1])[::-1], [0]])
    best = None
    for e in graph.edges:
        if e.src != 0:
            continue
        key = (max(e.ram, suffix_peak[e.dst]), e.macs + int(suffix_macs[e.dst]))
        if best is None or key < best[0]:
            best = (key, [e] + singles[e.dst:])
    return _plan(graph, best[1], "heuristic")


def p1_min_ram(graph: FusionGraph, max_overhead: float = math.inf) -> Plan:
    """P1: least peak RAM subject to F <= Fmax."""
    thresholds = np.unique(graph.ram)
    macs = min_macs_by_threshold(graph, thresholds)
    overhead = macs / graph.unfused_macs if graph.unfused_macs else np.ones_like(macs)
    ok = (macs < _INF) & (overhead <= max_overhead)   # a MAC-free model: F = 1, as Plan says
    if not ok.any():
        return _plan(graph, None, "min_ram", max_overhead=max_overhead)
    t = thresholds[int(np.argmax(ok))]
    return _plan(graph, min_mac_path(graph, t), "min_ram", max_overhead=max_overhead)


def p2_min_macs(graph: FusionGraph, ram_limit: float) -> Plan:
    """P2: fewest MACs subject to peak RAM <= Pmax."""
    return _plan(graph, min_mac_path(graph, ram_limit), "min_macs", ram_limit=ram_limit)


def pareto(graph: FusionGraph, cost: np.ndarray | None = None) -> list[Plan]:
    """Every non-dominated (peak RAM, MACs) plan, by increasing peak RAM; with `cost` (one
    integer per edge, e.g. predicted cycles) the (peak RAM, cost) frontier instead."""
    thresholds = np.unique(graph.ram)
    macs = min_macs_by_threshold(graph, thresholds, cost)
    plans, last = [], _INF
    with progress.task("Pareto frontier: plans") as step:
        for t, m in zip(thresholds, macs):
            if m < last:
                plans.append(_plan(graph, min_mac_path(graph, t, cost), "pareto"))
                last = m
                step.advance()
    return plans


def edge_cycles(graph: FusionGraph, board: str) -> list[float]:
    """The predicted cycles of every edge on `board` (latency.py's profile)."""
    from . import latency
    coefficients = latency.profile(board)
    cost = []
    with progress.task(f"predicting {board} cycles of edges", total=len(graph.edges)) as step:
        for e in graph.edges:
            cost.append(latency.edge_instructions(graph.model, e, coefficients))
            step.advance()
    return cost


def min_latency(graph: FusionGraph, ram_limit: float, board: str | None) -> Plan:
    """Least predicted time (latency.py's profile of `board`) with peak RAM <= ram_limit."""
    if board is None:
        raise MsfError("the min_latency objective needs a board (--board)")
    cost = edge_cycles(graph, board)
    return _plan(graph, min_mac_path(graph, ram_limit, cost), "min_latency", ram_limit=ram_limit)


OBJECTIVES = ("vanilla", "heuristic", "min_ram", "min_macs", "min_latency")


def solve(graph: FusionGraph, objective: str, max_overhead: float = math.inf,
          ram_limit: float | None = None, board: str | None = None) -> Plan:
    """Dispatch on the objective names of the CLI and platformio.ini; with a calibrated
    `board` the plan carries its predicted latency."""
    if objective == "vanilla":
        plan = vanilla(graph)
    elif objective == "heuristic":
        plan = heuristic(graph)
    elif objective == "min_ram":
        plan = p1_min_ram(graph, max_overhead)
    elif objective == "min_macs":
        plan = p2_min_macs(graph, math.inf if ram_limit is None else ram_limit)
    elif objective == "min_latency":
        plan = min_latency(graph, math.inf if ram_limit is None else ram_limit, board)
    else:
        raise ValueError(objective)
    plan.ram_limit = ram_limit
    if plan.feasible and ram_limit is not None and plan.peak_ram > ram_limit:
        plan.mark_infeasible(f"peak RAM {plan.peak_ram} B exceeds the limit {int(ram_limit)} B")
    if board is not None and board in latency_boards():
        plan.predict_latency(graph.model, board)
    return plan


def latency_boards() -> list[str]:
    from . import latency
    return latency.boards()

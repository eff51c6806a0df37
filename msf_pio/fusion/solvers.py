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
from .bounds import ram_cap
from .edge import Edge
from .graph import FusionGraph
from .plan import Plan

_INF = np.iinfo(np.int64).max // 4


def _least_cost(graph: FusionGraph, ram_limit: float, cost: np.ndarray | None = None,
                parents: bool = False):
    """Node by node (tensor indices are topological), the least cost of a path from the input
    using edges of RAM <= ram_limit, among equal costs the least peak RAM, then the first edge
    in the graph's order. Returns the least cost at the output (None if unreachable), and with
    `parents` the edge entering every node on its best path."""
    cost = graph.macs if cost is None else cost
    inf = _INF if cost.dtype.kind in "iu" else np.inf     # floats, Python integers: inf
    best = np.full(graph.n_nodes, inf, dtype=cost.dtype)
    peak = np.zeros(graph.n_nodes, dtype=np.int64)
    parent = np.full(graph.n_nodes, -1, dtype=np.int64)
    best[0] = 0
    usable = graph.ram <= ram_limit
    bounds, src, ram = graph.bounds, graph.src, graph.ram
    for v in range(1, graph.n_nodes):
        lo, hi = bounds[v], bounds[v + 1]
        s = src[lo:hi]
        ok = usable[lo:hi] & (best[s] < inf)
        if not ok.any():
            continue
        c = best[s] + cost[lo:hi]      # an unreachable source's inf stays far from overflow
        c[~ok] = inf
        least = c.min()
        if parents:
            p = np.where(c == least, np.maximum(peak[s], ram[lo:hi]), _INF)
            k = int(p.argmin())
            peak[v], parent[v] = p[k], lo + k
        best[v] = least
    out = best[-1] if best[-1] < inf else None
    return (out, parent) if parents else out


def min_mac_path(graph: FusionGraph, ram_limit: float, cost=None) -> list[Edge] | None:
    """Min-MAC path with every edge's RAM <= ram_limit; among equal MACs the smaller peak.
    `cost` (one number per edge) replaces the MACs: min_latency passes predicted instructions."""
    cost = None if cost is None else np.asarray(cost)
    least, parent = _least_cost(graph, ram_limit, cost, parents=True)
    if least is None:
        return None
    path, v = [], graph.output_node
    while v:
        e = graph.edges[parent[v]]
        path.append(e)
        v = e.src
    return path[::-1]


def frontier(graph: FusionGraph, cost: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every non-dominated (peak RAM, MACs) of the paths from the input to the output, by
    increasing peak (`cost`, one integer per edge, replaces the MACs): node by node, the Pareto
    set of the paths reaching it, each extended by the node's incoming edges (peak: the larger,
    MACs: the sum), the dominated ones dropped."""
    peaks: list = [None] * graph.n_nodes
    macs: list = [None] * graph.n_nodes
    peaks[0], macs[0] = np.zeros(1, np.int64), np.zeros(1, np.int64)
    bounds, src, ram = graph.bounds, graph.src, graph.ram
    cost = graph.macs if cost is None else np.asarray(cost, dtype=np.int64)
    for v in range(1, graph.n_nodes):
        parts_p, parts_m = [], []
        lo, hi = bounds[v], bounds[v + 1]
        # the edges into v by source (they are sorted so): one outer sum per source
        cuts = lo + np.flatnonzero(np.diff(src[lo:hi])) + 1
        for a, b in zip(np.r_[lo, cuts], np.r_[cuts, hi]):
            u = src[a]
            if peaks[u] is None:
                continue
            parts_p.append(np.maximum(peaks[u][None, :], ram[a:b, None]).ravel())
            parts_m.append((macs[u][None, :] + cost[a:b, None]).ravel())
        if not parts_p:
            continue
        p, m = np.concatenate(parts_p), np.concatenate(parts_m)
        order = np.lexsort((m, p))
        p, m = p[order], m[order]
        keep = m < np.minimum.accumulate(np.r_[_INF, m[:-1]])   # fewer MACs than any smaller
        peaks[v], macs[v] = p[keep], m[keep]
    if peaks[-1] is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return peaks[-1], macs[-1]


def _plan(graph: FusionGraph, path: list[Edge] | None, objective: str, **opts) -> Plan:
    return Plan.from_path(graph, path, objective, **opts)


def vanilla(graph: FusionGraph) -> Plan:
    path = [graph.single_edge(i) for i in range(graph.model.n_layers)]
    return _plan(graph, path, "vanilla")


def heuristic(graph: FusionGraph) -> Plan:
    """MCUNetV2-like: fuse only the head (any block from the input), then single layers."""
    graph = graph.covering(ram_cap(graph, "heuristic"))
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
    """P1: least peak RAM subject to F <= Fmax: the least RAM threshold whose min-MAC path has
    F <= Fmax (the min MACs only fall as the threshold grows: a binary search)."""
    graph = graph.covering(ram_cap(graph, "min_ram"))
    thresholds = np.unique(graph.ram)

    def ok(i: int) -> bool:
        macs = _least_cost(graph, thresholds[i])
        # a MAC-free model: F = 1, as Plan says
        return macs is not None and (macs / graph.unfused_macs if graph.unfused_macs
                                     else 1.0) <= max_overhead

    if not len(thresholds) or not ok(len(thresholds) - 1):
        return _plan(graph, None, "min_ram", max_overhead=max_overhead)
    lo, hi = 0, len(thresholds) - 1          # ok(hi); the answer is the first ok index
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return _plan(graph, min_mac_path(graph, thresholds[lo]), "min_ram",
                 max_overhead=max_overhead)


def p2_min_macs(graph: FusionGraph, ram_limit: float) -> Plan:
    """P2: fewest MACs subject to peak RAM <= Pmax."""
    graph = graph.covering(ram_cap(graph, "min_macs", ram_limit))
    return _plan(graph, min_mac_path(graph, ram_limit), "min_macs", ram_limit=ram_limit)


def pareto(graph: FusionGraph, cost: np.ndarray | None = None) -> list[Plan]:
    """Every non-dominated (peak RAM, MACs) plan, by increasing peak RAM; with `cost` (one
    integer per edge of `graph`, e.g. predicted cycles) the (peak RAM, cost) frontier instead
    (then `graph` must hold every block: the cost is not bounded by MACs)."""
    if cost is None:
        graph = graph.covering(ram_cap(graph, "pareto"))
    peaks, _ = frontier(graph, cost)
    plans = []
    with progress.task("Pareto frontier: plans", total=len(peaks)) as step:
        for t in peaks:
            plans.append(_plan(graph, min_mac_path(graph, t, cost), "pareto"))
            step.advance()
    return plans


def edge_cycles(graph: FusionGraph, board: str) -> np.ndarray:
    """The predicted cycles of every edge on `board` (latency.py's profile)."""
    from . import latency
    with progress.task(f"predicting {board} cycles of edges", total=len(graph.edges)) as step:
        return latency.edges_instructions(graph.model, graph.edges, latency.profile(board),
                                          step)


def exact_cycles(graph: FusionGraph, board: str) -> np.ndarray:
    """edge_cycles exactly, in one unit for every edge (latency.edges_exact: Python integers)."""
    from . import latency
    with progress.task(f"predicting {board} cycles of edges", total=len(graph.edges)) as step:
        return latency.edges_exact(graph.model, graph.edges, latency.profile(board), step)


def min_latency(graph: FusionGraph, ram_limit: float, board: str | None) -> Plan:
    """Least predicted time (latency.py's profile of `board`) with peak RAM <= ram_limit;
    among plans of equal time (exactly: exact_cycles) the least peak RAM."""
    if board is None:
        raise MsfError("the min_latency objective needs a board (--board)")
    graph = graph.covering(ram_cap(graph, "min_latency", ram_limit))
    cost = exact_cycles(graph, board)
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

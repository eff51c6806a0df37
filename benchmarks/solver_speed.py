"""Solver speed: the paper's Table 1 (all 39 cells) and Pareto frontiers, wall time per step.

Targets (issue 3): Table 1 well under 2 s; the Pareto frontier of mn2-320k-paper under 1 s.
Run: python benchmarks/solver_speed.py
"""
import time

from msf_pio.fusion import paper_table, solvers
from msf_pio.fusion.graph import build_graph, forget
from msf_pio.model import load_model


def best_of(fn, repeat=5):
    times = []
    for _ in range(repeat):
        forget()                      # each build from scratch, not the graph kept before
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main():
    t, result = best_of(paper_table.compute)
    print(f"paper-table1: {len(result['cells'])} cells, all match: {result['all_match']}, "
          f"{t:.3f} s (target < 2 s, ratio {t / 2:.2f})")
    for cost_model in ("paper", "exact"):
        model = load_model("mn2-320k-paper")
        tb, graph = best_of(lambda: build_graph(model, cost_model))
        tp, plans = best_of(lambda: solvers.pareto(graph))
        print(f"pareto mn2-320k-paper ({cost_model}): {len(graph.edges)} edges, {len(plans)} plans; "
              f"graph {tb:.3f} s + frontier {tp:.3f} s = {tb + tp:.3f} s (target < 1 s, "
              f"ratio {(tb + tp):.2f})")
    for name in ("mbv2-w0.35-r144", "mcunet-320kb", "mcunet-vww-5fps"):
        model = load_model(name)
        tb, graph = best_of(lambda: build_graph(model, "exact"), 3)
        tp, plans = best_of(lambda: solvers.pareto(graph), 3)
        print(f"pareto {name} (exact): {len(graph.edges)} edges, {len(plans)} plans, "
              f"{tb + tp:.3f} s")


if __name__ == "__main__":
    main()

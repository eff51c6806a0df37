"""Measured vs predicted, for every zoo model and the issue's plans: host output bytes against
the numpy reference and the unfused plan, arena high-water (painted) against the exact model's
workspace, executed MACs against predicted MACs. Prints a Markdown table.

Run: python benchmarks/verify_table.py [MODEL ...]
"""
import sys
import time

from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.model.zoo import zoo_names
from msf_pio.verify import quantized_model, verify

PLANS = [("vanilla", {}), ("heuristic", {}), ("min_ram", {}), ("min_ram", {"max_overhead": 1.3}),
         ("min_macs", {"ram_limit": 64_000})]


def main(names):
    print("| model | plan | F | ref | unfused | arena measured | predicted | MACs counted | "
          "predicted | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        model = quantized_model(name)
        graph = build_graph(model, "exact")
        for objective, opts in PLANS:
            plan = solvers.solve(graph, objective, **opts)
            if not plan.feasible:
                print(f"| {name} | {plan.label} | - | no plan fits | | | | | | |")
                continue
            start = time.perf_counter()
            r = verify(model, plan, seeds=(0, 1), sanitize=False)
            print(f"| {name} | {plan.label} | {plan.overhead:.3f} | "
                  f"{'=' if r['matches_reference'] else 'DIFF'} | "
                  f"{'=' if r['matches_unfused'] else 'DIFF'} | {r['arena_measured']} | "
                  f"{r['arena_predicted']} | {r['macs_counted']} | {r['macs_predicted']} | "
                  f"{time.perf_counter() - start:.1f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or zoo_names())

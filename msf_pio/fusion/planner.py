"""Model + options -> plan, with the nearest feasible plan named when the budget cannot be met.
One entry point for the CLI and the PlatformIO build script."""
from __future__ import annotations

import math

from ..errors import InfeasibleBudget, MsfError
from ..model import load_model
from ..model.ir import Model
from . import bounds, solvers
from .graph import FusionGraph, build_graph
from .plan import Plan


def plan_model(model: str | Model, objective: str = "min_ram", max_overhead: float = math.inf,
               ram_limit: float | None = None, cost_model: str = "exact",
               board: str | None = None, schemes: tuple[str, ...] | None = None
               ) -> tuple[Plan, dict | None]:
    if not isinstance(model, Model):
        model = load_model(model)
    graph = graph_for(model, objective, ram_limit, cost_model, schemes)
    plan = solvers.solve(graph, objective, max_overhead, ram_limit, board)
    return plan, (None if plan.feasible else nearest_feasible(graph, plan))


def graph_for(model: Model, objective: str, ram_limit: float | None = None,
              cost_model: str = "exact", schemes: tuple[str, ...] | None = None) -> FusionGraph:
    """The fusion graph with the blocks `objective` can use (bounds.py: a cap from the single
    layers' graph)."""
    if objective == "vanilla" or cost_model != "exact":     # the paper's graph is left whole
        return build_graph(model, cost_model, schemes, ram_cap=0 if objective == "vanilla"
                           else math.inf)
    singles = build_graph(model, cost_model, schemes, ram_cap=0)
    return build_graph(model, cost_model, schemes, bounds.ram_cap(singles, objective, ram_limit))


def feasible_plan(graph: FusionGraph, objective: str, max_overhead: float = math.inf,
                  ram_limit: float | None = None, context: str = "",
                  board: str | None = None) -> Plan:
    """The plan the options ask for, or an MsfError naming the nearest feasible plan."""
    plan = solvers.solve(graph, objective, max_overhead, ram_limit, board)
    if not plan.feasible:
        hint = nearest_feasible(graph, plan)
        raise InfeasibleBudget(f"infeasible budget{context}: {plan.reason}; nearest feasible: "
                       f"{hint['message']}", source=f"model {graph.model.name}")
    return plan


def nearest_feasible(graph: FusionGraph, plan: Plan) -> dict:
    """The feasible plan closest to what was asked, as a one-line suggestion plus its numbers."""
    least_ram = solvers.p1_min_ram(graph)
    if plan.ram_limit is not None and least_ram.peak_ram > plan.ram_limit:
        alt = least_ram
        text = (f"no plan fits in {int(plan.ram_limit)} B; the least-RAM plan (min_ram, "
                f"max_overhead inf) needs {alt.peak_ram} B at F={alt.overhead:.3f}")
    elif plan.objective == "min_ram":
        # the Fmax could not be met under the RAM limit: relax F to what the limit allows
        limit = math.inf if plan.ram_limit is None else plan.ram_limit
        alt = solvers.p2_min_macs(graph, limit)
        text = (f"F <= {plan.max_overhead:g} is not reachable; the fewest MACs possible"
                f"{'' if math.isinf(limit) else f' within {int(limit)} B'} give F={alt.overhead:.3f} "
                f"at {alt.peak_ram} B (raise max_overhead to {math.ceil(alt.overhead * 1000) / 1000:g})")
    else:
        alt = solvers.p2_min_macs(graph, plan.ram_limit)
        text = (f"the {plan.objective} plan needs {plan.peak_ram} B; min_macs within "
                f"{int(plan.ram_limit)} B fits with {alt.peak_ram} B at F={alt.overhead:.3f}")
    return {"message": text, "objective": alt.objective, "peak_ram_bytes": alt.peak_ram,
            "overhead": round(alt.overhead, 6),
            "max_overhead": None if math.isinf(alt.max_overhead) else alt.max_overhead,
            "ram_limit": None if alt.ram_limit is None or math.isinf(alt.ram_limit)
            else int(alt.ram_limit)}

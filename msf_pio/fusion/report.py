"""Human-readable plan and Pareto tables (and the frontier plot)."""
from __future__ import annotations

from ..text import printable
from . import schemes
from .graph import FusionGraph
from .plan import Plan


def _layers(plan: Plan, first: int, last: int) -> str:
    names = plan.layer_labels
    return names[first] if first == last else f"{names[first]}..{names[last]}"


def render_plan(plan: Plan, hint: dict | None = None) -> str:
    head = (f"model {printable(plan.model)}  cost model {plan.cost_model}  "
            f"objective {plan.objective} ({plan.label})")
    if not plan.feasible:
        lines = [head, f"INFEASIBLE: {plan.reason}"]
        if hint:
            lines.append(f"nearest feasible: {hint['message']}")
        return "\n".join(lines)
    rows = [(_layers(plan, e.first, e.last), schemes.label(e), f"{e.ram:,}", f"{e.macs:,}")
            for e in plan.blocks]
    lines = [head] + table([("layers", "scheme", "RAM B", "MACs")] + rows, right=(2, 3))
    fused = sum(1 for e in plan.blocks if e.fused)
    lines.append(f"peak RAM {plan.peak_ram} B ({plan.peak_ram / 1000:.3f} kB)  MACs {plan.macs}  "
                 f"F={plan.overhead:.3f}  edges {len(plan.blocks)} ({fused} fusion blocks)")
    modes = f"input {'stream' if plan.stream_input else 'buffer'}, " \
        f"output {'stream' if plan.stream_output else 'buffer'}"
    lines.append(f"workspace {plan.peak_ram} B + I/O {plan.io_bytes} B = "
                 f"{plan.peak_ram + plan.io_bytes} B ({modes})")
    if plan.state_bytes:
        lines.append(f"state {plan.state_bytes} B of the workspace: a streaming model's ring "
                     "buffers, kept in the arena from one run (frame) to the next")
    if plan.predicted_instructions is not None:
        time = f" = {plan.predicted_us / 1000:.1f} ms at {plan.f_cpu / 1e6:g} MHz" \
            if plan.predicted_us is not None else ""
        lines.append(f"predicted latency on {plan.board}: {plan.predicted_instructions} "
                     f"cycles{time}")
    if plan.predicted_stack is not None:
        lines.append(f"predicted stack: {plan.predicted_stack} B (the shipped firmware's "
                     f"deepest call path on the board)")
    return "\n".join(lines)


def table(rows: list[tuple[str, ...]], right=()) -> list[str]:
    """Rows of cells as aligned lines (the columns in `right`, numbers, to the right)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.rjust(w) if i in right else c.ljust(w)
                      for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]


def render_pareto(graph: FusionGraph, plans: list[Plan]) -> str:
    lines = [f"Pareto frontier of {printable(graph.model.name)} ({graph.cost_model} cost model): "
             f"{len(plans)} plans",
             f"{'peak RAM B':>11s} {'MACs':>12s} {'F':>7s}  fusion blocks"]
    for p in plans:
        blocks = " ".join(f"[{e.first}-{e.last}"
                          f"{'' if e.scheme == 'h-cache' else ' ' + schemes.label(e)}]"
                          for e in p.blocks if e.fused) or "(none)"
        lines.append(f"{p.peak_ram:11d} {p.macs:12d} {p.overhead:7.3f}  {blocks}")
    return "\n".join(lines)


def plot_pareto(graph: FusionGraph, frontiers: dict[str, list[Plan]], path: str) -> None:
    """Each frontier (label -> plans by increasing RAM) as a step line of F over peak RAM."""
    from ..errors import MsfError
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MsfError("--plot needs matplotlib (pip install matplotlib)") from None
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, plans in frontiers.items():
        ax.step([p.peak_ram / 1000 for p in plans], [p.overhead for p in plans], where="post",
                marker="o", markersize=3, label=label)
    if len(frontiers) > 1:
        ax.legend()
    ax.set_xlabel("peak RAM (kB)")
    ax.set_ylabel("MAC overhead F")
    ax.set_title(f"{printable(graph.model.name)}: RAM/MAC Pareto frontier ({graph.cost_model})")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

"""Static arena offsets for a plan: a two-ended stack, compacted between edges.

Each edge's output goes to the end opposite its input, stacked on what is still alive there
(tensors a later layer still reads: skips, branch inputs); its scratch buffers sit in the gap
between the two stacks. When a tensor
dies below a live one (a skip tensor whose add has run), the live ones slide over it before the
next edge (a memmove the generated code performs), so the stacks never hold a hole and the arena
is exactly the plan's peak RAM: the measured high-water equals the exact cost model's prediction.

An edge whose output may overlap its input (fusion/reuse.py: the output starts at most `shift`
bytes after the input, over input rows already read) puts it on the input's stack instead: on the
low stack the input first slides up by -shift bytes and the output starts where the input began;
on the high stack the output starts `shift` bytes after the input (or ends where it ended), and
the bytes left above it are a hole the next compaction closes.

A streaming model's state region (its stream layers' outputs: the rows kept across runs, then
the run's new rows) comes after the two stacks, alive for every edge and across runs: never
reused, never moved.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..fusion import latency
from ..fusion.geometry import arena_tensor_bytes, writes_in_place
from ..fusion.plan import Plan
from ..fusion.reuse import DETAIL as OVERLAP
from ..model.ir import Model


@dataclass
class Move:
    tensor: int
    src: int
    dst: int
    bytes: int


@dataclass
class EdgeLayout:
    offsets: dict[int, int]              # tensor -> arena offset during this edge
    scratch_offset: int                  # first scratch buffer; the rest follow in order
    scratch: list[dict]
    high_water: int                      # arena bytes in use during this edge
    moves: list[Move] = field(default_factory=list)   # compaction before this edge
    resident: dict[int, int] = field(default_factory=dict)   # tensor -> offset, state region


@dataclass
class ArenaLayout:
    size: int
    edges: list[EdgeLayout]
    state_offset: int = 0                # a streaming model's state region: [offset, size)

    def state_offsets(self, model: Model) -> dict[int, int]:
        """Stream layer -> arena offset of its output (in layer order in the state region)."""
        out, offset = {}, self.state_offset
        for l in model.state_layers():
            out[l] = offset
            offset += model.tensor_bytes(l + 1)
        return out


HOLE = -1      # stack entry of bytes no tensor holds (closed by the next compaction)


class _Stack:
    """One end of the arena: live tensors packed from its edge inwards, bottom first."""

    def __init__(self):
        self.items: list[tuple[int, int]] = []      # (tensor, bytes)

    @property
    def used(self) -> int:
        return sum(b for _, b in self.items)

    def depth(self, t: int) -> int:
        """Bytes between this end of the arena and the start of tensor t."""
        d = 0
        for x, b in self.items:
            if x == t:
                return d
            d += b
        raise KeyError(t)

    def holds(self, t: int) -> bool:
        return any(x == t for x, _ in self.items)

    def compact(self, alive: set[int]) -> list[tuple[int, int, int, int]]:
        """Drop dead tensors; return (tensor, old depth, new depth, bytes) of those that slide."""
        slides, old, new, kept = [], 0, 0, []
        for t, b in self.items:
            if t in alive:
                if old != new:
                    slides.append((t, old, new, b))
                kept.append((t, b))
                new += b
            old += b
        self.items = kept
        return slides


def _last_use(model: Model, plan: Plan) -> dict[int, int]:
    """Tensor -> index of the last edge that reads it (the edge of its last reader); an edge's
    input counts as read by it."""
    use: dict[int, int] = {}
    where = {l: k for k, e in enumerate(plan.blocks) for l in range(e.first, e.last + 1)}
    for k, e in enumerate(plan.blocks):
        use[e.first] = max(use.get(e.first, k), k)
    for t, l in model.last_reader().items():
        use[t] = max(use.get(t, 0), where[l])
    return use


def _overlap(model: Model, e, shift: int, low: _Stack, high: _Stack, slides: list) -> dict:
    """Places the output of edge e over its input (on top of its stack); returns per end the
    bytes in use during the edge and the depth of the input there."""
    a, b = e.first, e.last + 1
    na, nb = arena_tensor_bytes(model, a), arena_tensor_bytes(model, b)
    stack = low if low.holds(a) else high
    if stack.items[-1][0] != a:
        raise ValueError(f"edge {e.first}..{e.last}: its input is not on top of its stack")
    base = stack.used - na                   # depth of the input's first byte
    used = {"low": (low.used, {}), "high": (high.used, {})}
    if stack is low:
        rise = -min(shift, 0)                # the input slides up; the output starts at base
        moved = [i for i, s in enumerate(slides) if s[0] == "low" and s[1] == a]
        if moved:
            end, t, old, new, n = slides[moved[0]]
            slides[moved[0]] = (end, t, old, new + rise, n)
        elif rise:
            slides.append(("low", a, base, base + rise, na))
        stack.items[-1] = (b, nb)
        used["low"] = (base + max(rise + na, nb), {a: base + rise})
    else:
        start = min(shift, na - nb)          # output start after the input's, in bytes
        hole = na - start - nb               # between the output's end and the input's end
        stack.items[-1:] = [(HOLE, hole), (b, nb)] if hole else [(b, nb)]
        used["high"] = (base + na - min(start, 0), {a: base})
    return used


def plan_arena(model: Model, plan: Plan) -> ArenaLayout:
    if plan.cost_model != "exact":
        raise ValueError("arena layouts follow the exact cost model")
    last_use = _last_use(model, plan)
    low, high = _Stack(), _Stack()
    steps = []      # per edge: (slides, low depths, high depths, scratch offset, scratch, hw)
    for k, e in enumerate(plan.blocks):
        alive = {t for t, u in last_use.items() if u >= k and t <= e.first}
        slides = [("low", *s) for s in low.compact(alive)] + \
                 [("high", *s) for s in high.compact(alive)]
        out, out_bytes = e.last + 1, arena_tensor_bytes(model, e.last + 1)
        shift = e.detail.get(OVERLAP)
        if shift is not None:
            used, in_place = _overlap(model, e, shift, low, high, slides), None
        elif writes_in_place(model, e.first, e.last):
            skip = model.layers[e.last].skip
            stack = low if low.holds(skip) else high
            depth = stack.depth(skip)
            stack.items = [(out if t == skip else t, b) for t, b in stack.items]
            in_place = (stack is low, out, skip, depth)
        else:
            in_place = None
            if out_bytes:
                # opposite the input; an edge reading the caller's input starts at the bottom
                (high if low.holds(e.first) else low).items.append((out, out_bytes))
        if shift is None:
            used = {"low": (low.used, {}), "high": (high.used, {})}
        scratch = e.detail.get("scratch", [])
        (low_used, low_extra), (high_used, high_extra) = used["low"], used["high"]
        hw = low_used + sum(b["bytes"] for b in scratch) + high_used
        low_depths = {t: low.depth(t) for t, _ in low.items if t != HOLE}
        high_depths = {t: high.depth(t) for t, _ in high.items if t != HOLE}
        low_depths.update(low_extra)        # the input an output overlaps, during the edge
        high_depths.update(high_extra)
        if in_place:    # during the edge the skip and the output share one buffer
            (low_depths if in_place[0] else high_depths)[in_place[2]] = in_place[3]
        steps.append((slides, low_depths, high_depths, low_used, scratch, hw))
    size = max((s[5] for s in steps), default=0)

    def offset(end: str, t: int, depth: int) -> int:
        return depth if end == "low" else size - depth - arena_tensor_bytes(model, t)

    edges = []
    for slides, low_d, high_d, scratch_off, scratch, hw in steps:
        offsets = {t: offset("low", t, d) for t, d in low_d.items()}
        offsets.update({t: offset("high", t, d) for t, d in high_d.items()})
        moves = [Move(t, offset(end, t, old), offset(end, t, new), b)
                 for end, t, old, new, b in slides]
        edges.append(EdgeLayout(offsets, scratch_off, scratch, hw + model.state_bytes(), moves))
    layout = ArenaLayout(size + model.state_bytes(), edges, size)
    resident = {l + 1: offset for l, offset in layout.state_offsets(model).items()}
    for el in edges:
        el.resident = resident
    return layout


def compaction_counts(model: Model, plan: Plan) -> list[dict[str, int]]:
    """Per edge, the latency counts of the compaction before it: the bytes its memmoves move,
    priced as a line buffer's ring slides (memmove too: on qemu_f767zi 5.0 instructions per
    byte either way, benchmarks/function_profile.py)."""
    return [{"memmove.bytes": sum(m.bytes for m in el.moves)}
            for el in plan_arena(model, plan).edges]


def compaction_instructions(model: Model, plan: Plan, coefficients: dict) -> list[float]:
    """Per edge, the predicted instructions of the compaction before it (0 for an edge with
    none, and for every edge of a plan of another cost model than the exact one: its arena is
    not the one laid out here)."""
    if plan.cost_model != "exact":
        return [0.0] * len(plan.blocks)
    return [latency.instructions(c, coefficients) for c in compaction_counts(model, plan)]


def attach_compaction(model: Model, plan: Plan) -> None:
    """Adds the arena's compaction to the plan's predicted instructions (on its board, where
    the solver predicted them): the latency cost model prices each edge alone, but which
    tensors slide between edges depends on the whole path, so the moves are priced once the
    arena is laid out (fusion/latency.py)."""
    if plan.predicted_instructions is None or not plan.feasible:
        return
    extra = compaction_instructions(model, plan, latency.profile(plan.board))
    plan.edge_cycles = [c + int(round(x)) for c, x in zip(plan.edge_cycles, extra)]
    plan.predicted_instructions += int(round(sum(extra)))

"""A fusion plan: a path through the fusion graph, with its peak RAM, MACs and overhead F."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..model.ir import layer_label
from . import schemes
from .edge import Edge


@dataclass
class Plan:
    model: str
    cost_model: str
    objective: str
    blocks: list[Edge]
    unfused_macs: int
    max_overhead: float = math.inf
    ram_limit: float | None = None
    feasible: bool = True
    reason: str = ""
    layer_names: list[str] = field(default_factory=list, repr=False)   # the file's (JSON only)
    layer_labels: list[str] = field(default_factory=list, repr=False)  # op + index (tables)
    stream_output: bool = False
    stream_input: bool = False
    io_bytes: int = 0                         # the caller's input and output buffers
    board: str | None = None                  # latency predicted for this board (if any)
    predicted_instructions: int | None = None # = cycles under QEMU -icount
    edge_cycles: list[int] = field(default_factory=list, repr=False)  # per block, predicted
    f_cpu: int = 0
    predicted_stack: int | None = None        # bytes on `board` (codegen/stack.py sets it)
    state_bytes: int = 0                      # a streaming model's state (in every edge's RAM)

    @classmethod
    def from_path(cls, graph, path: list[Edge] | None, objective: str, **opts) -> "Plan":
        plan = cls(model=graph.model.name, cost_model=graph.cost_model, objective=objective,
                   blocks=path or [], unfused_macs=graph.unfused_macs,
                   layer_names=[l.name for l in graph.model.layers],
                   layer_labels=[layer_label(l.op, i) for i, l in enumerate(graph.model.layers)],
                   stream_output=graph.model.stream_output,
                   stream_input=graph.model.stream_input, io_bytes=_io_bytes(graph.model),
                   state_bytes=graph.model.state_bytes(), **opts)
        if path is None:
            plan.mark_infeasible("no plan satisfies the constraints")
        return plan

    def mark_infeasible(self, reason: str) -> None:
        self.feasible, self.reason = False, reason

    @property
    def peak_ram(self) -> int:
        return max((e.ram for e in self.blocks), default=0)

    @property
    def macs(self) -> int:
        return sum(e.macs for e in self.blocks)

    @property
    def overhead(self) -> float:
        return self.macs / self.unfused_macs if self.unfused_macs else 1.0

    @property
    def label(self) -> str:
        """Short plan name for serial lines and reports, e.g. p1:1.3 or p2:65536."""
        if self.objective == "min_ram":
            return f"p1:{_num(self.max_overhead)}"
        if self.objective == "min_macs":
            return f"p2:{_num(self.ram_limit)}"
        if self.objective == "min_latency":
            return f"lat:{_num(self.ram_limit)}"
        return self.objective

    def predict_latency(self, model, board: str) -> None:
        """Sets the predicted instructions of msf_model_run on `board` (latency.py)."""
        from . import latency
        self.board, self.f_cpu = board, latency.f_cpu(board)
        if self.feasible:
            coefficients = latency.profile(board)
            per_edge = [latency.edge_instructions(model, e, coefficients) for e in self.blocks]
            self.edge_cycles = [int(round(c)) for c in per_edge]
            self.predicted_instructions = int(round(sum(per_edge)))

    @property
    def predicted_us(self) -> float | None:
        if self.predicted_instructions is None or not self.f_cpu:
            return None
        return self.predicted_instructions * 1e6 / self.f_cpu

    def to_json(self) -> dict:
        return {
            "model": self.model,
            "cost_model": self.cost_model,
            "objective": self.objective,
            "max_overhead": None if math.isinf(self.max_overhead) else self.max_overhead,
            "ram_limit": None if self.ram_limit is None or math.isinf(self.ram_limit)
            else int(self.ram_limit),
            "input": "stream" if self.stream_input else "buffer",
            "output": "stream" if self.stream_output else "buffer",
            "io_bytes": self.io_bytes,
            "feasible": self.feasible,
            **({"reason": self.reason} if not self.feasible else {}),
            "peak_ram_bytes": self.peak_ram if self.feasible else None,
            **({"state_bytes": self.state_bytes} if self.state_bytes else {}),
            "macs": self.macs if self.feasible else None,
            "unfused_macs": self.unfused_macs,
            "overhead": round(self.overhead, 6) if self.feasible else None,
            **({"board": self.board, "predicted_cycles": self.predicted_instructions,
                "predicted_us": None if self.predicted_us is None else round(self.predicted_us)}
               if self.board else {}),
            **({"predicted_stack_bytes": self.predicted_stack}
               if self.predicted_stack is not None else {}),
            "blocks": [{"first": e.first, "last": e.last, "scheme": e.scheme,
                        **({"layers": self.layer_labels[e.first] if not e.fused else
                            f"{self.layer_labels[e.first]}..{self.layer_labels[e.last]}"}
                           if self.layer_labels else {}),
                        **({"names": self.layer_names[e.first:e.last + 1]}
                           if self.layer_names else {}),
                        **schemes.json_fields(e),
                        "ram_bytes": e.ram, "macs": e.macs,
                        **({"predicted_cycles": c} if c is not None else {}),
                        **{k: v for k, v in e.detail.items() if isinstance(v, (int, bool))}}
                       for e, c in zip(self.blocks, self.edge_cycles or [None] * len(self.blocks))],
        }


def _num(x) -> str:
    if x is None or (isinstance(x, float) and math.isinf(x)):
        return "inf"
    return f"{x:g}"


def _io_bytes(model) -> int:
    """Bytes of the caller's buffers: the input and output, unless streamed (a streamed tensor
    lives in the arena: the input rows the first edge reads, one output pixel)."""
    return (0 if model.stream_input else model.tensor_bytes(0)) + \
        (0 if model.stream_output else model.tensor_bytes(model.n_layers)) + \
        sum(model.tensor_bytes(t) for t in model.output_tensors if t != model.n_layers)

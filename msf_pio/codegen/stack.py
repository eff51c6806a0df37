"""The stack a plan's firmware needs: the deepest call path through the runtime for the plan's
edges, below the firmware's own frames (start-up, main, the board's probes), plus what an
interrupt stacks on top.

Per board, stack_profiles.json (beside this file; benchmarks/calibrate_stack.py measures it)
holds the call graph of the firmwares msf-pio ships (the demo, its `pio test` harness, the
`msf-pio init` main.c) as compiled and linked for that board: every function's frame and its
callees (msf_pio/pio/stack_graph.py). An edge runs only the kernels of its layers' ops and its
scheme's executor: a function of library/src/kernels/<op>_s8.c or library/src/schemes/
<executor>.c (its profile `unit`) counts only for the edges that use it. The executors'
variable-length arrays (one slot per layer of the block) are bounded here from the block's
layer count, as the C declares them (VLAS); the kernels' stack buffers from the shapes of the
edge's layers, as the generator sizes them (SCRATCH). The generated code's specialised kernels
count the largest frame the calibration found over a range of shapes (SPECIALISED). The
kernels the generated schedule calls itself on whole tensors (stream, crop, upsampling:
WHOLE_KERNELS) are in every profile, called from the schedule's function (the one calling
msf_run_edge) whatever model the calibration built: a whole-tensor edge runs its kernel, never
msf_run_edge, and every other edge the reverse. A profile holds every kernel and executor
whatever model it was calibrated with (benchmarks/calibrate_stack.py links them all); one that
lacks the code an edge runs (calibrated before that kernel was) is refused in one line, never
counted short. Not covered: a firmware of the user's own deeper than the shipped ones, and its
own interrupt handlers.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import MsfError
from ..fusion import schemes
from ..model import ir
from . import kernel_data
from .generate import CALLED, _called, block_shape

PROFILES = Path(__file__).with_name("stack_profiles.json")
INDIRECT = "__indirect_call"

# The kernel file (library/src/kernels/<unit>_s8.c) that runs each op.
OP_UNITS = {
    ir.CONV: "conv2d", ir.DEPTHWISE: "depthwise_conv2d", ir.ADD: "add", ir.CONCAT: "concat",
    ir.MAX_POOL: "pool", ir.AVG_POOL: "pool", ir.GLOBAL_AVGPOOL: "pool", ir.DENSE: "dense",
    ir.SOFTMAX: "softmax", ir.HARD_SWISH: "activation", ir.LEAKY_RELU: "activation",
    ir.LOGISTIC: "activation", ir.PRELU: "activation", ir.MUL: "mul", ir.SLICE: "slice",
    ir.STREAM: "stream", ir.CROP: "crop",
    ir.RESIZE_NEAREST: "resize_nearest", ir.TRANSPOSE_CONV: "transpose_conv",
}


def _unit(layer) -> str:
    """The kernel file of a layer: an average pool counting padded taps has its own."""
    if layer.op == ir.AVG_POOL and layer.count_pad:
        return "avg_pool_padded"
    return OP_UNITS.get(layer.op, "*")


VIEW = 20           # sizeof(msf_view_t) on the 32-bit targets: a pointer and four int32
# Calls through a pointer reach every function whose address is taken; one of those may call
# through a pointer again (freedom-metal's driver tables), counted to this depth of nesting and
# no deeper (hifive1-revb's predictions are the same for limits 0 to 6: its deepest path is the
# model's, whose only calls through pointers are the sink and source callbacks)
INDIRECT_NESTING = 3

# Variable-length arrays per function, as library/src declares them: the executors whose edges
# allocate them and, from the block's n, the byte size of each array (GCC rounds each up to the
# stack alignment). The H-cache's executor runs single spatial layers too (n = 1).
VLAS = {
    "msf_run_h_cache": (("h_cache",), lambda n: [
        VIEW * (n + 1), VIEW * 2 * n, 4 * (n + 1), 4 * (n + 1), 4 * (n + 1), 4 * n, 4 * n]),
    "msf_run_line_buffer": (("line_buffer",), lambda n: [
        VIEW * (n + 1), VIEW * 2 * n, 4 * n, 4 * (n + 1), 4 * n, 4 * n, 4 * n]),
}


# The kernels' stack buffers, variable-length arrays sized from the layer's shape
# (msf_layer_t.scratch, kernel_data.scratch_bytes): per function that declares one, the ops
# whose layers it serves. An edge's bound is its largest such layer's.
SCRATCH = {
    "msf_conv2d_column": (ir.CONV,),
    "msf_conv2d_special_column": (ir.CONV,),
    "msf_dense": (ir.DENSE,),
    "depthwise_conv2d_s8.c:dw3x3_line": (ir.DEPTHWISE,),
    "msf_depthwise_special_column": (ir.DEPTHWISE,),
}
# The generated code's specialised kernels (codegen/specialise.py), by the prefix of their
# names, and the op's unit they serve: their frames depend on the shape, so each counts as the
# largest the calibration compiled for a range of shapes (the profile's "specialised"), whatever
# the shapes of the firmware calibrated; the profile holds each form as one function of that
# name (its largest frame, every call)
SPECIALISED = {"msf_model.c:msf_conv_": "conv2d",
               "msf_model.c:msf_dw3x3_": "depthwise_conv2d"}
# The kernels the generated schedule (msf_model_execute) calls itself: an edge of one whole-tensor
# op (generate.CALLED), and at the end of a streaming model's run its rings' keep
CALLED_KERNELS = tuple(CALLED.values())
WHOLE_KERNELS = (*CALLED_KERNELS, "msf_stream_keep")
SCHEDULE_CALLS = "msf_run_edge"       # what the schedule's function calls for every other edge


# The runtime units that are executors (library/src/schemes/<executor>.c): they dispatch to
# the kernels of their edge's ops; a kernel's unit calls what it calls
EXECUTORS = frozenset(s.EXECUTOR for s in schemes.REGISTRY)


def edge_scratch(model, e, sizes: list[int]) -> tuple:
    """(function, bytes) of the SCRATCH arrays edge e's layers allocate (sizes: per layer)."""
    return tuple((fn, max((sizes[l] for l in range(e.first, e.last + 1)
                           if model.layers[l].op in ops), default=0))
                 for fn, ops in SCRATCH.items())


def layer_scratch(layer) -> int:
    """msf_layer_t.scratch of a layer as the generator sets it, or more: a depthwise layer
    whose shape allows folding counts as folded (whether it folds depends on its weights)."""
    return kernel_data.scratch_bytes(layer, kernel_data.may_fold(layer))


@dataclass(frozen=True)
class StackPrediction:
    bytes: int                  # the deepest stack: thread path + the worst interrupt
    path: tuple                 # (function, frame bytes) from the firmware's entry down
    interrupt: int              # bytes of the worst interrupt on top of it (hardware frame too)
    edge: int                   # the plan edge whose kernels make the deepest path


@lru_cache(maxsize=None)
def _profiles() -> dict:
    return json.loads(PROFILES.read_text()) if PROFILES.is_file() else {}


def boards() -> list[str]:
    return sorted(_profiles())


def profile(board: str) -> dict | None:
    return _profiles().get(board)


def _round(size: int, align: int) -> int:
    return -(-size // align) * align


def executor(model, e) -> str:
    """The executor (library/src/schemes/<executor>.c, the file's profile unit) edge e runs
    in: its scheme's; a single spatial layer's, the H-cache's; none for a single head layer
    (msf_run_edge runs it), nor for a whole-tensor op (the schedule calls its kernel)."""
    if _called(model, e):
        return ""
    if e.fused:
        return schemes.get(e.scheme).EXECUTOR
    return schemes.h_cache.EXECUTOR if block_shape(model, e)[0] else ""


def edge_units(model, e) -> frozenset:
    """The runtime units edge e runs: its layers' kernels and its executor. An op with no known
    kernel file makes every unit count."""
    units = {_unit(model.layers[l]) for l in range(e.first, e.last + 1)}
    return frozenset(units | ({executor(model, e)} - {""}))


class _Graph:
    def __init__(self, prof: dict):
        self.functions = dict(prof["functions"])
        whole = [k for k in WHOLE_KERNELS if k in self.functions]
        self.schedule = set()
        for name, fn in prof["functions"].items():      # the schedule may call them all
            if SCHEDULE_CALLS in fn["calls"]:
                self.functions[name] = {**fn, "calls": sorted(set(fn["calls"]) | set(whole))}
                self.schedule.add(name)
        self.align = int(prof["stack_align"])
        self.entry = prof["entry"]
        self.interrupts = prof.get("interrupts", {})
        self.specialised = int(prof.get("specialised", 0))

    def _another_kernel(self, name: str, callee: str, units: frozenset) -> bool:
        """Whether a dispatch (a function of no unit, or an executor) calls `callee` only for
        an edge of other units. A kernel's own calls are made whatever their file: msf_dense
        runs conv2d_s8.c's msf_conv_channels1."""
        unit = self.functions[callee].get("unit", "")
        caller = self.functions[name].get("unit", "")
        if caller and caller not in EXECUTORS:
            return False
        return bool(unit) and "*" not in units and unit not in units

    def _other_way(self, name: str, callee: str, whole: bool) -> bool:
        """Whether the schedule's function (name) runs the edge otherwise than through callee:
        a whole-tensor edge by calling its kernel, never msf_run_edge; any other edge through
        msf_run_edge, never a whole-tensor kernel."""
        return name in self.schedule and callee in ((SCHEDULE_CALLS,) if whole
                                                    else CALLED_KERNELS)

    def _callees(self, name: str, units: frozenset, whole: bool, nesting: int):
        """(callee, its pointer-call nesting) of the calls `name` makes for an edge of these
        units: not another op's kernel or another scheme, not the schedule's other way, not
        nested deeper than INDIRECT_NESTING (what deepest and reached both walk)."""
        for callee in self.functions[name]["calls"]:
            if self._another_kernel(name, callee, units) or \
                    self._other_way(name, callee, whole):
                continue
            level = nesting + (callee == INDIRECT)
            if level <= INDIRECT_NESTING:
                yield callee, level

    @lru_cache(maxsize=None)
    def deepest(self, name: str, units: frozenset, executor: str, n: int,
                nesting: int = 0, scratch: tuple = (), whole: bool = False) -> tuple[int, tuple]:
        """(bytes, path) of the deepest call path from `name` for an edge of these units, under
        `nesting` calls through pointers; scratch: edge_scratch's (function, bytes); whole: an
        edge the schedule runs by calling its kernel (not msf_run_edge)."""
        fn = self.functions[name]
        frame = fn["frame"]
        form = next((p for p in SPECIALISED if name.startswith(p)), None)
        if form:                                # its form's largest frame
            frame = max(frame, self.functions.get(form, {}).get("frame", self.specialised))
        if name in SCRATCH:
            frame += _round(kernel_data.padded(dict(scratch).get(name, 0), 4), self.align)
        elif name in VLAS and executor in VLAS[name][0]:
            frame += sum(_round(b, self.align) for b in VLAS[name][1](n))
        elif fn.get("dynamic") and name in VLAS:
            pass                                # another executor's: not on this edge's path
        elif fn.get("dynamic"):
            raise ValueError(f"{name} has a dynamic frame the predictor cannot bound")
        best, via = 0, ()
        for callee, level in self._callees(name, units, whole, nesting):
            d, p = self.deepest(callee, units, executor, n, level, scratch, whole)
            if d > best:
                best, via = d, p
        return frame + best, ((name, frame),) + via

    @lru_cache(maxsize=None)
    def reached(self, name: str, units: frozenset, whole: bool = False,
                nesting: int = 0) -> frozenset:
        """The units of the functions `deepest` may walk from `name` for an edge of these
        units: each of the edge's units is among them unless the profile lacks its kernel."""
        found = {self.functions[name].get("unit", "")}
        for callee, level in self._callees(name, units, whole, nesting):
            found |= self.reached(callee, units, whole, level)
        return frozenset(found)

    def interrupt(self) -> int:
        return max((hw + self.deepest(isr, frozenset({"*"}), "", 0)[0]
                    for isr, hw in self.interrupts.items()), default=0)


@lru_cache(maxsize=None)
def _graph(board: str) -> _Graph | None:
    prof = profile(board)
    return _Graph(prof) if prof else None


def attach(model, plan, board: str | None) -> StackPrediction | None:
    """Predicts the plan's stack on `board` and records it in the plan (its JSON carries it)."""
    prediction = predict(model, plan, board) if board and plan.feasible else None
    if prediction:
        plan.predicted_stack = prediction.bytes
    return prediction


def predict(model, plan, board: str) -> StackPrediction | None:
    """The plan's stack on `board`, or None for a board with no stack profile."""
    graph = _graph(board)
    if graph is None or not plan.blocks:
        return None
    worst = None
    sizes = [layer_scratch(layer) for layer in model.layers]
    for k, e in enumerate(plan.blocks):
        n, _ = block_shape(model, e)
        units, whole = edge_units(model, e), _called(model, e)
        missing = units - graph.reached(graph.entry, units, whole) - {"*"}
        if missing:         # a profile calibrated before the kernel was: no silent shortfall
            raise MsfError(
                f"{board}'s stack profile has no {' or '.join(sorted(missing))} code on the "
                f"path of edge {k} ({model.layers[e.first].op}{', fused' if e.fused else ''}); "
                f"recalibrate it: python benchmarks/calibrate_stack.py --boards {board}",
                source=PROFILES.name)
        depth, path = graph.deepest(graph.entry, units, executor(model, e), n,
                                    scratch=edge_scratch(model, e, sizes), whole=whole)
        if worst is None or depth > worst[0]:
            worst = (depth, path, k)
    irq = graph.interrupt()
    return StackPrediction(worst[0] + irq, worst[1], irq, worst[2])


def dump_profiles(profiles: dict) -> str:
    """stack_profiles.json's text: one line per function, so a recalibration diffs by
    function."""
    lines = ["{"]
    for b, (board, prof) in enumerate(sorted(profiles.items())):
        lines.append(f"  {json.dumps(board)}: {{")
        for key in ("framework", "compiler", "version", "cflags", "stack_align", "entry",
                    "interrupts", "specialised"):
            if key in prof:
                lines.append(f"    {json.dumps(key)}: {json.dumps(prof[key])},")
        lines.append('    "functions": {')
        fns = sorted(prof["functions"].items())
        for i, (name, fn) in enumerate(fns):
            lines.append(f"      {json.dumps(name)}: {json.dumps(fn)}"
                         + ("," if i < len(fns) - 1 else ""))
        lines.append("    }")
        lines.append("  }" + ("," if b < len(profiles) - 1 else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"

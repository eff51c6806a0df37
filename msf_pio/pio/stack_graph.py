"""The stack a firmware can use at most: its call graph with every function's frame.

GCC gives both for the C it compiles: -fcallgraph-info=su writes, per translation unit, a
VCG graph whose nodes carry the frame -fstack-usage measures ("N bytes (static)"; a "dynamic"
frame has variable-length arrays on top, which msf_pio/codegen/stack.py bounds) and whose edges
are the calls, the library calls GCC emits itself (__aeabi_uldivmod, memset) and one
"__indirect_call" node per call through a pointer. What the build links precompiled (the C
library's start-up, memcpy, libgcc's division) gets its frame and calls from the linked
firmware's disassembly (`objdump -d`): the stack adjustments of its body and its direct calls.

An indirect call may reach any function no code calls directly (its address was taken: a sink
or source callback, a constructor, a driver's table entry): `__indirect_call` calls all of them.
Direct calls must form a DAG: recursion has no bound here and is an error. Calls through
pointers may call through pointers again (freedom-metal's driver tables do): the predictor
bounds their nesting (codegen/stack.py, INDIRECT_NESTING).
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

INDIRECT = "__indirect_call"

_NODE = re.compile(r'node: \{ title: "([^"]+)" label: "([^"]*)"')
_EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')
_FRAME = re.compile(r"(\d+) bytes \((\w+)")


@dataclass
class Function:
    frame: int                         # bytes of its own frame (the static part if dynamic)
    calls: set = field(default_factory=set)
    dynamic: bool = False              # variable-length arrays on top of `frame`
    unit: str = ""                     # the source file defining it ("" if from a library)


def node_name(title: str) -> str:
    """A .ci title as a firmware-wide name: a static function's title is its translation unit
    and name ("/x/kernels/conv2d_s8.c:conv_column"), kept as "conv2d_s8.c:conv_column"."""
    if ":" in title:
        unit, name = title.rsplit(":", 1)
        return f"{Path(unit).name}:{name}"
    return title


def read_callgraph(ci_files) -> dict[str, Function]:
    """Functions defined in the .ci files, with their frames and callees."""
    graph: dict[str, Function] = {}
    for path in ci_files:
        text = Path(path).read_text()
        unit = text.split('"', 2)[1] if text.startswith("graph:") else str(path)
        for title, label in _NODE.findall(text):
            m = _FRAME.search(label)
            if m:                      # defined here (an ellipse node is only called)
                name = node_name(title)
                fn = graph.setdefault(name, Function(0, unit=unit))
                fn.frame = max(fn.frame, int(m.group(1)))
                fn.dynamic |= m.group(2) != "static"
        for source, target in _EDGE.findall(text):
            graph.setdefault(node_name(source), Function(0, unit=unit)).calls.add(
                node_name(target))
    return graph


# --- the disassembly of precompiled code -----------------------------------------------------

_HEAD = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
_TARGET = re.compile(r"<([^>+]+)(\+0x[0-9a-f]+)?>")
_REGLIST = re.compile(r"\{([^}]*)\}")


def _reg_count(text: str) -> tuple[int, int]:
    """(registers, bytes each) of an Arm register list such as {r4-r7, lr} or {d8-d15}."""
    m = _REGLIST.search(text)
    if not m:
        return 0, 4
    count, size = 0, 4
    for part in m.group(1).split(","):
        part = part.strip()
        size = 8 if part.startswith("d") else 4
        if "-" in part:
            a, b = part.split("-")
            count += int(re.sub(r"\D", "", b)) - int(re.sub(r"\D", "", a)) + 1
        else:
            count += 1
    return count, size


def _imm(text: str) -> int | None:
    m = re.search(r"#?(-?(?:0x[0-9a-f]+|\d+))\s*(?:@.*)?$", text.strip())
    return int(m.group(1), 0) if m else None


def _arm(mnemonic: str, ops: str, fn: dict) -> None:
    base = mnemonic.split(".")[0]
    if base == "push" or (base == "stmdb" and ops.startswith("sp!")):
        n, size = _reg_count(ops)
        fn["frame"] += n * size
    elif base == "vpush":
        n, size = _reg_count(ops)
        fn["frame"] += n * size
    elif base in ("sub", "subw") and re.match(r"sp,\s*(sp,\s*)?#", ops):
        fn["frame"] += _imm(ops) or 0
    elif base in ("sub", "subw") and ops.startswith("sp,"):
        fn["dynamic"] = True
    elif base in ("str", "strd") and re.search(r"\[sp, #-\d+\]!", ops):
        fn["frame"] += int(re.search(r"#-(\d+)\]!", ops).group(1))
    elif base in ("bl", "blx") and "<" in ops:
        fn["calls"].add(_TARGET.search(ops).group(1))
    elif base == "blx" or (base == "bx" and ops.strip() != "lr"):
        fn["calls"].add(INDIRECT)
    elif re.fullmatch(r"b(eq|ne|cs|cc|hs|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le|al)?", base) \
            and "<" in ops:
        fn["calls"].add(_TARGET.search(ops).group(1))    # a tail call if another function


def _riscv(mnemonic: str, ops: str, fn: dict) -> None:
    # `la sp, _sp` (auipc sp + addi sp, sp, lo) loads the stack's address: not a frame
    loading = fn.pop("auipc_sp", False)
    if mnemonic == "auipc" and ops.startswith("sp,"):
        fn["auipc_sp"] = True
        return
    m = re.match(r"sp,\s*sp,\s*(-?\d+)", ops)
    if mnemonic in ("add", "addi", "c.addi", "c.addi16sp") and m and not loading:
        fn["frame"] += max(0, -int(m.group(1)))
    elif mnemonic == "sub" and ops.startswith("sp,"):
        fn["dynamic"] = True
    elif mnemonic in ("jal", "j", "tail", "call") and "<" in ops:
        target = _TARGET.search(ops).group(1)
        if ops.startswith("t0,") and target.startswith("__riscv_save"):
            fn["save"] = target                          # -msave-restore: its frame is ours
        else:
            fn["calls"].add(target)
    elif mnemonic in ("jalr", "jr") and "<" in ops:          # auipc + jalr: a far direct call
        fn["calls"].add(_TARGET.search(ops).group(1))
    elif mnemonic in ("jalr", "jr") and ops.strip() not in ("ra", "zero,0(ra)"):
        fn["calls"].add(INDIRECT)


def _xtensa(mnemonic: str, ops: str, fn: dict) -> None:
    regs = fn.setdefault("regs", {})
    args = [a.strip() for a in ops.split(",")]
    if mnemonic in ("addi", "addi.n", "addmi") and args[:2] == ["a1", "a1"]:
        fn["frame"] += max(0, -(_imm(args[2]) or 0))
    elif mnemonic in ("movi", "movi.n") and len(args) == 2:
        regs[args[0]] = _imm(args[1])
    elif mnemonic == "sub" and args[:2] == ["a1", "a1"]:
        value = regs.get(args[2])
        if value is None:
            fn["dynamic"] = True
        else:                   # a frame beyond movi's 12 bits comes from a literal (l32r)
            fn["frame"] += value[1] if isinstance(value, tuple) else value
    elif mnemonic == "entry":
        fn["frame"] += _imm(args[1]) or 0
    elif mnemonic == "l32r":
        # a literal: the symbol whose address it is (a call's target), and its value
        m = re.search(r"\(([0-9a-f]+) <([^>]+)>\)", ops)
        regs[args[0]] = (None if re.search(r"[+-]", m.group(2)) else m.group(2),
                         int(m.group(1), 16)) if m else None
    elif mnemonic in ("call0", "call4", "call8", "call12", "j") and "<" in ops:
        fn["calls"].add(_TARGET.search(ops).group(1))
    elif mnemonic.startswith("callx") or mnemonic == "jx":
        value = regs.get(args[0])
        fn["calls"].add(value[0] if isinstance(value, tuple) and value[0] else INDIRECT)


_ISA = {"arm": _arm, "riscv": _riscv, "xtensa": _xtensa}
# the instructions after which control never reaches the next one (else a function falls
# through into the next symbol, as freedom-metal's _start does into _skip_init and main)
_NORETURN = re.compile(r"<(exit|_exit|abort)>")
_ENDS = {"arm": re.compile(r"^(b|b\.n|b\.w|bx|udf)(\s|$)|^(pop|ldmia|ldm)(\.w)?\s.*\bpc\b"),
         "riscv": re.compile(r"^(ret|j|jr|tail|mret|c\.j|c\.jr)\b"),
         "xtensa": re.compile(r"^(ret|ret\.n|j|jx|rfe|rfi|rfde|ill|break)\b")}


# address, flags, section, size, [visibility,] name (libgcc's helpers are .hidden)
_SYMBOL = re.compile(r"^([0-9a-f]+) (.{7}) \S+\s+[0-9a-f]+\s+(?:\.(?:hidden|protected|internal) )?"
                     r"(\S+)$")


def _function_symbols(elf: Path, objdump: str) -> dict[str, int]:
    """Symbols that start a function, with their addresses: typed as one, or global (assembly
    entries often carry no type); a local label without a type belongs to the function around
    it."""
    table = subprocess.run([objdump, "-t", str(elf)], check=True, capture_output=True,
                           text=True).stdout
    names = {}
    for address, flags, name in (m.groups() for m in map(_SYMBOL.match, table.splitlines())
                                 if m):
        if "F" in flags or flags[0] == "g" or flags[1] == "w":
            names[name] = int(address, 16)
    return names


def disassembled_functions(elf: Path, objdump: str, arch: str) -> dict[str, Function]:
    """Every function of a linked firmware: frame, dynamic, calls (a branch to another
    function's start counts as a call: a tail call reuses the caller's frame, so this bounds
    it). Frames are the sum of the body's stack decrements: exact for a prologue, an upper
    bound where a function adjusts the stack more than once."""
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(elf)], check=True,
                          capture_output=True, text=True).stdout
    starts = _function_symbols(elf, objdump)
    parse, ends = _ISA[arch], _ENDS[arch]
    found: dict[str, dict] = {}
    current, last = None, ""
    for line in text.splitlines():
        head = _HEAD.match(line)
        if head and head.group(2) not in starts and current is not None:
            continue                # a local label (a loop in start-up assembly): same function
        if head:
            if current is not None and last and not ends.search(last) and \
                    not _NORETURN.search(last):
                current["calls"].add(head.group(2))          # falls through into it
            current = found.setdefault(head.group(2), {"frame": 0, "calls": set(),
                                                       "dynamic": False})
            last = ""
            continue
        if line.startswith("Disassembly of section"):
            current, last = None, ""
            continue
        insn = _INSN.match(line)
        if current is not None and insn:
            parse(insn.group(2), insn.group(3), current)
            if not insn.group(2).startswith(".") and insn.group(2) not in ("nop", "nop.n"):
                last = f"{insn.group(2)} {insn.group(3)}"   # not a literal pool's data
    out = {}
    for name, f in found.items():
        frame = f["frame"] + (found[f["save"]]["frame"] if f.get("save") in found else 0)
        out[name] = Function(frame, {c for c in f["calls"] if c != name}, f["dynamic"])
    # an alias (picolibc's memcpy is __aeabi_memcpy's address) is the function objdump heads
    # by its other name: the same frame and calls
    at = {starts[name] & ~1: name for name in out if name in starts}
    for name, address in starts.items():
        if name not in out and address & ~1 in at:
            out[name] = out[at[address & ~1]]
    return out


# --- a firmware's graph ----------------------------------------------------------------------

class RecursionFound(ValueError):
    pass


def complete(graph: dict[str, Function], linked: dict[str, Function], roots: list[str],
             vectors: tuple = (), dropped: set | None = None) -> dict[str, Function]:
    """The functions reachable from `roots`: compiled ones from `graph`, the rest (precompiled)
    from the disassembly `linked`; `__indirect_call` calls every function linked into the
    firmware that no function calls directly, other than the roots and the other `vectors`
    (exception handlers: the hardware calls them). A callee the firmware does not hold
    (inlined everywhere, or a declaration only) is dropped, and added to `dropped` as
    (caller, callee)."""
    full: dict[str, Function] = {}
    # local (static) functions of the disassembly: named without their translation unit
    local = {name.split(":", 1)[1]: name for name in graph if ":" in name}

    def resolve(name: str) -> str | None:
        if name in graph or name == INDIRECT:
            return name
        base = name.split(".")[0]
        if name in linked:
            return name
        for candidate in (name, base):
            if candidate in local:
                return local[candidate]
        return None

    def take(names) -> None:
        stack = list(names)
        while stack:
            name = stack.pop()
            if name in full:
                continue
            fn = graph.get(name) or linked.get(name) or Function(0)
            asm = linked.get(name.split(":")[-1]) if name in graph else None
            # a compiled function's library calls as the optimised code makes them (GCC's
            # call graph names the libcall it expanded, __divdi3, where the code may call
            # __udivdi3)
            library = {c for c in asm.calls if c not in graph and c not in local
                       and c != INDIRECT} if asm else set()
            calls = {resolve(c) for c in fn.calls | library} - {None}
            if dropped is not None:
                dropped.update((name, c) for c in fn.calls | library if resolve(c) is None)
            full[name] = Function(fn.frame, calls, fn.dynamic, fn.unit)
            stack.extend(calls)

    take(roots)
    if INDIRECT in full:
        called = {c for g in (graph, linked) for f in g.values() for c in f.calls}
        called |= {c.split(":")[-1] for c in called}
        targets = {n for n in graph if n not in called and n.split(":")[-1] not in called
                   and n.split(":")[-1] in linked
                   and n not in roots and n.split(":")[-1] not in vectors and n != INDIRECT}
        full[INDIRECT] = Function(0, targets)
        take(targets)
    return full


def merge(graphs: list[dict[str, Function]]) -> dict[str, Function]:
    """One graph bounding several firmwares: a function's largest frame and all its calls."""
    out: dict[str, Function] = {}
    for g in graphs:
        for name, fn in g.items():
            m = out.setdefault(name, Function(fn.frame, set(), fn.dynamic, fn.unit))
            m.frame = max(m.frame, fn.frame)
            m.dynamic |= fn.dynamic
            m.calls |= fn.calls
            m.unit = m.unit or fn.unit
    return out


def check_acyclic(graph: dict[str, Function]) -> None:
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for c in sorted(graph[name].calls):
            if c not in graph or c == INDIRECT:
                continue
            if state.get(c) == 1:
                cycle = path[path.index(c):] if c in path else path
                raise RecursionFound(" -> ".join(cycle + [c]))
            if not state.get(c):
                visit(c, path + [c])
        state[name] = 2

    for name in sorted(graph):
        if not state.get(name) and name != INDIRECT:
            visit(name, [name])

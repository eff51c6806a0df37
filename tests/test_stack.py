"""The stack predictor (msf_pio/codegen/stack.py): its stored per-board call graphs are those the
board's compiler gives the runtime today, a plan's prediction follows the kernels its edges run,
and `custom_msf_ram_limit = auto` budgets the predicted stack where the board's reserve is
smaller. (Measured <= predicted on the emulated boards: tests/test_pio_models.py and
benchmarks/stack_boards.py.)"""
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from msf_pio.codegen import kernel_data, stack
from msf_pio.codegen.generate import generate
from msf_pio.errors import MsfError
from msf_pio.fusion.planner import plan_model
from msf_pio.model import ir, load_model
from msf_pio.pio import integration, stack_graph
from msf_pio.pio.boards import BoardFacts
from msf_pio.pio.golden import golden_sources
from msf_pio.verify import quantized_model

REPO = Path(__file__).resolve().parents[1]
LIBRARY = REPO / "library"
DEMO_MAIN = REPO / "examples" / "msf_demo" / "src" / "main.c"


def _fresh_graph(board: str, tmp: Path) -> dict:
    """The runtime, the board files and the demo's main.c compiled again with the flags the
    profile was calibrated with, as GCC's call graphs."""
    prof = stack.profile(board)
    compiler = shutil.which(prof["compiler"])
    if compiler is None:
        pytest.skip(f"{prof['compiler']} not installed (scripts/setup.sh installs it)")
    model = replace(quantized_model("tiny"), stream_output=True)
    plan, _ = plan_model(model)
    gen = tmp / "gen"
    gen.mkdir()
    (gen / "msf_model.h").write_text(generate(model, plan, measure=True).header)
    (gen / "msf_golden.h").write_text(golden_sources(np.zeros(768, np.int8),
                                                     np.zeros(4, np.int8), board, 0)[0])
    flags = [f.replace("{repo}", str(REPO)) for f in prof["cflags"]]
    sources = sorted((LIBRARY / "src").rglob("*.c")) + [DEMO_MAIN]
    procs = []
    for i, src in enumerate(sources):
        out = tmp / f"{i}-{src.stem}.o"
        procs.append(subprocess.Popen(
            [compiler, *flags, f"-I{LIBRARY / 'include'}", f"-I{LIBRARY / 'src'}", f"-I{gen}",
             "-fcallgraph-info=su", "-c", str(src), "-o", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p, src in zip(procs, sources):
        assert p.wait() == 0, f"{src}: {p.stdout.read()}"
    return stack_graph.read_callgraph(sorted(tmp.glob("*.ci")))


EMULATED = [b for b in stack.boards() if stack.profile(b)["framework"].startswith("qemu")]


@pytest.mark.parametrize("board", EMULATED)
def test_stored_frames_and_calls_are_the_compilers(board, tmp_path):
    """Every function of the runtime, the board files and the demo's main in the board's
    profile has the frame and the calls the board's compiler gives it now: a change to the C
    without `python benchmarks/calibrate_stack.py` fails here. (The real boards' profiles need
    their frameworks, laid out by scripts/real_boards.py: recalibrated with --real.)"""
    stored = stack.profile(board)["functions"]
    fresh = _fresh_graph(board, tmp_path)
    stale = []
    for name, fn in sorted(stored.items()):
        if name not in fresh:
            continue
        now = fresh[name]
        calls = {c for c in now.calls if c in stored or c in fresh}
        if str(LIBRARY) in now.unit:       # the runtime and board files: exactly as stored
            # (plus the library calls the linked code makes under another name: __aeabi_memcpy)
            extra = set(fn["calls"]) - calls
            same = now.frame == fn["frame"] and calls <= set(fn["calls"]) and \
                not extra & set(fresh) and all(":" not in c for c in extra)
        else:                              # main: the profile merges the shipped firmwares
            same = now.frame <= fn["frame"] and calls <= set(fn["calls"])
        if not same:
            stale.append(f"{name}: frame {fn['frame']} -> {now.frame}, calls "
                         f"{sorted(set(fn['calls']) ^ calls)} differ")
    assert not stale, (f"{board}'s stack profile is stale (python benchmarks/"
                       f"calibrate_stack.py --boards {board}):\n" + "\n".join(stale))


def test_every_op_has_its_kernel_file():
    for op in ir.ALL_OPS:
        unit = stack.OP_UNITS[op]
        assert (LIBRARY / "src" / "kernels" / f"{unit}_s8.c").is_file(), op


def test_profiles_are_acyclic_and_bounded():
    for board in stack.boards():
        prof = stack.profile(board)
        graph = {n: stack_graph.Function(f["frame"], set(f["calls"])) for n, f in
                 prof["functions"].items()}
        stack_graph.check_acyclic(graph)
        dynamic = {n for n, f in prof["functions"].items() if f.get("dynamic")}
        assert dynamic <= set(stack.VLAS) | set(stack.SCRATCH), (board, dynamic)
        assert all(c in graph for f in graph.values() for c in f.calls), board


def _plan(name, objective="min_ram", **model_opts):
    model = replace(load_model(name), **model_opts)
    plan, _ = plan_model(model, objective)
    return model, plan


def test_prediction_follows_the_kernels_of_the_plan():
    """The conv, dense and depthwise kernels keep a buffer on the stack sized from the layer's
    shape (msf_layer_t.scratch): a model with convolutions predicts its spatial kernels on the
    deepest path, the dense autoencoder does not (its edges run dense kernels only) and counts
    msf_dense's static frame plus its largest layer's buffer; the prediction is the deepest
    path's frames plus the worst interrupt."""
    board = "qemu_f767zi"
    if board not in stack.boards():
        pytest.skip("no profile")
    functions = stack.profile(board)["functions"]
    conv = stack.predict(*_plan("tiny"), board)
    model, plan = _plan("mlperf-tiny-ad")
    dense = stack.predict(model, plan, board)
    spatial = ("conv2d", "depthwise_conv2d")
    assert any(functions[f].get("unit") in spatial for f, _ in conv.path)
    # (msf_dense's own calls into conv2d_s8.c's channel loops count: a kernel's calls are made
    # whatever their file; measured 2,004 B on qemu_esp32s3 against 1,904 B when they did not)
    frames = dict(dense.path)
    assert "msf_layer_column" not in frames and "msf_dense" in frames
    after = [f for f, _ in dense.path[[f for f, _ in dense.path].index("msf_dense") + 1:]]
    assert after and set(after[:1]) <= set(functions["msf_dense"]["calls"])
    buffer = max(kernel_data.scratch_bytes(layer, False) for layer in model.layers)
    assert buffer == 2 * (640 + 4)              # its 640 inputs expanded, and a group's padding
    assert dict(dense.path)["msf_dense"] == functions["msf_dense"]["frame"] + \
        stack._round(buffer, 8)
    for p in (conv, dense):
        assert p.path[0][0] == stack.profile(board)["entry"]
        assert p.bytes == sum(b for _, b in p.path) + p.interrupt
        assert p.interrupt == 108                 # SysTick over the FPU's extended frame


@pytest.mark.parametrize("function", sorted(stack.SCRATCH))
def test_the_kernels_buffers_are_the_layers_scratch(function):
    """stack.SCRATCH's functions declare their buffer as the C does: one variable-length array
    of the layer's scratch bytes in words, and the generator sets scratch as the predictor
    counts it (kernel_data.scratch_bytes)."""
    import re
    name = function.split(":")[-1]
    source, = [p for p in sorted((LIBRARY / "src" / "kernels").glob("*.c"))
               if re.search(rf"void {name}\(", p.read_text())]
    text = source.read_text()
    body = text[re.search(rf"void {name}\(", text).start():]
    body = body[:body.index("\n}\n")]
    assert re.findall(r"int32_t \w+\[([^\]]*l->[^\]]*)\];", body) == ["(l->scratch + 3) / 4"]
    model = quantized_model("tiny")
    sources = generate(model, plan_model(model, "vanilla")[0])
    inits = sources.source.split("msf_layers[")[1].splitlines()[1:]
    checked = 0
    for i, layer in enumerate(model.layers):
        if layer.op in stack.SCRATCH[function]:
            set_to = int(re.search(r"\.scratch = (\d+),", inits[i]).group(1))
            # a depthwise layer's folding depends on its weights: the predictor counts it folded
            assert set_to == stack.layer_scratch(layer) or \
                (layer.op == ir.DEPTHWISE and set_to == 0), (i, set_to)
            checked += 1
    assert checked or function == "msf_dense"


def test_the_executors_arrays_grow_with_the_block():
    """The H-cache executor's variable-length arrays take a slot per layer of the block: the
    same path is deeper for a block of more layers, by the arrays' bytes."""
    board = stack.boards()[0]
    graph = stack._graph(board)
    units = frozenset({"conv2d"})
    short, _ = graph.deepest("msf_run_edge", units | {"h_cache"}, "h_cache", 2)
    long, _ = graph.deepest("msf_run_edge", units | {"h_cache"}, "h_cache", 12)
    align = graph.align
    sizes = lambda n: sum(stack._round(b, align) for b in stack.VLAS["msf_run_h_cache"][1](n))
    assert long - short == sizes(12) - sizes(2) >= 10 * 80
    # a single spatial layer (a vanilla plan's edge, n = 1) runs the same path with its arrays
    # (measured on qemu_hifive1b, tiny vanilla: 1,108 B against 976 B predicted without them)
    one, _ = graph.deepest("msf_run_edge", units | {"h_cache"}, "h_cache", 1)
    assert short - one == sizes(2) - sizes(1) > 0
    model = quantized_model("tiny")
    single = next(e for e in plan_model(model, "vanilla")[0].blocks
                  if model.layers[e.first].op == ir.CONV)
    assert stack.executor(model, single) == "h_cache"
    # a line-buffer edge goes from the dispatch to its own executor: only its arrays count
    _, path = graph.deepest("msf_run_edge", units | {"line_buffer"}, "line_buffer", 12)
    frames = dict(path)
    static = stack.profile(board)["functions"]
    assert frames["msf_run_edge"] == static["msf_run_edge"]["frame"]
    assert "msf_run_h_cache" not in frames
    lb = sum(stack._round(b, align) for b in stack.VLAS["msf_run_line_buffer"][1](12))
    assert frames["msf_run_line_buffer"] == static["msf_run_line_buffer"]["frame"] + lb


def _facts(board, ram, stack_reserve):
    return BoardFacts(board=board, flash=None, ram=ram, framework_ram=700, stack=stack_reserve)


def test_auto_budget_keeps_the_predicted_stack(tmp_path):
    """A board whose fixed reserve is below the plan's predicted stack: `auto` budgets the
    prediction instead (the plan, the summary and the header say so), and the budget error
    names it."""
    board = "qemu_f767zi"
    if board not in stack.boards():
        pytest.skip("no profile")
    opts = integration.Options("tiny", "min_ram", float("inf"), None, "exact", "stream")
    facts = _facts(board, 16_384, 1024)
    summary = integration._generate(opts, tmp_path / "a", facts, 216_000_000)
    predicted = summary["predicted_stack_bytes"]
    assert predicted > 1024 and summary["stack_bytes"] == predicted
    assert summary["ram_total_bytes"] == summary["peak_ram_bytes"] + predicted + 700 + 0
    header = (tmp_path / "a" / "msf_model" / "include" / "msf_model.h").read_text()
    assert f"#define MSF_MODEL_STACK_PREDICTED {predicted} " in header
    # a reserve above the prediction is kept as it is
    roomy = integration._generate(opts, tmp_path / "b", _facts(board, 16_384, 8192),
                                  216_000_000)
    assert roomy["stack_bytes"] == 8192 and roomy["predicted_stack_bytes"] == predicted
    # too little RAM once the predicted stack is in: the error counts it
    with pytest.raises(MsfError, match=rf"stack {predicted} B"):
        integration._generate(opts, tmp_path / "c", _facts(board, predicted + 700 + 100, 1024),
                              216_000_000)


def test_real_boards_reserve_at_least_the_demos_prediction():
    """boards.yaml's stack reserve of a real board with a profile holds the demo's plan
    (mbv2-w0.35-paper, least RAM, streamed output) as predicted on it: the reserve is sized
    from the prediction, not guessed (the HiFive1's linker-sized segment above all)."""
    import yaml
    table = yaml.safe_load((REPO / "msf_pio" / "pio" / "boards.yaml").read_text())
    model, plan = _plan("mbv2-w0.35-paper", stream_output=True)
    checked = 0
    for board, facts in table.items():
        if stack.profile(board) is None:
            continue
        predicted = stack.predict(model, plan, board).bytes
        assert facts["stack"] >= predicted, (board, facts["stack"], predicted)
        symbol = (facts.get("link_symbols") or {}).get("__stack_size")
        assert symbol is None or int(str(symbol), 0) == facts["stack"], board
        checked += 1
    assert checked >= 2


def _declared_vlas(path: Path, function: str) -> list:
    """The variable-length arrays `function` declares in C: (element type, length in n)."""
    import re
    text = path.read_text()
    body = text[text.index(f"void {function}("):]
    body = body[:body.index("\n}\n")]
    found = []
    for decl in re.findall(r"^\s+(?:const )?(msf_view_t|int32_t|int) ([^;=(]*\[[^;]*);", body,
                           re.M):
        ctype, names = decl
        for length in re.findall(r"\w+\[([^\]]*\bn\b[^\]]*)\]", names):
            found.append((ctype, length))
    return found


@pytest.mark.parametrize("function", sorted(stack.VLAS))
def test_the_bounded_arrays_are_the_ones_the_c_declares(function):
    """stack.VLAS mirrors the executors' variable-length arrays: the arrays library/src
    declares (type, length in the block's n) give the same bytes for every n."""
    source, = [p for p in sorted((LIBRARY / "src").rglob("*.c"))
               if f"void {function}(" in p.read_text()]
    declared = _declared_vlas(source, function)
    assert declared, function
    size = {"msf_view_t": stack.VIEW, "int32_t": 4, "int": 4}
    import re

    def count(length, n):          # a * n + b, as the C writes it ("2 * n", "n + 1")
        m = re.fullmatch(r"(?:(\d+) \* )?n(?: \+ (\d+))?", length)
        assert m, f"{function}: an array of {length} elements"
        return int(m.group(1) or 1) * n + int(m.group(2) or 0)

    for n in (0, 1, 5, 17):
        from_c = sorted(size[t] * count(length, n) for t, length in declared)
        assert sorted(stack.VLAS[function][1](n)) == from_c, (function, declared)


def test_xtensa_frames_beyond_movi_come_from_their_literal():
    """GCC's Xtensa prologue for a frame beyond movi's 12 bits loads it from the literal pool
    (objdump shows the literal's value in parentheses, with whatever symbol lies there) and
    subtracts it from a1; a literal that is a function's address is a call's target."""
    fn = {"frame": 0, "calls": set(), "dynamic": False}
    for mnemonic, ops in [
            ("entry", "a1, 48"),
            ("l32r", "a9, 500005c8 <msf_qemu_xtensa_vectors+0x1c8> (900 <__stack_size-0x3700>)"),
            ("sub", "a1, a1, a9"),
            ("l32r", "a8, 50000554 <msf_qemu_xtensa_vectors+0x154> (500026b8 <channels2>)"),
            ("callx8", "a8"),
            ("l32r", "a8, 50000558 <msf_qemu_xtensa_vectors+0x158> (50002318 <channels1+0x4>)"),
            ("callx8", "a8")]:
        stack_graph._xtensa(mnemonic, ops, fn)
    assert fn["frame"] == 48 + 0x900 and not fn["dynamic"]
    assert fn["calls"] == {"channels2", stack_graph.INDIRECT}


def _dispatched(header: str, template: str) -> set:
    """The functions a dispatch template of library/src calls, each under its op's or scheme's
    bit (msf_layer_column_of: every column kernel; msf_run_edge_of: every executor and head)."""
    import re
    text = (LIBRARY / "src" / header).read_text()
    body = text[text.index(f"void {template}("):]
    body = body[:body.index("\n}\n")]
    return set(re.findall(r"if \(\(?(?:ops|schemes|heads) & [^{]*\{\s+(\w+)\(", body))


@pytest.mark.parametrize("board", stack.boards())
def test_every_profile_holds_every_kernel_and_executor(board):
    """Whatever model a board was calibrated with (a firmware links only its plan's kernels),
    its profile holds every call a model can make: the column kernel of every op and every
    executor and head kernel, as the runtime's dispatch templates call them, the kernels the
    schedule calls on whole tensors, and each form of specialised kernel."""
    functions = stack.profile(board)["functions"]
    columns = _dispatched("edge.h", "msf_layer_column_of")
    edges = _dispatched("executor.h", "msf_run_edge_of")
    assert len(columns) >= 12 and {"msf_run_line_buffer", "msf_dense"} <= edges
    assert columns <= set(functions["msf_layer_column"]["calls"]), board
    assert edges <= set(functions["msf_run_edge"]["calls"]), board
    assert set(stack.WHOLE_KERNELS) | set(stack.SPECIALISED) <= set(functions), board
    assert all(functions[f].get("unit") == u for f, u in stack.SPECIALISED.items()), board


def test_a_profile_lacking_a_kernel_refuses_to_predict(monkeypatch):
    """A profile calibrated before a kernel was (or from a firmware that did not hold it) is
    refused in one line naming the board, the missing code and the command, not counted short."""
    board = "qemu_f767zi"
    model, plan = _plan("mlperf-tiny-ad", "vanilla")
    prof = stack.profile(board)
    functions = {n: f for n, f in prof["functions"].items() if f.get("unit") != "dense"}
    stale = {**prof, "functions": {n: {**f, "calls": [c for c in f["calls"] if c in functions]}
                                   for n, f in functions.items()}}
    monkeypatch.setattr(stack, "_graph", lambda b: stack._Graph(stale))
    with pytest.raises(MsfError) as error:
        stack.predict(model, plan, board)
    message = str(error.value)
    assert "\n" not in message and board in message and "no dense code" in message
    assert f"calibrate_stack.py --boards {board}" in message


UPSAMPLING = {"name": "upsampling", "input": {"shape": [6, 6, 4]}, "weights": {"random": 3},
              "layers": [{"op": "transpose_conv", "out": 8, "kernel": 3, "stride": 2},
                         {"op": "resize_nearest"}]}


def test_upsampling_edges_stack_within_the_prediction(tmp_path):
    """An upsampling layer runs by its whole-tensor kernel, called by the schedule itself
    (vanilla), or by its column kernel in a line-buffer block it begins (least RAM; measured
    984 B against 692 B predicted when the whole-tensor kernels were not in the profiles): the
    path predicted for each goes through the kernel that runs, and on an emulated board of each
    instruction set the painted stack of the least-RAM plan (and on qemu_f767zi of the vanilla
    one) stays within the prediction."""
    import json
    import re

    import yaml

    from msf_pio.pio import bootstrap
    from msf_pio.pio.project import make_project, pio, result_lines

    path = tmp_path / "upsampling.yaml"
    path.write_text(yaml.safe_dump(UPSAMPLING))
    model = load_model(str(path))
    for objective, kernels in (("vanilla", {"msf_transpose_conv_s8", "msf_resize_nearest_s8"}),
                               ("min_ram", {"msf_transpose_conv_column",
                                            "msf_resize_nearest_column"})):
        plan, _ = plan_model(model, objective)
        assert (objective == "min_ram") == any(e.fused for e in plan.blocks)
        for board in EMULATED:
            frames = dict(stack.predict(model, plan, board).path)
            assert kernels & set(frames), (board, objective, frames)
            assert (stack.SCHEDULE_CALLS in frames) == (objective == "min_ram")
    tools = {"arm-none-eabi-gcc", "qemu-system-arm", "riscv64-unknown-elf-gcc",
             "qemu-system-riscv32", "xtensa-lx106-elf-gcc", "qemu-system-xtensa"}
    if not all(shutil.which(t) for t in tools):
        pytest.skip("the cross compilers and QEMU are not installed (scripts/setup.sh)")
    core = str(tmp_path / "core")
    bootstrap.install_tool_scons(core, log=lambda _msg: None)
    # one board per instruction set (Armv7E-M, RV32, Xtensa LX7)
    runs = [("min_ram", board) for board in ("qemu_f767zi", "qemu_hifive1b", "qemu_esp32s3")] \
        + [("vanilla", "qemu_f767zi")]
    for objective, board in runs:
        project = make_project(tmp_path / objective, model=str(path), objective=objective)
        code, out = pio(core, project, "run", "-e", board, "-t", "upload")
        assert code == 0, out[-3000:]
        summary = json.loads((project / ".pio" / "build" / board / "msf_generated" /
                              "stamp.json").read_text())["summary"]
        line = result_lines(out)[0]
        measured = int(re.search(r" stack=(\d+) ", line).group(1))
        assert "status=ok" in line, line
        assert measured <= summary["predicted_stack_bytes"], (objective, board, measured)
        print(f"upsampling {objective} on {board}: stack {measured} B measured, "
              f"{summary['predicted_stack_bytes']} B predicted")


def test_riscv_start_up_loading_the_stack_pointer_is_no_frame():
    """freedom-e-sdk's _enter sets sp to the stack's top with `la sp, _sp` (auipc, then an add
    of the low part, negative here): an address, not a frame on the stack; a later decrement
    is."""
    fn = {"frame": 0, "calls": set(), "dynamic": False}
    for mnemonic, ops in [("auipc", "sp,0x5fff2"), ("add", "sp,sp,-244 # 80001f40 <_sp>"),
                          ("csrr", "a0,mhartid"), ("addi", "sp,sp,-32")]:
        stack_graph._riscv(mnemonic, ops, fn)
    assert fn["frame"] == 32

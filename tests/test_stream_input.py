"""The streamed network input (issue 8): the first edge pulls the input row by row from a
source into a ring of the rows it still reads (msf_pio/fusion/stream_input.py). Checked three
ways: the reference through a ring of exactly those rows (one row less raises), the generated C
(output bytes of the buffered plan, predicted arena and MACs, every row pulled once and in
order, sanitizer-clean), and the platformio.ini / CLI options."""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings

from msf_pio.cli import main
from msf_pio.codegen.generate import generate
from msf_pio.codegen.host import HostBuild
from msf_pio.errors import MsfError
from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.model.spec import spec_to_model
from msf_pio.reference import run_layer, run_model
from msf_pio.reference.plan import input_ring_rows, run_edge, run_plan
from msf_pio.reference.regions import RingError
from msf_pio.reference.stream_input import StreamedInput
from msf_pio.verify import quantized_model, seeded_input
from tests.random_models import small_specs


def streamed(model, output=False):
    return dataclasses.replace(model, stream_input=True, stream_output=output)


def check_first_edges(model, x):
    """Every edge reading the streamed input: through a ring of its input rows it gives the
    unfused tensor and pulls every row once, in order; a ring one row smaller raises."""
    tensors = {0: x}
    for i in range(model.n_layers):
        tensors[i + 1] = run_layer(model, i, tensors)
    for e in build_graph(model, "exact").edges:
        if e.first != 0:
            continue
        rows = input_ring_rows(e)
        assert any(b["bytes"] == rows * x.shape[1] * x.shape[2]
                   for b in e.detail["scratch"] if b["kind"] == "input")
        src = StreamedInput(lambda y: x[y], x.shape, rows)
        got = {0: src}
        run_edge(model, e, got)
        src.pull(x.shape[0])
        assert np.array_equal(got[e.last + 1], tensors[e.last + 1]), e
        assert src.pulled == list(range(x.shape[0]))
        if rows > 1:
            with pytest.raises(RingError):
                run_edge(model, e, {0: StreamedInput(lambda y: x[y], x.shape, rows - 1)})


def test_tiny_first_edges_through_the_reference():
    model = streamed(quantized_model("tiny"))
    check_first_edges(model, seeded_input(model, 0))


# later strides ask only for the pool's first row, whose padded window reads one input row
CLIPPED_FIRST_WINDOW = {"name": "clipped", "input": {"shape": [6, 6, 1]}, "layers": [
    {"op": "avg_pool", "kernel": 2, "stride": 2, "padding": 1, "count_pad": True},
    {"op": "pointwise", "out": 1},
    {"op": "conv2d", "out": 1, "kernel": 1, "stride": [2, 1], "act": "none"},
    {"op": "conv2d", "out": 1, "kernel": 1, "stride": [2, 1], "act": "none"}]}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(max_layers=7, residuals=False))
@example(spec=CLIPPED_FIRST_WINDOW)
def test_random_first_edges_through_the_reference(spec):
    model = streamed(quantized_model(spec_to_model(spec)))
    check_first_edges(model, seeded_input(model, 0))


def check_c(model, plan, x, ref, sanitize=True):
    build = HostBuild(generate(model, plan))
    try:
        run = build.run(x)
        assert np.array_equal(run.output, ref)
        assert run.figures["rows_pulled"] == model.input_shape[0]
        assert run.figures["rows_in_order"] == 1
        assert build.run(x, "count").figures["macs_counted"] == plan.macs
        assert build.run(x, "measure").figures["arena_measured"] == plan.peak_ram
        if sanitize:
            assert np.array_equal(build.run(x, "sanitize").output, ref)
    finally:
        build.close()


@pytest.mark.parametrize("output", [False, True])
def test_tiny_plans_in_c(output):
    buffered = quantized_model("tiny")
    model = streamed(buffered, output)
    x = seeded_input(model, 0)
    ref = run_model(buffered, x).reshape(-1)
    graph = build_graph(model, "exact")
    for plan in (solvers.vanilla(graph), solvers.p1_min_ram(graph),
                 solvers.p1_min_ram(graph, 1.0), solvers.p1_min_ram(graph, 1.3)):
        assert np.array_equal(run_plan(model, plan.blocks, x).reshape(-1), ref)
        check_c(model, plan, x, ref)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(max_layers=7, residuals=False))
def test_random_plans_in_c(spec):
    model = streamed(quantized_model(spec_to_model(spec)))
    x = seeded_input(model, 0)
    ref = run_model(model, x).reshape(-1)
    graph = build_graph(model, "exact")
    for plan in (solvers.p1_min_ram(graph), solvers.p1_min_ram(graph, 1.0)):
        check_c(model, plan, x, ref, sanitize=False)


def test_mcunet_vww_in_20_kb_at_f_1_3():
    """Issue 8's figure: with streamed input and output, mcunet-vww-5fps at F <= 1.3 needs at
    most 20,000 B of activation RAM in total, and its C gives the buffered plan's bytes."""
    buffered = quantized_model("mcunet-vww-5fps")
    model = streamed(buffered, output=True)
    plan = solvers.p1_min_ram(build_graph(model, "exact"), 1.3)
    assert plan.overhead <= 1.3 and plan.io_bytes == 0
    assert plan.peak_ram <= 20_000
    x = seeded_input(model, 0)
    ref = run_model(buffered, x).reshape(-1)
    assert np.array_equal(run_plan(model, plan.blocks, x).reshape(-1), ref)
    check_c(model, plan, x, ref)


def test_stream_input_costs_the_rows_it_keeps():
    """The least-RAM plan's figure moves by the input ring only: the buffered plan's edges plus
    the rows of the first edge (the plan may change, never below the buffered one)."""
    model = quantized_model("mcunet-vww-5fps")
    plain = solvers.p1_min_ram(build_graph(model, "exact"), math.inf)
    stream = solvers.p1_min_ram(build_graph(streamed(model), "exact"), math.inf)
    assert stream.peak_ram >= plain.peak_ram
    first = stream.blocks[0]
    assert first.first == 0 and input_ring_rows(first) < model.input_shape[0]


def test_an_input_read_by_an_add_is_refused():
    spec = {"name": "skip-input", "input": {"shape": [8, 8, 4]}, "weights": {"random": 1},
            "layers": [{"op": "conv2d", "out": 4, "kernel": 3, "stride": 1, "padding": "same"},
                       {"op": "add", "from": "input"}]}
    with pytest.raises(MsfError, match="streamed input"):
        build_graph(streamed(spec_to_model(spec)), "exact")


def test_platformio_option(tmp_path):
    from msf_pio.pio.boards import board_facts
    from msf_pio.pio.integration import read_options
    facts = board_facts("nucleo_f767zi", lambda key, default=None: default)

    def read(value):
        values = {"custom_msf_model": "tiny", "custom_msf_input": value}
        return read_options(lambda k, d=None: values.get(k, d), facts, tmp_path, "e")
    assert read("stream").input == "stream" and read("buffer").input == "buffer"
    assert read(None).input == "buffer"
    with pytest.raises(MsfError, match="custom_msf_input.*must be buffer or stream"):
        read("camera")


def test_cli_input_stream(capsys):
    assert main(["solve", "mcunet-vww-5fps", "--max-overhead", "1.3", "--input-mode", "stream",
                 "--output-mode", "stream"]) == 0
    out = capsys.readouterr().out
    assert "+ I/O 0 B" in out and "(input stream, output stream)" in out
    with pytest.raises(SystemExit):
        main(["solve", "tiny", "--input-mode", "camera"])


@pytest.mark.parametrize("target", ["cortex-m7", "rv32imac", "xtensa-lx106"])
def test_streamed_code_cross_compiles_warning_free(target, tmp_path):
    """The generated entry points of every input/output mode and the executors that pull rows."""
    import shutil
    import subprocess

    from msf_pio.codegen.host import LIBRARY, write_sources
    from tests.cross import CROSS
    if shutil.which(CROSS[target][0]) is None:
        pytest.skip(f"{CROSS[target][0]} is not installed (scripts/setup.sh installs it)")
    base = quantized_model("tiny")
    runtime = [LIBRARY / "src" / "executor.c", LIBRARY / "src" / "schemes" / "h_cache.c",
               LIBRARY / "src" / "schemes" / "line_buffer.c"]
    for stream_in in (False, True):
        for stream_out in (False, True):
            model = dataclasses.replace(base, stream_input=stream_in, stream_output=stream_out)
            write_sources(generate(model, solvers.p1_min_ram(build_graph(model, "exact"))),
                          tmp_path)
            for flags in ([], ["-DMSF_COUNT_MACS", "-DMSF_MEASURE_ARENA"]):
                for src in [tmp_path / "msf_model.c", *runtime]:
                    cmd = [*CROSS[target], "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror",
                           "-ffreestanding", *flags, f"-I{LIBRARY / 'include'}",
                           f"-I{tmp_path}", "-c", str(src), "-o", str(tmp_path / "m.o")]
                    proc = subprocess.run(cmd, capture_output=True, text=True)
                    assert proc.returncode == 0, proc.stderr

"""Stateful streaming models (microWakeWord): a file with state variables (VAR_HANDLE,
READ_VARIABLE, CONCATENATION over time, STRIDED_SLICE, ASSIGN_VARIABLE) and an initial-state
subgraph run by CALL_ONCE, built with the flatbuffers schema (tests/tflite_builder.py), runs
frame by frame: the reference and the generated C give TFLite Micro's bytes over a sequence of
frames (its interpreter keeps the variables across invoke()), the state lives in the arena
(measured == predicted, the plan JSON counts it) and msf_model_reset restores the file's
initial values."""
import numpy as np
import pytest

from msf_pio.codegen.generate import generate
from msf_pio.codegen.host import HostBuild
from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.model import ir, load_model
from msf_pio.reference import run_model
from msf_pio.reference.executor import initial_state
from msf_pio.reference.plan import run_plan

from .test_reference_tflm import runtime
from .tflite_builder import streaming_net

FRAMES = 7


def tflm_frames(data: bytes, frames) -> list[np.ndarray]:
    """TFLite Micro's output after each frame, on one interpreter (the state carried)."""
    interpreter = runtime.Interpreter.from_bytes(data, arena_size=1 << 20)
    out = []
    for x in frames:
        interpreter.set_input(x, 0)
        interpreter.invoke()
        out.append(interpreter.get_output(0).reshape(-1).copy())
    return out


@pytest.fixture(scope="module")
def streaming(tmp_path_factory):
    path = tmp_path_factory.mktemp("streaming") / "wake.tflite"
    path.write_bytes(streaming_net(3))
    model = load_model(str(path))
    rng = np.random.default_rng(5)
    frames = [rng.integers(-128, 128, (1, 2, 6)).astype(np.int8) for _ in range(FRAMES)]
    return path, model, frames, tflm_frames(path.read_bytes(), frames)


def test_the_rings_become_stream_layers_and_the_time_slice_a_crop(streaming):
    _, model, _, _ = streaming
    assert [l.op for l in model.layers] == [ir.STREAM, ir.CONV, ir.STREAM, ir.CROP,
                                            ir.DEPTHWISE, ir.DENSE]
    assert [model.layers[l].state_rows for l in model.state_layers()] == [3, 2]
    # the state region: each ring's output, its kept rows then the frame's 2 new rows
    assert model.state_bytes() == (3 + 2) * 6 + (2 + 2) * 8
    assert model.input_shape == (2, 1, 6) and model.layers[3].begin == 1


def test_reference_matches_tflm_frame_by_frame(streaming):
    _, model, frames, theirs = streaming
    state = initial_state(model)
    for k, (x, ref) in enumerate(zip(frames, theirs)):
        assert np.array_equal(run_model(model, model.input_io.hwc(x), state).reshape(-1), ref), k
    fresh = [run_model(model, model.input_io.hwc(x)).reshape(-1) for x in frames]
    assert np.array_equal(fresh[0], theirs[0])       # the file's initial state, not zeros
    assert any(not np.array_equal(a, b) for a, b in zip(fresh[1:], theirs[1:]))  # state counts


def test_generated_c_matches_tflm_over_frames_with_the_state_in_the_arena(streaming):
    _, model, frames, theirs = streaming
    graph = build_graph(model, "exact")
    hwc = np.stack([model.input_io.hwc(x) for x in frames])
    for plan in (solvers.vanilla(graph), solvers.p1_min_ram(graph)):
        assert all(e.ram >= model.state_bytes() for e in plan.blocks)
        assert plan.to_json()["state_bytes"] == model.state_bytes()
        state = initial_state(model)
        ref = [run_plan(model, plan.blocks, x, state=state).reshape(-1) for x in hwc]
        assert all(np.array_equal(a, b) for a, b in zip(ref, theirs)), plan.label
        sources = generate(model, plan)
        assert sources.layout.size == plan.peak_ram
        assert "void msf_model_reset(void);" in sources.header
        build = HostBuild(sources)
        try:
            plain = build.run_frames(hwc).output
            assert np.array_equal(plain, np.stack(theirs)), plan.label
            if plan.objective == "vanilla":      # measuring runs two frames, then resets
                measured = build.run_frames(hwc, "measure")
                assert measured.figures["arena_measured"] == plan.peak_ram
                assert np.array_equal(measured.output, plain)
        finally:
            build.close()


@pytest.mark.parametrize("update, fragment", [
    ((0, 2), "operator 11 (STRIDED_SLICE): state variable 'stream_1/states' may only be "
             "assigned the last rows of its own stream CONCATENATION (a ring buffer)"),
])
def test_a_state_that_is_not_a_ring_buffer_is_one_line(tmp_path, update, fragment):
    from .test_tflite_import import _one_line_error
    path = tmp_path / "not_a_ring.tflite"
    path.write_bytes(streaming_net(3, state_update=update))
    _one_line_error(path, fragment)


def test_export_writes_the_state_variables_tflm_runs(streaming, tmp_path):
    """The exporter writes each stream layer back as a state variable with its initial value
    (a CALL_ONCE subgraph): TFLite Micro gives the same bytes over frames, and the file reads
    back as the same layers."""
    from msf_pio.export.tflite import tflite_bytes
    _, model, frames, theirs = streaming
    data = tflite_bytes(model)
    assert np.array_equal(np.stack(tflm_frames(data, [model.input_io.hwc(x)[None]
                                                      for x in frames])), np.stack(theirs))
    path = tmp_path / "exported.tflite"
    path.write_bytes(data)
    back = load_model(str(path))
    assert [(l.op, l.out_shape, l.state_rows, l.begin) for l in back.layers] == \
        [(l.op, l.out_shape, l.state_rows, l.begin) for l in model.layers]
    for l in model.state_layers():
        assert np.array_equal(back.layers[l].state_init, model.layers[l].state_init)


def test_run_takes_a_sequence_of_frames(streaming, tmp_path, capsys):
    """`msf-pio run` on a streaming model: frames along a first axis, in the file's own type
    and shape, run in order from the initial state; one output per frame."""
    from msf_pio.cli import main
    path, _, frames, theirs = streaming
    np.save(tmp_path / "frames.npy", np.stack(frames))
    assert main(["run", str(path), "--input", str(tmp_path / "frames.npy"),
                 "--out", str(tmp_path / "out.npy")]) == 0
    out = np.load(tmp_path / "out.npy")
    assert out.shape == (FRAMES, 1, 4) and np.array_equal(out.reshape(FRAMES, -1),
                                                          np.stack(theirs))
    assert "wrote" in capsys.readouterr().out

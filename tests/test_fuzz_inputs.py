"""Property-based fuzzing of what a user hands msf-pio (issue 19): YAML specs (valid ones with
hostile values put in, and arbitrary text and bytes), and the solve command's options. Every
case either succeeds or ends in exactly one `msf-pio: error:` line with exit status 2 (1 for an
infeasible budget): never a traceback (status 3), never a hang (hypothesis' deadline), and a
spec that is accepted gives generated C whose output equals the numpy reference. The .tflite
and ONNX importers are fuzzed by tests/test_import_fuzz.py (mutated files)."""
import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msf_pio import cli
from msf_pio.errors import MsfError
from msf_pio.codegen.generate import generate
from msf_pio.codegen.host import HostBuild
from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.model import load_model
from msf_pio.reference import run_model
from msf_pio.verify import quantized_model

from .random_models import small_specs

SETTINGS = dict(deadline=20_000, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
HOSTILE = st.one_of(
    st.integers(-2, 3), st.integers(min_value=2**31 - 2, max_value=2**31 + 2),
    st.sampled_from([10**26, -(10**26), 100000, 10**8, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
    st.text(max_size=30), st.lists(st.integers(-3, 10**9), max_size=4),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
FIELDS = ["out", "kernel", "stride", "padding", "act", "expand", "repeat", "from", "input",
          "beta", "alpha", "slopes", "residual", "name", "op", "bogus"]


def run_cli(capsys, argv) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


def assert_one_line(code: int, err: str, source: str | None = None) -> None:
    assert code in (0, 1, 2), (code, err)       # 3: an internal error, a bug
    if code == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("msf-pio: error: "), err
        if source:
            assert lines[0].startswith(f"msf-pio: error: {source}"), err


@st.composite
def hostile_specs(draw):
    """A valid small spec with a few fields (or the input shape, the top level) replaced."""
    spec = draw(small_specs(max_layers=6))
    layers = spec["layers"]            # (the top level's "layers" may be replaced in the loop)
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.sampled_from(["layer", "layer", "input", "top"]))
        if where == "layer":
            layer = draw(st.sampled_from(layers))
            layer[draw(st.sampled_from(FIELDS))] = draw(HOSTILE)
        elif where == "input":
            spec["input"] = {"shape": draw(st.one_of(HOSTILE, st.lists(HOSTILE, max_size=4)))}
        else:
            spec[draw(st.sampled_from(["name", "weights", "layers", "extra"]))] = draw(HOSTILE)
    return spec


@settings(max_examples=60, **SETTINGS)
@given(hostile_specs())
def test_hostile_specs_are_one_line_errors(tmp_path_factory, capsys, spec):
    path = tmp_path_factory.mktemp("spec") / "net.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, err = run_cli(capsys, ["solve", str(path), "--max-overhead", "1.3"])
    assert_one_line(code, err, str(path))


@settings(max_examples=5, **{**SETTINGS, "deadline": None})
@given(hostile_specs())
def test_accepted_specs_run_bit_exact_in_c(tmp_path_factory, spec):
    """What the fuzzed loader accepts is computed right: small models, least RAM, in C."""
    path = tmp_path_factory.mktemp("spec") / "net.yaml"
    path.write_text(yaml.safe_dump(spec))
    try:
        model = load_model(str(path))
    except MsfError:
        return
    if np.prod(model.input_shape) > 4096 or model.n_layers > 8:
        return
    model = quantized_model(model)
    x = np.random.default_rng(0).integers(-128, 128, model.input_shape, dtype=np.int8)
    plan = solvers.p1_min_ram(build_graph(model, "exact"), 1.3)
    build = HostBuild(generate(model, plan))
    try:
        assert np.array_equal(build.run(x).output, run_model(model, x).reshape(-1))
    finally:
        build.close()


@settings(max_examples=40, **SETTINGS)
@given(st.one_of(st.text(max_size=400), st.binary(max_size=400).map(lambda b: b"\xff" + b)))
def test_arbitrary_yaml_text_and_bytes(tmp_path_factory, capsys, data):
    path = tmp_path_factory.mktemp("raw") / "net.yaml"
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    code, err = run_cli(capsys, ["solve", str(path)])
    assert code == 2
    assert_one_line(code, err, str(path))


OPTIONS = {
    "--objective": st.sampled_from(["vanilla", "heuristic", "min_ram", "min_macs",
                                    "min_latency", "bogus", ""]),
    "--max-overhead": st.sampled_from(["1", "1.3", "inf", "0.5", "nan", "-1", "x", "1e400"]),
    "--ram-limit": st.sampled_from(["64kB", "1.5", "0", "100", "64KiB", "1e9", "2.5kB", "x",
                                    "inf", "99999999999999999999999"]),
    "--cost-model": st.sampled_from(["exact", "paper", "bogus"]),
    "--schemes": st.sampled_from(["h-cache", "tiles,line-buffer", "nope", ",", ""]),
    "--board": st.sampled_from(["qemu_f767zi", "nucleo_f412zg", "hifive1-revb", "nosuchboard",
                                ""]),
    "--input-mode": st.sampled_from(["buffer", "stream", "x"]),
    "--json": st.just(None),
}


@settings(max_examples=50, **SETTINGS)
@given(st.dictionaries(st.sampled_from(sorted(OPTIONS)), st.just(0), max_size=4).flatmap(
    lambda keys: st.fixed_dictionaries({k: OPTIONS[k] for k in keys})))
def test_solve_options(capsys, options):
    argv = ["solve", "tiny"]
    for flag, value in options.items():
        argv += [flag] if value is None else [flag, value]
    code, err = run_cli_catching_exit(capsys, argv)
    assert_one_line(code, err)


def run_cli_catching_exit(capsys, argv) -> tuple[int, str]:
    """cli.main, with argparse's own exit (a bad choice) as its status."""
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err

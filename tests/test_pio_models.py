"""The product end to end, offline: `pio run -e <emulated board> -t upload` builds the demo
firmware for a model declared in platformio.ini, runs it in QEMU, and its MSF line shows the
output CRC equal to the host reference and the painted arena equal to the prediction;
`pio test` passes; options regenerate only when they change; bad options stop the build."""
import json
import re
import shutil
from pathlib import Path

import pytest

from msf_pio.pio import PLATFORM_DIR, bootstrap
from msf_pio.pio.boards import board_facts
from msf_pio.pio.project import make_project, pio, result_lines
from msf_pio.verify import crc32, quantized_model, seeded_input
from msf_pio.reference import run_model

TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm", "riscv64-unknown-elf-gcc", "qemu-system-riscv32",
         "xtensa-lx106-elf-gcc", "qemu-system-xtensa")
BOARDS = ("qemu_f767zi", "qemu_f412zg", "qemu_hifive1b", "qemu_esp32c3", "qemu_esp32s3")
MODELS = ("mbv2-w0.35-paper", "mn2-vww5-paper", "mn2-320k-paper", "mbv2-w0.35-r144",
          "mlperf-tiny-kws")
MLPERF_TINY = ("mlperf-tiny-kws", "mlperf-tiny-vww", "mlperf-tiny-ad", "mlperf-tiny-ic")
LINE = re.compile(r" hz=(\d+) .* arena=(\d+) arena_pred=(\d+) .* crc=(0x[0-9a-f]{8}) "
                  r"crc_ref=(0x[0-9a-f]{8}) status=(\w+)$")


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/setup.sh installs them)")
    path = str(tmp_path_factory.mktemp("pio-core"))
    bootstrap.install_tool_scons(path, log=lambda _msg: None)
    return path


def manifest(board):
    return json.loads((Path(PLATFORM_DIR) / "boards" / f"{board}.json").read_text())


F_CPU = {board: int(manifest(board)["build"]["f_cpu"].rstrip("L")) for board in BOARDS}


def emulated_facts(board):
    def get(key, default=None):
        value = manifest(board)
        for part in key.split("."):
            value = value.get(part, {}) if isinstance(value, dict) else {}
        return value if value != {} else default
    return board_facts(board, get)


def stack_used(line):
    """The result line's painted stack high-water (codegen/stack.py predicts its bound)."""
    return int(re.search(r" stack=(\d+) ", line).group(1))


def reference_crc(name):
    model = quantized_model(name)
    return f"0x{crc32(run_model(model, seeded_input(model, 0))):08x}"


@pytest.mark.parametrize("name", MODELS)
def test_min_ram_plan_runs_on_every_emulated_board(core, tmp_path, name):
    project = make_project(tmp_path / "demo", model=name)
    expected_crc = reference_crc(name)
    for board in BOARDS:
        code, out = pio(core, project, "run", "-e", board, "-t", "upload")
        summary = json.loads((project / ".pio" / "build" / board / "msf_generated" /
                              "stamp.json").read_text())["summary"] if code == 0 else None
        if code and board == "qemu_hifive1b" and "infeasible budget" in out:
            assert name != "mbv2-w0.35-paper"       # the paper ran this one in 16 KB
            budget = emulated_facts(board).ram_budget(0)   # 16 KB less stack and framework
            assert re.search(rf"msf-pio: error: .*no plan fits in {budget} B", out)
            continue
        assert code == 0, out[-3000:]
        lines = result_lines(out)
        assert len(lines) == 1, out[-2000:]
        hz, arena, arena_pred, crc, crc_ref, status = LINE.search(lines[0]).groups()
        assert status == "ok" and crc == crc_ref == expected_crc
        assert int(hz) == F_CPU[board]                   # the stood-in part's clock
        assert int(arena) == int(arena_pred) == summary["peak_ram_bytes"]
        assert summary["plan"] == "p1:inf"
        assert stack_used(lines[0]) <= summary["predicted_stack_bytes"], (board, lines[0])
        assert_flash_is_the_linked_firmwares(project, board, summary)
        if (name, board) == ("mbv2-w0.35-paper", "qemu_f767zi"):   # the demo's own build
            assert_demo_output_is_documented(project, board, code, out)


# the link map's input sections kept in the firmware: kind, size, object file (a long section
# name wraps onto the next line)
LINKED = re.compile(r"^ \.(text|rodata)\S*\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+\.o)$", re.M)


def assert_flash_is_the_linked_firmwares(project, board, summary):
    """The build's flash figures (codegen/flash.py, checked against the board's flash before
    compiling) against the link map: the constant data counted within 1% of the .rodata the
    runtime and the generated model keep, the code estimated at or above their .text and below
    1.75x it (only the model's kernels and executors are linked; the estimate counts their
    files whole, at the largest size over three instruction sets)."""
    text = (project / ".pio" / "build" / board / "firmware.map").read_text()
    text = text[text.index("Linker script and memory map"):]    # not the discarded sections
    linked = {"text": 0, "rodata": 0}
    for kind, size, obj in LINKED.findall(text):
        if obj.endswith("/msf_model/msf_model.o") or (
                re.search(r"/lib[0-9a-f]+/[^/]+/", obj) and "/board/" not in obj):
            linked[kind] += int(size, 16)
    data, code = summary["flash_data_bytes"], summary["flash_code_bytes"]
    assert abs(data - linked["rodata"]) <= 0.01 * linked["rodata"], (board, data, linked)
    assert linked["text"] <= code <= 1.75 * linked["text"], (board, code, linked)
    # the specialised kernels the linker kept fit what the code budget counts them at
    special = sum(specialised_code(text).values())
    used = summary["code_budget_used"]
    assert special <= used <= summary["code_budget_bytes"] and (special > 0) == (used > 0), \
        (board, special, used)


def specialised_code(text):
    """Per generated specialised kernel (msf_conv_<shape>, msf_dw3x3_<channels>) in a link
    map's memory map, its code bytes."""
    return {name: int(size, 16) for name, size in re.findall(
        r"^ \.text\.(msf_(?:conv|dw3x3)_\d\S*)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)", text, re.M)}


def assert_demo_output_is_documented(project, board, code, out):
    """What `msf-pio demo` prints for this build is what the README and docs show: the
    examples marked `demo` (scripts/docs_examples.py) cannot go stale."""
    import sys
    from msf_pio.pio.demo import render, result
    from msf_pio.pio.project import REPO
    sys.path.insert(0, str(REPO / "scripts"))
    import docs_examples
    shown = [body for path in docs_examples.documents()
             for args, body, _ in docs_examples.examples(path) if args == "demo"]
    assert shown and set(shown) == {render(result(project, board, code, out)) + "\n"}, \
        "stale demo output: python scripts/docs_examples.py"


def test_channel_split_plan_on_the_emulated_m7(core, tmp_path):
    """mn2-vww5-paper's least-RAM plan at F max 1.3 (channel-split triples: issue 8's row) on
    qemu_f767zi: the output CRC the host reference's, the painted arena the predicted one, and
    the build log names the scheme, group and tile height of each split block."""
    name = "mn2-vww5-paper"
    project = make_project(tmp_path / "demo", model=name, max_overhead="1.3")
    code, out = pio(core, project, "run", "-e", "qemu_f767zi", "-t", "upload")
    assert code == 0, out[-3000:]
    summary = json.loads((project / ".pio" / "build" / "qemu_f767zi" / "msf_generated" /
                          "stamp.json").read_text())["summary"]
    assert summary["plan"] == "p1:1.3"
    assert any(label.startswith("channel-split g=") for _, _, label in summary["blocks"])
    assert re.search(r"\[\d+-\d+ channel-split g=\d+ t=\d+\]", out)
    lines = result_lines(out)
    assert len(lines) == 1, out[-2000:]
    _, arena, arena_pred, crc, crc_ref, status = LINE.search(lines[0]).groups()
    assert status == "ok" and crc == crc_ref == reference_crc(name)
    assert int(arena) == int(arena_pred) == summary["peak_ram_bytes"] <= 8_880
    print(f"{name} p1:1.3 on qemu_f767zi: arena {arena} B, {lines[0]}")


def test_weights_in_external_memory_on_the_emulated_m7(core, tmp_path):
    """custom_msf_weights_section on qemu_f767zi: the weights leave the internal flash for
    mps2-an500's memory at 0x60000000 (msf-qemu's linker script maps the section there, QEMU's
    ELF loader fills it), PlatformIO's flash figure leaves them out, and the model runs from
    there: the output CRC the host reference's, the painted arena the predicted one."""
    import subprocess
    name, board = "tiny", "qemu_f767zi"
    project = make_project(tmp_path / "demo", model=name)
    ini = project / "platformio.ini"
    ini.write_text(ini.read_text() + "\n[env]\ncustom_msf_weights_section = .msf_weights\n")
    code, out = pio(core, project, "run", "-e", board, "-t", "upload")
    assert code == 0, out[-3000:]
    build = project / ".pio" / "build" / board
    weights = json.loads((build / "msf_generated" / "stamp.json").read_text())["summary"][
        "weight_bytes"]
    sysv = subprocess.run(["arm-none-eabi-size", "-A", str(build / "firmware.elf")],
                          capture_output=True, text=True, check=True).stdout
    sections = {f[0]: (int(f[1]), int(f[2])) for f in map(str.split, sysv.splitlines())
                if len(f) == 3 and f[1].isdigit()}
    assert sections[".msf_weights"] == (weights, 0x60000000)
    berkeley = subprocess.run(["arm-none-eabi-size", "-B", str(build / "firmware.elf")],
                              capture_output=True, text=True, check=True).stdout
    text, data = map(int, berkeley.splitlines()[1].split()[:2])
    assert int(re.search(r"Flash: .*\(used (\d+) bytes", out).group(1)) == text + data - weights
    lines = result_lines(out)
    assert len(lines) == 1, out[-2000:]
    _, arena, arena_pred, crc, crc_ref, status = LINE.search(lines[0]).groups()
    assert status == "ok" and crc == crc_ref == reference_crc(name)
    assert arena == arena_pred


@pytest.mark.parametrize("name", MLPERF_TINY)
def test_mlperf_tiny_vanilla_and_least_ram_on_the_emulated_m7(core, tmp_path, name):
    """The MLPerf Tiny models (kws: rectangular windows; ic: shortcut convs) give the reference's bytes on
    qemu_f767zi under the vanilla and the least-RAM plans, each painting its predicted arena;
    fusion never needs more RAM than vanilla."""
    expected_crc, arenas = reference_crc(name), {}
    for objective in ("vanilla", "min_ram"):
        project = make_project(tmp_path / objective, model=name, objective=objective)
        code, out = pio(core, project, "run", "-e", "qemu_f767zi", "-t", "upload")
        assert code == 0, out[-3000:]
        summary = json.loads((project / ".pio" / "build" / "qemu_f767zi" / "msf_generated" /
                              "stamp.json").read_text())["summary"]
        lines = result_lines(out)
        assert len(lines) == 1, out[-2000:]
        _, arena, arena_pred, crc, crc_ref, status = LINE.search(lines[0]).groups()
        assert status == "ok" and crc == crc_ref == expected_crc, objective
        assert int(arena) == int(arena_pred) == summary["peak_ram_bytes"], objective
        assert stack_used(lines[0]) <= summary["predicted_stack_bytes"], objective
        arenas[objective] = int(arena)
        print(f"{name} {objective}: plan {summary['plan']}, arena {arena} B")
    assert arenas["min_ram"] <= arenas["vanilla"]


def test_pio_test_on_emulated_boards(core, tmp_path):
    project = make_project(tmp_path / "demo", model="mn2-vww5-paper")
    code, out = pio(core, project, "test", "--without-uploading",
                    *[a for board in BOARDS for a in ("-e", board)])
    assert code == 0, out[-3000:]
    assert re.search(r"20 test cases: 20 succeeded", out), out[-1500:]


def test_regenerates_only_when_options_change(core, tmp_path):
    project = make_project(tmp_path / "demo", model="tiny")
    board = "qemu_f767zi"
    code, out = pio(core, project, "run", "-e", board)
    assert code == 0 and "generated in" in out, out[-2000:]
    code, out = pio(core, project, "run", "-e", board)
    assert code == 0 and "nothing regenerated" in out
    generated = project / ".pio" / "build" / board / "msf_generated" / "msf_model"
    mtime = (generated / "src" / "msf_model.c").stat().st_mtime_ns
    make_project(project, model="tiny", max_overhead="1.2")
    code, out = pio(core, project, "run", "-e", board)
    assert code == 0 and "generated in" in out and "p1:1.2" in out
    assert (generated / "src" / "msf_model.c").stat().st_mtime_ns != mtime
    linked = project / ".pio" / "build" / board / "firmware.map"
    assert specialised_code(linked.read_text())
    # no code budget: the firmware links no specialised kernel
    make_project(project, model="tiny", max_overhead="1.2", code_budget="0")
    code, out = pio(core, project, "run", "-e", board)
    assert code == 0 and "generated in" in out and "specialised kernels 0 B of a 0 B" in out
    assert not specialised_code(linked.read_text())


@pytest.mark.parametrize("option,value,words", [
    ("objective", "fastest", "custom_msf_objective: must be one of"),
    ("max_overhead", "0.5", "custom_msf_max_overhead: must be >= 1"),
    ("ram_limit", "-3", "custom_msf_ram_limit: must be"),
    ("model", "models/missing.yaml", "custom_msf_model: no such model file"),
])
def test_bad_options_stop_the_build_with_one_line(core, tmp_path, option, value, words):
    project = make_project(tmp_path / "demo", **{option: value})
    code, out = pio(core, project, "run", "-e", "qemu_f767zi")
    assert code != 0
    errors = [l for l in out.splitlines() if l.startswith("msf-pio: error:")]
    assert len(errors) == 1 and words in errors[0] and "platformio.ini [env:qemu_f767zi]" in errors[0]
    assert "Traceback" not in out


def test_infeasible_budget_names_the_nearest_plan(core, tmp_path):
    project = make_project(tmp_path / "demo", model="mn2-320k-paper", objective="min_macs",
                           ram_limit="16kB")
    code, out = pio(core, project, "run", "-e", "qemu_f767zi")
    assert code != 0
    assert re.search(r"msf-pio: error: .*nearest feasible: no plan fits in 16000 B; the "
                     r"least-RAM plan .* needs \d+ B", out), out[-2000:]


def test_demo_ini_lints_and_declares_every_board():
    """The real-board envs cannot be built offline (no registry); the ini can be checked."""
    from platformio.project.config import ProjectConfig

    from msf_pio.pio.project import DEMO, envs
    assert ProjectConfig.lint(str(DEMO / "platformio.ini")) == {"errors": [], "warnings": []}
    assert set(envs(DEMO)) == {"nucleo_f767zi", "disco_f746ng", "nucleo_f412zg",
                               "esp32-s3-devkitc-1", "esp32-c3-devkitm-1", "hifive1-revb",
                               *BOARDS}
    config = ProjectConfig(str(DEMO / "platformio.ini"))
    for env in ("nucleo_f767zi", "disco_f746ng", "nucleo_f412zg"):
        assert config.get(f"env:{env}", "platform") == "ststm32"
    for env in ("esp32-s3-devkitc-1", "esp32-c3-devkitm-1"):
        assert config.get(f"env:{env}", "platform") == "espressif32"
    assert config.get("env:hifive1-revb", "platform") == "sifive"

"""`msf-pio init`: a project from any model kind that builds, runs on an emulated board and can be
committed without this machine's paths; `--into` adds msf-pio to a project and changes nothing
that was there."""
import re
import shutil
import subprocess

import numpy as np
import pytest

from msf_pio.cli import main
from msf_pio.errors import MsfError
from msf_pio.pio import bootstrap, init as init_mod, monitor
from msf_pio.pio.init import add_into, init
from msf_pio.pio.project import REPO, pio, result_lines

from .test_onnx_import import residual_net
from .tflite_builder import foreign_net

GIT = shutil.which("git")


def _config(project):
    """The project's configuration as PlatformIO reads it (from the project's folder)."""
    from platformio import fs
    from platformio.project.config import ProjectConfig
    with fs.cd(str(project)):
        return ProjectConfig(str(project / "platformio.ini"))


def _model(kind, tmp_path):
    """A model of each kind, as a user has it: a zoo name or a file outside the project."""
    src = tmp_path / "mine"
    src.mkdir(exist_ok=True)
    if kind == "zoo":
        return "tiny", []
    if kind == "yaml":
        (src / "w").mkdir(exist_ok=True)
        np.savez(src / "w" / "net.npz", placeholder=np.zeros(1))
        (src / "net.yaml").write_text(re.sub(r"weights: \{random: \d+\}", "weights: {npz: w/net.npz}",
                                             (REPO / "msf_pio/model/zoo/tiny.yaml").read_text()))
        assert "w/net.npz" in (src / "net.yaml").read_text()
        return str(src / "net.yaml"), ["models/net.yaml", "models/w/net.npz"]
    if kind == "onnx":
        path = residual_net(src)
        return str(path), [f"models/{path.name}"]
    (src / "net.tflite").write_bytes(foreign_net())
    return str(src / "net.tflite"), ["models/net.tflite"]


def _committed(project) -> str:
    """Every file git would commit, as one text."""
    subprocess.run([GIT, "init", "-q"], cwd=project, check=True)
    subprocess.run([GIT, "add", "-A"], cwd=project, check=True)
    names = subprocess.run([GIT, "ls-files"], cwd=project, check=True, capture_output=True,
                           text=True).stdout.split()
    return names, "\n".join((project / n).read_bytes().decode("latin-1") for n in names)


@pytest.mark.skipif(GIT is None, reason="git not installed")
@pytest.mark.parametrize("kind", ["zoo", "yaml", "onnx", "tflite"])
def test_every_model_kind_is_copied_in_and_nothing_committed_names_this_machine(tmp_path, kind):
    model, copied = _model(kind, tmp_path)
    project = tmp_path / "proj"
    init(project, ["qemu_f767zi", "nucleo_f767zi"], model)
    config = _config(project)
    name = config.get("env:qemu_f767zi", "custom_msf_model")
    assert name == (copied[0] if copied else "tiny") and not name.startswith("/")
    for rel in copied:
        assert (project / rel).read_bytes() == (tmp_path / "mine" / rel[len("models/"):]).read_bytes()
    names, text = _committed(project)
    assert "local.ini" not in names and ".gitignore" in names and "src/main.c" in names
    assert str(REPO) not in text and str(tmp_path) not in text
    # what names this machine is in local.ini, which PlatformIO reads over platformio.ini
    assert config.get("env:qemu_f767zi", "platform") == \
        f"symlink://{REPO}/msf_pio/pio/platform"
    assert config.get("env:nucleo_f767zi", "lib_deps") == [f"msf-pio=symlink://{REPO}"]


def test_release_defaults_and_the_default_env(tmp_path, capsys):
    assert main(["init", str(tmp_path / "a"), "--board", "nucleo_f767zi", "--board",
                 "qemu_f412zg"]) == 0
    config = _config(tmp_path / "a")
    assert config.default_envs() == ["qemu_f412zg"]              # the emulated one, offline
    for option, value in (("custom_msf_measure", "auto"), ("custom_msf_output", "buffer"),
                          ("custom_msf_input", "buffer")):
        assert config.get("env:nucleo_f767zi", option) == value
    assert "note:" not in capsys.readouterr().out
    assert main(["init", str(tmp_path / "b"), "--board", "nucleo_f767zi"]) == 0
    out = capsys.readouterr().out
    assert "note: no emulated board" in out and "--board qemu_f767zi" in out
    ini = (tmp_path / "b" / "platformio.ini").read_text()
    assert "No emulated board: building needs the PlatformIO registry" in ini
    assert not (tmp_path / "b" / "local.ini").read_text().count("platform =")


def test_a_package_install_names_the_registry_library(tmp_path, monkeypatch):
    monkeypatch.setattr(init_mod, "is_checkout", lambda: False)
    init(tmp_path, ["qemu_f767zi"], "tiny")
    config = _config(tmp_path)
    from msf_pio import __version__
    assert config.get("env:qemu_f767zi", "lib_deps") == [f"msf-pio@^{__version__}"]
    assert "registry" in (tmp_path / "platformio.ini").read_text()
    assert "lib_deps" not in (tmp_path / "local.ini").read_text()


def test_the_user_main_is_short_and_the_harness_lives_under_test(tmp_path):
    init(tmp_path, ["qemu_f767zi"], "tiny")
    main_c = (tmp_path / "src" / "main.c").read_text()
    assert len(main_c.splitlines()) < 50 and "msf_model_run(input, output)" in main_c
    assert "msf_model_measure_arena" not in main_c and "msf_board_cycles" not in main_c
    harness = (tmp_path / "test" / "test_msf" / "harness.c").read_text()
    assert "msf_model_measure_arena" in harness and "msf_unit_tests" in harness


def test_init_overwrites_nothing_and_refuses_unknowns(tmp_path):
    init(tmp_path, ["qemu_f767zi"], "tiny")
    mine = (tmp_path / "src" / "main.c").read_text() + "// mine\n"
    (tmp_path / "src" / "main.c").write_text(mine)
    with pytest.raises(MsfError, match="exists already"):
        init(tmp_path, ["qemu_f767zi"], "tiny")
    assert (tmp_path / "src" / "main.c").read_text() == mine
    with pytest.raises(MsfError, match="unknown board 'uno'"):
        init(tmp_path / "x", ["uno"], "tiny")
    with pytest.raises(MsfError, match="nor a zoo model"):
        init(tmp_path / "y", ["qemu_f767zi"], "resnet")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


EXISTING = """; my project
[platformio]
default_envs = board

[env]
lib_deps = someone/foo

[env:board]
platform = ststm32
board = nucleo_f767zi
framework = stm32cube
build_flags = -DMINE

[env:derived]
extends = env:board
"""


def test_into_adds_msf_pio_and_changes_nothing_that_was_there(tmp_path):
    model = _model("tflite", tmp_path)[0]
    tmp_path = tmp_path / "proj"
    (tmp_path / "src").mkdir(parents=True)
    (tmp_path / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "platformio.ini").write_text(EXISTING)
    (tmp_path / ".gitignore").write_text("build/\n")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    project = add_into(tmp_path, ["qemu_f767zi"], model)
    assert (tmp_path / "src" / "main.c").read_bytes() == before[tmp_path / "src" / "main.c"]
    ini = (tmp_path / "platformio.ini").read_text().splitlines()
    old = iter(ini)
    assert all(line in old for line in EXISTING.splitlines())     # every old line, in order
    assert (tmp_path / ".gitignore").read_text().startswith("build/\n")
    config = _config(tmp_path)
    assert config.get("env:board", "custom_msf_model") == "models/net.tflite"
    assert config.get("env:derived", "custom_msf_model") == "models/net.tflite"  # through board
    assert config.get("env:board", "build_flags") == ["-DMINE"]
    assert config.get("env:board", "lib_deps") == ["someone/foo", f"msf-pio=symlink://{REPO}"]
    assert config.get("env:qemu_f767zi", "board") == "qemu_f767zi"
    assert any("msf_model_run" in n for n in project.notes)
    # run again (a clone with local.ini gone): only local.ini comes back
    (tmp_path / "local.ini").unlink()
    ini_text = (tmp_path / "platformio.ini").read_text()
    again = add_into(tmp_path, [], None)
    assert list(again.files) == [init_mod.Path("local.ini")]
    assert (tmp_path / "platformio.ini").read_text() == ini_text


def test_into_needs_a_project(tmp_path):
    with pytest.raises(MsfError, match="not a PlatformIO project"):
        add_into(tmp_path, ["qemu_f767zi"], "tiny")


def _device_monitor(core, project, timeout=120) -> str:
    """What `pio device monitor` shows on a terminal (a pseudo-terminal) until QEMU's run is
    over or the monitor gives up; then Ctrl+C."""
    import os
    import pty
    import select
    import sys
    import time
    pid, fd = pty.fork()
    if pid == 0:                                     # the child: the monitor on the terminal
        os.chdir(project)
        os.execve(sys.executable, [sys.executable, "-m", "platformio", "device", "monitor"],
                  bootstrap.offline_env(core))
    out, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and b"QEMU exited" not in out:
            if select.select([fd], [], [], 1)[0]:
                out += os.read(fd, 4096)
        os.write(fd, b"\x03")
        while select.select([fd], [], [], 2)[0]:
            out += os.read(fd, 4096)
    except OSError:                                  # the monitor ended: its terminal is gone
        pass
    finally:
        os.waitpid(pid, 0)
        os.close(fd)
    return out.decode("ascii", "replace")


@pytest.mark.skipif(GIT is None or shutil.which("qemu-system-arm") is None,
                    reason="git and qemu-system-arm (scripts/setup.sh)")
def test_a_tflite_project_builds_runs_tests_profiles_and_commits(tmp_path):
    """The user's view end to end, on the kind of file the old init broke on; with
    custom_msf_profile = yes the firmware times every edge of its plain run."""
    core = bootstrap.core_dir()
    bootstrap.install_tool_scons(core, log=lambda _m: None)
    model, _ = _model("tflite", tmp_path)
    project = tmp_path / "proj"
    init(project, ["qemu_f767zi"], model)
    ini = project / "platformio.ini"
    ini.write_text(re.sub(r"custom_msf_profile = no", "custom_msf_profile = yes", ini.read_text()))
    assert "is not built yet: run `pio run -e qemu_f767zi`" in _device_monitor(core, project)
    code, out = pio(core, project, "run", "-t", "upload")
    assert code == 0, out[-3000:]
    assert re.search(r"^class [0-4] of 5 score \d+$", out, re.M), out[-2000:]
    seen = _device_monitor(core, project)          # the emulated board's serial port
    assert re.search(r"^class [0-4] of 5 score \d+\r?$", seen, re.M), seen
    assert "QEMU exited (status 0)" in seen
    assert not result_lines(out)                     # the user's firmware measures nothing
    plan = monitor.load_plan(project / ".pio/build/qemu_f767zi/msf_generated/plan.json")
    edges = len(plan["blocks"])
    assert len(re.findall(r"^MSF edge=\d+ cycles=\d+$", out, re.M)) == edges
    code, out = pio(core, project, "test", "-e", "qemu_f767zi")
    assert code == 0, out[-3000:]
    record = monitor.parse_lines(out.splitlines())[0]
    assert record["status"] == "ok" and "4 test cases: 4 succeeded" in out
    # the edges are disjoint parts of the timed run, which adds only the output's check
    timed = record["edge_cycles"]
    assert len(timed) == edges and all(c > 0 for c in timed)
    assert sum(timed) <= record["cycles"] <= 1.1 * sum(timed)
    names, text = _committed(project)
    assert str(REPO) not in text and str(tmp_path) not in text and "models/net.tflite" in names

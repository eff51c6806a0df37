"""msf-pio as a PlatformIO library the usual way: the packed library carries what a build needs
and nothing else; with PlatformIO alone in a new virtual environment (the PlatformIO IDE's layout) a project whose
lib_deps point at the packed tarball builds, runs on qemu_f767zi and regenerates only on change;
a missing dependency offline and an old Python each stop the build with one line."""
import os
import re
import shutil
import subprocess
import sys
import tarfile
import types
from pathlib import Path

import pytest

from msf_pio.pio import bootstrap
from msf_pio.pio.init import init
from msf_pio.pio.project import REPO, result_lines

sys.path.insert(0, str(REPO / "scripts"))
from pack_library import pack  # noqa: E402


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    return pack(tmp_path_factory.mktemp("pack"))


def test_packed_library_holds_what_a_build_needs_and_nothing_else(tarball):
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    tops = {n.split("/")[0] for n in names}
    assert {"library", "msf_pio", "library.json", "LICENSE", "examples"} <= tops
    assert not tops & {"tests", "benchmarks", "scripts", ".ci", ".git"}
    assert not [n for n in names if re.search(r"(^|/)(\.pio|__pycache__)/|\.pyc$", n)]
    # the monitor filter: the msf-qemu platform's and the demo's (a link to the same file)
    assert "msf_pio/pio/platform/monitor/filter_msf.py" in names
    assert "msf_pio/pio/library_script.py" in names and "library/include/msf/board.h" in names
    assert "msf_pio/model/zoo/mbv2-w0.35-paper.yaml" in names
    assert {n for n in names if n.startswith("examples/")} <= {
        f"examples/msf_demo/{f}" for f in (
            "platformio.ini", "CMakeLists.txt", "sdkconfig.defaults", "sdkconfig.defaults.esp32s3",
            "sdkconfig.defaults.esp32c3", "src/main.c", "src/CMakeLists.txt",
            "test/test_custom_runner.py", "test/test_model/test_model.c",
            "monitor/filter_msf.py")}


def test_library_script_refuses_an_old_python_in_one_line(monkeypatch, capsys):
    exits = []
    env = types.SimpleNamespace(Exit=exits.append)
    monkeypatch.setattr(sys, "version_info", (3, 9, 18, "final", 0))
    code = (REPO / "msf_pio" / "pio" / "library_script.py").read_text()
    exec(compile(code, str(REPO / "msf_pio/pio/library_script.py"), "exec"),
         {"Import": lambda _name: None, "env": env, "__name__": "SCons"})
    out = capsys.readouterr().out.strip().splitlines()
    assert exits == [1] and len(out) == 1
    assert out[0].startswith("msf-pio: error: PlatformIO runs Python 3.9")
    assert "needs Python 3.10" in out[0]


def test_model_sources_join_the_build_once_by_the_builder_platformio_builds():
    # platform-espressif32's espidf builder constructs every library builder once for include
    # paths only, discards it, then constructs it again; a built library's build() is called by
    # each of its dependents
    from msf_pio.pio.integration import _when_built

    class LibBuilder:
        def __init__(self):
            self.built = 0

        def build(self):
            self.built += 1
            return ["lib"]

    compiled = []
    discarded, real = LibBuilder(), LibBuilder()
    _when_built(discarded, lambda: compiled.append("discarded"))
    _when_built(real, lambda: compiled.append("real"))
    assert real.build() == ["lib"] and real.build() == ["lib"] and real.built == 2
    assert compiled == ["real"]


@pytest.fixture(scope="module")
def pio_alone(tmp_path_factory):
    """A new virtual environment with PlatformIO and nothing else."""
    if not shutil.which("qemu-system-arm"):
        pytest.skip("qemu-system-arm not installed (scripts/setup.sh installs it)")
    from platformio import __version__ as pio_version
    venv = tmp_path_factory.mktemp("pio-alone") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           f"platformio=={pio_version}"], capture_output=True, text=True)
    if proc.returncode:
        pytest.skip(f"cannot install PlatformIO into a new venv: {proc.stderr[-200:]}")
    core = str(tmp_path_factory.mktemp("core"))
    bootstrap.install_tool_scons(core, log=lambda _m: None)
    return python, core


def run_pio(pio_alone, project, *args, **env):
    python, core = pio_alone
    proc = subprocess.run([str(python), "-m", "platformio", *args], cwd=project,
                          env={**bootstrap.offline_env(core), **env}, capture_output=True,
                          text=True, timeout=900)
    return proc.returncode, proc.stdout + proc.stderr


def test_platformio_alone_builds_the_packed_library(pio_alone, tarball, tmp_path):
    python, _ = pio_alone
    project = tmp_path / "proj"
    init(project, ["qemu_f767zi", "qemu_f412zg"], "mbv2-w0.35-paper",
         lib_deps=f"msf-pio=file://{tarball}")

    # offline: one line naming the command, nothing else
    code, out = run_pio(pio_alone, project, "run", "-e", "qemu_f767zi", PIP_NO_INDEX="1")
    errors = [l for l in out.splitlines() if l.startswith("msf-pio: error:")]
    assert code != 0 and len(errors) == 1 and "Traceback" not in out
    assert re.search(rf"run: {re.escape(str(python))}\S* -m pip install numpy", errors[0])

    # online: the first build installs msf-pio's dependencies into PlatformIO's Python
    code, out = run_pio(pio_alone, project, "run", "-e", "qemu_f767zi", "-t", "upload")
    assert code == 0, out[-3000:]
    assert "installing numpy" in out and "generated in" in out
    assert re.search(r"^class \d+ of \d+ score \d+$", out, re.M)    # the user's src/main.c

    code, out = run_pio(pio_alone, project, "run", "-e", "qemu_f767zi")
    assert code == 0 and "nothing regenerated" in out and "installing" not in out

    ini = project / "platformio.ini"
    ini.write_text(ini.read_text().replace("custom_msf_max_overhead = inf",
                                           "custom_msf_max_overhead = 1.3"))
    code, out = run_pio(pio_alone, project, "test", "-e", "qemu_f767zi", "-e", "qemu_f412zg")
    assert code == 0, out[-3000:]
    lines = result_lines(out)                         # the harness under test/
    # the option changed for both envs: both regenerated
    assert len(lines) == 2 and all("plan=p1:1.3" in l and "status=ok" in l for l in lines)

    code, out = run_pio(pio_alone, project, "run", "-t", "clean")
    assert code == 0 and "msf-pio:" not in out       # nothing generated on clean
    assert not (project / "monitor" / "filter_msf.py").read_text() == ""
    assert os.listdir(project / "src") == ["main.c"]  # the build writes nothing into src/

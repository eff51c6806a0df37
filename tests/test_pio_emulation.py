"""End to end through PlatformIO, offline: bootstrap a fresh core dir, build examples/hello
with the msf-qemu platform, run it in QEMU via `pio run -t upload` and `pio test`."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from msf_pio.pio import PLATFORM_DIR, bootstrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELLO = os.path.join(ROOT, "examples", "hello")
HELLO_RE = re.compile(r"^MSF hello cycles=[1-9]\d* stack=[1-9]\d* status=ok$", re.M)
ARM_TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm")
RISCV_TOOLS = ("riscv64-unknown-elf-gcc", "qemu-system-riscv32")


def need(*tools):
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.skip("not installed: %s (apt: gcc-arm-none-eabi picolibc-arm-none-eabi "
                    "gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-arm "
                    "qemu-system-misc)" % ", ".join(missing))


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    pytest.importorskip("platformio")
    path = str(tmp_path_factory.mktemp("pio-core"))
    bootstrap.install_tool_scons(path, log=lambda _msg: None)
    return path


def make_project(dst, ini_text=None):
    """Copy of hello pointing at this checkout's platform (the example's path is relative)."""
    shutil.copytree(HELLO, dst, ignore=shutil.ignore_patterns(".pio"))
    ini = os.path.join(dst, "platformio.ini")
    with open(ini, encoding="utf8") as fp:
        text = ini_text or fp.read()
    with open(ini, "w", encoding="utf8") as fp:
        fp.write(text.replace("symlink://../../msf_pio/pio/platform", "symlink://" + PLATFORM_DIR))
    return str(dst)


def pio(core, project, *args, timeout=240):
    proc = subprocess.run([sys.executable, "-m", "platformio", *args], cwd=project,
                          env=bootstrap.offline_env(core), capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def hello(core, tmp_path_factory):
    return make_project(tmp_path_factory.mktemp("hello") / "hello")


def test_bootstrap_is_idempotent(core):
    messages = []
    path = bootstrap.install_tool_scons(core, log=messages.append)
    assert "already" in messages[0]
    assert os.path.isfile(os.path.join(path, "scons.py"))


def test_upload_runs_in_qemu(core, hello):
    need(*ARM_TOOLS)
    rc, out = pio(core, hello, "run", "-e", "qemu_f767zi", "-t", "upload")
    assert rc == 0, out
    assert HELLO_RE.search(out), out
    assert "MSF exit=0" in out


@pytest.mark.parametrize("env", ["qemu_hifive1b", "qemu_esp32c3"])
def test_upload_riscv_boards(core, hello, env):
    need(*RISCV_TOOLS)
    rc, out = pio(core, hello, "run", "-e", env, "-t", "upload")
    assert rc == 0, out
    assert HELLO_RE.search(out), out


def test_pio_test_custom_runner(core, hello):
    need(*ARM_TOOLS)
    rc, out = pio(core, hello, "test", "-e", "qemu_f767zi", "--without-uploading")
    assert rc == 0, out
    assert HELLO_RE.search(out) and "MSF selftest" in out, out
    assert "2 test cases: 2 succeeded" in out, out


FAILING_MAIN = """#include <stdio.h>
int main(void)
{
#ifdef HANG
    for (;;) {
    }
#endif
    puts("returning 3");
    return 3;
}
"""


@pytest.mark.parametrize("flags,status", [("", "Error 3"), ("-DHANG", "Error 124")])
def test_failures_fail_the_upload(core, tmp_path, flags, status):
    """A non-zero exit status and a hang (timeout) must both fail `pio run -t upload`."""
    need(*ARM_TOOLS)
    # test_framework = custom: with a test/ dir and the default (unity) even `pio run`
    # wants Unity from the registry.
    ini = ("[env:qemu_f412zg]\nplatform = symlink://../../msf_pio/pio/platform\n"
           f"board = qemu_f412zg\nbuild_flags = {flags}\ncustom_qemu_timeout = 3\n"
           "test_framework = custom\n")
    project = make_project(tmp_path / "bad", ini)
    with open(os.path.join(project, "src", "main.c"), "w", encoding="utf8") as fp:
        fp.write(FAILING_MAIN)
    rc, out = pio(core, project, "run", "-e", "qemu_f412zg", "-t", "upload")
    assert rc != 0 and status in out, out


def test_real_board_ini_lints_offline():
    """The real-board envs cannot be built offline; their options and values can be checked."""
    from platformio.project.config import ProjectConfig

    result = ProjectConfig.lint(os.path.join(HELLO, "platformio-boards.ini"))
    assert result == {"errors": [], "warnings": []}

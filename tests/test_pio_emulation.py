"""End to end through PlatformIO, offline: bootstrap a fresh core dir, build examples/hello
(the msf-pio library's msf/board.h on the msf-qemu platform), run it in QEMU via
`pio run -t upload` and `pio test`; exit statuses, hangs and CPU faults fail the run."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from msf_pio.pio import bootstrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELLO = os.path.join(ROOT, "examples", "hello")
HELLO_RE = re.compile(r"^MSF hello cycles=[1-9]\d* stack=[1-9]\d* status=ok$", re.M)
ARM_TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm")
RISCV_TOOLS = ("riscv64-unknown-elf-gcc", "qemu-system-riscv32")
XTENSA_TOOLS = ("xtensa-lx106-elf-gcc", "qemu-system-xtensa")
TOOLS = {"qemu_f412zg": ARM_TOOLS, "qemu_esp32c3": RISCV_TOOLS, "qemu_esp32s3": XTENSA_TOOLS}


def need(*tools):
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.skip("not installed: %s (apt: gcc-arm-none-eabi picolibc-arm-none-eabi "
                    "gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf gcc-xtensa-lx106 "
                    "qemu-system-arm qemu-system-misc)" % ", ".join(missing))


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    pytest.importorskip("platformio")
    path = str(tmp_path_factory.mktemp("pio-core"))
    bootstrap.install_tool_scons(path, log=lambda _msg: None)
    return path


def make_project(dst, ini_text=None):
    """Copy of hello pointing at this checkout's platform and library (the example's paths are
    relative)."""
    shutil.copytree(HELLO, dst, ignore=shutil.ignore_patterns(".pio"))
    ini = os.path.join(dst, "platformio.ini")
    with open(ini, encoding="utf8") as fp:
        text = ini_text or fp.read()
    with open(ini, "w", encoding="utf8") as fp:
        fp.write(text.replace("symlink://../..", "symlink://" + ROOT))
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


@pytest.mark.parametrize("env", ["qemu_hifive1b", "qemu_esp32c3", "qemu_esp32s3"])
def test_upload_riscv_and_xtensa_boards(core, hello, env):
    need(*(XTENSA_TOOLS if env == "qemu_esp32s3" else RISCV_TOOLS))
    rc, out = pio(core, hello, "run", "-e", env, "-t", "upload")
    assert rc == 0, out
    assert HELLO_RE.search(out), out


def test_pio_test_custom_runner(core, hello):
    need(*ARM_TOOLS)
    rc, out = pio(core, hello, "test", "-e", "qemu_f767zi", "--without-uploading")
    assert rc == 0, out
    assert HELLO_RE.search(out) and "MSF selftest" in out, out
    assert "2 test cases: 2 succeeded" in out, out


FAILING_MAIN = """#include "msf/board.h"
int main(void)
{
    msf_board_init();
#ifdef HANG
    for (;;) {
    }
#endif
#ifdef FAULT
    __builtin_trap();
#endif
    msf_board_puts("returning 3\\n");
    return 3;
}
"""


@pytest.mark.parametrize("flags,status", [("", "Error 3"), ("-DHANG", "Error 124"),
                                          ("-DFAULT", "Error 99")])
@pytest.mark.parametrize("board", sorted(TOOLS))
def test_failures_fail_the_upload(core, tmp_path, board, flags, status):
    """A non-zero status returned by main, a hang (timeout) and a CPU fault (reported, then
    status 99) must all fail `pio run -t upload`."""
    need(*TOOLS[board])
    # test_framework = custom: with a test/ dir and the default (unity) even `pio run`
    # wants Unity from the registry.
    ini = (f"[env:{board}]\nplatform = symlink://../../msf_pio/pio/platform\n"
           f"board = {board}\nlib_deps = msf-pio=symlink://../..\nbuild_flags = {flags}\n"
           "custom_qemu_timeout = 3\ntest_framework = custom\n")
    project = make_project(tmp_path / "bad", ini)
    with open(os.path.join(project, "src", "main.c"), "w", encoding="utf8") as fp:
        fp.write(FAILING_MAIN)
    rc, out = pio(core, project, "run", "-e", board, "-t", "upload")
    assert rc != 0 and status in out, out
    if flags == "-DFAULT":
        assert re.search(r"^MSF fault=\S+ cause=0x[0-9a-f]{8} pc=0x[0-9a-f]{8}$", out, re.M), out
    if not flags:
        assert "returning 3" in out and "MSF exit=3" in out, out


ARITHMETIC_MAIN = """#include <stdint.h>
#include "msf/board.h"
static uint64_t a[] = {%s};              /* .data: copied from flash by the start-up code */
static uint64_t b[] = {%s};
static uint32_t zero;                     /* .bss */
static int constructed;
__attribute__((constructor)) static void construct(void) { constructed = 1; }
static void hex(uint64_t v)
{
    char t[18];
    t[17] = 0;
    t[16] = ' ';
    for (int i = 15; i >= 0; i--, v >>= 4) t[i] = "0123456789abcdef"[v & 15u];
    msf_board_puts(t);
}
int main(void)
{
    msf_board_init();
    for (unsigned i = 0; i < sizeof a / sizeof a[0]; i++) {
        uint32_t x = (uint32_t)a[i], y = (uint32_t)b[i];
        int32_t sx = (int32_t)x, sy = (int32_t)y;
        int64_t lx = (int64_t)a[i], ly = (int64_t)b[i];
        msf_board_puts("MSF ops ");
        hex(x / y); hex(x %% y); hex((uint32_t)(sx / sy)); hex((uint32_t)(sx %% sy));
        hex(a[i] * b[i]); hex((uint64_t)x * y); hex((uint64_t)((int64_t)sx * sy));
        hex(a[i] / b[i]); hex(a[i] %% b[i]); hex((uint64_t)(lx / ly)); hex((uint64_t)(lx %% ly));
        msf_board_puts("\\n");
    }
    return zero != 0 || !constructed;
}
"""


def expected_ops(x64, y64):
    """What ARITHMETIC_MAIN prints for one operand pair (C semantics: truncating division)."""
    def signed(v, bits):
        return v - (1 << bits) if v >> (bits - 1) else v

    def cdiv(n, d):
        q = abs(n) // abs(d)
        return -q if (n < 0) != (d < 0) else q

    x, y = x64 & 0xFFFFFFFF, y64 & 0xFFFFFFFF
    sx, sy, lx, ly = signed(x, 32), signed(y, 32), signed(x64, 64), signed(y64, 64)
    values = [(x // y, 32), (x % y, 32), (cdiv(sx, sy), 32), (sx - cdiv(sx, sy) * sy, 32),
              (x64 * y64, 64), (x * y, 64), (sx * sy, 64), (x64 // y64, 64), (x64 % y64, 64),
              (cdiv(lx, ly), 64), (lx - cdiv(lx, ly) * ly, 64)]
    return " ".join("%016x" % (v & ((1 << bits) - 1)) for v, bits in values)


def test_xtensa_start_up_and_integer_helpers(core, tmp_path):
    """The Xtensa stand-in's own start-up (.data, .bss, constructors) and the integer helpers
    its libgcc lacks (library/src/board/qemu_xtensa_libgcc.c) against Python's arithmetic."""
    need(*XTENSA_TOOLS)
    pairs = [(7, 3), (0xFFFFFFFF, 1), (0x80000001, 0xFFFFFFFF), (123456789, 1000),
             (0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF), (1 << 63, 3), (0x123456789ABCDEF0, 0x1234567),
             (0xFFFFFFFF9ABCDEF0, 0x76543210), (5, 0xFFFFFFFFFFFFFFFE), ((1 << 40) + 5, (1 << 33) + 3)]
    ini = ("[env:qemu_esp32s3]\nplatform = symlink://../../msf_pio/pio/platform\n"
           "board = qemu_esp32s3\nlib_deps = msf-pio=symlink://../..\n"
           "custom_qemu_timeout = 20\ntest_framework = custom\n")
    project = make_project(tmp_path / "ops", ini)
    with open(os.path.join(project, "src", "main.c"), "w", encoding="utf8") as fp:
        fp.write(ARITHMETIC_MAIN % (", ".join("%#xull" % x for x, _ in pairs),
                                    ", ".join("%#xull" % y for _, y in pairs)))
    rc, out = pio(core, project, "run", "-e", "qemu_esp32s3", "-t", "upload")
    assert rc == 0 and "MSF exit=0" in out, out
    got = [l[len("MSF ops "):].strip() for l in out.splitlines() if l.startswith("MSF ops ")]
    assert got == [expected_ops(x, y) for x, y in pairs]


def test_real_board_ini_lints_offline():
    """The real-board envs cannot be built offline; their options and values can be checked."""
    from platformio.project.config import ProjectConfig

    result = ProjectConfig.lint(os.path.join(HELLO, "platformio-boards.ini"))
    assert result == {"errors": [], "warnings": []}

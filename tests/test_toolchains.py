"""The runtime and the generated C of every zoo model compile warning-free with the compilers
a user's build meets, not only Debian's GCC 12: GCC 7's <arm_acle.h> and dialect (stm32cube's
default toolchain) and clang for Cortex-M4/M7 and RV32 (tests/cross.py, TOOLCHAINS). The
ESP-IDF builds (its headers, gnu17) are checked by scripts/real_boards.py."""
import shutil
import subprocess
from pathlib import Path

import pytest

from msf_pio.codegen.generate import generate
from msf_pio.codegen.host import LIBRARY, write_sources
from msf_pio.fusion.planner import plan_model
from msf_pio.model.zoo import zoo_names
from msf_pio.verify import quantized_model

from tests.cross import TOOLCHAINS

WARNINGS = ["-Wall", "-Wextra", "-Werror", "-Os", "-ffreestanding", f"-I{LIBRARY / 'include'}"]
MEASURING = ["-DMSF_COUNT_MACS", "-DMSF_MEASURE_ARENA", "-DMSF_PROFILE_EDGES"]
DSP = {"gcc7-headers-m4", "gcc7-headers-m7", "clang-m4", "clang-m7"}


def compiler(name: str) -> list[str]:
    cmd = TOOLCHAINS[name]
    if shutil.which(cmd[0]) is None:
        pytest.skip(f"{cmd[0]} is not installed (scripts/setup.sh installs it)")
    return cmd


def compile_c(cmd: list[str], src: Path, out: Path, *flags: str) -> str:
    proc = subprocess.run([*cmd, *WARNINGS, *flags, "-c", str(src), "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"{src.name}: {proc.stderr[-2000:]}"
    return proc.stdout


def test_gcc7_stand_in_hides_the_simd32_intrinsics(tmp_path):
    """The stand-in header is the one found, and it lacks what GCC 7's lacks: a source that uses
    __smlad fails with it and compiles with Debian's GCC 12 header."""
    cmd = compiler("gcc7-headers-m4")
    src = tmp_path / "uses_acle.c"
    src.write_text("#include <arm_acle.h>\n"
                   "int f(unsigned a, unsigned b, int c) { return __smlad(a, b, c); }\n")
    stand_in = subprocess.run([*cmd, "-Werror", "-c", str(src), "-o", str(tmp_path / "a.o")],
                              capture_output=True, text=True)
    assert stand_in.returncode != 0 and "__smlad" in stand_in.stderr
    gcc12 = [c for c in cmd if not c.startswith("-isystem")]
    assert subprocess.run([*gcc12, "-Werror", "-c", str(src), "-o", str(tmp_path / "b.o")],
                          capture_output=True, text=True).returncode == 0


@pytest.mark.parametrize("name", sorted(TOOLCHAINS))
def test_runtime_compiles(name, tmp_path):
    """Every runtime source, release and measuring builds; on Cortex-M the DSP path is in."""
    cmd = compiler(name)
    for flags in ([], MEASURING):
        for src in sorted(LIBRARY.glob("src/**/*.c")):
            compile_c(cmd, src, tmp_path / f"{src.stem}.o", *flags)
    asm = subprocess.run([*cmd, *WARNINGS, "-S", "-o", "-",
                          str(LIBRARY / "src" / "kernels" / "conv2d_s8.c")],
                         capture_output=True, text=True).stdout
    assert ("smlad" in asm) == (name in DSP)


@pytest.mark.parametrize("model", zoo_names(scale=False))
def test_generated_model_compiles(model, tmp_path):
    """Each zoo model's least-RAM plan at F <= 1.3 (the fused executors' tables), with every
    compiler; the measuring build (arena painting, MAC counts, edge profiling) with GCC 7's."""
    quantized = quantized_model(model)
    plan, _ = plan_model(quantized, "min_ram", 1.3)
    write_sources(generate(quantized, plan), tmp_path)
    for name in sorted(TOOLCHAINS):
        cmd = compiler(name)
        compile_c(cmd, tmp_path / "msf_model.c", tmp_path / f"{name}.o", f"-I{tmp_path}")
    compile_c(compiler("gcc7-headers-m4"), tmp_path / "msf_model.c", tmp_path / "m.o",
              f"-I{tmp_path}", *MEASURING)

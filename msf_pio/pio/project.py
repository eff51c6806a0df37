"""The demo PlatformIO project as a working copy: paths made absolute, custom_msf_* options
set, and `pio` run on it offline. Used by `msf-pio demo`, the benchmarks and the tests."""
from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path

from . import bootstrap

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "msf_demo"
RESULT_RE = re.compile(r"^MSF model=.*$", re.M)


def make_project(dst: Path, **options: str) -> Path:
    """Copy examples/msf_demo to dst (replacing an earlier copy made by this function) with
    `custom_msf_<name> = value` for every option given."""
    dst = Path(dst)
    if dst.exists():
        if not (dst / ".msf-demo-copy").is_file():
            raise FileExistsError(f"{dst} exists and is not a demo copy made by msf-pio")
        shutil.rmtree(dst / "src")
        shutil.rmtree(dst / "test")
    shutil.copytree(DEMO, dst, ignore=shutil.ignore_patterns(".pio"),
                    dirs_exist_ok=True)
    (dst / ".msf-demo-copy").write_text("made by msf-pio; safe to delete\n")
    ini = dst / "platformio.ini"
    text = ini.read_text().replace("../..", str(REPO))
    for name, value in options.items():
        key = f"custom_msf_{name}"
        text, n = re.subn(rf"^{key}\s*=.*$", f"{key} = {value}", text, flags=re.M)
        if not n:
            raise KeyError(key)
    ini.write_text(text)
    return dst


def widen_flash(project: Path, flash: int) -> None:
    """Every env of a demo copy takes `flash` bytes of flash as a user would widen it
    (board_upload.maximum_size): the emulated machines map more code memory than the parts
    they stand for (qemu_f767zi's mps2-an500: 4 MB at 0x0). The [env] section is the file's
    last, so a caller may append more of its options."""
    ini = project / "platformio.ini"
    ini.write_text(ini.read_text() + f"\n[env]\nboard_upload.maximum_size = {flash}\n")


def envs(project: Path) -> list[str]:
    parser = configparser.ConfigParser(inline_comment_prefixes=(";",))
    parser.read(project / "platformio.ini")
    return [s[4:] for s in parser.sections() if s.startswith("env:")]


def pio(core: str | None, project: Path, *args: str, timeout: float = 900):
    """Run `pio` offline on `project`; returns (exit code, combined output)."""
    proc = subprocess.run([sys.executable, "-m", "platformio", *args], cwd=project,
                          env=bootstrap.offline_env(core), capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def result_lines(output: str) -> list[str]:
    return RESULT_RE.findall(output)

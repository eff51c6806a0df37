"""`msf-pio init`: a new PlatformIO project that runs a model on the chosen boards.

Writes platformio.ini (the demo's envs for the chosen boards, msf-pio in lib_deps, no
extra_scripts), the demo's application (src/main.c), its on-target test (test/) and the monitor
filter (monitor/filter_msf.py, for `monitor_filters = msf`), plus ESP-IDF's project files when an
espidf board is chosen. Never overwrites a file: an existing one stops it with one line.
"""
from __future__ import annotations

import configparser
import shutil
from pathlib import Path

from ..errors import MsfError
from .project import DEMO, REPO

FILTER = REPO / "msf_pio" / "pio" / "platform" / "monitor" / "filter_msf.py"
ESPIDF_FILES = ("CMakeLists.txt", "src/CMakeLists.txt", "sdkconfig.defaults",
                "sdkconfig.defaults.esp32s3", "sdkconfig.defaults.esp32c3")
APP_FILES = ("src/main.c", "test/test_custom_runner.py", "test/test_model/test_model.c")


def demo_config() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
    parser.read(DEMO / "platformio.ini")
    return parser


def boards() -> list[str]:
    return [s[4:] for s in demo_config().sections() if s.startswith("env:")]


def _section(parser, name: str, lib_deps: str) -> str:
    lines = [f"[{name}]"]
    for key, value in parser.items(name, raw=True):
        if key == "lib_deps":
            value = lib_deps
        value = value.replace("symlink://../..", f"symlink://{REPO}")
        lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


def project_ini(chosen: list[str], model: str, lib_deps: str) -> str:
    parser = demo_config()
    parser.set("msf", "custom_msf_model", model)
    sections = ["msf"]
    for board in chosen:
        parent = parser.get(f"env:{board}", "extends", fallback="msf")
        if parent not in sections:
            sections.append(parent)
    head = ("; Made by `msf-pio init`: the model and its RAM budget are the custom_msf_* options;\n"
            "; `pio run -e ENV -t upload` builds, uploads and runs it, `pio device monitor` shows\n"
            "; the result line, `pio test -e ENV` checks it bit-exactly on the target.\n\n"
            f"[platformio]\ndefault_envs = {chosen[0]}\n\n")
    return head + "\n".join(_section(parser, s, lib_deps) for s in sections + [
        f"env:{b}" for b in chosen])


def init(directory: Path, chosen: list[str], model: str, lib_deps: str | None = None) -> list[Path]:
    """Write the project into `directory`; returns the files written."""
    known = boards()
    for board in chosen:
        if board not in known:
            raise MsfError(f"unknown board {board!r}; one of: {', '.join(known)}", where="--board")
    if not DEMO.is_dir():
        raise MsfError("the demo project is not beside this msf-pio (install it from a checkout)",
                       source=str(DEMO))
    directory = Path(directory)
    model_path = Path(model)
    files: dict[Path, Path | str] = {}
    if model_path.suffix in (".yaml", ".yml", ".onnx"):
        if not model_path.is_file():
            raise MsfError("no such model file", source=model, where="--model")
        files[Path("models") / model_path.name] = model_path
        model = f"models/{model_path.name}"
    lib_deps = lib_deps or f"msf-pio=symlink://{REPO}"
    files[Path("platformio.ini")] = project_ini(chosen, model, lib_deps)
    for name in APP_FILES:
        files[Path(name)] = DEMO / name
    files[Path("monitor/filter_msf.py")] = FILTER
    if any(demo_config().get(f"env:{b}", "framework", fallback="") == "espidf" for b in chosen):
        for name in ESPIDF_FILES:
            files[Path(name)] = DEMO / name
    taken = [str(directory / f) for f in files if (directory / f).exists()]
    if taken:
        raise MsfError("exists already; msf-pio init writes a new project and overwrites "
                       "nothing", source=taken[0])
    for rel, src in files.items():
        dst = directory / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, Path):
            shutil.copyfile(src, dst)
        else:
            dst.write_text(src)
    return [directory / f for f in files]

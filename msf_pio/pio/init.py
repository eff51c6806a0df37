"""`msf-pio init`: a PlatformIO project that runs a model, ready to build and to commit.

A new project gets platformio.ini (msf-pio's options in one [msf] section every env extends),
the model copied into models/ (any kind: a zoo name stays a name), a short src/main.c the user
keeps (fill the input, run, read the result), the measuring harness and its runner under test/
only, the monitor filter, .gitignore and, for ESP-IDF boards, ESP-IDF's project files.
`--into` adds msf-pio to an existing project: files it would write that exist are left alone,
and platformio.ini only gains lines (new sections, `extends = msf` in envs that extend nothing).

Nothing committed names this machine: what does (a development checkout of msf-pio, the
folder of its emulated platform) goes into local.ini, which platformio.ini reads through
`extra_configs` and .gitignore leaves out; a clone elsewhere runs `msf-pio init --into .` to
write its own.
"""
from __future__ import annotations

import configparser
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .. import __version__
from ..errors import MsfError
from .boards import FACTS
from .project import DEMO, REPO

PACKAGE = Path(__file__).resolve().parents[1]
PLATFORM = PACKAGE / "pio" / "platform"
TEMPLATE = Path(__file__).with_name("template")
FILTER = PLATFORM / "monitor" / "filter_msf.py"
MODEL_SUFFIXES = (".yaml", ".yml", ".onnx", ".tflite")
# the official PlatformIO platform of each framework msf-pio's board files support
PLATFORMS = {"stm32cube": "ststm32", "espidf": "espressif32", "freedom-e-sdk": "sifive"}
ESPIDF_FILES = ("CMakeLists.txt", "src/CMakeLists.txt", "sdkconfig.defaults",
                "sdkconfig.defaults.esp32s3", "sdkconfig.defaults.esp32c3")
# the harness (the demo's measuring firmware and its on-target tests) and pio test's runner
HARNESS = {"test/test_custom_runner.py": "test_custom_runner.py",
           "test/test_msf/harness.c": "harness.c",
           "test/test_msf/test_model.c": "test_model.c"}
LOCAL_INI = "local.ini"
GITIGNORE = (".pio/", f"{LOCAL_INI}", ".vscode/")


def emulated_boards() -> list[str]:
    return sorted(p.stem for p in (PLATFORM / "boards").glob("*.json"))


def real_boards() -> dict[str, str]:
    """Board id -> framework, for the boards msf-pio has facts and a board file for."""
    facts = yaml.safe_load(FACTS.read_text())
    return {b: f["framework"] for b, f in facts.items() if f.get("framework") in PLATFORMS}


def boards() -> list[str]:
    return emulated_boards() + list(real_boards())


def is_checkout() -> bool:
    """msf-pio's C library lies beside the package: a development checkout (or an unpacked
    library), which a project gets by path; an installed package gets the library by name."""
    return (REPO / "library.json").is_file() and (REPO / "library" / "src").is_dir()


@dataclass
class Project:
    """What init writes: files (path -> text or source file) and lines for platformio.ini."""
    directory: Path
    files: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


def _model_files(model: str, directory: Path) -> tuple[str, dict]:
    """The model as custom_msf_model names it, and the files to copy (project path -> source):
    a file model goes into models/ with what it references (a YAML spec's weights file)."""
    path = Path(model)
    if path.suffix.lower() not in MODEL_SUFFIXES:
        from ..model.zoo import zoo_names, zoo_path
        if zoo_path(model) is None:
            raise MsfError(f"not a model file ({', '.join(MODEL_SUFFIXES)}) nor a zoo model "
                           f"(one of {', '.join(zoo_names())})", source=model, where="--model")
        return model, {}
    if not path.is_file():
        raise MsfError("no such model file", source=model, where="--model")
    inside = _relative_to(path.resolve(), directory.resolve())
    if inside is not None:                       # already in the project: named, not copied
        return inside.as_posix(), {}
    files = {Path("models") / path.name: path}
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            spec = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise MsfError(f"cannot read the spec: {exc}", source=model) from None
        weights = spec.get("weights") if isinstance(spec, dict) else None
        for kind, ref in (weights or {}).items() if isinstance(weights, dict) else ():
            if kind == "random" or not isinstance(ref, str):
                continue
            rel = Path(ref)
            if rel.is_absolute() or ".." in rel.parts:
                raise MsfError(f"weights file {ref!r} is not in the spec's folder: init copies "
                               "the spec with the files beside it", source=model,
                               where=f"weights.{kind}")
            if not (path.parent / rel).is_file():
                raise MsfError(f"no such weights file {ref!r}", source=model,
                               where=f"weights.{kind}")
            files[Path("models") / rel] = path.parent / rel
    return f"models/{path.name}", files


def _relative_to(path: Path, base: Path) -> Path | None:
    try:
        return path.relative_to(base)
    except ValueError:
        return None


def _lib_deps(explicit: str | None) -> tuple[str, str]:
    """lib_deps as committed, and its comment."""
    if explicit:
        return explicit, "how this project gets msf-pio (msf-pio init --lib-deps)"
    return f"msf-pio@^{__version__}", "the PlatformIO registry's" + (
        " (local.ini: a checkout)" if is_checkout() else "")


def _options(model: str, lib_deps: tuple[str, str]) -> list[tuple[str, str, str]]:
    """The [msf] section: (option, value, comment); release defaults."""
    return [
        ("lib_deps", *lib_deps),
        ("custom_msf_model", model, "zoo name, models/*.yaml|.onnx|.tflite"),
        ("custom_msf_objective", "min_ram", "min_ram (P1) | min_macs (P2) | min_latency | vanilla"),
        ("custom_msf_max_overhead", "inf", "P1's Fmax: MACs at most F x the unfused model's"),
        ("custom_msf_ram_limit", "auto", "P2's Pmax (64kB, 64KiB); auto: what the board has left"),
        ("custom_msf_cost_model", "exact", "exact | paper"),
        ("custom_msf_input", "buffer", "buffer | stream (rows from a callback)"),
        ("custom_msf_output", "buffer", "buffer | stream (pixels to a sink)"),
        ("custom_msf_measure", "auto", "arena painting: only pio test and emulated builds"),
        ("custom_msf_profile", "no", "yes: time every edge (monitor: measured vs predicted)"),
        ("test_framework", "custom", "test/test_custom_runner.py"),
        ("monitor_filters", "msf", "a verdict under every result line"),
    ]


def _section(name: str, rows: list[tuple[str, str, str]]) -> str:
    width = max(len(f"{k} = {v}") for k, v, _ in rows)
    lines = [f"[{name}]"] + [(f"{k} = {v}".ljust(width) + (f"   ; {c}" if c else "")).rstrip()
                             for k, v, c in rows]
    return "\n".join(lines) + "\n"


def _env_sections(chosen: list[str]) -> list[str]:
    emulated, real = emulated_boards(), real_boards()
    out = []
    if any(b in emulated for b in chosen):
        out.append(_section("qemu", [
            ("extends", "msf", ""),
            ("platform", "msf-qemu", "msf-pio's emulated boards (local.ini: their folder)"),
            ("custom_qemu_timeout", "300", "seconds")]))
    if any(b in real for b in chosen):
        out.append(_section("real", [("extends", "msf", ""),
                                     ("monitor_speed", "115200", "the board's serial port")]))
    for b in chosen:
        if b in emulated:
            out.append(_section(f"env:{b}", [
                ("extends", "qemu", ""), ("board", b, ""),
                ("monitor_port", f"qemu://{b}", "pio device monitor runs the firmware in QEMU")]))
        else:
            out.append(_section(f"env:{b}", [
                ("extends", "real", ""), ("platform", PLATFORMS[real[b]], ""), ("board", b, ""),
                ("framework", real[b], "")]))
    return out


def _local_ini(emulated: bool, checkout: bool, env_lib_deps: bool = False) -> str | None:
    """This machine's settings (never committed): the development checkout of msf-pio (when
    `checkout`) and the folder of its emulated platform; None when there is nothing to say.
    `env_lib_deps`: keep [env]'s lib_deps, which [msf]'s would hide."""
    rows = []
    if checkout:
        keep = "${env.lib_deps}\n    " if env_lib_deps else ""
        rows.append(("msf", "lib_deps", f"{keep}msf-pio=symlink://{REPO}",
                     "a development checkout"))
    if emulated:
        rows.append(("qemu", "platform", f"symlink://{PLATFORM}", "msf-pio's emulated boards"))
    if not rows:
        return None
    text = ["; This machine's paths (not committed: .gitignore). `msf-pio init --into .` "
            "writes it again.", ""]
    for section in dict.fromkeys(r[0] for r in rows):
        text.append(_section(section, [(k, v, c) for s, k, v, c in rows if s == section]))
    return "\n".join(text)


def _head(model: str, chosen: list[str], default_env: str) -> str:
    emulated = [b for b in chosen if b in emulated_boards()]
    real = [b for b in chosen if b not in emulated]
    lines = [f"; {model} on {', '.join(chosen)}: made by `msf-pio init` (msf-pio {__version__}).",
             "; The model and its RAM budget are the custom_msf_* options of [msf]; msf-pio plans",
             "; the fusion and generates the model's C at build time, into .pio/ (never src/).",
             ";"]
    commands = []
    for b in emulated[:1]:
        commands += [(f"pio run -e {b} -t upload", "build src/main.c, run it in QEMU"),
                     (f"pio test -e {b}", "the harness: output, arena and latency checked")]
    for b in real[:1]:
        commands += [(f"pio run -e {b} -t upload", "build, flash the board"),
                     (f"pio device monitor -e {b}", "its serial output"),
                     (f"pio test -e {b}", "the harness on the board")]
    width = max(len(c) for c, _ in commands)
    lines += [f";   {c.ljust(width)}   {what}" for c, what in commands]
    if not emulated:
        lines += [";", "; No emulated board: building needs the PlatformIO registry (the board's "
                       "platform and", "; toolchain). `msf-pio init --into . --board "
                       "qemu_f767zi` adds one that builds offline."]
    return "\n".join(lines) + "\n\n" + _section("platformio", [
        ("default_envs", default_env, ""),
        ("extra_configs", LOCAL_INI, "this machine's paths, not committed")]) + "\n"


def _check_boards(chosen: list[str]) -> None:
    known = boards()
    for board in chosen:
        if board not in known:
            raise MsfError(f"unknown board {board!r}; one of: {', '.join(known)}",
                           where="--board")


def _espidf_files() -> dict:
    """ESP-IDF's project files, the demo's: a checkout (or the PlatformIO library) has them."""
    if not (DEMO / ESPIDF_FILES[0]).is_file():
        raise MsfError("ESP-IDF boards need ESP-IDF's project files of msf-pio's demo "
                       "(examples/msf_demo), which this install of msf-pio lacks: use a "
                       "checkout", where="--board")
    return {Path(name): DEMO / name for name in ESPIDF_FILES}


def _harness_files(chosen: list[str]) -> dict:
    files = {Path(dst): TEMPLATE / src for dst, src in HARNESS.items()}
    files[Path("monitor/filter_msf.py")] = FILTER
    if any(real_boards().get(b) == "espidf" for b in chosen):
        files.update(_espidf_files())
    return files


def init(directory: Path, chosen: list[str], model: str, lib_deps: str | None = None) -> Project:
    """A new project in `directory` (absent, or holding none of the files init writes);
    nothing is written until everything checks out."""
    _check_boards(chosen)
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise MsfError("is a file, not a folder for a new project", source=str(directory))
    model_name, files = _model_files(model, directory)
    files = {**files, **_harness_files(chosen), Path("src/main.c"): TEMPLATE / "main.c"}
    emulated = [b for b in chosen if b in emulated_boards()]
    default_env = (emulated or chosen)[0]
    ini = _head(model_name, chosen, default_env) + "\n".join(
        [_section("msf", _options(model_name, _lib_deps(lib_deps)))] + _env_sections(chosen))
    files[Path("platformio.ini")] = ini
    files[Path(".gitignore")] = "\n".join(GITIGNORE) + "\n"
    local = _local_ini(bool(emulated), is_checkout() and not lib_deps)
    if local:
        files[Path(LOCAL_INI)] = local
    taken = [directory / f for f in files if (directory / f).exists()]
    if taken:
        raise MsfError("exists already; msf-pio init writes a new project and overwrites "
                       "nothing (--into adds msf-pio to an existing one)", source=str(taken[0]))
    project = Project(directory, files)
    if not emulated:
        project.notes.append(f"no emulated board: `pio run` builds {default_env}, which needs "
                             "the PlatformIO registry; add --board qemu_f767zi for one that "
                             "builds and runs offline")
    _write(project)
    return project


def add_into(directory: Path, chosen: list[str], model: str | None,
             lib_deps: str | None = None) -> Project:
    """msf-pio added to the PlatformIO project in `directory`: the files it lacks, and lines in
    platformio.ini (never a changed one). Run again in a clone, it writes local.ini."""
    _check_boards(chosen)
    directory = Path(directory)
    ini_path = directory / "platformio.ini"
    if not ini_path.is_file():
        raise MsfError("not a PlatformIO project (no platformio.ini)", source=str(directory),
                       where="--into")
    ini = _Ini(ini_path.read_text(), str(ini_path))
    project = Project(directory)
    files: dict = {}
    if ini.has("msf"):
        if model is not None:
            project.notes.append("[msf] exists: its custom_msf_model stays (edit it there)")
    else:
        if model is None:
            raise MsfError("is needed to add msf-pio to a project", where="--model")
        model_name, files = _model_files(model, directory)
        env_lib_deps = ini.get("env", "lib_deps")
        deps = _lib_deps(lib_deps)
        if env_lib_deps:                 # [msf] would hide [env]'s: keep them
            deps = ("${env.lib_deps}\n    " + deps[0], deps[1])
        options = _options(model_name, deps)
        if (directory / "test").exists():
            options = [o for o in options if o[0] != "test_framework"]
            project.notes.append("test/ is the project's own: the msf-pio harness was not "
                                 "added (a new project from `msf-pio init` shows it)")
        else:
            files.update({Path(d): TEMPLATE / s for d, s in HARNESS.items()})
        ini.append(_section("msf", options))
    for name, base in (("qemu", [b for b in chosen if b in emulated_boards()]),
                       ("real", [b for b in chosen if b in real_boards()])):
        if base and not ini.has(name):
            ini.append(_env_sections(base)[0])
    for board in chosen:
        if not ini.has(f"env:{board}"):
            ini.append(_env_sections([board])[-1])
    for env in ini.envs():
        extends = ini.get(env, "extends")
        if extends is None:
            ini.insert(env, "extends = msf   ; msf-pio's options (added by msf-pio init --into)")
        elif not ini.extends_msf(env):
            project.notes.append(f"[{env}] extends {extends}: add msf to it "
                                 f"(extends = {extends}, msf) to run the model there")
        if ini.get(env, "lib_deps") is not None and ini.extends_msf(env):
            project.notes.append(f"[{env}] has its own lib_deps: add msf-pio to them")
    if not ini.has("platformio"):
        ini.append(_section("platformio", [("extra_configs", LOCAL_INI,
                                            "this machine's paths, not committed")]))
    elif ini.get("platformio", "extra_configs") is None:
        ini.insert("platformio", f"extra_configs = {LOCAL_INI}   ; this machine's paths")
    elif LOCAL_INI not in ini.get("platformio", "extra_configs").split():
        ini.insert_after_option("platformio", "extra_configs", f"    {LOCAL_INI}")
    files[Path("monitor/filter_msf.py")] = FILTER
    if any(real_boards().get(b) == "espidf" for b in chosen):
        files.update(_espidf_files())
    local = _local_ini(ini.has("qemu"), is_checkout() and not lib_deps and
                       (ini.get("msf", "lib_deps") or "").endswith(
                           f"msf-pio@^{__version__}"), ini.get("env", "lib_deps") is not None)
    if local:
        files[Path(LOCAL_INI)] = local
    project.files = {rel: src for rel, src in files.items() if not (directory / rel).exists()}
    kept = sorted(str(rel) for rel in files if rel not in project.files)
    if kept:
        project.notes.append(f"kept as they are: {', '.join(kept)}")
    if not (directory / "src" / "main.c").exists() or ini.changed:
        project.notes.append("your firmware calls msf_model_run(input, output) (msf_model.h); "
                             "the src/main.c of a new `msf-pio init` project shows how")
    gitignore = directory / ".gitignore"
    have = gitignore.read_text().splitlines() if gitignore.is_file() else []
    missing = [line for line in GITIGNORE if line not in have]
    if missing:
        project.files[Path(".gitignore")] = "\n".join(
            have + (["# msf-pio"] if have else []) + missing) + "\n"
    if ini.changed:
        project.files[Path("platformio.ini")] = ini.text()
    _write(project)
    return project


class _Ini:
    """platformio.ini as lines, edited only by adding lines (sections appended, options
    inserted under a section's header); read with PlatformIO's own syntax."""

    def __init__(self, text: str, source: str):
        self.lines, self.changed, self.source = text.splitlines(), False, source
        self._parse()

    def _parse(self):
        self.config = configparser.ConfigParser(inline_comment_prefixes=(";", "#"),
                                                interpolation=None, strict=False)
        try:
            self.config.read_string("\n".join(self.lines))
        except configparser.Error as exc:
            raise MsfError(f"cannot read: {str(exc).splitlines()[0]}", source=self.source) \
                from None

    def has(self, section: str) -> bool:
        return self.config.has_section(section)

    def get(self, section: str, option: str) -> str | None:
        if not self.has(section) or not self.config.has_option(section, option):
            return None
        return self.config.get(section, option, raw=True)

    def envs(self) -> list[str]:
        return [s for s in self.config.sections() if s.startswith("env:")]

    def extends_msf(self, section: str) -> bool:
        """The section is [msf] or extends it (through its chain)."""
        seen = set()
        while section and section not in seen:
            if section == "msf":
                return True
            seen.add(section)
            parents = [p.strip() for p in (self.get(section, "extends") or "").split(",")]
            if not any(parents):
                return False
            if "msf" in parents:
                return True
            section = parents[0]
        return False

    def _header(self, section: str) -> int:
        pattern = re.compile(rf"^\s*\[{re.escape(section)}\]")
        return next(i for i, line in enumerate(self.lines) if pattern.match(line))

    def insert(self, section: str, line: str) -> None:
        self.lines.insert(self._header(section) + 1, line)
        self.changed = True
        self._parse()

    def insert_after_option(self, section: str, option: str, line: str) -> None:
        i = self._header(section) + 1
        while not re.match(rf"^{re.escape(option)}\s*=", self.lines[i]):
            i += 1
        i += 1
        while i < len(self.lines) and self.lines[i][:1] in (" ", "\t") and self.lines[i].strip():
            i += 1                                           # the value's continuation lines
        self.lines.insert(i, line)
        self.changed = True
        self._parse()

    def append(self, section_text: str) -> None:
        if self.lines and self.lines[-1].strip():
            self.lines.append("")
        self.lines += section_text.rstrip("\n").splitlines()
        self.changed = True
        self._parse()

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _write(project: Project) -> None:
    for rel, src in project.files.items():
        dst = project.directory / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, Path):
            shutil.copyfile(src, dst)
        else:
            dst.write_text(src)

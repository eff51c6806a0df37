"""The demo's real-board envs, built against the official PlatformIO platforms and frameworks
and, where QEMU models the part, run through a pseudo-terminal the way a board's serial port is
read: `pio device monitor` and `pio test --test-port`.

Needs a folder of packages laid out offline (docs/real-boards.md: platform-ststm32,
platform-sifive and platform-espressif32 from snapshots of their repositories, the Cube F4/F7 HAL,
freedom-e-sdk, ESP-IDF 5.5.3, toolchain packages pointing at Debian's GCC, and an Xtensa LX7 GCC
built from Debian's GCC source with Espressif's overlay). Builds nucleo_f767zi, disco_f746ng,
nucleo_f412zg, hifive1-revb, esp32-c3-devkitm-1 and esp32-s3-devkitc-1 as a user would (the last
two through platform-espressif32's own espidf builder, i.e. ESP-IDF's CMake); compiles msf-pio's
own sources of each build again with the build's own command lines plus -Wall -Wextra -Werror;
measures the framework's static RAM beside the model (the figure msf_pio/pio/boards.yaml
budgets); for the ESP32 envs shows what the espidf build did with the library (the model compiled
and linked once, the app partition of the build's partition table as the flash budget, the
sdkconfig's flash size and task watchdog, the watchdog hand-over linked in); runs the
nucleo_f412zg firmware on QEMU netduinoplus2 (an STM32F405: relinked for its 128 KB of SRAM,
USART3 as on the Nucleo) and the hifive1-revb firmware on QEMU sifive_e,revb=true (UART0);
prints tables. No ESP32 emulator runs ESP-IDF firmware here: the ESP32 envs are built, not run.
Envs whose platform is not in the folder are skipped.

Usage: python scripts/real_boards.py PACKAGES_DIR [--work DIR] [--model NAME] [--seconds S]
                                     [--env ENV ...]
"""
import argparse
import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import serial

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from msf_pio.pio import bootstrap  # noqa: E402
from msf_pio.pio.boards import app_partition  # noqa: E402
from msf_pio.pio.project import make_project, pio  # noqa: E402

PLATFORMS = {"nucleo_f767zi": "ststm32", "disco_f746ng": "ststm32", "nucleo_f412zg": "ststm32",
             "hifive1-revb": "sifive", "esp32-c3-devkitm-1": "espressif32",
             "esp32-s3-devkitc-1": "espressif32"}
ESP32 = ("esp32-c3-devkitm-1", "esp32-s3-devkitc-1")
# what platform-espressif32 resolves for an espidf-only env (platform.py): the compilers, ESP-IDF,
# CMake, Ninja, esptool, and packages a build never runs (ULP, ROM ELFs, GDB) that must exist
ESP_PACKAGES = ("framework-espidf", "toolchain-riscv32-esp", "tool-cmake", "tool-ninja",
                "tool-esptoolpy", "toolchain-esp32ulp", "tool-esp-rom-elfs",
                "tool-xtensa-esp-elf-gdb", "tool-riscv32-esp-elf-gdb")
ESP_TOOLCHAIN = {"esp32-c3-devkitm-1": "toolchain-riscv32-esp",
                 "esp32-s3-devkitc-1": "toolchain-xtensa-esp-elf"}
FIELD = re.compile(r"(\w+)=(\S+)")
SIZE = re.compile(r"^(RAM|Flash):.*used (\d+) bytes from (\d+) bytes", re.M)


def laid_out(pkgs: Path, env: str) -> bool:
    return (pkgs / f"platform-{PLATFORMS[env]}").is_dir()


def offline_ini(pkgs: Path, work: Path) -> str:
    """Platform and package overrides pointing at the laid-out packages, plus the QEMU env."""
    text = ""
    if (pkgs / "platform-ststm32").is_dir():
        stm32 = (f"platform = symlink://{pkgs}/platform-ststm32\nplatform_packages =\n"
                 f"    toolchain-gccarmnoneeabi@symlink://{pkgs}/toolchain-gccarmnoneeabi\n"
                 f"    tool-ldscripts-ststm32@symlink://{pkgs}/tool-ldscripts-ststm32\n")
        for env, family in (("nucleo_f767zi", "f7"), ("disco_f746ng", "f7"),
                            ("nucleo_f412zg", "f4")):
            text += (f"[env:{env}]\n{stm32}    framework-stm32cube{family}@symlink://"
                     f"{pkgs}/framework-stm32cube{family}\n\n")
        # netduinoplus2's STM32F405 has 128 KB of SRAM where the F412ZG has 256 KB
        st_ld = (pkgs / "tool-ldscripts-ststm32" / "stm32f4" /
                 "STM32F412ZGTX_FLASH.ld").read_text()
        ld = work / "STM32F412ZG_128K.ld"
        ld.write_text(re.sub(r"(RAM\s+\(xrw\)\s+: ORIGIN = 0x20000000,\s+LENGTH = )256K",
                             r"\g<1>128K", st_ld))
        text += (f"[env:nucleo_f412zg_qemu]\nextends = env:nucleo_f412zg\n"
                 f"board_build.ldscript = {ld}\nboard_upload.maximum_ram_size = 131072\n\n")
    if (pkgs / "platform-sifive").is_dir():
        text += (f"[env:hifive1-revb]\nplatform = symlink://{pkgs}/platform-sifive\n"
                 f"platform_packages =\n    toolchain-riscv@symlink://{pkgs}/toolchain-riscv\n"
                 f"    framework-freedom-e-sdk@symlink://{pkgs}/framework-freedom-e-sdk\n\n")
    if (pkgs / "platform-espressif32").is_dir():
        for env in ESP32:
            packages = ESP_PACKAGES + (("toolchain-xtensa-esp-elf",) if "-s3-" in env else ())
            text += (f"[env:{env}]\nplatform = symlink://{pkgs}/platform-espressif32\n"
                     "platform_packages =\n" + "".join(
                         f"    {p}@symlink://{pkgs}/{p}\n" for p in packages) + "\n")
    return text


def project(pkgs: Path, work: Path, model: str) -> Path:
    proj = make_project(work / "demo", model=model)
    (proj / "msf_offline.ini").write_text(offline_ini(pkgs, work))
    ini = proj / "platformio.ini"
    ini.write_text(ini.read_text().replace("[platformio]\n",
                                           "[platformio]\nextra_configs = msf_offline.ini\n", 1))
    return proj


def build(core, proj, env, *args, timeout=900):
    code, out = pio(core, proj, "run", "-e", env, *args, timeout=timeout)
    sizes = {k: (int(u), int(t)) for k, u, t in SIZE.findall(out)}
    error = next((l for l in out.splitlines() if "rror" in l), out[-300:])
    return code == 0, sizes, error, out


def tool_path(pkgs: Path, env: str) -> dict:
    """The environment a build's own compiler command lines run in: an ESP32 build names its
    compiler without a folder (PlatformIO puts the toolchain package's bin/ on PATH)."""
    extra = [str(pkgs / ESP_TOOLCHAIN[env] / "bin")] if env in ESP_TOOLCHAIN else []
    return {**os.environ, "PATH": os.pathsep.join(extra + [os.environ["PATH"]])}


def strict_warnings(core, proj, env, pkgs) -> str:
    """msf-pio's sources of the build (the library and the generated model) compiled again with
    -Wall -Wextra -Werror, with the build's own command lines (compile_commands.json): its
    compiler, headers, dialect and flags (for an espidf build: ESP-IDF's)."""
    code, out = pio(core, proj, "run", "-e", env, "-t", "compiledb", timeout=3600)
    if code:
        return "compiledb failed"
    ours = [str(REPO / "library"), str(proj / ".pio" / "build" / env / "msf_generated")]
    bad, n, dialects, compilers = [], 0, set(), set()
    for entry in json.loads((proj / "compile_commands.json").read_text()):
        path = os.path.join(entry["directory"], entry["file"])
        if not any(Path(path).resolve().is_relative_to(Path(p).resolve()) for p in ours):
            continue
        args = shlex.split(entry["command"])
        if "-o" in args:
            args[args.index("-o") + 1] = os.devnull
        dialects.update(a for a in args if a.startswith("-std="))
        compilers.add(os.path.basename(args[0]))
        proc = subprocess.run(args + ["-Wall", "-Wextra", "-Werror"], cwd=entry["directory"],
                              capture_output=True, text=True, env=tool_path(pkgs, env))
        n += 1
        if proc.returncode:
            bad.append(f"{Path(path).name}: {(proc.stderr.strip() or 'failed').splitlines()[0]}")
    how = f"{', '.join(sorted(compilers))} {' '.join(sorted(dialects)) or '(no -std)'}"
    return (f"{n} files clean ({how})" if not bad else "; ".join(bad)) if n else "no files"


GCC7_HEADERS = REPO / "tests" / "c" / "gcc7"   # a stand-in of GCC 7's <arm_acle.h>
CLANG_TARGET = {"arm": ["--target=thumbv7em-none-eabihf"],
                "riscv": ["--target=riscv32-unknown-elf", "-march=rv32imac", "-mabi=ilp32"]}
# GCC-only flags of the builds' command lines that clang rejects or would warn about
CLANG_DROP = re.compile(r"^(--specs=.*|-misa-spec=.*|-mcmodel=.*|-nostdlib|-mcpu=.*riscv.*)$")


def ours(proj: Path, env: str) -> list[tuple[list[str], str, Path]]:
    """msf-pio's own compile commands of a build (compile_commands.json, made by
    strict_warnings): (arguments with -o to /dev/null, directory, source)."""
    mine = [REPO / "library", proj / ".pio" / "build" / env / "msf_generated"]
    out = []
    for entry in json.loads((proj / "compile_commands.json").read_text()):
        path = Path(entry["directory"], entry["file"]).resolve()
        if any(path.is_relative_to(p.resolve()) for p in mine):
            args = shlex.split(entry["command"])
            if "-o" in args:
                args[args.index("-o") + 1] = os.devnull
            out.append((args, entry["directory"], path))
    return out


def system_includes(args: list[str], env: dict) -> list[str]:
    """The C library's header folders the build's GCC searches with its target flags and specs
    (not GCC's own folders: clang has its own builtin headers)."""
    target = [a for a in args[1:] if a.startswith(("--specs=", "-march=", "-mabi=", "-mcpu=",
                                                    "-mfloat-abi=", "-mfpu=", "-mthumb"))]
    proc = subprocess.run([args[0], *target, "-xc", "-E", "-v", os.devnull],
                          capture_output=True, text=True, env=env)
    text = proc.stderr.split("#include <...> search starts here:")[-1].split("End of search")[0]
    folders = [os.path.normpath(d.strip()) for d in text.splitlines() if d.strip()]
    return [f"-isystem{d}" for d in folders if "/gcc/" not in d and "gcc-lib" not in d]


def other_compilers(proj, env, pkgs) -> dict:
    """msf-pio's sources of a stm32cube or freedom-e-sdk build, -Wall -Wextra -Werror, as two
    other compilers would take the build's own command lines: GCC 7's header set (the stand-in
    <arm_acle.h>, its gnu11 dialect; Arm only) and clang (its own builtin headers, the build's
    C library's)."""
    arch = "riscv" if env == "hifive1-revb" else "arm"
    variants = {"clang": None} if arch == "riscv" else {"GCC 7 header set": None, "clang": None}
    results = {}
    entries = ours(proj, env)
    for name in variants:
        bad = []
        for args, cwd, path in entries:
            if name == "GCC 7 header set":
                cmd = [a for a in args if not a.startswith("-std=")] + \
                    ["-std=gnu11", f"-isystem{GCC7_HEADERS}"]
            else:
                libc = system_includes(args, tool_path(pkgs, env))
                cmd = ["clang", *CLANG_TARGET[arch], *libc,
                       *[a for a in args[1:] if not CLANG_DROP.match(a)],
                       "-Wno-unused-command-line-argument"]
            proc = subprocess.run(cmd + ["-Wall", "-Wextra", "-Werror"], cwd=cwd,
                                  capture_output=True, text=True, env=tool_path(pkgs, env))
            if proc.returncode:
                bad.append(f"{path.name}: {(proc.stderr.strip() or 'failed').splitlines()[0]}")
        n = len(entries)
        results[name] = ("no files" if not n else f"{n} files clean" if not bad else
                         f"{n - len(bad)} of {n} clean; " + "; ".join(bad[:3]))
    return results


def compiler_version(pkgs: Path, env: str, prefix: str) -> str:
    proc = subprocess.run([f"{prefix}gcc", "--version"], capture_output=True, text=True,
                          env=tool_path(pkgs, env))
    return proc.stdout.splitlines()[0] if proc.returncode == 0 else f"{prefix}gcc missing"


def espidf_checks(core, proj, env, pkgs, prefix) -> dict:
    """What the espidf build did with the library, from the build itself: the model's sources
    compiled and linked once (the model's objects and the firmware removed, then a verbose build
    recompiles and relinks them), the msf-pio summary printed once, the app partition of the
    build's own partitions.bin against the flash budget the generator used, the sdkconfig the
    build wrote, and the watchdog hand-over linked in."""
    bdir = proj / ".pio" / "build" / env
    for obj in [*(bdir / "msf_model").glob("*.o"), bdir / "firmware.elf"]:
        obj.unlink(missing_ok=True)
    ok, _sizes, error, out = build(core, proj, env, "-v", timeout=3600)
    if not ok:
        return {"error": error}
    lines = out.splitlines()
    compiled = {name: sum(f"{name}.o" in l and " -c " in l for l in lines)
                for name in ("msf_model", "msf_golden")}
    link = next((l for l in lines if f" -o .pio/build/{env}/firmware.elf " in l), "")
    linked = {name: len(re.findall(rf"\b{name}\.o\b", link)) for name in compiled}
    summaries = sum(l.startswith("msf-pio: ") and "(arena)" in l for l in lines)
    idf = pkgs / "framework-espidf" / "components" / "partition_table" / "gen_esp32part.py"
    table = subprocess.run([sys.executable, str(idf), "-q", str(bdir / "partitions.bin")],
                           capture_output=True, text=True).stdout
    part = app_partition(table)
    summary = json.loads((bdir / "msf_generated" / "stamp.json").read_text())["summary"]
    sdk = dict(re.findall(r"^CONFIG_(\w+)=(.*)$", (proj / f"sdkconfig.{env}").read_text(), re.M))
    syms = subprocess.run([f"{prefix}nm", str(bdir / "firmware.elf")], capture_output=True,
                          text=True, env=tool_path(pkgs, env)).stdout
    return {"compiled": compiled, "linked": linked, "summaries": summaries,
            "partition": part, "budget": (summary.get("board_flash"), summary.get("flash_region")),
            "sdkconfig": {k: sdk.get(k) for k in (
                "ESPTOOLPY_FLASHSIZE", "ESP_TASK_WDT_INIT", "ESP_TASK_WDT_TIMEOUT_S",
                "ESP_TASK_WDT_CHECK_IDLE_TASK_CPU0", "ESP_TASK_WDT_CHECK_IDLE_TASK_CPU1",
                "ESP_TASK_WDT_PANIC", "ESP_DEFAULT_CPU_FREQ_MHZ", "ESP_MAIN_TASK_STACK_SIZE",
                "COMPILER_OPTIMIZATION_SIZE")},
            "flash_size_warning": "Flash memory size mismatch" in out,
            "wdt_linked": bool(re.search(r" T esp_task_wdt_reconfigure$", syms, re.M))}


def framework_ram(proj, env, prefix, pkgs) -> int:
    """.data + .bss of the firmware less the arena: what the framework and board file hold
    (ESP-IDF: its internal DRAM's .dram0.data/.dram0.bss; task stacks come from its heap)."""
    elf = proj / ".pio" / "build" / env / "firmware.elf"
    sizes = subprocess.run([f"{prefix}size", "-A", str(elf)], capture_output=True,
                           text=True, env=tool_path(pkgs, env)).stdout
    static = sum(int(s) for name, s in re.findall(r"^(\.[\w.]+)\s+(\d+)", sizes, re.M)
                 if name in (".data", ".bss", ".sdata", ".sbss", ".tdata", ".tbss",
                             ".dram0.data", ".dram0.bss"))
    syms = subprocess.run([f"{prefix}nm", "-S", str(elf)], capture_output=True, text=True,
                          env=tool_path(pkgs, env)).stdout
    arena = next(int(size, 16) for size, name in re.findall(r"^\w+ (\w+) \w (\w+)$", syms, re.M)
                 if name == "msf_arena")
    return static - arena


def budgeted(env) -> int:
    """boards.yaml's framework RAM less what is reserved but not in .data/.bss (ST's heap)."""
    import yaml
    entry = yaml.safe_load((REPO / "msf_pio" / "pio" / "boards.yaml").read_text())[env]
    heap = 512 if entry["framework"] == "stm32cube" else 0   # _Min_Heap_Size of ST's scripts
    return entry["framework_ram"] - heap


class Emulator:
    """QEMU with the board's console UART on a pseudo-terminal, like a board's USB serial port."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        match = re.search(r"(/dev/pts/\d+)", line)
        if not match:
            self.stop()
            raise RuntimeError(f"QEMU gave no pseudo-terminal: {line!r}")
        self.port = match.group(1)

    def read_lines(self, seconds, count):
        """MSF lines read from the port for up to `seconds`, until `count` result lines arrived
        (a profiling firmware prints its edges' lines before each)."""
        lines, deadline = [], time.time() + seconds
        with serial.Serial(self.port, 115200, timeout=0.5) as port:
            buf = b""
            while time.time() < deadline and \
                    sum(l.startswith("MSF model=") for l in lines) < count:
                buf += port.read(4096)
                *done, buf = buf.split(b"\n")
                lines += [l.decode("ascii", "replace").strip() for l in done]
        return [l for l in lines if l.startswith("MSF ")]

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def qemu_argv(machine, elf):
    """-icount: one instruction per virtual ns, so cycle counts are deterministic."""
    icount = ["-icount", "shift=0,sleep=off"]
    if machine == "netduinoplus2":   # USART1..3 in order: the Nucleo's console is USART3
        return ["qemu-system-arm", "-M", "netduinoplus2", "-nographic", "-monitor", "none",
                *icount, "-kernel", str(elf), "-serial", "null", "-serial", "null", "-serial",
                "pty"]
    return ["qemu-system-riscv32", "-M", "sifive_e,revb=true", "-nographic", "-monitor", "none",
            *icount, "-bios", "none", "-kernel", str(elf), "-serial", "pty"]


def stack_region(elf: Path, prefix: str) -> int:
    """The stack the firmware really has, from its linker symbols: stm32cube's stack grows down
    from _estack over what .bss and the heap reservation leave; freedom-metal's is a segment."""
    syms = {name: int(addr, 16) for addr, _kind, name in re.findall(
        r"^(\w+) (\w) (\w+)$", subprocess.run([f"{prefix}nm", str(elf)], capture_output=True,
                                               text=True).stdout, re.M)}
    if "metal_segment_stack_end" in syms:
        return syms["metal_segment_stack_end"] - syms["metal_segment_stack_begin"]
    return syms["_estack"] - syms["_end"] - syms["_Min_Heap_Size"]


def check_result(line):
    f = dict(FIELD.findall(line))
    ok = (f.get("status") == "ok" and f.get("crc") == f.get("crc_ref")
          and int(f.get("stack", 0)) > 0)
    return ok, f


def run_emulated(core, proj, env, machine, seconds):
    """The firmware's report read twice through the pty (it repeats: no fault, still running),
    then `pio device monitor` (msf filter) and `pio test --test-port` on the same kind of port."""
    row = {"env": env, "machine": machine}
    ok, _sizes, error, _out = build(core, proj, env)
    if not ok:
        return {**row, "result": f"build failed: {error}"}
    elf = proj / ".pio" / "build" / env / "firmware.elf"
    row["stack_size"] = stack_region(elf, "arm-none-eabi-" if machine == "netduinoplus2"
                                     else "riscv64-unknown-elf-")
    plan = json.loads((elf.parent / "msf_generated" / "plan.json").read_text())
    row["stack_pred"] = plan.get("predicted_stack_bytes")      # msf_pio/codegen/stack.py
    emu = Emulator(qemu_argv(machine, elf))
    try:
        lines = [l for l in emu.read_lines(seconds, 2)]
        results = [l for l in lines if l.startswith("MSF model=")]
        row["faults"] = sum("fault" in l for l in lines)
        row["reports"] = len(results)
        row["alive"] = emu.alive()
        if results:
            row["ok"], row["fields"] = check_result(results[0])
        row["monitor"] = monitor(core, proj, env, emu.port)
    finally:
        emu.stop()
    row["pio_test"] = pio_test(core, proj, env, machine, seconds)
    return row


def monitor(core, proj, env, port) -> str:
    """`pio device monitor` needs a terminal on stdin: `script` gives it one."""
    cmd = (f"{shlex.quote(sys.executable)} -m platformio device monitor -p {port} -b 115200 "
           f"-e {env}")
    proc = subprocess.run(["timeout", "12", "script", "-qfec", cmd, "/dev/null"], cwd=proj,
                          env=bootstrap.offline_env(core), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True)
    verdicts = [l.strip() for l in proc.stdout.splitlines() if l.strip().startswith("-> ")]
    return f"`{verdicts[0]}`" if verdicts else "no verdict line"


def pio_test(core, proj, env, machine, seconds) -> str:
    """Build the test firmware, start it in QEMU, then `pio test` reads its serial port."""
    code, out = pio(core, proj, "test", "-e", env, "--without-uploading", "--without-testing")
    if code:
        return "test build failed"
    emu = Emulator(qemu_argv(machine, proj / ".pio" / "build" / env / "firmware.elf"))
    try:
        code, out = pio(core, proj, "test", "-e", env, "--without-building",
                        "--without-uploading", "--no-reset", "--test-port", emu.port,
                        timeout=seconds * 4)
    finally:
        emu.stop()
    summary = re.search(r"(\d+) test cases: (.*) in", out)
    return (f"exit {code}: " + (summary.group(0)[:-3] if summary else out[-200:]))


def installed() -> dict[str, str]:
    """PlatformIO's Python is this one (msf-pio depends on platformio): its distributions, to
    see that no framework builder installs anything into a user's environment (platform-sifive's
    pip-installs pyparsing 2.4.5, which breaks matplotlib, unless jinja2 and pyparsing import:
    msf-pio depends on both for that reason)."""
    return {d.metadata["Name"].lower(): d.version for d in importlib.metadata.distributions()}


def prefix_of(env) -> str:
    return {"hifive1-revb": "riscv64-unknown-elf-", "esp32-c3-devkitm-1": "riscv32-esp-elf-",
            "esp32-s3-devkitc-1": "xtensa-esp32s3-elf-"}.get(env, "arm-none-eabi-")


def esp_rows(core, proj, pkgs, envs) -> int:
    """The ESP32 envs: build through the espidf builder, then what it did with the library."""
    print("\n## ESP32 envs through platform-espressif32's espidf builder (ESP-IDF 5.5.3)\n")
    print("| env | compiler | build | RAM used / part | flash used / app partition | model "
          "compiled, linked, generated | app partition (partitions.bin) = generator's budget | "
          "sdkconfig | watchdog hand-over linked |")
    print("|---|---|---|---|---|---|---|---|---|")
    failed = 0
    for env in envs:
        c = espidf_checks(core, proj, env, pkgs, prefix_of(env))
        if "error" in c:
            failed += 1
            print(f"| {env} | | FAILED: {c['error']} | | | | | | |")
            continue
        _ok, sizes, _error, _out = build(core, proj, env, timeout=3600)
        ram, flash = sizes.get("RAM", (0, 0)), sizes.get("Flash", (0, 0))
        once = (set(c["compiled"].values()) == {1} and set(c["linked"].values()) == {1}
                and c["summaries"] == 1)
        part = c["partition"] or ("none", 0)
        budget_ok = c["budget"][0] == part[1] == flash[1]
        sdk = {k: v for k, v in c["sdkconfig"].items() if v is not None}
        failed += not (once and budget_ok and c["wdt_linked"] and not c["flash_size_warning"])
        print(f"| {env} | {compiler_version(pkgs, env, prefix_of(env))} | ok | "
              f"{ram[0]} / {ram[1]} | {flash[0]} / {flash[1]} | "
              f"{c['compiled']} / {c['linked']} / summaries {c['summaries']} | "
              f"{part[0]} {part[1]} B; budget {c['budget'][0]} B ({c['budget'][1]}) | "
              f"{' '.join(f'{k}={v}' for k, v in sdk.items())}"
              f"{'; flash size mismatch warned' if c['flash_size_warning'] else ''} | "
              f"{c['wdt_linked']} |")
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("packages", type=Path, help="folder with pkgs/ laid out offline")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--model", default="mbv2-w0.35-paper")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--env", action="append", choices=list(PLATFORMS),
                    help="build only these envs (default: every env whose platform is laid out)")
    args = ap.parse_args()
    # ESP-IDF's CMake stops on a compiler whose --version is not the Espressif GCC it lists
    # (esp-14.2.0_20251107) unless IDF_MAINTAINER is set: the stand-ins here are Debian's GCC
    # and a GCC built from Debian's source, and are named as such
    os.environ["IDF_MAINTAINER"] = "1"
    pkgs = (args.packages / "pkgs").resolve()
    work = (args.work or Path(tempfile.mkdtemp(prefix="msf-realboards-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    core = str(work / "core")
    before = installed()
    bootstrap.install_tool_scons(core, log=lambda _m: None)
    proj = project(pkgs, work, args.model)
    envs = [e for e in (args.env or PLATFORMS) if laid_out(pkgs, e)]
    for env in set(args.env or PLATFORMS) - set(envs):
        print(f"{env}: platform-{PLATFORMS[env]} is not laid out in {pkgs}: skipped")

    print(f"## Real-board envs against the official platforms ({args.model})\n")
    print("| env | build | RAM used / part | flash used / part | framework RAM measured "
          "(boards.yaml) | msf-pio sources, -Wall -Wextra -Werror |")
    print("|---|---|---|---|---|---|")
    failed = 0
    for env in envs:
        ok, sizes, error, _out = build(core, proj, env, timeout=3600)
        if not ok:
            failed += 1
            print(f"| {env} | FAILED: {error} | | | | |")
            continue
        ram, flash = sizes.get("RAM", (0, 0)), sizes.get("Flash", (0, 0))
        print(f"| {env} | ok | {ram[0]} / {ram[1]} | {flash[0]} / {flash[1]} | "
              f"{framework_ram(proj, env, prefix_of(env), pkgs)} B ({budgeted(env)} B) | "
              f"{strict_warnings(core, proj, env, pkgs)} |")
    other = [e for e in envs if e not in ESP32 and (proj / "compile_commands.json").is_file()]
    if other:
        print("\n## msf-pio's sources of each build with the compilers a user may have\n")
        print("Each build's own command lines (compile_commands.json) and -Wall -Wextra -Werror. "
              "The build's compiler is Debian's GCC 12 standing in for the registry's GCC 7.2.1 "
              "(stm32cube) and SiFive GCC 8.3 (freedom-e-sdk); GCC 7's header set is the stand-in "
              "of its <arm_acle.h> (no SIMD32 intrinsics) in its gnu11 dialect.\n")
        print("| env | GCC 12 (the build's) | GCC 7 header set | clang |")
        print("|---|---|---|---|")
        for env in other:
            pio(core, proj, "run", "-e", env, "-t", "compiledb", timeout=3600)
            mine = other_compilers(proj, env, pkgs)
            print(f"| {env} | {strict_warnings(core, proj, env, pkgs)} | "
                  f"{mine.get('GCC 7 header set', 'n/a (RISC-V)')} | {mine['clang']} |")
    esp = [e for e in envs if e in ESP32]
    if esp:
        failed += esp_rows(core, proj, pkgs, esp)
        print("\nNo emulator here runs ESP-IDF firmware: the ESP32 envs are built, not run.")

    emulated = [(e, m) for e, m in (("nucleo_f412zg_qemu", "netduinoplus2"),
                                    ("hifive1-revb", "sifive_e,revb=true"))
                if e.replace("_qemu", "") in envs]
    if emulated:
        print("\n## Run in QEMU, read through a pseudo-terminal\n")
        print("| env | QEMU machine | result line | status | crc = crc_ref | "
              "stack / predicted / size | "
              "reports, faults, alive | pio device monitor | pio test --test-port |")
        print("|---|---|---|---|---|---|---|---|---|")
    for env, machine in emulated:
        row = run_emulated(core, proj, env, machine, args.seconds)
        f = row.get("fields", {})
        good = (row.get("ok") and row.get("alive") and not row.get("faults")
                and 0 < int(row.get("fields", {}).get("stack", 0)) < row.get("stack_size", 0)
                and int(f.get("stack", 0)) <= (row.get("stack_pred") or 1 << 30)
                and row.get("monitor", "").startswith("`-> ")
                and row.get("reports", 0) >= 2 and row["pio_test"].startswith("exit 0"))
        failed += not good
        print(f"| {env} | {machine} | {row.get('result', 'read')} | {f.get('status')} | "
              f"{f.get('crc') == f.get('crc_ref') and 'crc' in f} | "
              f"{f.get('stack')} / {row.get('stack_pred')} / {row.get('stack_size')} | "
              f"{row.get('reports')}, "
              f"{row.get('faults')}, {row.get('alive')} | {row.get('monitor')} | "
              f"{row['pio_test']} |")
        if f:
            print(f"|   | | `{' '.join(f'{k}={v}' for k, v in f.items())}` | | | | | | |")
    after = installed()
    changed = sorted(f"{n} {before.get(n, '-')} -> {after.get(n, '-')}"
                     for n in before.keys() | after.keys() if before.get(n) != after.get(n))
    print(f"\nPython packages the builds installed or changed in {sys.prefix}: "
          f"{', '.join(changed) or 'none'}")
    failed += bool(changed)
    print(f"\nwork folder: {work}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Tries msf-pio as a hostile but realistic user would (issue 19) and prints a table per
category: cases, how many ended as expected (ok, or one `msf-pio: error:` line with the
contract's exit status), tracebacks, hangs, wrong exit statuses, injections (a payload in a
model's name or file name that ran or reached code). The last four must be zero.

Categories: YAML specs, model files (.tflite/.onnx, mutated and hostile file names), CLI
options, PlatformIO options (the demo project built with bad custom_msf_* values), torn and
concurrent builds, monitor input.

Run: python scripts/hostile_inputs.py [--quick] [--work DIR]   (~10 min; --quick: no builds)
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from msf_pio.pio import bootstrap  # noqa: E402
from msf_pio.pio.project import make_project, pio  # noqa: E402

NET = "input: {shape: [16, 16, 3]}\nlayers:\n  - {op: conv2d, out: 8, kernel: 3}\n"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
INJECT = ('x", }; __attribute__((constructor)) static void f(void) { extern int system(const '
          'char *); system("touch MARKER"); } static const char *g = "*/ #error ??/')
TIMEOUT = 120


@dataclass
class Tally:
    cases: int = 0
    expected: int = 0
    tracebacks: int = 0
    hangs: int = 0
    wrong_status: int = 0
    injections: int = 0
    notes: list = field(default_factory=list)

    def add(self, name, status, out, expect, injected=False):
        self.cases += 1
        text = out or ""
        if status is None:
            self.hangs += 1
            self.notes.append(f"{name}: hang")
        elif "Traceback" in text:
            self.tracebacks += 1
            self.notes.append(f"{name}: traceback")
        elif injected:
            self.injections += 1
            self.notes.append(f"{name}: INJECTED")
        elif status not in expect if isinstance(expect, tuple) else status != expect:
            self.wrong_status += 1
            self.notes.append(f"{name}: exit {status}, expected {expect}: {text[-200:]!r}")
        elif status != 0 and status != 130 and not one_line(text):
            self.wrong_status += 1
            self.notes.append(f"{name}: not one error line: {text[-300:]!r}")
        else:
            self.expected += 1


def one_line(text: str) -> bool:
    """The failure said in one line: msf-pio's error line, the monitor's verdict, or an
    infeasible plan naming the nearest feasible one."""
    lines = [l for l in text.splitlines() if l.strip()]
    said = [l for l in lines if l.startswith(("msf-pio: error:", "msf-pio monitor:"))
            or "nearest feasible" in l]
    return len(said) == 1


def run(argv, cwd=None, timeout=TIMEOUT, stdin=None):
    """(exit status or None on a hang, stderr; for an infeasible budget, status 1, what it
    printed), of `msf-pio ARGV` in a subprocess."""
    try:
        proc = subprocess.run([sys.executable, "-m", "msf_pio.cli", *argv], cwd=cwd,
                              capture_output=True, text=True, timeout=timeout, input=stdin)
    except subprocess.TimeoutExpired:
        return None, ""
    err = proc.stderr
    if proc.returncode == 2 and err.count("\n") != 1:
        err += "\nmsf-pio: error: (more than one line)"
    if proc.returncode == 1 and "nearest feasible" in proc.stdout:
        err += next(l for l in proc.stdout.splitlines() if "nearest feasible" in l)
    return proc.returncode, err


def specs(work: Path, t: Tally) -> None:
    cases = {
        "alias bomb in name": BOMB + "name: *i\n" + NET,
        "alias bomb in a field": BOMB + NET.replace("kernel: 3}", "kernel: 3, act: *i}"),
        "deep nesting": "[" * 5000 + "]" * 5000,
        "repeat 100000": NET + "  - {op: inverted_residual, out: 8, repeat: 100000}\n",
        "100000x100000 input": NET.replace("[16, 16, 3]", "[100000, 100000, 3]"),
        "10^8 channels": NET.replace("out: 8", "out: 100000000"),
        "26-digit integer": NET.replace("out: 8", "out: 10000000000000000000000000"),
        "huge tensor": NET.replace("[16, 16, 3]", "[8192, 8192, 64]"),
        "huge weights": NET.replace("out: 8", "out: 60000").replace("[16, 16, 3]",
                                                                     "[600, 600, 3]"),
        "empty file": "", "a scalar": "3", "a list": "[1, 2]", "unknown op":
        NET.replace("conv2d", "conv3d"), "unknown field": NET.replace("kernel", "kernal"),
        "float kernel": NET.replace("kernel: 3", "kernel: 2.5"),
        "negative stride": NET.replace("kernel: 3}", "kernel: 3, stride: -1}"),
        "kernel larger than input": NET.replace("kernel: 3", "kernel: 17"),
        "no layers": "input: {shape: [4, 4, 1]}\nlayers: []\n",
        "bad from": NET + "  - {op: add, from: 7}\n",
        "control character": "\x08" + NET,
        "tab indentation": NET.replace("  -", "\t-"),
        "duplicate keys": NET.replace("out: 8,", "out: 8, out: 9,"),
        "weights file missing": "weights: {npz: nope.npz}\n" + NET,
        "python tag": "!!python/object/apply:os.system ['touch x']\n",
        "very long name": f"name: {'n' * 100000}\n" + NET,
        "kernel width 13": NET.replace("kernel: 3", "kernel: [1, 13]"),
    }
    for name, text in cases.items():
        path = work / "spec.yaml"
        path.write_text(text)
        t.add(f"spec {name}", *run(["solve", str(path)]), 2)
    for name, data in {"not UTF-8": "name: caf\u00e9\n".encode("latin-1") + NET.encode(),
                       "binary": bytes(range(256)) * 4, "2 MB": b"#" * (2 << 20)}.items():
        path = work / "spec.yaml"
        path.write_bytes(data)
        t.add(f"spec {name}", *run(["solve", str(path)]), 2)
    for command in ("verify", "run"):          # a name that tries to become code
        marker = work / f"injected-{command}"
        path = work / "inject.yaml"
        path.write_text(f"name: {json.dumps(INJECT.replace('MARKER', str(marker)))}\n" + NET)
        args = [command, str(path), "--no-sanitize"] if command == "verify" else \
            [command, str(path), "--input", str(work / "x.npy"), "--out", str(work / "y.npy")]
        if command == "run":
            import numpy as np
            np.save(work / "x.npy", np.zeros((16, 16, 3), np.int8))
        status, err = run(args)
        t.add(f"spec name injection ({command})", status, err, 0, injected=marker.exists())
    for name, args, expect in (
            ("generate over a file", ["generate", "tiny", "--out", str(work / "spec.yaml")], 2),
            ("generate under a file", ["generate", "tiny", "--out",
                                       str(work / "spec.yaml" / "sub")], 2),
            ("generate into /proc", ["generate", "tiny", "--out", "/proc/msf"], 2)):
        t.add(name, *run(args), expect)


def files(work: Path, t: Tally) -> None:
    from tests.test_import_fuzz import mutate
    from tests.tflite_builder import foreign_net
    data = foreign_net()
    rng = random.Random(7)
    for i in range(60):
        path = work / "m.tflite"
        path.write_bytes(mutate(data, rng))
        status, err = run(["solve", str(path)])
        t.add(f"mutated .tflite {i}", status, err, (0, 2))
    for stem in ('we"ird', "a*b", "x\\y", "caf\u00e9", "sp ace", "-dash", "n" * 200):
        marker = work / "injected-file"
        path = work / f"{stem}.tflite"
        path.write_bytes(data)
        status, err = run(["generate", str(path), "--out", str(work / "gen")])
        bad = False
        if status == 0:       # the generated C must compile (a quote in a name broke it)
            proc = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Werror",
                                   f"-I{REPO / 'library' / 'include'}", str(work / "gen" /
                                                                          "msf_model.c")],
                                  capture_output=True, text=True)
            bad = proc.returncode != 0
        t.add(f".tflite named {stem[:20]!r}", status, err, 0, injected=bad or marker.exists())
        path.unlink()
    for name, blob in {"empty": b"", "zeros": bytes(4096), "text": b"hello"}.items():
        for suffix in (".tflite", ".onnx"):
            path = work / f"m{suffix}"
            path.write_bytes(blob)
            t.add(f"{name} {suffix}", *run(["solve", str(path)]), 2)


def options(work: Path, t: Tally) -> None:
    cases = [
        ["solve", "tiny", "--objective", "min_macs"],
        ["solve", "tiny", "--objective", "bogus"],
        ["solve", "tiny", "--max-overhead", "0.5"], ["solve", "tiny", "--max-overhead", "nan"],
        ["solve", "tiny", "--max-overhead", "x"],
        ["solve", "tiny", "--objective", "vanilla", "--max-overhead", "1.2"],
        ["solve", "tiny", "--ram-limit", "1.5"], ["solve", "tiny", "--ram-limit", "-4"],
        ["solve", "tiny", "--ram-limit", "64 MB MB"], ["solve", "tiny", "--board", "nosuch"],
        ["solve", "tiny", "--cost-model", "paper", "--schemes", "tiles"],
        ["solve", "tiny", "--schemes", "nope"], ["solve", "tiny", "--schemes", ","],
        ["solve", "tiny", "--input-mode", "sideways"], ["verify", "tiny", "--seeds", "0"],
        ["verify", "tiny", "--seeds", "-3"], ["verify", "tiny", "--seed", "x"],
        ["monitor"], ["monitor", "--log", "/nonexistent"], ["monitor", "--log", "x", "--count",
                                                             "0"],
        ["init", str(work / "spec.yaml")], ["nosuchcommand"], ["solve"],
        ["--debug"], ["run", "tiny", "--input", "/nonexistent.npy", "--out", "y.npy"],
    ]
    for argv in cases:
        t.add("options " + " ".join(argv[:4]), *run(argv), 2)
    t.add("solve | head", *_pipe_head(), 0)
    t.add("infeasible budget", *run(["solve", "tiny", "--objective", "min_macs",
                                     "--ram-limit", "10"]), 1)


def _pipe_head():
    proc = subprocess.run(f"{sys.executable} -m msf_pio.cli pareto mbv2-w0.35-r144 | head -1",
                          shell=True, capture_output=True, text=True, timeout=TIMEOUT,
                          executable="/bin/bash")
    status = subprocess.run(f"set -o pipefail; {sys.executable} -m msf_pio.cli solve "
                            "mbv2-w0.35-r144 | head -1 >/dev/null; echo ${PIPESTATUS[0]}",
                            shell=True, capture_output=True, text=True, executable="/bin/bash",
                            timeout=TIMEOUT).stdout.strip()
    return int(status or 99), proc.stderr


def pio_options(work: Path, t: Tally, core: str) -> None:
    bad = {"ram_limit": "1.5", "objective": "bogus", "max_overhead": "0.2",
           "model": "nope.yaml", "measure": "always", "cost_model": "x"}
    for key, value in bad.items():
        proj = make_project(work / "proj", **{key: value})
        code, out = pio(core, proj, "run", "-e", "qemu_f767zi")
        t.add(f"pio custom_msf_{key} = {value}", code, _pio_err(out), 1)
    proj = make_project(work / "proj")
    ini = proj / "platformio.ini"
    ini.write_text(ini.read_text().replace("custom_msf_ram_limit =", "custom_msf_ram_limt ="))
    code, out = pio(core, proj, "run", "-e", "qemu_f767zi")
    t.add("pio custom_msf_ram_limt (typo)", code, _pio_err(out), 1)
    spec = proj / "models" / "bomb.yaml"
    spec.parent.mkdir(exist_ok=True)
    spec.write_text(BOMB + "name: *i\n" + NET)
    proj = make_project(work / "proj", model="models/bomb.yaml")
    (proj / "models").mkdir(exist_ok=True)
    (proj / "models" / "bomb.yaml").write_text(BOMB + "name: *i\n" + NET)
    code, out = pio(core, proj, "run", "-e", "qemu_f767zi")
    t.add("pio alias-bomb spec", code, _pio_err(out), 1)


def _pio_err(out: str) -> str:
    lines = [l for l in out.splitlines() if l.startswith("msf-pio: error:")]
    return ("Traceback" if "Traceback" in out else "") + "\n".join(lines[:1])


def torn_builds(work: Path, t: Tally, core: str) -> None:
    proj = make_project(work / "torn", model="tiny")
    code, out = pio(core, proj, "run", "-e", "qemu_f767zi")
    t.add("build", code, out if code else "", 0)
    gen = proj / ".pio" / "build" / "qemu_f767zi" / "msf_generated"
    for name, path in (("torn stamp", gen / "stamp.json"),
                       ("half msf_model.c", gen / "msf_model" / "src" / "msf_model.c")):
        data = path.read_bytes()
        path.write_bytes(data[:len(data) // 2])
        code, out = pio(core, proj, "run", "-e", "qemu_f767zi")
        t.add(f"rebuild after {name}", code, out if code else "", 0)
    results = []

    def build():
        results.append(pio(core, proj, "run", "-e", "qemu_f767zi", "-t", "clean")[0] or
                       pio(core, proj, "run", "-e", "qemu_f767zi")[0])
    threads = [threading.Thread(target=build) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i, code in enumerate(results):
        t.add(f"concurrent build {i}", code, "", 0)


def monitor_input(work: Path, t: Tally) -> None:
    line = ("MSF model=m plan=p1:1.3 board=qemu_f767zi clock=systick hz=40000000 cycles=7 us=1 "
            "arena=5 arena_pred=5 stack=4 ram=9 ram_pred=5 macs=3 crc=0x1234abcd "
            "crc_ref=0x1234abcd status=ok")
    logs = {"good": (line + "\n", 0), "4 MB line": ("x" * (4 << 20) + "\n" + line + "\n", 0),
            "50 MB line": ("y" * (50 << 20) + "\n" + line + "\n", 0),
            "truncated result": (line + "\n" + line[:70] + "\n", 1),
            "garbled result": (line + "\n" + line.replace("crc=0x", "crc=0y") + "\n", 1),
            "binary": ("\x00\xff" * 1000 + "\n", 1), "empty": ("", 1)}
    for name, (text, expect) in logs.items():
        path = work / "serial.log"
        path.write_bytes(text.encode("latin-1"))
        status, err = run(["monitor", "--log", str(path), "--quiet"])
        t.add(f"monitor {name}", status, err, expect)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the PlatformIO builds")
    ap.add_argument("--work", type=Path)
    args = ap.parse_args()
    work = (args.work or Path(tempfile.mkdtemp(prefix="msf-hostile-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    core = str(work / "core")
    categories = {"YAML specs": lambda t: specs(work, t),
                  "model files": lambda t: files(work, t),
                  "CLI options": lambda t: options(work, t),
                  "monitor input": lambda t: monitor_input(work, t)}
    if not args.quick:
        bootstrap.install_tool_scons(core, log=lambda _m: None)
        categories["PlatformIO options"] = lambda t: pio_options(work, t, core)
        categories["torn, concurrent builds"] = lambda t: torn_builds(work, t, core)
    print("| category | cases | as expected | tracebacks | hangs | wrong exit status | "
          "injections |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    notes, bad = [], 0
    for name, fill in categories.items():
        t = Tally()
        fill(t)
        bad += t.tracebacks + t.hangs + t.wrong_status + t.injections
        notes += t.notes
        print(f"| {name} | {t.cases} | {t.expected} | {t.tracebacks} | {t.hangs} | "
              f"{t.wrong_status} | {t.injections} |", flush=True)
        for n in t.notes:
            print(f"<!-- {n} -->", file=sys.stderr, flush=True)
    for n in notes:
        print(f"- {n}")
    shutil.rmtree(work / "core", ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

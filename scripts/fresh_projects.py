"""A new user's projects, one per model kind: `msf-pio init` from a zoo name, a YAML spec (with
its weights file), a float ONNX file and an int8 .tflite file, each built and run on an emulated
board (`pio run -t upload`), its harness run (`pio test`), committed to a new git repository,
and `git grep` run for this checkout's path, the model's original folder and the home folder
(nothing may name this machine). `into`: a project of the user's (a real board's env, their
main.c, their git history) gets msf-pio with `msf-pio init --into` (no line of theirs deleted),
the user's main.c then calls the model, and the same build, test, commit and search follow.
The commands are the README's, run as a user runs them (the console scripts of the Python
that runs this), offline; every one is printed before it runs.

Run: python scripts/fresh_projects.py [--kind zoo|yaml|onnx|tflite|into ...]
     [--board qemu_f767zi] [--keep DIR] [--no-test]
About 25 s per kind on an idle machine; prints one row per kind and exits 1 if one failed.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from msf_pio.pio import bootstrap  # noqa: E402

BIN = Path(sys.executable).parent
KINDS = ("zoo", "yaml", "onnx", "tflite", "into")

SPEC = """\
name: my-net
input: {shape: [48, 48, 3]}
weights: {npz: weights/my-net.npz}
layers:
  - {op: conv2d, out: 16, kernel: 3, stride: 2, act: relu6, name: stem}
  - {op: inverted_residual, out: 16, expand: 4, kernel: 3, stride: 1, repeat: 2}
  - {op: inverted_residual, out: 24, expand: 4, kernel: 3, stride: 2}
  - {op: global_avgpool}
  - {op: dense, out: 4, name: head}
  - {op: softmax}
"""


def model_of(kind: str, mine: Path) -> str:
    """The model as a user has it: a zoo name, or a file in a folder of theirs."""
    mine.mkdir(parents=True, exist_ok=True)
    if kind == "zoo":
        return "mlperf-tiny-ic"
    if kind == "yaml":
        spec = mine / "my-net.yaml"
        spec.write_text(SPEC)
        write_npz_weights(spec, mine / "weights" / "my-net.npz")
        return str(spec)
    if kind == "onnx":                   # a float file, quantized by msf-pio post-training
        from tests.test_onnx_import import residual_net
        return str(residual_net(mine))
    path = mine / "kws.tflite"           # MLPerf Tiny's keyword spotter, as the docs export it
                                         # (into: the same file, added to a project of theirs)
    shutil.copyfile(REPO / "docs" / "examples" / "kws.tflite", path)
    return str(path)


def write_npz_weights(spec: Path, npz: Path) -> None:
    """Float weights for every weighted layer of the spec, as a training script would save
    them (`<layer name>/w` and `/b`), seeded."""
    import numpy as np
    from msf_pio.model.weights import random_weights
    npz.parent.mkdir(parents=True, exist_ok=True)
    from msf_pio.model.spec import spec_to_model, safe_yaml
    model = spec_to_model(safe_yaml(SPEC.replace("{npz: weights/my-net.npz}", "{random: 7}"),
                                    str(spec)), source=str(spec))
    arrays = {}
    for layer, params in zip(model.layers, random_weights(model, seed=7)):
        if params is not None:
            arrays[f"{layer.name}/w"], arrays[f"{layer.name}/b"] = params.w, params.b
    np.savez(npz, **arrays)


EXISTING_INI = """\
; my firmware, on the board I have
[env:nucleo_f767zi]
platform = ststm32
board = nucleo_f767zi
framework = stm32cube
build_flags = -DMY_APP
"""
EXISTING_MAIN = "int main(void)\n{\n    for (;;) {\n    }\n}\n"
# what the user writes once msf-pio is in (init --into's note: call msf_model_run)
MY_MAIN = """\
#include <stdint.h>

#include "msf/board.h"
#include "msf_golden.h"
#include "msf_model.h"

static int8_t input[MSF_MODEL_INPUT_BYTES], output[MSF_MODEL_OUTPUT_BYTES];

int main(void)
{
    msf_board_init();
    for (int32_t i = 0; i < MSF_MODEL_INPUT_BYTES; i++) {
        input[i] = msf_golden_input[i];
    }
    msf_model_run(input, output);
    int32_t best = 0;
    for (int32_t i = 1; i < MSF_MODEL_OUTPUT_BYTES; i++) {
        best = output[i] > output[best] ? i : best;
    }
    msf_board_put_dec("class ", (uint64_t)best);
    msf_board_put_dec(" of ", MSF_MODEL_OUTPUT_BYTES);
    msf_board_put_dec(" score ", (uint64_t)(output[best] + 128));
    msf_board_puts("\\n");
    msf_board_end_of_run(0);
    return 0;
}
"""


def existing_project(project: Path, log: list[str]) -> bool:
    """A project of the user's before msf-pio: their real board's env, their main.c, their git
    history."""
    (project / "src").mkdir(parents=True)
    (project / "platformio.ini").write_text(EXISTING_INI)
    (project / "src" / "main.c").write_text(EXISTING_MAIN)
    (project / ".gitignore").write_text(".pio/\n")
    return all(sh(["git", *argv], project, log)[0] == 0 for argv in (
        ["init", "-q"], ["add", "-A"], [*GIT_USER, "commit", "-q", "-m", "my firmware"]))


def changed_nothing(project: Path, log: list[str]) -> str:
    """'' if init --into deleted no line of any committed file, else what it deleted."""
    sh(["git", "add", "-A"], project, log)
    code, out = sh(["git", "diff", "--cached", "--numstat"], project, log)
    deleted = [line for line in out.splitlines()          # "-" deleted: a binary file, new
               if line.split("\t")[1] != "0" and not line.startswith("-\t-\t")]
    code, new = sh(["git", "diff", "--cached", "--diff-filter=M", "--name-only", "--",
                    "src"], project, log)
    deleted += [f"{name} changed" for name in new.split()]
    return "; ".join(deleted) if code == 0 else f"git diff exit {code}"


GIT_USER = ["-c", "user.name=user", "-c", "user.email=user@example.com"]


def sh(argv: list[str], cwd: Path, log: list[str], timeout: float = 1200) -> tuple[int, str]:
    shown = " ".join(a if " " not in a else repr(a) for a in argv)
    print(f"  $ {shown}", flush=True)
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=bootstrap.offline_env(), capture_output=True,
                          text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    log.append(f"$ {shown}\n{out}")
    print(f"    exit {proc.returncode} after {time.monotonic() - t0:.0f} s", flush=True)
    return proc.returncode, out


def fresh_project(kind: str, root: Path, board: str, test: bool) -> dict:
    mine, project, log = root / "mine" / kind, root / f"{kind}-project", []
    row = {"kind": kind, "model": None, "init": False, "run": "", "test": "-", "commit": False,
           "grep": ""}
    print(f"{kind}:", flush=True)
    model = model_of(kind, mine)
    row["model"] = model if kind == "zoo" else Path(model).name
    if kind == "into":
        if not existing_project(project, log):
            return row | {"log": log}
        code, out = sh([str(BIN / "msf-pio"), "init", "--into", str(project), "--model", model,
                        "--board", board], root, log)
        kept = changed_nothing(project, log)
        if kept:
            row["init"] = False
            log.append(f"init --into deleted lines: {kept}")
            return row | {"log": log}
        (project / "src" / "main.c").write_text(MY_MAIN)
    else:
        code, out = sh([str(BIN / "msf-pio"), "init", str(project), "--model", model,
                        "--board", board], root, log)
    row["init"] = code == 0
    if code:
        return row | {"log": log}
    env = ["-e", board] if kind == "into" else []      # init's own projects: default_envs
    code, out = sh([str(BIN / "pio"), "run", *env, "-t", "upload"], project, log)
    line = re.search(r"^class \d+ of \d+ score -?\d+$", out, re.M)
    row["run"] = line[0] if code == 0 and line else f"FAILED (exit {code})"
    if test:
        code, out = sh([str(BIN / "pio"), "test", "-e", board], project, log)
        cases = re.search(r"(\d+) test cases: (\d+) succeeded", out)
        ok = code == 0 and cases
        row["test"] = f"{cases[2]}/{cases[1]} ok" if ok else f"FAILED (exit {code})"
    git = shutil.which("git")
    for argv in ([] if kind == "into" else [["init", "-q"]]) + [
            ["add", "-A"], [*GIT_USER, "commit", "-q", "-m", "my model on a microcontroller"]]:
        code, _ = sh([git, *argv], project, log)
        if code:
            return row | {"log": log}
    row["commit"] = True
    found = []
    for path in (str(REPO), str(mine), str(Path.home())):
        code, out = sh([git, "grep", "-n", "-F", path], project, log)
        if code != 1:                            # 1: nothing found; anything else: found or broke
            found.append(f"{path}: exit {code}: {out.strip()[:200]}")
    # the search can find the path: the uncommitted local.ini names it, and git ignores it
    code, tracked = sh([git, "ls-files", "local.ini"], project, log)
    if str(REPO) not in (project / "local.ini").read_text() or tracked.strip():
        found.append("local.ini does not name the checkout, or is committed")
    row["grep"] = "nothing" if not found else "; ".join(found)
    (root / f"{kind}.log").write_text("\n".join(log))
    return row | {"log": log}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", action="append", choices=KINDS, help="(default: all four)")
    parser.add_argument("--board", default="qemu_f767zi",
                        help="an emulated board (default: %(default)s)")
    parser.add_argument("--keep", type=Path, help="make the projects in DIR and leave them there")
    parser.add_argument("--no-test", action="store_true", help="skip `pio test`")
    args = parser.parse_args(argv)
    bootstrap.install_tool_scons(bootstrap.core_dir(), log=lambda _m: None)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        rows = [fresh_project(kind, root.resolve(), args.board, not args.no_test)
                for kind in args.kind or KINDS]
    print(f"\n{'kind':7} {'model':15} {'init':5} {'pio run -t upload':30} {'pio test':9} "
          f"{'commit':7} git grep (checkout, model folder, home)")
    bad = False
    for r in rows:
        ok = r["init"] and r["run"].startswith("class") and "FAILED" not in r["test"] \
            and r["commit"] and r["grep"] == "nothing"
        bad |= not ok
        print(f"{r['kind']:7} {r['model']:15} {'yes' if r['init'] else 'NO':5} {r['run']:30} "
              f"{r['test']:9} {'yes' if r['commit'] else 'NO':7} {r['grep']}")
        if not ok:
            print("\n".join(r["log"])[-4000:])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

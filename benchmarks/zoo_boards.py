"""The zoo's large models (zoo/large: MobileNetV3-Small and EfficientNet-lite0 at 96 and 224,
the SSDLite detector with six outputs) built with PlatformIO for an emulated board and run in
QEMU through the demo firmware (`msf-pio demo --model NAME`): the measured arena and stack
against the predicted ones, the output's CRC against the host reference's, the cycles; a model the board
cannot hold is the build's one-line reason (its weights against the board's flash).

--flash BYTES widens the emulated board's flash as a user would (`board_upload.maximum_size`
in the env): QEMU's mps2-an500 behind qemu_f767zi maps 4 MB of code memory at 0x0, so models
whose weights exceed the real part's 2 MB run there with the real part's RAM and core.
--weights-section NAME places the weights in that linker section instead
(custom_msf_weights_section): qemu_f767zi maps it to mps2-an500's 16 MB at 0x60000000, as a
user's board maps it to external flash.

--objective and --max-overhead choose the plan as custom_msf_objective and
custom_msf_max_overhead do (default the demo's: P1, least RAM at any overhead).

Run: python benchmarks/zoo_boards.py [--board qemu_f767zi] [--flash 4194304]
     [--weights-section .msf_weights] [--objective vanilla] [--max-overhead 1.3] [MODEL ...]
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from msf_pio.model.zoo import zoo_names  # noqa: E402
from msf_pio.pio import bootstrap, monitor  # noqa: E402
from msf_pio.pio.demo import demo_dir  # noqa: E402
from msf_pio.pio.project import make_project, pio, result_lines, widen_flash  # noqa: E402

FIELD = re.compile(r"(\w+)=(\S+)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*",
                    default=sorted(set(zoo_names(large=True)) - set(zoo_names())))
    ap.add_argument("--board", default="qemu_f767zi")
    ap.add_argument("--flash", type=int, help="the emulated board's flash in bytes")
    ap.add_argument("--weights-section", help="custom_msf_weights_section: the weights in the "
                    "board's external memory")
    ap.add_argument("--objective", default="min_ram", help="custom_msf_objective")
    ap.add_argument("--max-overhead", default="inf", help="custom_msf_max_overhead (P1's Fmax)")
    args = ap.parse_args()
    print("| model | plan | arena measured | predicted | stack measured | predicted | cycles | "
          "predicted cycles | output CRC | status |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    core = bootstrap.core_dir()
    bootstrap.install_tool_scons(core, log=lambda _m: None)
    for name in args.models:
        # the outputs in the caller's buffers (the demo streams its single output to a sink)
        project = make_project(demo_dir().parent / "zoo-boards", model=name, output="buffer",
                               profile="no", objective=args.objective,
                               max_overhead=args.max_overhead)
        if args.flash:
            widen_flash(project, args.flash)
        if args.weights_section:
            ini = project / "platformio.ini"
            ini.write_text(ini.read_text() + ("" if args.flash else "\n[env]\n") +
                           f"custom_msf_weights_section = {args.weights_section}\n")
        code, out = pio(core, project, "run", "-e", args.board, "-t", "upload")
        lines = result_lines(out)
        if code or not lines:
            reason = next((l for l in out.splitlines() if l.startswith("msf-pio: error")),
                          out.strip().splitlines()[-1] if out.strip() else "")
            print(f"| {name} | | | | | | | | | not built: {reason[:200]} |", flush=True)
            continue
        f = dict(FIELD.findall(lines[0]))
        record = monitor.parse_lines(out.splitlines())[0]
        plan = monitor.load_plan(project / ".pio" / "build" / args.board / "msf_generated" /
                                 "plan.json")
        crc = "== host" if f.get("crc") == f.get("crc_ref") else "!= host"
        status = "ok" if not monitor.problems(record, plan) else "MISMATCH"
        predicted = monitor.predicted_cycles(record, plan)
        error = f" ({record['cycles'] / predicted - 1:+.1%})" if predicted else ""
        print(f"| {name} | {f.get('plan')} | {f.get('arena')} | {f.get('arena_pred')} | "
              f"{f.get('stack')} | {plan.get('predicted_stack_bytes', '-')} | "
              f"{f.get('cycles')} | {predicted}{error} | {crc} | {status} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""On the emulated boards, through PlatformIO (`pio run -e <board> -t upload`):
1. the min-RAM plans of the paper models and mbv2-w0.35-r144 on the five boards: the MSF
   result lines (measured arena and stack, cycles, CRC check);
2. deterministic instruction counts (QEMU -icount; RISC-V mcycle = executed instructions) of
   fused vs vanilla plans of the three paper models, beside the predicted MAC overhead F.

Run: python benchmarks/emulated_boards.py [--quick]
"""
import re
import sys
import tempfile
from pathlib import Path

from msf_pio.pio import bootstrap
from msf_pio.pio.project import make_project, pio, result_lines

BOARDS = ("qemu_f767zi", "qemu_f412zg", "qemu_hifive1b", "qemu_esp32c3", "qemu_esp32s3")
MODELS = ("mbv2-w0.35-paper", "mn2-vww5-paper", "mn2-320k-paper", "mbv2-w0.35-r144")
FIELD = re.compile(r"(\w+)=(\S+)")


def run(core, project, board):
    code, out = pio(core, project, "run", "-e", board, "-t", "upload")
    lines = result_lines(out)
    if code or not lines:
        error = [l for l in out.splitlines() if l.startswith("msf-pio: error")]
        return None, (error[0] if error else out[-300:])
    return dict(FIELD.findall(lines[0])), None


def main(quick=False):
    with tempfile.TemporaryDirectory() as tmp:
        core = str(Path(tmp) / "core")
        bootstrap.install_tool_scons(core, log=lambda _m: None)
        print("## min-RAM plans on the emulated boards\n")
        print("| model | board | plan | arena measured | predicted | stack | cycles | clock | "
              "crc ok |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name in MODELS[:1] if quick else MODELS:
            project = make_project(Path(tmp) / name, model=name)
            for board in BOARDS:
                r, error = run(core, project, board)
                if r is None:
                    print(f"| {name} | {board} | - | {error} | | | | | |", flush=True)
                    continue
                print(f"| {name} | {board} | {r['plan']} | {r['arena']} | {r['arena_pred']} | "
                      f"{r['stack']} | {r['cycles']} | {r['clock']} | "
                      f"{r['crc'] == r['crc_ref'] and r['status'] == 'ok'} |", flush=True)
        print("\n## Instructions (qemu_esp32c3, -icount: mcycle = instructions), fused vs "
              "vanilla\n")
        print("| model | plan | arena B | predicted F | instructions | measured ratio | "
              "instructions/MAC |")
        print("|---|---|---|---|---|---|---|")
        for name in MODELS[:3]:
            base = None
            for label, opts in (("vanilla", {"objective": "vanilla"}),
                                ("p1:1.3", {"max_overhead": "1.3"}),
                                ("p1:inf", {})):
                project = make_project(Path(tmp) / f"{name}-{label}", model=name,
                                       ram_limit="inf", **opts)
                r, error = run(core, project, "qemu_esp32c3")
                if r is None:
                    print(f"| {name} | {label} | {error} | | | | |")
                    continue
                cycles, macs = int(r["cycles"]), int(r["macs"])
                base = base or (cycles, macs)
                print(f"| {name} | {r['plan']} | {r['arena']} | {macs / base[1]:.3f} | {cycles} | "
                      f"{cycles / base[0]:.3f} | {cycles / macs:.2f} |", flush=True)


if __name__ == "__main__":
    main("--quick" in sys.argv)

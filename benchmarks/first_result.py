"""Predicted seconds from start-up to the first result line on each real board, for the demo
project's model and options (examples/msf_demo/platformio.ini, section [msf]), planned as the
build plans it for that board: the plan's instructions under the latency cost model of the
board's emulated twin (msf_pio/pio/boards.yaml: twin, cpu_hz) at one cycle per instruction,
times the runs before the first line (a release firmware runs the model once; a measuring
build, custom_msf_measure = yes or `pio test`, paints the arena in two more runs). The
framework's own start-up (clock set-up, ESP-IDF's bootloader) is not counted.

Run: python benchmarks/first_result.py [--model NAME]
"""
import argparse
import configparser
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from msf_pio.pio.boards import board_facts  # noqa: E402
from msf_pio.pio.integration import (first_result_seconds, generate_library,  # noqa: E402
                                     read_options)

DEMO = REPO / "examples" / "msf_demo"
BOARDS = ("nucleo_f767zi", "disco_f746ng", "nucleo_f412zg", "esp32-s3-devkitc-1",
          "esp32-c3-devkitm-1", "hifive1-revb")


def demo_options(model: str | None) -> dict:
    ini = configparser.ConfigParser(inline_comment_prefixes=(";",))
    ini.read(DEMO / "platformio.ini")
    options = dict(ini["msf"])
    if model:
        options["custom_msf_model"] = model
    return options


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="another model than the demo's")
    args = ap.parse_args()
    options = demo_options(args.model)
    print("| board | plan | twin | clock | predicted instructions | first line, release (1 run) "
          "| first line, measuring (3 runs) |")
    print("|---|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for board in BOARDS:
            facts = board_facts(board, lambda key, default: default)
            opts = read_options(lambda k, d: options.get(k, d), facts, DEMO, board)
            _, summary, _ = generate_library(opts, Path(tmp) / board, facts, facts.cpu_hz)
            one = first_result_seconds({**summary, "runs_before_report": 1})
            print(f"| {board} | {summary['plan']} | {facts.twin} | {facts.cpu_hz / 1e6:g} MHz | "
                  f"{summary['predicted_cycles']:,} | {one:.2f} s | "
                  f"{3 * one:.2f} s |")


if __name__ == "__main__":
    main()

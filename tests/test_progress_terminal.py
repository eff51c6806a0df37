"""Progress as a user sees it: the slow steps of report, solve, run and verify, run on a
pseudo-terminal (what a shell gives), each show a line on the terminal that names the step,
how far it is and the time, rewritten in place and cleared before the command's output. The
steps of tiny models end within the one second a step runs unseen, so the child lowers that
delay to nothing; which steps report, and how, is what is checked."""
import os
import pty
import select
import sys

import numpy as np

CHILD = ("import sys; from msf_pio import progress; progress.DELAY = 0.0; "
         "from msf_pio.cli import main; [main(a.split()) for a in sys.argv[1:]]")


def on_terminal(*commands: str, timeout: float = 600) -> str:
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", CHILD, *commands])
    out = b""
    try:
        while select.select([fd], [], [], timeout)[0]:
            data = os.read(fd, 65536)
            if not data:
                break
            out += data
    except OSError:                      # the child is gone: its terminal closed
        pass
    os.waitpid(pid, 0)
    os.close(fd)
    return out.decode("utf-8", "replace")


def test_slow_steps_show_progress_on_a_terminal(tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((16, 16, 3), np.int8))
    shown = on_terminal(f"report tiny --out {tmp_path / 'r'}",
                        "solve tiny --objective min_latency --board qemu_f767zi",
                        f"run tiny --input {x} --out {tmp_path / 'y.npy'}",
                        "verify tiny --no-sanitize")
    for step in ("costing fusion blocks (cache scheme) ", "predicting qemu_f767zi cycles of edges",
                 "Pareto frontier: plans", "report: pictures",
                 "run: generating and compiling the C on the host",
                 "verify: host builds and runs"):
        assert f"\rmsf-pio: {step}" in shown, step           # drawn in place
    lines = [l for l in shown.split("\r") if l.startswith("msf-pio: ")]
    assert all(l.rstrip().endswith(" s") or "/" in l for l in lines)   # how far, how long
    # and then each command's own output, on a cleared line
    assert "this plan" in shown and "predicted latency on qemu_f767zi" in shown
    assert "p1:inf: wrote" in shown and "VERIFIED" in shown

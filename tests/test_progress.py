"""Progress lines: silent for short steps and when off, a rewritten line on a terminal, plain
periodic lines in a log."""
import io

import pytest

from msf_pio import progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(progress, "clock", c)
    monkeypatch.delenv("MSF_PIO_PROGRESS", raising=False)
    yield c
    progress.configure()


def run_step(clock, seconds, steps=8, what="costing", total=-1):
    with progress.task(what, total=steps if total == -1 else total) as step:
        for i in range(steps):
            clock.now += seconds / steps
            step.advance(note=f"{i + 1} edges")


def test_short_step_is_silent(clock):
    for mode in ("tty", "lines"):
        out = Tty()
        progress.configure(mode, out)
        run_step(clock, 0.9)
        assert out.getvalue() == ""


def test_log_gets_periodic_lines_and_the_end(clock):
    out = io.StringIO()
    progress.configure("lines", out)
    run_step(clock, 10.0, steps=80)              # a step every 1/8 s
    # shown from 1 s on, every 2 s: at 1, 3, 5, 7 and 9 s, then the end
    assert out.getvalue().splitlines() == [
        "msf-pio: costing 8/80 (8 edges), 1.0 s", "msf-pio: costing 24/80 (24 edges), 3.0 s",
        "msf-pio: costing 40/80 (40 edges), 5.0 s", "msf-pio: costing 56/80 (56 edges), 7.0 s",
        "msf-pio: costing 72/80 (72 edges), 9.0 s",
        "msf-pio: costing 80/80 (80 edges), 10.0 s: done"]


def test_terminal_line_is_rewritten_and_cleared(clock):
    out = Tty()
    progress.configure("auto", out)               # a terminal: one line in place
    run_step(clock, 3.0, steps=32)
    text = out.getvalue()
    assert "\n" not in text and text.count("\r") >= 10
    assert text.endswith("\r") and text.rstrip("\r").split("\r")[-1].strip() == ""


def test_off_when_not_a_terminal_or_asked(clock, monkeypatch):
    out = io.StringIO()                           # auto, not a terminal: nothing
    progress.configure("auto", out)
    run_step(clock, 5.0)
    assert out.getvalue() == ""
    out = io.StringIO()
    progress.configure("lines", out)
    monkeypatch.setenv("MSF_PIO_PROGRESS", "off")  # the environment wins
    run_step(clock, 5.0)
    assert out.getvalue() == ""


def test_nested_steps_name_the_outer_one(clock):
    out = io.StringIO()
    progress.configure("lines", out)
    with progress.task("verify", total=2) as outer:
        run_step(clock, 3.0, what="costing fusion blocks", total=None)
        outer.advance()
    first = out.getvalue().splitlines()[0]
    assert first.startswith("msf-pio: verify: costing fusion blocks ")
    with pytest.raises(ValueError):
        progress.configure("loud")


def test_a_step_dropped_by_an_exception_is_forgotten(clock):
    out = io.StringIO()
    progress.configure("lines", out)

    def fails():
        step = progress.task("costing")       # never closed
        step.advance()
        raise RuntimeError

    with pytest.raises(RuntimeError):
        fails()
    run_step(clock, 3.0, what="solving")
    assert out.getvalue().splitlines()[0].startswith("msf-pio: solving ")

"""Progress of long steps, for the command line and the PlatformIO build log.

    with progress.task("costing fusion blocks", total=len(ends)) as step:
        for end in ends:
            ...
            step.advance(note=f"{n} edges")

A step that ends within DELAY seconds prints nothing. A step spent in one blocking call (a
compiler, a subprocess) is made with `ticking=True`: a thread shows it while it runs. A longer one shows what is being done,
how far (done/total), its note and the elapsed time: on a terminal as one line rewritten in
place on stderr and cleared at the end; in a log (PlatformIO's build output, mode "lines") as a
plain line every INTERVAL seconds and one when it ends. Steps nest: the line names the outer
steps too. The mode is "auto" (a terminal on stderr: "tty", else "off"), or set by
configure() or the environment variable MSF_PIO_PROGRESS (tty, lines, off).
This module imports nothing of msf-pio: every layer may use it.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import weakref

DELAY = 1.0          # seconds a step runs before anything is shown
INTERVAL = 2.0       # seconds between two lines in a log
REFRESH = 0.1        # seconds between two redraws on a terminal
MODES = ("auto", "tty", "lines", "off")

_config = {"mode": "auto", "stream": None}
_stack: list[weakref.ref] = []   # open steps, outermost first (a step dropped unclosed by an
                                 # exception leaves with its frame)
_screen = {"width": 0}      # characters of the line on the terminal
_lock = threading.RLock()   # one writer at a time: a ticking step's thread, the main thread
clock = time.monotonic      # seconds (tests set their own)


def configure(mode: str = "auto", stream=None) -> None:
    """Where progress goes: `mode` one of MODES, `stream` (default stderr) the file."""
    if mode not in MODES:
        raise ValueError(f"progress mode {mode!r} (expected one of {', '.join(MODES)})")
    _config.update(mode=mode, stream=stream)


def _mode(stream) -> str:
    mode = os.environ.get("MSF_PIO_PROGRESS", "").strip().lower() or _config["mode"]
    if mode not in MODES:
        mode = "auto"
    if mode == "auto":
        return "tty" if getattr(stream, "isatty", lambda: False)() else "off"
    return mode


class Task:
    """One step; use through task()."""

    def __init__(self, what: str, total: int | None = None, ticking: bool = False):
        self.what, self.total, self.done, self.note = what, total, 0, ""
        self.start = clock()
        self.shown = 0.0           # when a line was last written (0: never)
        self.stream = _config["stream"] or sys.stderr
        self.mode = _mode(self.stream)
        _stack.append(weakref.ref(self))
        self._stop = None
        if ticking and self.mode != "off":
            self._stop = threading.Event()
            threading.Thread(target=_tick, args=(weakref.ref(self), self._stop),
                             daemon=True).start()
            self._maybe_show()     # at once if DELAY allows: a fast step is not left to the tick

    def advance(self, n: int = 1, note: str | None = None) -> None:
        """`n` more units done; `note` replaces the text shown after the count."""
        self.done += n
        if note is not None:
            self.note = note
        self._maybe_show()

    def update(self, done: int | None = None, note: str | None = None) -> None:
        """Sets how many units are done (and the note)."""
        if done is not None:
            self.done = done
        if note is not None:
            self.note = note
        self._maybe_show()

    def line(self) -> str:
        open_ = _open()
        names = ": ".join(t.what for t in open_[:open_.index(self)]) if self in open_ else ""
        count = f" {self.done}/{self.total}" if self.total else \
            (f" {self.done}" if self.done else "")
        note = f" ({self.note})" if self.note else ""
        elapsed = clock() - self.start
        return f"msf-pio: {names + ': ' if names else ''}{self.what}{count}{note}, {elapsed:.1f} s"

    def _maybe_show(self) -> None:
        if self.mode == "off":
            return
        with _lock:
            now = clock()
            if now - self.start < DELAY or \
                    now - self.shown < (REFRESH if self.mode == "tty" else INTERVAL):
                return
            if self not in _open()[-1:]:       # an inner step is showing itself
                return
            self._write(self.line())
            self.shown = now

    def _write(self, text: str) -> None:
        try:
            if self.mode == "tty":
                self.stream.write("\r" + text.ljust(_screen["width"]))
                _screen["width"] = len(text)
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):      # a closed or broken stream: progress is optional
            self.mode = "off"

    def close(self) -> None:
        """Ends the step: a terminal's line is cleared (what the command prints comes next); a
        log gets the step's last line if it ran longer than DELAY."""
        if self._stop is not None:
            self._stop.set()
        with _lock:
            self._close()

    def _close(self) -> None:
        if self not in _open():
            return
        if self.mode == "tty" and _screen["width"]:
            self._write("")
            self.stream.write("\r")
            _screen["width"] = 0
        elif self.mode == "lines" and clock() - self.start >= DELAY:
            self._write(f"{self.line()}: done")
        _stack[:] = [r for r in _stack if r() is not None and r() is not self]

    def __enter__(self) -> "Task":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _tick(ref, stop: threading.Event) -> None:
    """Shows a ticking step while the main thread is blocked in it, until it is closed or
    dropped (an exception left its frame: the thread holds it only weakly)."""
    while not stop.wait(REFRESH):
        step = ref()
        if step is None or step not in _open():
            return
        step._maybe_show()
        del step


def _open() -> list[Task]:
    return [t for t in (r() for r in _stack) if t is not None]


def task(what: str, total: int | None = None, ticking: bool = False) -> Task:
    """A step to report, until its close(): `with task("costing", total=n) as step: ...`;
    `ticking`: shown while it runs even when nothing advances it (one blocking call)."""
    return Task(what, total, ticking)

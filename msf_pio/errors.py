"""One exception type for every user-facing error, so the CLI and the build script can print it
as a single line instead of a traceback, with the exit status of its kind:
0 ok, 1 an infeasible budget (InfeasibleBudget), 2 bad input or option (MsfError),
3 an internal error (anything else: a bug, reported in one line; --debug shows the traceback)."""

from .text import printable

EXIT_OK, EXIT_INFEASIBLE, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class MsfError(Exception):
    """A user error: bad model file, unsupported op, bad option."""

    status = EXIT_BAD_INPUT

    def __init__(self, message: str, *, source: str | None = None, where: str | None = None):
        self.source = source
        self.where = where
        parts = [p for p in (source, where) if p]
        prefix = ": ".join(parts)
        # one line, whatever a model's names hold: line breaks (a compiler's stderr) as spaces,
        # any other control character escaped
        text = f"{prefix}: {message}" if prefix else message
        super().__init__(printable(" ".join(text.split())))


class InfeasibleBudget(MsfError):
    """The model and options are fine, but no plan meets the budget (RAM limit, overhead bound,
    the board's RAM or flash): the message names the nearest feasible plan."""

    status = EXIT_INFEASIBLE


def one_line(text: object, limit: int = 1000) -> str:
    """An error message as one line (a compiler's stderr may hold many), cut to `limit`."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."

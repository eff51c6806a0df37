"""One exception type for every user-facing error, so the CLI and the build script can print it
as a single line instead of a traceback."""


class MsfError(Exception):
    """A user error: bad model file, unsupported op, bad option, infeasible budget."""

    def __init__(self, message: str, *, source: str | None = None, where: str | None = None):
        self.source = source
        self.where = where
        parts = [p for p in (source, where) if p]
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)

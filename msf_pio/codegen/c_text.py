"""Text from a model file (its name, a file stem) reaches generated C only through these: as a C
string literal, inside a comment, or as a token of the serial result line. Nothing a model
holds is ever pasted into code."""
from __future__ import annotations

import re

_PLAIN = re.compile(r"[A-Za-z0-9 _.,:;+\-=/()\[\]<>#%&|^~!@{}]")   # no quote, backslash, ?, *
_TOKEN_BAD = re.compile(r"[^A-Za-z0-9._:+\-]")
MAX_COMMENT = 80
MAX_TOKEN = 64


def c_string(text: str) -> str:
    """A C string literal holding the UTF-8 bytes of `text`, any length: every byte but plain
    printable ASCII as an octal escape, so a quote, a backslash, a newline, a trigraph or a
    non-ASCII character is data."""
    out = []
    for byte in text.encode("utf-8", "surrogatepass"):
        ch = chr(byte)
        out.append(ch if byte < 128 and _PLAIN.fullmatch(ch) else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def c_comment(text: str) -> str:
    """`text` as comment text: printable ASCII only (anything else, `*` and `/` included, as
    '_'), so no `*/` can end the comment early, cut to MAX_COMMENT characters."""
    safe = "".join(c if c.isascii() and c.isprintable() and c not in "*/\\" else "_"
                   for c in text)
    return safe if len(safe) <= MAX_COMMENT else safe[:MAX_COMMENT - 3] + "..."


def line_token(text: str) -> str:
    """`text` as one token of the ASCII serial result line (`model=<token>`): letters, digits
    and . _ : + - only, at most MAX_TOKEN characters, never empty."""
    token = _TOKEN_BAD.sub("_", text)[:MAX_TOKEN]
    return token or "_"

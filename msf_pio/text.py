"""Text from a model file shown to a person or made a file name: never a terminal's control
sequence (an escape sequence in a model's name could rewrite what a build log shows), never a
path. Generated C has its own escaping (codegen/c_text.py)."""
from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_STEM_BAD = re.compile(r"[^A-Za-z0-9._+\-]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
MAX_STEM = 64


def printable(text: object) -> str:
    """`text` with every control character (C0, DEL, C1) written as an escape: one line."""
    return _CONTROL.sub(lambda m: _ESCAPES.get(m.group(), f"\\x{ord(m.group()):02x}"),
                        str(text))


def file_stem(text: str) -> str:
    """`text` as a file name in the current folder: letters, digits and . _ + - only, no
    leading dot (no '..', no hidden file), at most MAX_STEM characters, never empty."""
    stem = _STEM_BAD.sub("_", text)[:MAX_STEM].lstrip(".")
    return stem or "model"

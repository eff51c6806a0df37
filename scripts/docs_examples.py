"""Regenerate every example output in README.md and docs/*.md from the code, so none can go
stale: a fenced block right after a marker

    <!-- msf-pio example: solve tiny --max-overhead 1.3 -->

holds what `msf-pio solve tiny --max-overhead 1.3` prints, run from the repository's root
(`report ... --out docs/examples/X` also draws the pictures there). `demo` is the one
example that builds and runs firmware (about a minute); the tests check it where they build the
same firmware anyway (tests/test_pio_models.py).

Run: python scripts/docs_examples.py [--check] [--skip-demo]
     --check: change nothing, list the stale examples, exit 1 if there is one
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MARKER = re.compile(r"<!-- msf-pio example: (?P<args>[^>]*?) -->\n```(?P<lang>\w*)\n"
                    r"(?P<body>.*?)```\n", re.S)


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def examples(path: Path):
    """(args, body, match) of every example in a document."""
    text = path.read_text()
    for m in MARKER.finditer(text):
        yield m["args"].strip(), m["body"], m


def run(args: str, where: Path = REPO) -> str:
    """What `msf-pio ARGS` prints, run in `where` (the repository's root, or a scratch folder
    with an empty docs/examples for a check, which leaves the committed pictures alone)."""
    argv = shlex.split(args)
    if argv == ["demo"]:
        from msf_pio.pio.demo import render, run_demo
        return render(run_demo(log=lambda _m: None)) + "\n"
    from msf_pio import progress
    from msf_pio.cli import main
    progress.configure("off")
    buffer = io.StringIO()
    cwd = os.getcwd()
    try:
        os.chdir(where)
        with contextlib.redirect_stdout(buffer):
            code = main(argv)
    finally:
        os.chdir(cwd)
    if code not in (0, 1):
        raise SystemExit(f"msf-pio {args} exited {code}")
    return buffer.getvalue()


def stale(skip=("demo",)) -> list[tuple[Path, str]]:
    """The examples whose block is not what the code prints now."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "docs" / "examples").mkdir(parents=True)
        for path in documents():
            for args, body, _ in examples(path):
                if args not in skip and run(args, Path(tmp)) != body:
                    out.append((path, args))
    return out


def regenerate(skip=()) -> list[tuple[Path, str]]:
    """Every example block (and report picture) written again; returns the changed ones."""
    changed, outputs = [], {}
    for path in documents():
        text = path.read_text()
        pieces, last = [], 0
        for args, body, m in examples(path):
            if args not in skip and args not in outputs:
                outputs[args] = run(args)
            new = outputs.get(args, body)
            pieces += [text[last:m.start("body")], new]
            last = m.end("body")
            if new != body:
                changed.append((path, args))
        path.write_text("".join(pieces) + text[last:])
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="list stale examples, change nothing")
    parser.add_argument("--skip-demo", action="store_true", help="leave the demo's output alone")
    args = parser.parse_args(argv)
    skip = ("demo",) if args.skip_demo else ()
    if args.check:
        bad = stale(skip)
        for path, example in bad:
            print(f"stale: {path.relative_to(REPO)}: msf-pio {example}")
        return 1 if bad else 0
    for path, example in regenerate(skip):
        print(f"updated: {path.relative_to(REPO)}: msf-pio {example}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Nothing from a model file becomes code (issue 19): a model's name, however hostile, reaches
the generated C only as an escaped string literal, a comment stripped to printable text and a
serial-line token. The C compiles warning-free (trigraphs on), prints the token exactly, and
the payload of an injection attempt never runs."""
import subprocess
from pathlib import Path
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msf_pio.codegen.c_text import c_comment, c_string, line_token
from msf_pio.codegen.generate import generate
from msf_pio.codegen.host import LIBRARY, write_sources
from msf_pio.fusion import solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.pio.golden import golden_sources
from msf_pio.verify import quantized_model

INJECTION = ('", }; __attribute__((constructor)) static void f(void) { extern int puts(const '
             'char *); puts("INJECTED"); } static const char *g = "*/ /*\n#error x\n??/')
PRINT_NAME = r"""
#include <stdio.h>
#include "msf_model.h"
#include "msf_golden.h"
int main(void)
{
    fputs(msf_model_info.name, stdout);
    fputs("|", stdout);
    fputs(MSF_BOARD_NAME, stdout);
    return 0;
}
"""


CC = ["gcc", "-std=c99", "-trigraphs", "-Wall", "-Wextra", "-Werror", "-O0",
      f"-I{LIBRARY / 'include'}"]


@pytest.fixture(scope="module")
def tiny():
    model = quantized_model("tiny")
    return model, solvers.p1_min_ram(build_graph(model, "exact"))


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """The runtime as one static library, built once."""
    tmp = tmp_path_factory.mktemp("runtime")
    objects = []
    for src in sorted(LIBRARY.glob("src/**/*.c")):
        objects.append(str(tmp / f"{src.stem}.o"))
        subprocess.run([*CC, "-c", str(src), "-o", objects[-1]], check=True)
    subprocess.run(["ar", "rcs", str(tmp / "libmsf.a"), *objects], check=True)
    return tmp / "libmsf.a"


def build_and_print(tmp_path, runtime, model, plan, name, board="qemu_f767zi") -> str:
    """The generated model named `name` (and the golden header for `board`), compiled with
    -Werror and trigraphs, linked with a main that prints the info record's name and the board
    name."""
    write_sources(generate(replace(model, name=name), plan), tmp_path)
    header, _ = golden_sources(np.zeros(1, np.int8), np.zeros(1, np.int8), board, 0)
    (tmp_path / "msf_golden.h").write_text(header)
    (tmp_path / "main.c").write_text(PRINT_NAME)
    exe = tmp_path / "a.out"
    proc = subprocess.run([*CC, f"-I{tmp_path}", str(tmp_path / "main.c"),
                           str(tmp_path / "msf_model.c"), str(runtime), "-o", str(exe)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def test_injection_in_a_name_is_data(tmp_path, runtime, tiny):
    board = 'nucleo"); evil(); ("'
    out = build_and_print(tmp_path, runtime, *tiny, INJECTION, board=board)
    assert "INJECTED" not in out
    assert out == line_token(INJECTION) + "|" + line_token(board)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(min_size=1, max_size=200))
def test_any_name_compiles_and_prints_its_token(tmp_path_factory, runtime, tiny, name):
    tmp = tmp_path_factory.mktemp("name")
    assert build_and_print(tmp, runtime, *tiny, name).split("|")[0] == line_token(name)


@given(st.text(max_size=300))
def test_c_string_round_trips_every_byte(text):
    literal = c_string(text)
    assert literal.startswith('"') and literal.endswith('"')
    body = literal[1:-1]
    assert all(32 <= ord(c) < 127 for c in body) and '"' not in body.replace('\\"', "")
    assert "??" not in body and "*/" not in body
    # decode the C escapes (only octal ones are emitted) back to the UTF-8 bytes
    out, i = bytearray(), 0
    while i < len(body):
        if body[i] == "\\":
            out.append(int(body[i + 1:i + 4], 8))
            i += 4
        else:
            out.append(ord(body[i]))
            i += 1
    assert bytes(out) == text.encode("utf-8", "surrogatepass")


@given(st.text(max_size=300))
def test_comment_and_token_are_inert(text):
    comment, token = c_comment(text), line_token(text)
    assert "*/" not in comment and "/*" not in comment and "\n" not in comment
    assert all(c.isascii() and c.isprintable() for c in comment) and len(comment) <= 80
    assert token and len(token) <= 64 and token.isascii() and " " not in token and "=" not in token


TERMINAL = "\x1b]0;pwned\x07\x1b[2J\r../../escaped\nMSF status=ok"


def test_a_name_never_reaches_the_terminal_or_a_path(tmp_path, monkeypatch, capsys):
    """A spec's name with terminal escape sequences, a carriage return, a line break and a
    relative path: solve prints it escaped on its one line, report's default folder stays in
    the current folder, and an error about the model is one line without control characters."""
    from msf_pio.cli import main
    spec = (Path(__file__).parents[1] / "msf_pio" / "model" / "zoo" / "tiny.yaml").read_text()
    name = TERMINAL.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    name = name.replace("\x1b", "\\e").replace("\x07", "\\a")
    (tmp_path / "m.yaml").write_text(spec.replace("name: tiny", f'name: "{name}"'))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["solve", str(tmp_path / "m.yaml")]) == 0
    out = capsys.readouterr().out
    assert not any(ch in out for ch in "\x1b\x07\r")
    assert out.splitlines()[0].startswith("model \\x1b]0;pwned\\x07\\x1b[2J\\r../../escaped\\nMSF")
    assert main(["report", str(tmp_path / "m.yaml")]) == 0
    capsys.readouterr()
    made = [p for p in tmp_path.rglob("report.json")]
    assert len(made) == 1 and made[0].parent.parent == work, made
    assert main(["report", str(tmp_path / "m.yaml"), "--ram-limit", "10"]) == 1
    err = capsys.readouterr()
    lines = (err.out + err.err).splitlines()
    assert len(lines) == 1 and "\\x1b]0;pwned" in lines[0], lines
    assert not any(ch in lines[0] for ch in "\x1b\x07\r")

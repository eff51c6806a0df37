"""Build and run generated C on the host (gcc): the output bytes, counted MACs and the
measured arena high-water of a plan, in plain, instrumented and sanitizer builds."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import MsfError
from .generate import Sources

LIBRARY = Path(__file__).resolve().parents[2] / "library"
WARNINGS = ["-std=c99", "-Wall", "-Wextra", "-Werror"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "msf_model.h"
#include "msf/runtime.h"

#if MSF_MODEL_STREAM_INPUT && !defined(MSF_MEASURE_ARENA)
/* A streamed input's rows from the input buffer, checking that each is asked once, in order. */
typedef struct {
    const int8_t *input;
    long calls, next;
    int in_order;
} rows_t;

static void pull_row(int32_t row, int8_t *dst, void *ctx)
{
    rows_t *r = ctx;
    r->in_order &= row == r->next;
    r->next = row + 1;
    r->calls++;
    memcpy(dst, r->input + (long)row * MSF_MODEL_INPUT_W * MSF_MODEL_INPUT_C,
           MSF_MODEL_INPUT_W * MSF_MODEL_INPUT_C);
}
#endif
#if MSF_MODEL_STREAM_INPUT && MSF_MODEL_STREAM_OUTPUT && !defined(MSF_MEASURE_ARENA)
static void collect(int32_t row, int32_t col, const int8_t *pixel, int32_t channels, void *ctx)
{
    memcpy((int8_t *)ctx + (row * MSF_MODEL_OUTPUT_W + col) * channels, pixel, (size_t)channels);
}
#endif

#ifdef MSF_PROFILE_EDGES
/* The profiling hook, checked: every edge opened then closed, edges in plan order, each run. */
static long edges_profiled, profile_in_order = 1;
static long open_edge = -1, last_edge = -1;

void msf_profile_edge(uint32_t edge, int done)
{
    if (!done) {
        profile_in_order &= open_edge < 0 && (long)edge == (last_edge + 1) % MSF_MODEL_EDGES;
        open_edge = (long)edge;
        return;
    }
    profile_in_order &= open_edge == (long)edge;
    open_edge = -1;
    last_edge = (long)edge;
    edges_profiled++;
}
#endif

/* msf host harness: input bytes from argv[1], output bytes to argv[2], figures on stdout */
int main(int argc, char **argv)
{
    static int8_t input[MSF_MODEL_INPUT_BYTES], output[MSF_MODEL_OUTPUT_BYTES];
    if (argc != 3) {
        fprintf(stderr, "usage: %s in.bin out.bin\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
#ifdef MSF_HOST_IO
    (void)input, (void)output;
    fclose(f);
#else
    if (!f || fread(input, 1, sizeof input, f) != sizeof input) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    fclose(f);
#endif
#ifdef MSF_HOST_IO
    /* the file's own types and layout: msf_model_run_io (argv bytes are msf_input_t's) */
    static msf_input_t io_input[MSF_MODEL_IO_INPUT_SIZE];
    static msf_output_t io_output[MSF_MODEL_IO_OUTPUT_SIZE];
    f = fopen(argv[1], "rb");
    if (!f || fread(io_input, 1, sizeof io_input, f) != sizeof io_input) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    fclose(f);
    msf_model_run_io(io_input, io_output);
    f = fopen(argv[2], "wb");
    if (!f || fwrite(io_output, 1, sizeof io_output, f) != sizeof io_output) {
        fprintf(stderr, "cannot write %s\n", argv[2]);
        return 2;
    }
    fclose(f);
    return 0;
#endif
#ifdef MSF_MEASURE_ARENA
    printf("arena_measured=%lu\n", (unsigned long)msf_model_measure_arena(input, output));
#if MSF_MODEL_STATE_BYTES
    msf_model_reset();                 /* measuring ran a streaming model's first frame */
#endif
    msf_model_run(input, output);      /* the output too (measuring discards a streamed one) */
#elif MSF_MODEL_STREAM_INPUT
    rows_t rows = {input, 0, 0, 1};
#if MSF_MODEL_STREAM_OUTPUT
    msf_model_run_streamed(pull_row, &rows, collect, output);
#else
    msf_model_run_streamed(pull_row, &rows, output);
#endif
    printf("rows_pulled=%ld\nrows_in_order=%d\n", rows.calls, rows.in_order);
#else
    msf_model_run(input, output);
#endif
#ifdef MSF_COUNT_MACS
    printf("macs_counted=%llu\n", (unsigned long long)msf_macs);
#endif
#ifdef MSF_PROFILE_EDGES
    printf("edges_profiled=%ld\nprofile_in_order=%ld\n", edges_profiled, profile_in_order);
#endif
    f = fopen(argv[2], "wb");
    if (!f || fwrite(output, 1, sizeof output, f) != sizeof output) {
        fprintf(stderr, "cannot write %s\n", argv[2]);
        return 2;
    }
#if MSF_MODEL_STATE_BYTES
    /* a streaming model: the input file's further frames, run in order, outputs appended */
    FILE *in = fopen(argv[1], "rb");
    if (!in || fseek(in, (long)sizeof input, SEEK_SET)) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    while (fread(input, 1, sizeof input, in) == sizeof input) {
        msf_model_run(input, output);
        if (fwrite(output, 1, sizeof output, f) != sizeof output) {
            fprintf(stderr, "cannot write %s\n", argv[2]);
            return 2;
        }
    }
    fclose(in);
#endif
    fclose(f);
    return 0;
}
"""


@dataclass
class HostRun:
    output: np.ndarray
    figures: dict[str, int]


def runtime_sources() -> list[Path]:
    return sorted((LIBRARY / "src").rglob("*.c"))


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "msf-pio" / "host-runtime"


def runtime_objects(flags: list[str]) -> list[Path]:
    """The runtime's object files compiled with `flags`, kept in the user's cache under a key
    of the compiler, the flags and every library source and header: the runtime includes no
    generated file, so every build of a flavour links the same objects (compiling the runtime
    was 95% of a host build's time). Written to a private folder, then renamed into place."""
    sources = runtime_sources()
    key = hashlib.sha1()
    gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout
    key.update((gcc + "\0".join(WARNINGS + flags)).encode())
    for f in sorted(LIBRARY.rglob("*.[ch]")):
        key.update(str(f.relative_to(LIBRARY)).encode() + b"\0" + f.read_bytes())
    folder = _cache_root() / key.hexdigest()[:20]
    names = [f"{i:03d}_{src.stem}.o" for i, src in enumerate(sources)]
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
        try:
            for src, name in zip(sources, names):
                cmd = ["gcc", *WARNINGS, *flags, f"-I{LIBRARY / 'include'}", "-c", str(src),
                       "-o", str(tmp / name)]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode:
                    raise MsfError(f"host compile failed ({src.name}):\n{proc.stderr[-4000:]}")
            try:
                tmp.rename(folder)             # another process may have been first: keep its
            except OSError:
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return [folder / name for name in names]


def write_sources(sources: Sources, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "msf_model.h").write_text(sources.header)
    (directory / "msf_model.c").write_text(sources.source)


class HostBuild:
    """Compiles generated sources once per flavour and runs the binaries on inputs."""

    FLAVOURS = {
        "plain": ["-O2"],
        "count": ["-O2", "-DMSF_COUNT_MACS"],
        "measure": ["-O2", "-DMSF_MEASURE_ARENA"],
        "sanitize": ["-O1", "-g", *SANITIZE, "-DMSF_MEASURE_ARENA"],
        "profile": ["-O2", "-DMSF_PROFILE_EDGES", "-DMSF_MEASURE_ARENA"],   # both hooks at once
        "io": ["-O2", "-DMSF_HOST_IO"],            # msf_model_run_io: the file's types
    }

    def __init__(self, sources: Sources, workdir: Path | None = None):
        if shutil.which("gcc") is None:
            raise MsfError("host builds need gcc on PATH")
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="msf-host-")
        self.dir = Path(workdir or self._tmp.name)
        write_sources(sources, self.dir)
        (self.dir / "harness.c").write_text(HARNESS)
        self.binaries: dict[str, Path] = {}

    def binary(self, flavour: str) -> Path:
        if flavour not in self.binaries:
            exe = self.dir / f"model_{flavour}"
            flags = self.FLAVOURS[flavour]
            try:
                runtime = runtime_objects(flags)
            except OSError:                    # no writable cache folder: compile it here
                runtime = runtime_sources()
            cmd = ["gcc", *WARNINGS, *flags, f"-I{LIBRARY / 'include'}",
                   f"-I{self.dir}", str(self.dir / "harness.c"), str(self.dir / "msf_model.c"),
                   *map(str, runtime), "-o", str(exe)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode:
                raise MsfError(f"host compile failed ({flavour}):\n{proc.stderr[-4000:]}")
            self.binaries[flavour] = exe
        return self.binaries[flavour]

    def run(self, x: np.ndarray, flavour: str = "plain") -> HostRun:
        """Run on input x: int8 HWC bytes, or for `io` the file's own (msf_model_run_io); the
        output comes back as raw int8 (for `io`: bytes of the file's type, see run_io)."""
        exe = self.binary(flavour)
        key = hashlib.sha1(x.tobytes() + str(x.dtype).encode()).hexdigest()[:12]
        inp, out = self.dir / f"in_{key}.bin", self.dir / f"out_{key}_{flavour}.bin"
        data = np.ascontiguousarray(x if flavour == "io" else np.asarray(x, dtype=np.int8))
        inp.write_bytes(data.tobytes())
        env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
               "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
        proc = subprocess.run([str(exe), str(inp), str(out)], capture_output=True, text=True,
                              env=env, timeout=600)
        if proc.returncode:
            raise MsfError(f"host run failed ({flavour}, exit {proc.returncode}):\n"
                           f"{(proc.stderr or proc.stdout)[-4000:]}")
        figures = {}
        for line in proc.stdout.splitlines():
            key_, _, value = line.partition("=")
            if value.strip().isdigit():
                figures[key_] = int(value)
        return HostRun(np.frombuffer(out.read_bytes(), dtype=np.int8).copy(), figures)

    def run_frames(self, frames: np.ndarray, flavour: str = "plain") -> HostRun:
        """A streaming model's output after each of `frames` (int8 HWC inputs, run in order
        from the initial state: measure runs first and resets), one row per frame."""
        frames = np.asarray(frames, dtype=np.int8)
        run = self.run(frames.reshape(-1), flavour)
        run.output = run.output.reshape(len(frames), -1)
        return run

    def run_io(self, model, x: np.ndarray) -> np.ndarray:
        """msf_model_run_io on x (the file's type and shape); the output in the file's."""
        from .io import C_TYPES, io_of
        i, o = io_of(model)
        dtypes = {"int8": np.int8, "uint8": np.uint8, "float32": np.float32}
        x = np.asarray(x)
        if x.dtype != dtypes[i.dtype] or x.size != int(np.prod(i.dims)):
            raise MsfError(f"input must be {i.dtype} of shape {list(i.dims)} ({C_TYPES[i.dtype]}"
                           f"), got {x.dtype} {list(x.shape)}")
        raw = self.run(x.reshape(i.dims), "io").output
        return np.frombuffer(raw.tobytes(), dtypes[o.dtype]).reshape(o.dims).copy()

    def close(self) -> None:
        if self._tmp:
            self._tmp.cleanup()

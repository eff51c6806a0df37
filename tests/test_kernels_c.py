"""The C kernels of library/ are bit-exact with the numpy reference, whole and on tiles.

The runtime is compiled on the host with -Werror (and once more, in a subprocess that re-runs
this module, with AddressSanitizer and UBSan) into a shared library driven through ctypes by
tests/c/kernel_harness.c. Tiles read their input from column rings holding only the rows and
columns the tile needs, as the fused executor does; the MAC counter must equal the reference's.
The DSP (Cortex-M4/M7), RV32 and Xtensa builds are compile-checked with the cross toolchains,
and so are the emulated boards' board files (library/src/board/qemu_*.c) with each board's flags.
"""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msf_pio import numerics as nm
from msf_pio.codegen import kernel_data
from msf_pio.codegen.generate import c_channels, c_weights, weights_ref
from msf_pio.model import ir
from msf_pio.pio import PLATFORM_DIR
from msf_pio.reference import layer_macs, run_layer

from .cross import CROSS
from .int8_models import POOLS, WEIGHTED, random_input, single_op_model

REPO = Path(__file__).resolve().parents[1]
LIBRARY = REPO / "library"
HARNESS = Path(__file__).parent / "c" / "kernel_harness.c"
WARNINGS = ["-std=c99", "-Wall", "-Wextra", "-Werror"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
LIB_ENV = "MSF_TEST_KERNELS_LIB"     # set by the sanitizer re-run: use this prebuilt library
OP_NAMES = {ir.CONV: "MSF_CONV2D", ir.DEPTHWISE: "MSF_DEPTHWISE", ir.ADD: "MSF_ADD",
            ir.MAX_POOL: "MSF_MAX_POOL", ir.AVG_POOL: "MSF_AVG_POOL",
            ir.GLOBAL_AVGPOOL: "MSF_GLOBAL_AVGPOOL", ir.DENSE: "MSF_DENSE"}
CASES = {**{f"{n}-{a}": (s, l[:-1] + [{**l[-1], "act": a}]) for n, (s, l) in WEIGHTED.items()
            for a in ("none", "relu6")}, **POOLS}
SEEDS = (0, 1)

_INT_FIELDS = ["op", "kernel_h", "kernel_w", "stride_h", "stride_w", "pad_top", "pad_left",
               "in_h", "in_w", "in_c", "out_h", "out_w", "out_c", "in_offset", "out_offset",
               "act_min", "act_max", "in2_offset", "left_shift", "in1_mult", "in1_shift",
               "in2_mult", "in2_shift", "requant", "folded", "scratch"]


class Case(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int32) for f in _INT_FIELDS] + [
        (f, ctypes.c_void_p) for f in ("weights", "channels", "mult", "shift")]


class View(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("row0", ctypes.c_int32), ("row_stride", ctypes.c_int32),
                ("col_stride", ctypes.c_int32), ("col_slots", ctypes.c_int32)]


def sources() -> list[Path]:
    return sorted(LIBRARY.glob("src/**/*.c"))


def build(out: Path, flags: list[str]) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("no host gcc")
    cmd = ["gcc", *WARNINGS, "-O2", "-fPIC", "-shared", "-DMSF_COUNT_MACS",
           f"-I{LIBRARY / 'include'}", *flags, *map(str, sources()), str(HARNESS), "-o", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return out


def op_codes() -> dict[str, int]:
    text = (LIBRARY / "include" / "msf" / "runtime.h").read_text()
    return {name: int(value) for name, value in re.findall(r"(MSF_\w+)\s*=\s*(\d+)", text)}


class Kernels:
    """The compiled runtime plus the marshalling of IR layers into harness cases."""

    def __init__(self, path: Path):
        self.lib = ctypes.CDLL(str(path))
        self.codes = op_codes()
        for name in ("harness_tile", "harness_global_avgpool", "harness_gap_iterative",
                     "harness_dense"):
            getattr(self.lib, name).restype = None
        self.lib.harness_take_macs.restype = ctypes.c_uint64

    def case(self, model, index):
        """(Case, arrays kept alive while the case is used)."""
        layer = model.layers[index]
        rq = nm.requantization(model, index)
        (ih, iw, ic), (oh, ow, oc) = layer.in_shape, layer.out_shape
        c = Case(op=self.codes[OP_NAMES[layer.op]], kernel_h=layer.kernel_h,
                 kernel_w=layer.kernel_w, stride_h=layer.stride_h, stride_w=layer.stride_w,
                 pad_top=layer.pad_top, pad_left=layer.pad_left, in_h=ih, in_w=iw, in_c=ic,
                 out_h=oh, out_w=ow, out_c=oc, act_min=rq.act_min, act_max=rq.act_max)
        keep = []

        def pointer(a, dtype):
            a = np.ascontiguousarray(a, dtype=dtype)
            keep.append(a)
            return a.ctypes.data

        if isinstance(rq, nm.ChannelRequant):
            c.in_offset, c.out_offset = rq.input_offset, rq.output_offset
            data = kernel_data.layer_data(layer, rq)
            c.weights = pointer(data["weights"], data["weights"].dtype)
            c.channels = pointer(data["channels"], kernel_data.CHANNEL)
            c.requant, c.folded, c.scratch = data["requant"], data["folded"], data["scratch"]
        elif isinstance(rq, nm.AddRequant):
            c.in_offset, c.in2_offset, c.out_offset = (rq.input1_offset, rq.input2_offset,
                                                       rq.output_offset)
            c.left_shift = rq.left_shift
            c.in1_mult, c.in1_shift = rq.input1_multiplier, rq.input1_shift
            c.in2_mult, c.in2_shift = rq.input2_multiplier, rq.input2_shift
            c.mult = pointer([rq.output_multiplier], np.int32)
            c.shift = pointer([rq.output_shift], np.int8)
        return c, keep

    def take_macs(self) -> int:
        return int(self.lib.harness_take_macs())


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    prebuilt = os.environ.get(LIB_ENV)
    path = Path(prebuilt) if prebuilt else build(tmp_path_factory.mktemp("c") / "libmsf.so", [])
    k = Kernels(path)
    k.take_macs()
    return k


# -- views: whole tensors and column rings -------------------------------------------------
class Ring:
    """Rows [row0, row0 + rows) of a tensor, column c stored in slot c % slots, rows padded
    by `gap` bytes, surrounded by a guard the kernels must not touch."""
    GUARD = 64

    def __init__(self, row0, rows, slots, channels, gap=0, fill=0):
        self.row0, self.rows, self.slots, self.channels = row0, rows, slots, channels
        self.row_stride = slots * channels + gap
        self.buf = np.full(2 * self.GUARD + rows * self.row_stride, fill, np.int8)

    @classmethod
    def whole(cls, shape, fill=0):
        h, w, c = shape
        return cls(0, h, w, c, 0, fill)

    def view(self) -> View:
        return View(self.buf.ctypes.data + self.GUARD, self.row0, self.row_stride, self.channels,
                    self.slots)

    def _pixel(self, row, col):
        at = self.GUARD + (row - self.row0) * self.row_stride + (col % self.slots) * self.channels
        return slice(at, at + self.channels)

    def store(self, tensor, rows, cols):
        for r in range(*rows):
            for c in range(*cols):
                self.buf[self._pixel(r, c)] = tensor[r, c]

    def load(self, rows, cols) -> np.ndarray:
        return np.array([[self.buf[self._pixel(r, c)] for c in range(*cols)] for r in range(*rows)],
                        np.int8).reshape(rows[1] - rows[0], cols[1] - cols[0], self.channels)

    def guards_intact(self, fill) -> bool:
        guards = np.concatenate([self.buf[:self.GUARD], self.buf[-self.GUARD:]])
        return bool(np.all(guards == fill))


def input_span(layer, lo, hi, axis):
    """Input rows (axis 0) or columns (axis 1) that output positions [lo, hi) read."""
    if layer.op == ir.ADD:
        return lo, hi
    kernel, stride, pad = layer.kernel[axis], layer.stride[axis], layer.pad[axis]
    size = layer.in_shape[axis]
    return max(0, lo * stride - pad), min(size, (hi - 1) * stride - pad + kernel)


def run_tile(kernels, model, index, tensors, rows, cols, rng):
    """Computes one output tile from column rings of the inputs into a column ring; returns it."""
    layer = model.layers[index]
    case, keep = kernels.case(model, index)
    in_rows, in_cols = input_span(layer, *rows, 0), input_span(layer, *cols, 1)
    inputs = []
    for t in ([index, layer.skip] if layer.op == ir.ADD else [index]):
        slots = in_cols[1] - in_cols[0] + int(rng.integers(3))
        ring = Ring(in_rows[0], in_rows[1] - in_rows[0], slots, layer.cin,
                    gap=int(rng.integers(3)), fill=99)
        ring.store(tensors[t], in_rows, in_cols)
        inputs.append(ring)
    out = Ring(rows[0], rows[1] - rows[0], cols[1] - cols[0] + int(rng.integers(2)), layer.cout,
               gap=int(rng.integers(3)), fill=-77)
    views = [r.view() for r in inputs]
    kernels.lib.harness_tile(ctypes.byref(case), ctypes.byref(views[0]),
                             ctypes.byref(views[1]) if len(views) > 1 else None,
                             ctypes.byref(out.view()), rows[0], rows[1], cols[0], cols[1])
    del keep
    assert out.guards_intact(-77) and all(r.guards_intact(99) for r in inputs)
    return out.load(rows, cols)


def reference_tensors(model, seed):
    tensors = {0: random_input(model, seed)}
    for i in range(model.n_layers):
        tensors[i + 1] = run_layer(model, i, tensors)
    return tensors


def split(n, rng):
    """Random cut points of range(n) into consecutive pieces (at least one)."""
    cuts = rng.choice(np.arange(1, n), size=min(n - 1, int(rng.integers(0, 3))), replace=False)
    bounds = [0, *sorted(map(int, cuts)), n]
    return list(zip(bounds[:-1], bounds[1:]))


# -- tests ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_kernel_matches_reference(kernels, case, seed):
    shape, layers = CASES[case]
    model = single_op_model(shape, layers, seed)
    tensors = reference_tensors(model, seed)
    for i, layer in enumerate(model.layers):
        kept, keep = kernels.case(model, i)
        x = np.ascontiguousarray(tensors[i])
        if layer.op in (ir.DENSE, ir.GLOBAL_AVGPOOL):
            out = np.full(layer.cout, -77, np.int8)
            head = (kernels.lib.harness_dense if layer.op == ir.DENSE
                    else kernels.lib.harness_global_avgpool)
            head(ctypes.byref(kept), x.ctypes.data_as(ctypes.c_void_p),
                 out.ctypes.data_as(ctypes.c_void_p))
        else:
            rings = [Ring.whole(layer.in_shape) for _ in range(2 if layer.op == ir.ADD else 1)]
            rings[0].store(x, (0, x.shape[0]), (0, x.shape[1]))
            if layer.op == ir.ADD:
                rings[1].store(tensors[layer.skip], (0, x.shape[0]), (0, x.shape[1]))
            dst = Ring.whole(layer.out_shape, fill=-77)
            views = [r.view() for r in rings]
            kernels.lib.harness_tile(ctypes.byref(kept), ctypes.byref(views[0]),
                                     ctypes.byref(views[-1]), ctypes.byref(dst.view()),
                                     0, layer.out_shape[0], 0, layer.out_shape[1])
            out = dst.load((0, layer.out_shape[0]), (0, layer.out_shape[1]))
        del keep
        np.testing.assert_array_equal(out.reshape(-1), tensors[i + 1].reshape(-1),
                                      err_msg=f"layer {i} ({layer.name})")
        assert kernels.take_macs() == layer_macs(layer), f"layer {i} ({layer.name})"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", sorted(c for c in CASES if "dense" not in c and "gap" not in c))
def test_tiles_from_column_rings_match_reference(kernels, case, seed):
    """A random grid of tiles, each computed from rings holding just the input it needs:
    the pieces assemble the reference output and their MACs add up to the layer's."""
    shape, layers = CASES[case]
    model = single_op_model(shape, layers, seed)
    tensors = reference_tensors(model, seed)
    rng = np.random.default_rng(seed)
    for i, layer in enumerate(model.layers):
        oh, ow, oc = layer.out_shape
        out = np.zeros((oh, ow, oc), np.int8)
        for rows in split(oh, rng):
            for cols in split(ow, rng):
                tile = run_tile(kernels, model, i, tensors, rows, cols, rng)
                out[slice(*rows), slice(*cols)] = tile
        np.testing.assert_array_equal(out, tensors[i + 1], err_msg=f"layer {i} ({layer.name})")
        assert kernels.take_macs() == layer_macs(layer), f"layer {i} ({layer.name})"


@pytest.mark.parametrize("seed", SEEDS)
def test_iterative_global_avgpool_matches_reference(kernels, seed):
    model = single_op_model((7, 9, 6), [{"op": "global_avgpool"}], seed)
    tensors = reference_tensors(model, seed)
    case, keep = kernels.case(model, 0)
    sums = np.zeros(4 * 6, np.int8)
    out = np.zeros(6, np.int8)
    x = np.ascontiguousarray(tensors[0])
    kernels.lib.harness_gap_iterative(ctypes.byref(case), x.ctypes.data_as(ctypes.c_void_p),
                                      sums.ctypes.data_as(ctypes.c_void_p),
                                      out.ctypes.data_as(ctypes.c_void_p))
    np.testing.assert_array_equal(out, tensors[1].reshape(-1))
    assert kernels.take_macs() == layer_macs(model.layers[0])


@pytest.mark.skipif(bool(os.environ.get(LIB_ENV)), reason="already the sanitizer run")
def test_kernels_clean_under_address_and_undefined_sanitizers(tmp_path):
    """Re-runs this module against a -fsanitize=address,undefined build of the runtime."""
    lib = build(tmp_path / "libmsf_asan.so", SANITIZE)
    asan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                          text=True).stdout.strip()
    ubsan = subprocess.run(["gcc", "-print-file-name=libubsan.so"], capture_output=True,
                           text=True).stdout.strip()
    env = {**os.environ, LIB_ENV: str(lib), "LD_PRELOAD": f"{asan} {ubsan}",
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1", "UBSAN_OPTIONS": "print_stacktrace=1"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                             __file__, "-k", "not sanitizers and not cross"],
                            cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout


@pytest.mark.parametrize("target", sorted(CROSS))
def test_cross_compiles_warning_free(target, tmp_path):
    """Freestanding -Werror builds; on Cortex-M the DSP intrinsics path must be compiled in."""
    compiler, *flags = CROSS[target]
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    for src in sources():
        cmd = [compiler, *flags, *WARNINGS, "-O2", "-ffreestanding", "-DMSF_COUNT_MACS",
               f"-I{LIBRARY / 'include'}", "-c", str(src), "-o", str(tmp_path / (src.stem + ".o"))]
        result = subprocess.run(cmd, capture_output=True, text=True)
        assert result.returncode == 0, f"{src.name}: {result.stderr}"
    if target.startswith("cortex"):
        conv = LIBRARY / "src" / "kernels" / "conv2d_s8.c"
        asm = subprocess.run([compiler, *flags, *WARNINGS, "-O2", "-ffreestanding",
                              f"-I{LIBRARY / 'include'}", "-S", "-o", "-", str(conv)],
                             capture_output=True, text=True).stdout
        assert re.search(r"\bsmlad\b", asm), "the DSP path (SMLAD) was not compiled in"


EMULATED_BOARDS = sorted(p.stem for p in (Path(PLATFORM_DIR) / "boards").glob("*.json"))
ARCH = {"arm": CROSS["cortex-m4"][:2], "riscv": CROSS["rv32imac"][:2],
        "xtensa": CROSS["xtensa-lx106"]}   # the compiler and C library; the board gives the CPU


@pytest.mark.parametrize("board", EMULATED_BOARDS)
def test_emulated_board_support_compiles_warning_free(board, tmp_path):
    """The runtime with the msf-qemu board files switched on (-DMSF_QEMU), with the flags and
    defines of the board's manifest, as the platform compiles them, at -Os and -O2."""
    build = json.loads((Path(PLATFORM_DIR) / "boards" / f"{board}.json").read_text())["build"]
    compiler, *flags = ARCH[build["arch"]]
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    flags += [*build["cpu_flags"], *build["extra_flags"].split(), "-DMSF_QEMU",
              f"-DF_CPU={build['f_cpu']}", "-ffreestanding", f"-I{LIBRARY / 'include'}"]
    board_files = sorted((LIBRARY / "src" / "board").glob("qemu_*.c"))
    assert board_files
    for opt in ("-Os", "-O2"):
        for src in sources():
            cmd = [compiler, *flags, *WARNINGS, opt, "-c", str(src), "-o", str(tmp_path / "x.o")]
            result = subprocess.run(cmd, capture_output=True, text=True)
            assert result.returncode == 0, f"{src.name} {opt}: {result.stderr}"


# -- the DSP path, run on emulated Cortex-M4/M7 ---------------------------------------------
QEMU = {"cortex-m7": "mps2-an500", "cortex-m4": "mps2-an386"}
DSP_CASES = ["conv3x3_s1_same-relu6", "conv5x5_s2_same-none", "conv3x3_cin13-none",
             "conv3x3_cin120-relu6", "dense_long-none",
             "conv1x1_cin13-relu6", "conv1x1_s2-none", "conv1x1-none", "conv1x1_cin11-relu6",
             "conv1x1_cin6-none", "conv3x3_s2_pad1-relu6",
             "dw3x3_s2_same-relu6", "dw3x3_s1_same-none", "dw5x5_s2_pad1-relu6",
             "dw7x7_s2_same-none", "dw3x3_c8-relu6", "dw3x3_c12_s2-none",
             "dw3x3_c4_valid-relu6", "add-none", "conv10x4_s2_same-relu6",
             "conv3x1_s21_same-none", "conv5x3_s12_pad1-relu6", "dw3x1_s12_same-none",
             "dw3x5_s2_pad1-relu6", "dw3x3_c19-relu6", "maxpool_k3_s2_c19",
             "avgpool_k2_same_c13", "avgpool_k24x5_c8"]
_LINK = ["--oslib=semihost", "--crt0=semihost",      # picolibc's specs come with CROSS
         "-Wl,--defsym=__flash=0x0", "-Wl,--defsym=__flash_size=0x400000",
         "-Wl,--defsym=__ram=0x20000000", "-Wl,--defsym=__ram_size=0x400000"]


def _c_array(ctype, name, values, const=True):
    flat = ", ".join(str(int(v)) for v in np.asarray(values).reshape(-1))
    return f"static {'const ' if const else ''}{ctype} {name}[] = {{{flat}}};\n"


def _dsp_program(models) -> str:
    """A bare-metal program that runs the last layer of every model twice, on whole tensors
    (contiguous kernel rows) and on pixels padded by one byte (unaligned loads, per column,
    requantized without the accumulator bound), and prints each output in hex."""
    # generate.c_weights / c_channels place the arrays with MSF_WEIGHTS (no section here)
    decls, body = ['#include <stdio.h>\n#include "msf/runtime.h"\n#define MSF_WEIGHTS\n'], []
    for n, (model, tensors) in enumerate(models):
        i = model.n_layers - 1
        layer = model.layers[i]
        rq = nm.requantization(model, i)
        (ih, iw, ic), (oh, ow, oc) = layer.in_shape, layer.out_shape
        fields = dict(op=OP_NAMES[layer.op], kernel_h=layer.kernel_h, kernel_w=layer.kernel_w,
                      stride_h=layer.stride_h, stride_w=layer.stride_w, pad_top=layer.pad_top,
                      pad_left=layer.pad_left, in_h=ih, in_w=iw, in_c=ic, out_h=oh, out_w=ow,
                      out_c=oc, skip=-1, act_min=rq.act_min, act_max=rq.act_max)
        wide = {}
        if isinstance(rq, nm.ChannelRequant):
            data = kernel_data.layer_data(layer, rq)
            exact = kernel_data.layer_data(layer, rq, fast=False)
            decls += [c_weights(f"w{n}", data["weights"]), c_channels(f"ch{n}", data["channels"]),
                      c_weights(f"wx{n}", exact["weights"]), c_channels(f"ex{n}", exact["channels"])]
            fields.update(in_offset=rq.input_offset, out_offset=rq.output_offset,
                          weights=weights_ref(f"w{n}", data["weights"]), channels=f"ch{n}",
                          requant=data["requant"], folded=data["folded"], scratch=data["scratch"])
            wide = {"weights": weights_ref(f"wx{n}", exact["weights"]), "channels": f"ex{n}",
                    "requant": exact["requant"], "folded": 0, "scratch": exact["scratch"]}
        elif layer.op in (ir.MAX_POOL, ir.AVG_POOL):
            fields.update(mult="0", shift="0")
        else:
            fields.update(mult=f"m{n}", shift=f"s{n}")
            decls += [_c_array("int32_t", f"m{n}", [rq.output_multiplier]),
                      _c_array("int8_t", f"s{n}", [rq.output_shift])]
            fields.update(in_offset=rq.input1_offset, in2_offset=rq.input2_offset,
                          out_offset=rq.output_offset, left_shift=rq.left_shift,
                          in1_mult=rq.input1_multiplier, in1_shift=rq.input1_shift,
                          in2_mult=rq.input2_multiplier, in2_shift=rq.input2_shift)
        init = ", ".join(f".{k} = {v}" for k, v in fields.items())
        wide = ", ".join(f".{k} = {v}" for k, v in {**fields, **wide}.items())
        # the padded run takes the requantization path of accumulators without a bound
        decls.append(f"static const msf_layer_t l{n}whole = {{{init}}};\n"
                     f"static const msf_layer_t l{n}padded = {{{wide}}};\n"
                     f"static int8_t o{n}[{oh * ow * oc}];\n")
        second = tensors[layer.skip] if layer.op == ir.ADD else tensors[i]
        for tag, gap in (("whole", 0), ("padded", 1)):
            for name, t in (("x", tensors[i]), ("y", second)):
                stored = np.zeros((ih, iw, ic + gap), np.int8)
                stored[..., :ic] = t
                decls.append(_c_array("int8_t", f"{name}{n}{tag}", stored, const=False))
            row, col = iw * (ic + gap), ic + gap
            body.append(
                f"    {{\n        msf_view_t a = {{x{n}{tag}, 0, {row}, {col}, {iw}}};\n"
                f"        msf_view_t b = {{y{n}{tag}, 0, {row}, {col}, {iw}}};\n"
                f"        msf_view_t o = {{o{n}, 0, {ow * oc}, {oc}, {ow}}};\n"
                + (f"        msf_dense(&l{n}{tag}, x{n}{tag}, o{n});\n"
                   "        (void)a, (void)b, (void)o;\n" if layer.op == ir.DENSE else
                   f"        for (int32_t c = 0; c < {ow}; c++)\n"
                   f"            msf_layer_column(&l{n}{tag}, &a, &b, &o, c, 0, {oh});\n") +
                f"        printf(\"{n} {tag} \");\n"
                f"        for (int32_t j = 0; j < {oh * ow * oc}; j++)\n"
                f"            printf(\"%02x\", (uint8_t)o{n}[j]);\n"
                f"        printf(\"\\n\");\n    }}\n")
    return "".join(decls) + "int main(void)\n{\n" + "".join(body) + "    return 0;\n}\n"


@pytest.mark.parametrize("cpu", sorted(QEMU))
def test_dsp_path_bit_exact_on_emulated_cortex_m(cpu, tmp_path):
    compiler, *flags = CROSS[cpu]
    if shutil.which(compiler) is None or shutil.which("qemu-system-arm") is None:
        pytest.skip("needs arm-none-eabi-gcc and qemu-system-arm")
    models = []
    for seed, name in enumerate(DSP_CASES):
        shape, layers = CASES[name]
        model = single_op_model(shape, layers, seed)
        models.append((model, reference_tensors(model, seed)))
    src = tmp_path / "dsp_check.c"
    src.write_text(_dsp_program(models))
    elf = tmp_path / "dsp_check.elf"
    build_cmd = [compiler, *flags, *WARNINGS, "-O2", f"-I{LIBRARY / 'include'}",
                 *map(str, sources()), str(src), *_LINK, "-o", str(elf)]
    result = subprocess.run(build_cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    run = subprocess.run(["qemu-system-arm", "-M", QEMU[cpu], "-nographic", "-monitor", "none",
                          "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)],
                         capture_output=True, text=True, timeout=60)
    # semihosting console output arrives on QEMU's stderr
    lines = [l.split() for l in (run.stdout + run.stderr).splitlines() if l[:1].isdigit()]
    assert run.returncode == 0 and len(lines) == 2 * len(models), run.stdout + run.stderr
    for index, tag, hexbytes in lines:
        model, tensors = models[int(index)]
        got = np.frombuffer(bytes.fromhex(hexbytes), np.int8)
        np.testing.assert_array_equal(got, tensors[model.n_layers].reshape(-1),
                                      err_msg=f"{DSP_CASES[int(index)]} ({tag})")

"""CMSIS-NN's kernels on the emulated Cortex-M boards, built from its public sources, for the
one-layer models of benchmarks/kernel_instructions.py: the same input, weights and quantization
as msf-pio's run of the model, the instructions of the one CMSIS-NN call (QEMU -icount, the
board's cycle counter), and whether its output is msf-pio's reference bytes.

The sources are not part of this repository: --cmsis-nn names a checkout of
https://github.com/ARM-software/CMSIS-NN (its Include/ and Source/). Its integer kernels are
compiled at -Ofast (CMSIS-NN's own recommendation for speed) with the board's CPU flags; the
call is made as TFLite Micro's CMSIS-NN kernels make it (the *_wrapper_s8 entry points, the
fully connected layer's kernel sums computed beforehand, outside the timed call, as TFLite
Micro's Prepare does). The driver, the board support (library/src/board, -DMSF_QEMU) and the
link follow the msf-qemu platform (msf_pio/pio/platform/builder/main.py).

With no model named it prints the kernel-class table: every shape of CLASSES (issue 11's six
shapes of benchmarks/kernel_instructions.py and issue 24's: 5x5 and 3x3 convs, odd channel
counts and widths, stride-2 depthwise, dense 64->1000 and 256->10, average and max pooling,
the KWS 10x4 stem and its 24x5 average pool) as a one-layer model, msf-pio's firmware built
and run through PlatformIO under the vanilla plan (as kernel_instructions.py does: it times
msf_model_run, so the per-call set-up of the one edge is counted on our side) beside the one
CMSIS-NN call, instructions per nominal MAC (every kernel tap, padding included; a pooling
layer's taps), their ratio, whether both outputs are the reference's bytes, and msf-pio's
stack (the firmware's measure) and code (the runtime's and generated model's functions,
mlperf_tiny.flash).

Run: python benchmarks/cmsis_nn.py --cmsis-nn DIR [--boards qemu_f767zi,qemu_f412zg]
                                   [--only SUBSTRING] [--jobs 2]       (the table, ~5 min)
     python benchmarks/cmsis_nn.py --cmsis-nn DIR MODEL.yaml ... [--boards qemu_f767zi]
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from msf_pio import numerics as nm  # noqa: E402
from msf_pio.model import ir, load_model  # noqa: E402
from msf_pio.pio import bootstrap  # noqa: E402
from msf_pio.reference import run_layer  # noqa: E402
from msf_pio.verify import quantized_model, seeded_input  # noqa: E402
from kernel_instructions import SHAPES, project_for, run  # noqa: E402
from mlperf_tiny import flash  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BOARD_FILES = REPO / "msf_pio" / "pio" / "platform" / "boards"
SOURCE_DIRS = ("ConvolutionFunctions", "NNSupportFunctions", "FullyConnectedFunctions",
               "PoolingFunctions", "BasicMathFunctions")
RESULT = re.compile(r"CMSIS cycles=(\d+) crc=0x([0-9a-f]{8}) status=(\d+)")
BOARDS = ("qemu_f767zi", "qemu_f412zg")
# name -> (input HWC, the layer): issue 11's six shapes, then issue 24's kernel classes
CLASSES = {name: (shape, layer) for name, (shape, layer, _) in SHAPES.items()}
CLASSES.update({
    "conv 5x5 s1, 16->32, 20x20": ([20, 20, 16], {"op": "conv2d", "out": 32, "kernel": 5}),
    "conv 3x3 s1, 16->16, 32x32": ([32, 32, 16], {"op": "conv2d", "out": 16, "kernel": 3,
                                                  "act": "relu"}),
    "conv 3x3 s1, 7->13, 23x23": ([23, 23, 7], {"op": "conv2d", "out": 13, "kernel": 3,
                                                "act": "relu"}),
    "pointwise 13->37, 21x21": ([21, 21, 13], {"op": "pointwise", "out": 37, "act": "relu6"}),
    "depthwise 3x3 s1, 27 ch, 19x19": ([19, 19, 27], {"op": "depthwise_conv2d", "kernel": 3,
                                                      "act": "relu6"}),
    "depthwise 3x3 s2, 64 ch, 40x40": ([40, 40, 64], {"op": "depthwise_conv2d", "kernel": 3,
                                                      "stride": 2, "act": "relu6"}),
    "depthwise 3x3 s2, 37 ch, 21x21": ([21, 21, 37], {"op": "depthwise_conv2d", "kernel": 3,
                                                      "stride": 2, "act": "relu6"}),
    "dense 64->1000": ([1, 1, 64], {"op": "dense", "out": 1000}),
    "dense 256->10": ([1, 1, 256], {"op": "dense", "out": 10}),
    "KWS stem conv 10x4 s2, 1->64, 49x10": ([49, 10, 1], {"op": "conv2d", "out": 64,
                                                          "kernel": [10, 4], "stride": 2,
                                                          "act": "relu"}),
    "KWS avg pool 24x5, 64 ch, 25x5": ([25, 5, 64], {"op": "avg_pool", "kernel": [24, 5]}),
    "avg pool 2x2 s2, 32 ch, 32x32": ([32, 32, 32], {"op": "avg_pool", "kernel": 2,
                                                     "stride": 2}),
    "avg pool 3x3 s1 same, 19 ch, 15x15": ([15, 15, 19], {"op": "avg_pool", "kernel": 3,
                                                          "stride": 1, "padding": "same"}),
    "max pool 2x2 s2, 32 ch, 32x32": ([32, 32, 32], {"op": "max_pool", "kernel": 2,
                                                     "stride": 2}),
    "max pool 3x3 s2, 27 ch, 23x23": ([23, 23, 27], {"op": "max_pool", "kernel": 3,
                                                     "stride": 2}),
})


def c_array(ctype: str, name: str, values, const: bool = True) -> str:
    flat = ", ".join(str(int(v)) for v in np.asarray(values).reshape(-1)) or "0"
    return (f"static {'const ' if const else ''}{ctype} {name}[] "
            f"__attribute__((aligned(4))) = {{{flat}}};\n")


def dims(n: int, h: int, w: int, c: int) -> str:
    return f"{{{n}, {h}, {w}, {c}}}"


def tensors(model) -> dict:
    """Every tensor of the model on its seeded input (msf-pio's reference)."""
    t = {0: seeded_input(model, 0)}
    for i in range(model.n_layers):
        t[i + 1] = run_layer(model, i, t)
    return t


def driver(model) -> str:
    """The C program: the model's last layer as one CMSIS-NN call between two reads of the
    cycle counter, on the reference's tensors of its inputs, then its output's CRC-32."""
    i = model.n_layers - 1
    layer, t = model.layers[i], tensors(model)
    rq = nm.requantization(model, i)
    (ih, iw, ic), (oh, ow, oc) = layer.in_shape, layer.out_shape
    out = ["#include <stdint.h>\n#include <string.h>\n#include \"arm_nnfunctions.h\"\n"
           "#include \"msf/board.h\"\n",
           c_array("int8_t", "input", t[model.input_of(i)]),
           c_array("int8_t", "input2", t[layer.skip] if layer.op == ir.ADD else [0]),
           f"static int8_t output[{oh * ow * oc}];\n", "static int32_t scratch[16384];\n"]
    setup, call = [], ""
    act = f"{{{rq.act_min}, {rq.act_max}}}"
    if layer.op in (ir.CONV, ir.DEPTHWISE, ir.DENSE):
        out += [c_array("int8_t", "filter", layer.weights.w),
                c_array("int32_t", "bias", layer.weights.bias),
                c_array("int32_t", "mult", rq.multiplier, const=False),
                c_array("int32_t", "shift", rq.shift, const=False)]
        setup.append("cmsis_nn_per_channel_quant_params quant = {mult, shift};")
    if layer.op == ir.CONV:
        (kh, kw), (sh, sw) = layer.kernel, layer.stride
        setup += [f"cmsis_nn_conv_params p = {{{rq.input_offset}, {rq.output_offset}, "
                  f"{{{sw}, {sh}}}, {{{layer.pad_left}, {layer.pad_top}}}, {{1, 1}}, {act}}};",
                  f"cmsis_nn_dims in = {dims(1, ih, iw, ic)}, f = {dims(oc, kh, kw, ic)}, "
                  f"b = {dims(1, 1, 1, oc)}, o = {dims(1, oh, ow, oc)};",
                  "ctx.size = arm_convolve_wrapper_s8_get_buffer_size(&p, &in, &f, &o);"]
        call = ("arm_convolve_wrapper_s8(&ctx, &p, &quant, &in, input, &f, filter, &b, bias, "
                "&o, output)")
    elif layer.op == ir.DEPTHWISE:
        (kh, kw), (sh, sw) = layer.kernel, layer.stride
        setup += [f"cmsis_nn_dw_conv_params p = {{{rq.input_offset}, {rq.output_offset}, 1, "
                  f"{{{sw}, {sh}}}, {{{layer.pad_left}, {layer.pad_top}}}, {{1, 1}}, {act}}};",
                  f"cmsis_nn_dims in = {dims(1, ih, iw, ic)}, f = {dims(1, kh, kw, oc)}, "
                  f"b = {dims(1, 1, 1, oc)}, o = {dims(1, oh, ow, oc)};",
                  "ctx.size = arm_depthwise_conv_wrapper_s8_get_buffer_size(&p, &in, &f, &o);"]
        call = ("arm_depthwise_conv_wrapper_s8(&ctx, &p, &quant, &in, input, &f, filter, &b, "
                "bias, &o, output)")
    elif layer.op == ir.DENSE:
        n = ih * iw * ic
        setup += [f"cmsis_nn_fc_params p = {{{rq.input_offset}, 0, {rq.output_offset}, {act}}};",
                  f"cmsis_nn_dims in = {dims(1, 1, 1, n)}, f = {dims(n, 1, 1, oc)}, "
                  f"b = {dims(1, 1, 1, oc)}, o = {dims(1, 1, 1, oc)};",
                  "ctx.size = arm_fully_connected_s8_get_buffer_size(&f);",
                  f"if (ctx.size > 0) arm_vector_sum_s8(scratch, {n}, {oc}, filter, "
                  f"{rq.input_offset}, 0, bias);"]
        call = ("arm_fully_connected_per_channel_s8(&ctx, &p, &quant, &in, input, &f, filter, "
                "&b, bias, &o, output)")
    elif layer.op in (ir.AVG_POOL, ir.MAX_POOL):
        (kh, kw), (sh, sw) = layer.kernel, layer.stride
        setup += [f"cmsis_nn_pool_params p = {{{{{sw}, {sh}}}, {{{layer.pad_left}, "
                  f"{layer.pad_top}}}, {act}}};",
                  f"cmsis_nn_dims in = {dims(1, ih, iw, ic)}, f = {dims(1, kh, kw, 1)}, "
                  f"o = {dims(1, oh, ow, oc)};"]
        if layer.op == ir.AVG_POOL:
            setup.append(f"ctx.size = arm_avgpool_s8_get_buffer_size({ow}, {ic});")
            call = "arm_avgpool_s8(&ctx, &p, &in, input, &f, &o, output)"
        else:
            call = "arm_max_pool_s8(&ctx, &p, &in, input, &f, &o, output)"
    elif layer.op == ir.ADD:
        call = (f"arm_elementwise_add_s8(input, input2, {rq.input1_offset}, "
                f"{rq.input1_multiplier}, {rq.input1_shift}, {rq.input2_offset}, "
                f"{rq.input2_multiplier}, {rq.input2_shift}, {rq.left_shift}, output, "
                f"{rq.output_offset}, {rq.output_multiplier}, {rq.output_shift}, "
                f"{rq.act_min}, {rq.act_max}, {oh * ow * oc})")
    else:
        raise ValueError(f"no CMSIS-NN call for {layer.op}")
    return "".join(out) + f"""
static uint32_t crc32(const int8_t *p, uint32_t n)
{{
    uint32_t crc = 0xFFFFFFFFu;
    for (uint32_t i = 0; i < n; i++) {{
        crc ^= (uint8_t)p[i];
        for (int b = 0; b < 8; b++) {{
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
        }}
    }}
    return ~crc;
}}

int main(void)
{{
    msf_board_init();
    cmsis_nn_context ctx = {{scratch, 0}};
    {chr(10).join('    ' + s for s in setup).strip()}
    if (ctx.size > (int32_t)sizeof scratch) {{
        msf_board_puts("CMSIS scratch too small\\n");
        msf_board_end_of_run(1);
    }}
    const uint64_t t0 = msf_board_cycles();
    const arm_cmsis_nn_status status = {call};
    const uint64_t cycles = msf_board_cycles() - t0;
    msf_board_put_dec("CMSIS cycles=", cycles);
    msf_board_put_hex(" crc=", crc32(output, sizeof output));
    msf_board_put_dec(" status=", (uint64_t)status);
    msf_board_puts("\\n");
    msf_board_end_of_run(0);
    return 0;
}}
"""


def _board(board: str) -> dict:
    return json.loads((BOARD_FILES / f"{board}.json").read_text())


def cmsis_objects(cmsis: Path, board: str, work: Path) -> list[Path]:
    """CMSIS-NN's integer kernels compiled for the board at -Ofast (once per board)."""
    out = work / f"cmsis-{board}"
    out.mkdir(parents=True, exist_ok=True)
    flags = _board(board)["build"]["cpu_flags"]
    objs = []
    for d in SOURCE_DIRS:
        for src in sorted((cmsis / "Source" / d).glob("*.c")):
            if src.stem.endswith(("_f16", "_f32")):
                continue
            obj = out / f"{src.stem}.o"
            if not obj.is_file():
                subprocess.run(["arm-none-eabi-gcc", "-Ofast", *flags, "--specs=picolibc.specs",
                                f"-I{cmsis / 'Include'}", "-c", str(src), "-o", str(obj)],
                               check=True, capture_output=True, text=True)
            objs.append(obj)
    return objs


def measure(model, board: str, cmsis: Path, work: Path, objs: list[Path]):
    """(instructions of the CMSIS-NN call, its output is the reference's) on the board."""
    spec = _board(board)
    build, upload = spec["build"], spec["upload"]
    work.mkdir(parents=True, exist_ok=True)
    (work / "driver.c").write_text(driver(model))
    ld = work / "link.ld"
    ld.write_text(f"__flash = {build['flash_origin']};\n__flash_size = 4194304;\n"
                  f"__ram = {build['ram_origin']};\n__ram_size = {upload['maximum_ram_size']};\n"
                  f"__stack_size = {build['stack_size']};\nINCLUDE picolibc.ld\n")
    defines = ["-DMSF_QEMU", f"-DF_CPU={build['f_cpu']}", *build["extra_flags"].split()]
    board_src = sorted((REPO / "library" / "src" / "board").glob("qemu_*.c"))
    elf = work / "cmsis.elf"
    cmd = ["arm-none-eabi-gcc", "-O2", *build["cpu_flags"], "--specs=picolibc.specs",
           "--crt0=hosted", *defines, f"-I{cmsis / 'Include'}", f"-I{REPO / 'library' / 'include'}",
           str(work / "driver.c"), *map(str, board_src), *map(str, objs), "-T", str(ld),
           "-Wl,--gc-sections", "-o", str(elf)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    emu = spec["emulator"]
    run = subprocess.run([emu["system"], *emu["args"], "-display", "none", "-monitor", "none",
                          "-serial", "stdio", "-kernel", str(elf)], capture_output=True,
                         text=True, timeout=600)
    m = RESULT.search(run.stdout + run.stderr)
    if not m or m.group(3) != "0":
        raise RuntimeError(f"CMSIS-NN run failed: {(run.stdout + run.stderr)[-300:]}")
    y = np.ascontiguousarray(tensors(model)[model.n_layers], np.int8).reshape(-1)
    return int(m.group(1)), int(m.group(2), 16) == zlib.crc32(y.tobytes())


def nominal_macs(layer) -> int:
    """Every kernel tap of every output, padding included (a pooling layer's taps)."""
    (oh, ow, oc), ic = layer.out_shape, layer.in_shape[2]
    if layer.op == ir.DENSE:
        return int(np.prod(layer.in_shape)) * oc
    kh, kw = layer.kernel
    return oh * ow * oc * kh * kw * (ic if layer.op == ir.CONV else 1)


def classes_table(cmsis: Path, boards, jobs: int, only: str = "") -> None:
    """Each shape of CLASSES on each board: msf-pio's firmware beside the CMSIS-NN call."""
    shapes = {n: v for n, v in CLASSES.items() if only in n}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        core = str(tmp / "core")
        bootstrap.install_tool_scons(core, log=lambda _m: None)
        models = {}
        for i, (name, (shape, layer)) in enumerate(shapes.items()):
            models[name] = tmp / f"class{i}.yaml"
            models[name].write_text(yaml.safe_dump({
                "name": f"class{i}", "input": {"shape": shape}, "weights": {"random": 1},
                "layers": [layer]}))
        objs = {b: cmsis_objects(cmsis, b, tmp) for b in boards}

        def one(job):
            k, (name, board) = job
            project = project_for(tmp, f"class{k}", board, model=str(models[name]),
                                  objective="vanilla")
            ours, error = run(core, project, board)
            if ours is not None:
                ours["code"] = flash(project, board)["code"]
            theirs = measure(quantized_model(str(models[name])), board, cmsis,
                             tmp / f"cmsis{k}", objs[board])
            return (name, board), (ours, error, theirs)

        results = {}
        with ThreadPoolExecutor(jobs) as pool:
            results.update(pool.map(one, enumerate((n, b) for n in shapes for b in boards)))
        print("| shape | board | nominal MACs | ours instr/MAC | CMSIS-NN -Ofast instr/MAC | "
              "ours / CMSIS-NN | bytes identical | ours stack B measured / predicted | "
              "ours code B |")
        print("|---|---|---:|---:|---:|---:|---|---:|---:|")
        for name in shapes:
            macs = nominal_macs(load_model(str(models[name])).layers[0])
            for board in boards:
                ours, error, (instructions, same) = results[(name, board)]
                theirs = instructions / macs
                if ours is None:
                    print(f"| {name} | {board} | {macs:,} | error: {error[:60]} | "
                          f"{theirs:.2f} | - | - | - | - |")
                    continue
                mine = int(ours["cycles"]) / macs
                print(f"| {name} | {board} | {macs:,} | {mine:.2f} | {theirs:.2f} | "
                      f"{mine / theirs:.2f}x | {'yes' if same else 'NO'} | "
                      f"{ours['stack']} / {ours['stack_pred']} | {ours['code']:,} |", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="one-layer models (none: the CLASSES table)")
    ap.add_argument("--cmsis-nn", type=Path, required=True)
    ap.add_argument("--boards", "--board", default=None,
                    help=f"comma-separated (default: {','.join(BOARDS)} for the table, "
                         f"qemu_f767zi for models)")
    ap.add_argument("--only", default="", help="the table's shapes whose name contains this")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    if not args.models:
        classes_table(args.cmsis_nn, (args.boards or ",".join(BOARDS)).split(","), args.jobs,
                      args.only)
        return 0
    args.board = (args.boards or "qemu_f767zi").split(",")[0]
    with tempfile.TemporaryDirectory() as tmp:
        objs = cmsis_objects(args.cmsis_nn, args.board, Path(tmp))

        def one(job):
            k, name = job
            model = quantized_model(name)
            return name, measure(model, args.board, args.cmsis_nn, Path(tmp) / str(k), objs)

        with ThreadPoolExecutor(args.jobs) as pool:
            for name, (instructions, same) in pool.map(one, enumerate(args.models)):
                print(f"{name}: {instructions:,} instructions, reference bytes: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

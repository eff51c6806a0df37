"""The flash a generated model takes, known before anything is compiled (the build's flash
check, msf_pio/pio/integration.py, and the report).

Constant data, counted: every constant array the generated source declares (weights in the
kernels' layout, channel records, the layer and edge tables, rings, resize maps, the arena
measurement's tables), at the sizes its types have on the 32-bit targets, each rounded up to a
word as the compiler aligns it, plus the model's description (msf_model_info and its strings).
The arrays marked MSF_WEIGHTS (the weights, records, slopes and maps weight_bytes counts) are
`weights`: with custom_msf_weights_section they leave the internal flash for that section.

Code, estimated: the generated model links only the kernels and executors its plan runs
(msf/dispatch.h); each runtime file it links counts with all its functions at the largest code
size measured for that file over the three instruction sets (Cortex-M at -Os with the kernels
at -O3, RV32IMC, Xtensa LX7: `python benchmarks/tflm_size.py --units`), or where every layer of
a conv2d or depthwise file runs a specialised kernel the part the linker keeps (SPECIAL_ONLY),
the generated specialised kernels at the largest size measured for their kind, and the
schedule per edge. The linker
drops the functions of a file that nothing calls, so the estimate is above the firmware's (up
to 1.75x its code, 20-35 KB: tests/test_pio_models.py checks it against the link map). Not
counted: the framework's own start-up, drivers and C library, and the application's code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..fusion.kernel_counts import INSTANCE_BYTES
from .generate import dispatch_sets
from .stack import OP_UNITS

# sizeof on the 32-bit targets (4-byte pointers; tests/test_report.py asks the compiler)
TYPE_BYTES = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4,
              "uint32_t": 4, "msf_channel_t": 16, "msf_ring_t": 8, "msf_span_t": 8,
              "msf_layer_t": 112, "msf_block_t": 44}
INFO_BYTES = 56                 # sizeof(msf_model_info_t), its strings apart
ARRAY = re.compile(r"^(?:static )?const (\w+) (\w+)\[(\d+)\]([^=\n]*)=", re.M)
STRING = re.compile(r'^const msf_model_info_t msf_model_info = \{(.*?)^\};', re.M | re.S)

# .text bytes of each runtime file (library/src/<unit>.c, kernels/<op>_s8.c, schemes/<x>.c),
# the largest over qemu_f767zi, qemu_esp32c3 and qemu_esp32s3 (tflm_size.py --units)
UNIT_CODE = {
    "measure": 162, "profile": 2,
    "kernels/activation_s8": 4198, "kernels/add_s8": 1358, "kernels/avg_pool_padded_s8": 501,
    "kernels/concat_s8": 208, "kernels/conv2d_s8": 15196, "kernels/crop_s8": 43,
    "kernels/dense_s8": 964, "kernels/depthwise_conv2d_s8": 8610, "kernels/mul_s8": 429,
    "kernels/pool_s8": 2549, "kernels/requant_s8": 3246, "kernels/resize_nearest_s8": 344,
    "kernels/slice_s8": 144, "kernels/softmax_s8": 1078, "kernels/stream_s8": 84,
    "kernels/transpose_conv_s8": 1641,
    "schemes/channel_split": 708, "schemes/h_cache": 2470, "schemes/line_buffer": 3044,
}
# the files a kernel's functions call into: conv2d, dense and depthwise requantize through
# requant_s8.c, dense runs conv2d_s8.c's column code; every executor finishes a block's
# head (global pooling, dense)
NEEDS = {
    "kernels/conv2d_s8": ("kernels/requant_s8",),
    "kernels/depthwise_conv2d_s8": ("kernels/requant_s8",),
    "kernels/dense_s8": ("kernels/conv2d_s8", "kernels/requant_s8"),
    "schemes/h_cache": ("kernels/pool_s8", "kernels/dense_s8"),
    "schemes/line_buffer": ("kernels/pool_s8", "kernels/dense_s8", "kernels/depthwise_conv2d_s8"),
    "schemes/channel_split": ("kernels/pool_s8", "kernels/dense_s8", "kernels/conv2d_s8",
                              "kernels/depthwise_conv2d_s8"),
}
# the generated code: a specialised kernel of each kind (msf/kernels.h), the largest measured
# over the MLPerf Tiny files on the three instruction sets (tflm_size.py --units); per edge of the schedule (its call
# and the arena measurement's steps); the entry points, dispatches and measurement loop
SPECIALISED = {"MSF_CONV2D_KERNEL": INSTANCE_BYTES["conv"],
               "MSF_DW3X3_KERNEL": INSTANCE_BYTES["depthwise"]}
EDGE_CODE = 100
FIXED_CODE = 800


@dataclass(frozen=True)
class Flash:
    data: int                   # constant data, counted (weights included)
    weights: int                # of which the arrays marked MSF_WEIGHTS
    code: int                   # code, estimated
    units: tuple                # the runtime files linked

    @property
    def total(self) -> int:
        return self.data + self.code


def _word(n: int) -> int:
    return -(-n // 4) * 4


def constant_bytes(source: str) -> tuple[int, int]:
    """Bytes of the constant data a generated msf_model.c declares, and of those the arrays
    marked MSF_WEIGHTS."""
    arrays = [(_word(TYPE_BYTES[t] * int(n)), "MSF_WEIGHTS" in attrs)
              for t, _, n, attrs in ARRAY.findall(source)]
    info = STRING.search(source)
    strings = re.findall(r'"((?:[^"\\]|\\.)*)"', info.group(1)) if info else []
    total = sum(b for b, _ in arrays) + INFO_BYTES + sum(_word(len(s) + 1) for s in strings)
    return total, sum(b for b, placed in arrays if placed)


def units(ops, executors, heads, called) -> tuple:
    """The runtime files a plan links (generate.dispatch_sets' four sets): its ops' kernels (a
    kernel file per op, codegen/stack.py's OP_UNITS), its executors and what they call."""
    todo = {"measure", "profile"} | {f"schemes/{x}" for x in executors}
    todo |= {"kernels/avg_pool_padded_s8" if op == "avg_pool_padded"
             else f"kernels/{OP_UNITS[op]}_s8" for op in set(ops) | set(heads) | set(called)}
    names = set()
    while todo:
        name = todo.pop()
        names.add(name)
        todo |= set(NEEDS.get(name, ())) - names
    return tuple(sorted(names))


# What a plan links of a kernel file whose every layer runs a specialised kernel (the
# dispatch has no MSF_CONV2D_ANY / MSF_DEPTHWISE_ANY bit) and which no executor calls for any
# shape (channel split: conv2d and depthwise; line buffer: depthwise rows): the instances'
# call into the file and the code they share (conv2d: the lone and paired last pixels;
# depthwise: clipped windows), and what dense takes from conv2d_s8.c. Measured as the .text
# the linker kept (tflm_size.py --units: the largest over the three instruction sets).
SPECIAL_ONLY = {
    "kernels/conv2d_s8": ("MSF_CONV2D_ANY", ("channel_split",), 9504),
    "kernels/depthwise_conv2d_s8": ("MSF_DEPTHWISE_ANY", ("channel_split", "line_buffer"), 416),
}


def unit_code(unit: str, source: str, executors) -> int:
    """Code of a runtime file the plan links: the whole file's, or SPECIAL_ONLY's share."""
    if unit in SPECIAL_ONLY:
        bit, callers, size = SPECIAL_ONLY[unit]
        if f"MSF_BIT({bit})" not in source and not set(callers) & set(executors):
            return size
    return UNIT_CODE[unit]


def estimate(model, plan, source: str) -> Flash:
    """The generated model's flash: `source` is its msf_model.c."""
    ops, schemes, heads, called = dispatch_sets(model, plan)
    linked = units(ops, schemes, heads, called)
    code = sum(unit_code(u, source, schemes) for u in linked)
    code += sum(SPECIALISED[kind] * len(re.findall(rf"^{kind}\(", source, re.M))
                for kind in SPECIALISED)
    code += EDGE_CODE * len(plan.blocks) + FIXED_CODE
    return Flash(*constant_bytes(source), code, linked)


"""Plan -> C sources: msf_model.h and msf_model.c (docs/design.md, the C API).

Weights are `const` arrays (flash), activations live in one static arena laid out by
arena.py, and the schedule is a table of edges that the runtime's executor runs in order.
Deterministic: the same model and plan give byte-identical sources.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import numerics
from ..errors import MsfError
from ..fusion import schemes
from ..fusion.kernel_counts import specialised
from ..fusion.plan import Plan
from ..model import ir
from ..model.ir import Model
from ..model.limits import check_model
from ..options import parse_section_name
from . import io, kernel_data, specialise
from .arena import ArenaLayout, plan_arena
from .c_text import c_comment, c_string, line_token

OPS = {ir.CONV: "MSF_CONV2D", ir.DEPTHWISE: "MSF_DEPTHWISE", ir.ADD: "MSF_ADD",
       ir.CONCAT: "MSF_CONCAT",
       ir.MAX_POOL: "MSF_MAX_POOL", ir.AVG_POOL: "MSF_AVG_POOL",
       ir.GLOBAL_AVGPOOL: "MSF_GLOBAL_AVGPOOL", ir.DENSE: "MSF_DENSE",
       ir.SOFTMAX: "MSF_SOFTMAX", ir.HARD_SWISH: "MSF_HARD_SWISH",
       ir.LEAKY_RELU: "MSF_LEAKY_RELU", ir.LOGISTIC: "MSF_LOGISTIC", ir.PRELU: "MSF_PRELU",
       ir.MUL: "MSF_MUL", ir.SLICE: "MSF_SLICE", ir.STREAM: "MSF_STREAM", ir.CROP: "MSF_CROP",
       ir.RESIZE_NEAREST: "MSF_RESIZE_NEAREST", ir.TRANSPOSE_CONV: "MSF_TRANSPOSE_CONV"}
EXTERNAL = "MSF_EXTERNAL"
# Single-layer edges the schedule calls itself, whole tensors in and out (never in a block)
CALLED = {ir.STREAM: "msf_stream_rows", ir.CROP: "msf_crop_rows",
          ir.RESIZE_NEAREST: "msf_resize_nearest_s8", ir.TRANSPOSE_CONV: "msf_transpose_conv_s8"}


@dataclass
class Sources:
    header: str
    source: str
    layout: ArenaLayout


def c_array(ctype: str, name: str, values, per_line: int = 24, storage: str = "static const",
            align: bool = False, weights: bool = False) -> str:
    """A C array definition of integers (weights go to flash as const); `align`: on a word
    boundary, for kernels that load it a word at a time; `weights`: one of the arrays
    weight_bytes counts, placed in MSF_WEIGHTS (custom_msf_weights_section)."""
    a = np.asarray(values).reshape(-1)
    flat = list(map(str, a.tolist() if a.dtype.kind in "iu" else [int(v) for v in a]))
    lines = [", ".join(flat[i:i + per_line]) for i in range(0, len(flat), per_line)]
    body = ",\n    ".join(lines) if lines else "0"
    aligned = " __attribute__((aligned(4)))" if align else ""
    placed = " MSF_WEIGHTS" if weights else ""
    return (f"{storage} {ctype} {name}[{max(len(flat), 1)}]{aligned}{placed} = {{\n    {body}"
            "\n};\n")


def c_channels(name: str, records: np.ndarray) -> str:
    """The per-channel records of a conv2d / depthwise / dense layer (msf_channel_t)."""
    rows = [f"    {{{r['bias']}, {r['mult']}, {r['round']}, {r['shift']}, {r['right']}}}"
            for r in records]
    return (f"static const msf_channel_t {name}[{len(rows)}] MSF_WEIGHTS = {{\n" +
            ",\n".join(rows) +
            "\n};\n")


def c_weights(name: str, weights: np.ndarray) -> str:
    """A kernel's weights (int8, or int16 for depthwise), word-aligned."""
    ctype = "int16_t" if weights.dtype == np.int16 else "int8_t"
    return c_array(ctype, name, weights, align=True, weights=True)


def weights_ref(name: str, weights: np.ndarray, offset: int = 0) -> str:
    """msf_layer_t.weights for an array of c_weights, `offset` elements in."""
    at = f"&{name}[{offset}]" if offset else name
    return f"(const int8_t *){at}" if weights.dtype == np.int16 else at


def _check(model: Model) -> None:
    if not model.quantized:
        raise MsfError("the model has no quantized weights (materialize it first)",
                       source=model.source or model.name)
    check_model(model)      # the runtime's field widths (load_model checked them already)


def _layer_params(model: Model, i: int, keep: frozenset = frozenset(), cout: int | None = None,
                  own_weights: bool = True, own_channels: bool = True
                  ) -> tuple[list[str], dict, list]:
    """Constant arrays, the initializer fields of layer i and the specialised kernel shapes it
    uses (if i is in `keep`, kernel_counts.specialised, the choice the cost model prices too;
    cout: of a channel-split group's first cout channels). own_weights / own_channels False:
    its weights / channel records live in its edge's own arrays only (_regrouped_layers), the
    table's pointer is null."""
    layer = model.layers[i]
    rq = numerics.requantization(model, i)
    arrays, f, shapes = [], {}, []
    if isinstance(rq, numerics.ChannelRequant):
        data = kernel_data.layer_data(layer, rq)
        if own_weights:
            arrays.append(c_weights(f"w{i}", data["weights"]))
        if own_channels:
            arrays.append(c_channels(f"ch{i}", data["channels"]))
        f.update(in_offset=rq.input_offset, out_offset=rq.output_offset,
                 weights=weights_ref(f"w{i}", data["weights"]) if own_weights else 0,
                 channels=f"ch{i}" if own_channels else 0, requant=data["requant"],
                 folded=data["folded"], scratch=data["scratch"])
        act = (rq.act_min, rq.act_max)
        if i in keep and layer.op == ir.CONV and kernel_data.conv_fits(layer):
            shapes.append(specialise.conv_shape(layer, data["requant"], act, cout))
        elif i in keep and data["folded"]:
            shapes.append(specialise.depthwise_shape(layer, act, cout))
        if shapes:
            f["column"] = shapes[-1].name
    elif isinstance(rq, numerics.MeanRequant):      # a GAP that requantizes: TFLite MEAN
        arrays.append(c_array("int32_t", f"m{i}", rq.multiplier))
        arrays.append(c_array("int8_t", f"s{i}", rq.shift))
        f.update(in_offset=rq.input_offset, out_offset=rq.output_offset, mult=f"m{i}",
                 shift=f"s{i}")
    elif isinstance(rq, numerics.AddRequant):
        arrays.append(c_array("int32_t", f"m{i}", [rq.output_multiplier]))
        arrays.append(c_array("int8_t", f"s{i}", [rq.output_shift]))
        f.update(in_offset=rq.input1_offset, out_offset=rq.output_offset, mult=f"m{i}",
                 shift=f"s{i}", in2_offset=rq.input2_offset, left_shift=rq.left_shift,
                 in1_mult=rq.input1_multiplier, in1_shift=rq.input1_shift,
                 in2_mult=rq.input2_multiplier, in2_shift=rq.input2_shift)
    elif isinstance(rq, numerics.MulRequant):
        f.update(in_offset=rq.input1_offset, in2_offset=rq.input2_offset,
                 out_offset=rq.output_offset, fn_mult1=rq.multiplier, fn_shift1=rq.shift,
                 broadcast=int(model.broadcasts(i)))
    elif isinstance(rq, numerics.SoftmaxRequant):
        f.update(fn_mult1=rq.multiplier, fn_shift1=rq.left_shift, fn_limit=rq.diff_min)
    elif isinstance(rq, numerics.ActivationRequant):
        f.update(in_offset=rq.input_offset, out_offset=rq.output_offset,
                 fn_mult1=rq.multiplier1, fn_shift1=rq.shift1, fn_mult2=rq.multiplier2,
                 fn_shift2=rq.shift2, fn_limit=rq.limit)
        if layer.op == ir.PRELU:                    # the slopes: C bytes of flash
            arrays.append(c_array("int8_t", f"w{i}", layer.weights.w, weights=True))
            f.update(weights=f"w{i}", in2_offset=rq.alpha_offset,
                     slope_per_pixel=int(layer.slope_per_pixel))
    if layer.op in (ir.SLICE, ir.CROP):
        f.update(begin=layer.begin)
    if layer.op == ir.STREAM:
        f.update(begin=layer.state_rows)
    if layer.op == ir.RESIZE_NEAREST:               # the row and column maps: flash tables
        arrays.append(c_array("uint16_t", f"r{i}", resize_index(layer), weights=True))
        f.update(index=f"r{i}")
    if layer.count_pad:                             # padding taps hold the input's zero point
        f.update(in_offset=-model.tensor_q(model.input_of(i)).zero_point)
    f.update(act_min=rq.act_min, act_max=rq.act_max)
    return arrays, f, shapes


def resize_index(layer) -> np.ndarray:
    """A resize's input row of every output row, then input column of every output column."""
    (h, w, _), (oh, ow, _) = layer.in_shape, layer.out_shape
    return np.concatenate([numerics.nearest_index(h, oh, layer.align_corners, layer.half_pixel),
                           numerics.nearest_index(w, ow, layer.align_corners, layer.half_pixel)])


def weight_bytes(layer) -> int:
    """Flash bytes of a layer's parameters as _layer_params emits them: a conv2d's, depthwise's,
    dense's or transposed conv's weights and channel records in the kernels' layout
    (kernel_data.flash_bytes), a PReLU's slopes, a resize's row and column maps."""
    if layer.op == ir.PRELU:
        (ih, iw, ic) = layer.in_shape
        return ih * iw * ic if layer.slope_per_pixel else ic
    if layer.op == ir.RESIZE_NEAREST:             # uint16 row and column maps
        return 2 * (layer.out_shape[0] + layer.out_shape[1])
    if layer.op in (ir.CONV, ir.TRANSPOSE_CONV, ir.DEPTHWISE, ir.DENSE):
        return kernel_data.flash_bytes(layer)
    return 0


def _layer_struct(model: Model, i: int, f: dict) -> str:
    l = model.layers[i]
    (ih, iw, ic), (oh, ow, oc) = l.in_shape, l.out_shape
    (kh, kw), (sh, sw) = l.kernel, l.stride
    op = "MSF_AVG_POOL_PADDED" if l.count_pad else OPS[l.op]
    fields = {"op": op, "kernel_h": kh, "kernel_w": kw, "stride_h": sh, "stride_w": sw,
              "pad_top": l.pad_top, "pad_left": l.pad_left, "in_h": ih, "in_w": iw, "in_c": ic,
              "out_h": oh, "out_w": ow, "out_c": oc, "input": model.input_of(i),
              "skip": l.skip if l.skip is not None else -1, **f}
    return "    {" + ", ".join(f".{k} = {v}" for k, v in fields.items()) + "},"


def _offset(el, model: Model, t: int) -> str:
    """Tensor t's arena offset during an edge (el: its EdgeLayout), or the caller's buffer."""
    if t == 0 or (model.is_output(t) and not (t == model.n_layers and model.stream_output)):
        return EXTERNAL
    return str(el.resident[t] if t in el.resident else el.offsets[t])


def block_shape(model: Model, e) -> tuple[int, int]:
    """The msf_block_t's n (its spatial layers, run in tiles or rows, or an upsampling layer
    alone; 0: a single head layer)
    and head (the global pooling and dense layers after them, consumed pixel by pixel)."""
    end = e.last
    while end > e.first and model.layers[end].op in ir.HEAD_OPS:
        end -= 1
    if model.layers[e.first].op not in ir.SPATIAL_OPS + ir.UPSAMPLE_OPS:
        return 0, 0
    return end - e.first + 1, e.last - end


def _called(model: Model, e) -> bool:
    """Whether edge e is a single layer whose whole-tensor kernel the schedule calls (CALLED);
    an upsampling layer inside a fusion block runs in its executor, by its column kernel."""
    return not e.fused and model.layers[e.first].op in CALLED


def _executor(e) -> str:
    """The C executor of edge e (library/src/schemes/): its scheme's; a single layer's, the
    H-cache's."""
    return (schemes.get(e.scheme) if e.fused else schemes.h_cache).EXECUTOR


def _edge_struct(model: Model, k: int, e, el) -> tuple[list[str], str, list]:
    """Arrays, the msf_block_t initializer and the specialised kernel shapes of edge k."""
    n, head = block_shape(model, e)
    arrays = []
    fields = {"layers": f"&msf_layers[{e.first}]", "n": n, "head": head,
              "stream": int(model.stream_output and e.last + 1 == model.n_layers),
              "scheme": f"MSF_{_executor(e).upper()}",           # enum msf_scheme
              "first": e.first,
              **({"tile_rows": e.tile_rows} if e.tile_rows > 1 else {}),
              "in_offset": _offset(el, model, model.input_of(e.first)
                                   if _called(model, e) else e.first)}
    out_t = e.last + 1
    fields["out_offset"] = _offset(el, model, out_t)
    # per layer, its two inputs if made before the block input (a skip, a branch's input)
    outer = [t if t is not None and t < e.first else None for l in range(e.first, e.first + n)
             for t in (model.inputs(l) + [None])[:2]]
    if any(t is not None for t in outer):
        vals = [_offset(el, model, t) if t is not None else "0" for t in outer]
        arrays.append(f"static const uint32_t outer{k}[{2 * n}] = {{{', '.join(vals)}}};\n")
        fields["outer_offset"] = f"outer{k}"
    offset = el.scratch_offset
    rings = []
    for b in el.scratch:
        if b["kind"] == "ring":
            rings.append(f"{{{offset}, {b['rows']}, {b['cols']}}}")
        elif b["kind"] == "input":          # a streamed input's ring of rows
            fields["in_offset"] = offset
            fields["in_rows"] = b["rows"]
        elif b["kind"] == "staging":
            fields["staging_offset"] = offset
        else:
            fields["sums_offset"] = offset
        offset += b["bytes"]
    if rings:
        arrays.append(f"static const msf_ring_t ring{k}[{len(rings)}] = {{{', '.join(rings)}}};\n")
        fields["rings"] = f"ring{k}"
    shapes = []
    if _executor(e) in EXECUTOR_FIELDS:
        a, more, shapes = EXECUTOR_FIELDS[_executor(e)](model, k, e)
        arrays += a
        fields.update(more)
    return arrays, "    {" + ", ".join(f".{a} = {v}" for a, v in fields.items()) + "},", shapes


def group_layer(model: Model, i: int, c: int, g: int):
    """Layer i (a channel-split triple's expand or depthwise) over its channels [c, c + g) only,
    and its requantization: a group's kernel data is laid out on its own (pairs of filters,
    groups of four channels, folding: kernel_data.layer_data), whatever g."""
    layer, rq = model.layers[i], numerics.requantization(model, i)
    w = layer.weights
    cut = (lambda a: a[..., c:c + g]) if layer.op == ir.DEPTHWISE else (lambda a: a[c:c + g])
    sliced = replace(layer, out_shape=(*layer.out_shape[:2], g),
                     in_shape=(*layer.in_shape[:2], g) if layer.op == ir.DEPTHWISE
                     else layer.in_shape,
                     weights=replace(w, w=cut(w.w), bias=w.bias[c:c + g]))
    return sliced, replace(rq, multiplier=rq.multiplier[c:c + g], shift=rq.shift[c:c + g])


def _split_groups(model: Model, k: int, e) -> tuple[list[str], dict, list]:
    """Per channel group of the channel-split triple of edge k, its expand, depthwise and
    project layers over the group's channels (channel_split.c): the expand's and the
    depthwise's weights and channel records laid out per group (group_layer), one after the
    other; the project's input channels (OHWI, for the sums kernel) group after group. The
    project adds no bias: the sums' finish does, with the layer's own records."""
    i, g = e.first, e.detail["g"]
    E, D, P = model.layers[i:i + 3]
    n = E.cout // g
    per_group = lambda w: np.concatenate([w[..., j * g:(j + 1) * g] for j in range(n)])
    keep = specialised(model)
    (_, fe, _), (_, fd, _), (_, fp, _) = (_layer_params(model, l, keep, g if l < i + 2 else None)
                                          for l in range(i, i + 3))   # the project: cout
    weights = {"e": [], "d": []}
    records = {"e": [], "d": []}
    inits, shapes, at = [], [], {"we": 0, "wd": 0, "ce": 0, "cd": 0}
    co = P.cout
    for j in range(n):
        fields = []
        for tag, l, f in (("e", i, fe), ("d", i + 1, fd)):
            layer, rq = group_layer(model, l, j * g, g)
            data = kernel_data.layer_data(layer, rq)
            act = (rq.act_min, rq.act_max)
            name = f"{tag}wg{k}"
            more = {"out_c": g, "channels": f"&{tag}chg{k}[{at['c' + tag]}]",
                    "weights": weights_ref(name, data["weights"], at["w" + tag]),
                    "requant": data["requant"], "folded": data["folded"],
                    "scratch": data["scratch"], "column": 0}
            if tag == "d":
                more["in_c"] = g
            if l in keep and layer.op == ir.CONV and kernel_data.conv_fits(layer):
                shapes.append(specialise.conv_shape(layer, data["requant"], act, g))
                more["column"] = shapes[-1].name
            elif l in keep and data["folded"]:
                shapes.append(specialise.depthwise_shape(layer, act))
                more["column"] = shapes[-1].name
            weights[tag].append(data["weights"])
            records[tag].append(data["channels"])
            at["w" + tag] += len(data["weights"])
            at["c" + tag] += len(data["channels"])
            fields.append(_layer_struct(model, l, {**f, **more}))
        inits += [*fields, _layer_struct(model, i + 2, {**fp, "in_c": g, "channels": 0,
                                                        "weights": f"&pwg{k}[{j * co * g}]"})]
    arrays = [c_array("int8_t", f"pwg{k}", per_group(P.weights.w), weights=True)]
    for tag in ("e", "d"):
        arrays.append(c_weights(f"{tag}wg{k}", np.concatenate(weights[tag])))
        arrays.append(c_channels(f"{tag}chg{k}", np.concatenate(records[tag])))
    arrays.append("\n".join([f"static const msf_layer_t groups{k}[{3 * n}] = {{", *inits, "};",
                             ""]))
    return arrays, {"groups": f"groups{k}"}, shapes


# executors whose blocks need more than msf_block_t's common fields: their arrays, fields and
# specialised kernel shapes
EXECUTOR_FIELDS = {"channel_split": _split_groups}


def _regrouped_layers(plan: Plan) -> dict[int, bool]:
    """Layers whose weights only their edge's per-group arrays hold (a channel-split triple's
    three: ewg/dwg/pwg), each with whether the layer table keeps its channel records: the
    project's (the sums' finish reads them); the expand's and depthwise's are in echg/dchg
    only. No second copy in flash (it doubled the weights', then added 16 B a channel)."""
    return {l: l == e.first + 2 for e in plan.blocks if _executor(e) == "channel_split"
            for l in (e.first, e.first + 1, e.first + 2)}


def generate(model: Model, plan: Plan, measure: bool = False,
             stack_bytes: int | None = None, weights_section: str | None = None) -> Sources:
    """measure: the header itself turns arena painting on (firmware builds that measure; host
    builds pass -DMSF_MEASURE_ARENA instead). stack_bytes: the plan's predicted stack on the
    board built for (codegen/stack.py), MSF_MODEL_STACK_PREDICTED in the header.
    weights_section: the linker section of the weight arrays (custom_msf_weights_section,
    checked by options.parse_section_name), else they stay in .rodata."""
    _check(model)
    if not plan.feasible:
        raise MsfError(f"plan is infeasible: {plan.reason}", source=model.source or model.name)
    layout = plan_arena(model, plan)
    outs = model.output_tensors
    if len(outs) > 1 and model.stream_output:
        raise MsfError("a streamed output with several graph outputs is not supported",
                       source=model.source or model.name)
    arrays, layer_inits, shapes = [], [], []
    regrouped = _regrouped_layers(plan)
    keep = specialised(model)
    columns = set()                 # the layers whose msf_layer_t.column is a specialised kernel
    for i in range(model.n_layers):
        a, f, sh = _layer_params(model, i, keep, own_weights=i not in regrouped,
                                 own_channels=regrouped.get(i, True))
        arrays += a
        shapes += sh
        layer_inits.append(_layer_struct(model, i, f))
        if f.get("column"):
            columns.add(i)
    edge_arrays, edge_inits, steps = [], [], []
    for k, (e, el) in enumerate(zip(plan.blocks, layout.edges)):
        a, init, sh = _edge_struct(model, k, e, el)
        shapes += sh
        edge_arrays += a
        edge_inits.append(init)
        for mv in el.moves:
            steps.append(f"    memmove(msf_arena + {mv.dst}, msf_arena + {mv.src}, {mv.bytes});")
        steps.append(f"    MSF_EDGE_BEGIN({k});")
        j = outs.index(e.last + 1) if e.last + 1 in outs else len(outs) - 1
        if _called(model, e):
            steps.append(_whole_op(model, e.first, el, f"outputs[{j}]"))
        else:
            steps.append(f"    msf_run_edge(&msf_edges[{k}], msf_arena, input, outputs[{j}], "
                         "sink, source);")
        steps.append("    MSF_EDGE_DONE(" + str(k) + ");")
    # the end of a streaming model's run: each ring keeps its last rows for the next
    steps += [f"    msf_stream_keep(&msf_layers[{l}], msf_arena + {offset});"
              for l, offset in layout.state_offsets(model).items()]
    header = _header(model, plan, layout, measure, stack_bytes)
    source = "\n".join([
        "/* Generated by msf-pio from model " + c_comment(model.name) + ", plan " +
        c_comment(plan.label) +
        " (" + plan.cost_model + " cost model). Do not edit. */",
        '#include "msf_model.h"',
        '#include "msf/requant.h"',
        '#include "msf/dispatch.h"',
        '#include "msf/kernels.h"',
        '#include "msf/runtime.h"',
        "",
        *_dispatch(model, plan, columns),
        "MSF_KERNEL_SPEED   /* the specialised kernels at -O3 in a firmware built for size */",
        _weights_attribute(weights_section),
        "",
        *specialise.definitions(shapes),
        f"static int8_t msf_arena[{max(layout.size, 1)}] __attribute__((aligned(4)));",
        "",
        _measurement(model, plan, layout),
        *arrays,
        f"static const msf_layer_t msf_layers[{model.n_layers}] = {{",
        *layer_inits,
        "};",
        "",
        *edge_arrays,
        f"static const msf_block_t msf_edges[{len(plan.blocks)}] = {{",
        *edge_inits,
        "};",
        "",
        _info(model, plan, layout),
        *_reset(model, layout),
        "int8_t *msf_model_arena(void)",
        "{",
        "    return msf_arena;",
        "}",
        "",
        *_entry_points(model, steps),
        *io.source_lines(model),
        "#ifdef MSF_MEASURE_ARENA",
        *(["static void msf_discard(int32_t row, int32_t col, const int8_t *pixel,",
           "                        int32_t channels, void *ctx)",
           "{",
           "    (void)row, (void)col, (void)pixel, (void)channels, (void)ctx;",
           "}", ""] if model.stream_output else []),
        "uint32_t msf_model_measure_arena(const int8_t *input, int8_t *output)",
        "{",
        "    uint32_t high_water = 0;",
        *(["    const msf_sink_t sink = {msf_discard, 0};",
           "    const msf_source_t source = " + _source_init(model) + ";",
           "    int8_t *const none[1] = {0};"]
          if model.stream_output else []),
        "    memset(msf_written, 0, sizeof msf_written);",
        "    for (msf_pass = 0; msf_pass < 2; msf_pass++) {",
        # both passes from one state, so that they write the same bytes (measure.c)
        *(["        msf_model_reset();"] if model.state_bytes() else []),
        ("        msf_model_execute(" + ("0" if model.stream_input else "input") +
         ", none, &sink, &source);" if model.stream_output else
         "        msf_model_run(input, output);"),
        "    }",
        "    msf_pass = -1;",
        *(["    (void)output;"] if model.stream_output else []),
        "    for (uint32_t k = 0; k < MSF_MODEL_EDGES; k++) {",
        "        uint32_t used = msf_live_bytes[k] + msf_written[k];",
        "        high_water = used > high_water ? used : high_water;",
        "    }",
        "    return high_water;",
        "}",
        "#endif",
        "",
    ])
    return Sources(header, source, layout)


def _weights_attribute(section: str | None) -> str:
    """MSF_WEIGHTS, on every array weight_bytes counts: a named section where the user's
    linker script maps memory that holds them (external flash), else nothing (.rodata)."""
    if section is None:
        return "#define MSF_WEIGHTS"
    parse_section_name(section)             # never text from a model file; checked again
    return (f'#define MSF_WEIGHTS __attribute__((section("{section}")))'
            "   /* custom_msf_weights_section */")


def dispatch_sets(model: Model, plan: Plan) -> tuple[set, set, set, set]:
    """What the plan runs, by how the C reaches it: the ops of the layers its edges run column
    by column (ir ops; "avg_pool_padded" for an average pool counting padded taps), their
    executors (schemes' EXECUTOR names), the ops of its single head layers, and the ops of the
    whole-tensor layers the schedule calls itself."""
    ops, executors, heads, called = set(), set(), set(), set()
    for e in plan.blocks:
        first = model.layers[e.first]
        if _called(model, e):
            called.add(first.op)
            continue
        n, _ = block_shape(model, e)
        if n == 0:
            heads.add(first.op)
            continue
        executors.add(_executor(e))
        for l in range(e.first, e.first + n):
            layer = model.layers[l]
            ops.add("avg_pool_padded" if layer.count_pad else layer.op)
    return ops, executors, heads, called


def _dispatch(model: Model, plan: Plan, columns: set) -> list[str]:
    """The runtime's dispatches (msf/dispatch.h) over the ops, schemes and single head layers
    this plan runs, so that the firmware links no other kernel or executor (compiled before
    MSF_KERNEL_SPEED: at the firmware's own optimisation level, as the runtime's). `columns`:
    the layers with a specialised kernel; a conv2d or depthwise layer without one needs the
    kernel for any shape (MSF_CONV2D_ANY, MSF_DEPTHWISE_ANY), else it is not linked."""
    ops, executors, heads, _ = dispatch_sets(model, plan)
    ops |= {f"{op}_any" for op in (ir.CONV, ir.DEPTHWISE) if op in ops and any(
        layer.op == op and i not in columns for i, layer in enumerate(model.layers))}

    def bits(names) -> str:
        return " | ".join(f"MSF_BIT({n})" for n in sorted(names)) or "0"

    named = {"avg_pool_padded": "MSF_AVG_POOL_PADDED", f"{ir.CONV}_any": "MSF_CONV2D_ANY",
             f"{ir.DEPTHWISE}_any": "MSF_DEPTHWISE_ANY"}
    column_ops = {named.get(op) or OPS[op] for op in ops}
    return ["/* The runtime's dispatches over this plan's ops and executors only (msf/dispatch.h):",
            " * the firmware links no other kernel */",
            "void msf_layer_column(const msf_layer_t *l, const msf_view_t *in, "
            "const msf_view_t *in2,",
            "                      const msf_view_t *out, int32_t col, int32_t r0, int32_t r1)",
            "{",
            f"    msf_layer_column_of({bits(column_ops)}, l, in, in2, out, col, r0, r1);",
            "}", "",
            "void msf_run_edge(const msf_block_t *b, int8_t *arena, const int8_t *input, "
            "int8_t *output,",
            "                  const msf_sink_t *sink, const msf_source_t *source)",
            "{",
            f"    msf_run_edge_of({bits(f'MSF_{x.upper()}' for x in executors)}, "
            f"{bits(OPS[op] for op in heads)}, b, arena, input, output, sink, source);",
            "}", ""]


def _source_init(model: Model) -> str:
    """The msf_source_t that reads a streamed input's rows from the caller's buffer `input`."""
    return "{msf_copy_row, (void *)(uintptr_t)input}" if model.stream_input else "{0, 0}"


def _entry_points(model: Model, steps: list[str]) -> list[str]:
    """msf_model_execute (the schedule), msf_model_run on whole buffers, and for a streamed
    output msf_model_run_stream (pixels to a sink), for a streamed input msf_model_run_streamed
    (rows from a source, and pixels to a sink if the output is streamed too). msf_model_run
    serves streamed tensors from and into the caller's buffers."""
    si, so = model.stream_input, model.stream_output
    _, w, c = model.input_shape
    ow = model.output_shape[1]
    sink_fn = ("void (*fn)(int32_t row, int32_t col, const int8_t *pixel, int32_t channels, "
               "void *ctx)")
    offsets = np.cumsum([0] + [model.tensor_bytes(t) for t in model.output_tensors])
    n_out = len(model.output_tensors)
    packed = "{" + ", ".join(f"output + {o}" if o else "output" for o in offsets[:-1]) + "}"
    none = "{" + ", ".join(["0"] * n_out) + "}"
    first_run = ["    if (!msf_state_ready) {", "        msf_model_reset();", "    }"] \
        if model.state_bytes() else []
    if not any("msf_run_edge" in step for step in steps):   # whole-tensor layers only
        first_run.append("    (void)sink, (void)source;")
    out = ["static int msf_model_execute(const int8_t *input, int8_t *const *outputs,",
           "                             const msf_sink_t *sink, const msf_source_t *source)",
           "{", *first_run, *steps, "    return 0;", "}", ""]
    if si:
        out += ["static void msf_copy_row(int32_t row, int8_t *dst, void *ctx)", "{",
                f"    memcpy(dst, (const int8_t *)ctx + row * {w * c}, {w * c});", "}", ""]
    if so:
        out += ["static void msf_collect(int32_t row, int32_t col, const int8_t *pixel, "
                "int32_t channels,", "                        void *ctx)", "{",
                f"    memcpy((int8_t *)ctx + (row * {ow} + col) * channels, pixel, "
                "(size_t)channels);", "}", ""]
    sink = "{msf_collect, output}" if so else "{0, 0}"
    out += ["int msf_model_run(const int8_t *input, int8_t *output)", "{",
            f"    const msf_sink_t sink = {sink};",
            f"    const msf_source_t source = {_source_init(model)};",
            f"    int8_t *const outputs[{n_out}] = {none if so else packed};",
            f"    return msf_model_execute({'0' if si else 'input'}, outputs, &sink, &source);",
            "}", "",
            "int msf_model_run_outputs(const int8_t *input, int8_t *const *outputs)", "{",
            f"    const msf_sink_t sink = {sink if not so else '{0, 0}'};",
            f"    const msf_source_t source = {_source_init(model)};",
            f"    return msf_model_execute({'0' if si else 'input'}, outputs, &sink, &source);",
            "}", ""]
    if so and not si:
        out += ["int msf_model_run_stream(const int8_t *input,", f"    {sink_fn},", "    void *ctx)",
                "{", "    const msf_sink_t sink = {fn, ctx};",
                "    const msf_source_t source = {0, 0};",
                f"    int8_t *const outputs[{n_out}] = {none};",
                "    return msf_model_execute(input, outputs, &sink, &source);", "}", ""]
    if si:
        row_fn = "void (*row_fn)(int32_t row, int8_t *dst, void *row_ctx), void *row_ctx"
        tail = f"    {sink_fn},\n    void *ctx)" if so else "    int8_t *output)"
        out += [f"int msf_model_run_streamed({row_fn},", tail, "{",
                "    const msf_sink_t sink = " + ("{fn, ctx}" if so else "{0, 0}") + ";",
                "    const msf_source_t source = {row_fn, row_ctx};",
                f"    int8_t *const outputs[{n_out}] = {none if so else packed};",
                "    return msf_model_execute(0, outputs, &sink, &source);",
                "}", ""]
    return out


def _whole_op(model: Model, i: int, el, output: str) -> str:
    """The call of a whole-tensor layer (stream, crop, upsampling), which the schedule makes
    itself: its input and output in the arena (a stream layer's: in the state region) or the
    caller's buffers; a streamed output's upsampling layer hands its pixels to the sink."""
    def where(t: int, external: str) -> str:
        offset = _offset(el, model, t)
        return external if offset == EXTERNAL else f"msf_arena + {offset}"

    args = [f"&msf_layers[{i}]", where(model.input_of(i), "input"), where(i + 1, output)]
    if model.layers[i].op in ir.UPSAMPLE_OPS:      # a streamed output: pixels to the sink
        args.append("sink" if model.stream_output and i + 1 == model.n_layers else "0")
    return f"    {CALLED[model.layers[i].op]}({', '.join(args)});"


def _reset(model: Model, layout: ArenaLayout) -> list[str]:
    """A streaming model's msf_model_reset: its state region back to the file's initial
    values (the first run does it; TFLite's CALL_ONCE of the initial-state subgraph)."""
    if not model.state_bytes():
        return []
    offsets = layout.state_offsets(model)
    init = np.concatenate([model.layers[l].state_init.reshape(-1) for l in offsets])
    starts = np.cumsum([0] + [model.layers[l].state_init.size for l in offsets])
    return [c_array("int8_t", "msf_state_init", init).rstrip("\n"),
            "static int msf_state_ready;", "",
            "void msf_model_reset(void)", "{",
            *[f"    memcpy(msf_arena + {offset}, msf_state_init + {start}, {n});"
              for offset, start, n in zip(offsets.values(), starts, np.diff(starts))],
            "    msf_state_ready = 1;", "}", ""]


def _measurement(model: Model, plan: Plan, layout: ArenaLayout) -> str:
    """MSF_MEASURE_ARENA builds: per edge, the buffers it reads (painting spares them) and
    msf_model_measure_arena(), which runs the model twice and returns the arena high-water.
    MSF_PROFILE_EDGES builds: msf_profile_edge() around every edge."""
    spans, first = [], [0]
    live_bytes = []
    for e, el in zip(plan.blocks, layout.edges):
        live = sorted((off, model.tensor_bytes(t)) for t, off in el.offsets.items()
                      if t <= e.first)
        if model.state_bytes():             # the state: alive across every edge and run
            live.append((layout.state_offset, model.state_bytes()))
        spans += [f"{{{off}, {n}}}" for off, n in live]
        first.append(len(spans))
        live_bytes.append(sum(n for _, n in live))
    size, edges = max(layout.size, 1), len(plan.blocks)
    return f"""#ifdef MSF_PROFILE_EDGES      /* the firmware times every edge (msf/runtime.h) */
#define MSF_PROFILE(k, done) msf_profile_edge(k, done)
#else
#define MSF_PROFILE(k, done) ((void)0)
#endif
#ifdef MSF_MEASURE_ARENA
static const msf_span_t msf_live[{max(len(spans), 1)}] = {{{", ".join(spans) or "{0, 0}"}}};
static const uint16_t msf_live_first[{edges + 1}] = {{{", ".join(map(str, first))}}};
static const uint32_t msf_live_bytes[{edges}] = {{{", ".join(map(str, live_bytes))}}};
static uint32_t msf_written[{edges}];
static int msf_pass = -1;              /* -1: a plain run, no painting */
#define MSF_LIVE(k) &msf_live[msf_live_first[k]], (uint32_t)(msf_live_first[k + 1] - msf_live_first[k])
#define MSF_EDGE_BEGIN(k) do {{ \\
    if (msf_pass >= 0) msf_paint_free(msf_arena, {size}u, MSF_LIVE(k), msf_pass ? 0xAA : 0x55); \\
    else MSF_PROFILE(k, 0); }} while (0)         /* painting runs are not timed */
#define MSF_EDGE_DONE(k) do {{ \\
    if (msf_pass < 0) MSF_PROFILE(k, 1); \\
    else msf_written[k] += msf_count_written(msf_arena, {size}u, MSF_LIVE(k), \\
                                             msf_pass ? 0xAA : 0x55, msf_pass); \\
    }} while (0)
#else
#define MSF_EDGE_BEGIN(k) MSF_PROFILE(k, 0)
#define MSF_EDGE_DONE(k) MSF_PROFILE(k, 1)
#endif
"""


def _info(model: Model, plan: Plan, layout: ArenaLayout) -> str:
    h, w, c = model.input_shape
    oh, ow, oc = model.output_shape
    return (
        "const msf_model_info_t msf_model_info = {\n"
        f"    .name = {c_string(line_token(model.name))},\n"
        f"    .plan = {c_string(line_token(plan.label))},\n"
        f"    .cost_model = {c_string(plan.cost_model)},\n"
        f"    .arena_bytes = {layout.size},\n"
        f"    .peak_ram_predicted = {plan.peak_ram},\n"
        f"    .input_bytes = {h * w * c},\n"
        f"    .output_bytes = {model.output_bytes()},\n"
        f"    .macs = {plan.macs}u,\n"
        f"    .unfused_macs = {plan.unfused_macs}u,\n"
        f"    .edges = {len(plan.blocks)},\n"
        "};\n")


MEASURE_ON = """
#ifndef MSF_MEASURE_ARENA
#define MSF_MEASURE_ARENA 1   /* this build measures: arena painting compiled in */
#endif
"""


def _header(model: Model, plan: Plan, layout: ArenaLayout, measure: bool,
            stack_bytes: int | None) -> str:
    h, w, c = model.input_shape
    oh, ow, oc = model.output_shape
    qi, qo = model.q_input, model.tensor_q(model.n_layers)
    return f"""/* Generated by msf-pio: model {c_comment(model.name)}, plan {c_comment(plan.label)}.
 * Do not edit. */
#ifndef MSF_MODEL_H
#define MSF_MODEL_H

#include <stdint.h>
{MEASURE_ON if measure else ""}
#ifdef __cplusplus
extern "C" {{
#endif

#define MSF_MODEL_INPUT_H {h}
#define MSF_MODEL_INPUT_W {w}
#define MSF_MODEL_INPUT_C {c}
#define MSF_MODEL_INPUT_BYTES {h * w * c}
#define MSF_MODEL_INPUT_SCALE {float(np.float32(qi.scale))!r}f
#define MSF_MODEL_INPUT_ZERO_POINT {qi.zero_point}
#define MSF_MODEL_OUTPUT_H {oh}
#define MSF_MODEL_OUTPUT_W {ow}
#define MSF_MODEL_OUTPUT_C {oc}
#define MSF_MODEL_OUTPUT_BYTES {model.output_bytes()}
#define MSF_MODEL_OUTPUTS {len(model.output_tensors)}
#define MSF_MODEL_OUTPUT_SCALE {float(np.float32(qo.scale))!r}f
#define MSF_MODEL_OUTPUT_ZERO_POINT {qo.zero_point}
#define MSF_MODEL_ARENA_BYTES {max(layout.size, 1)}
#define MSF_MODEL_EDGES {len(plan.blocks)}
#define MSF_MODEL_STATE_BYTES {model.state_bytes()}
{f"#define MSF_MODEL_STACK_PREDICTED {stack_bytes}  /* bytes, the board's firmware */" + chr(10)
 if stack_bytes else ""}
/* What the plan predicts (exact cost model): workspace = the arena; the input and output
 * are the caller's buffers. */
typedef struct {{
    const char *name;
    const char *plan;
    const char *cost_model;
    uint32_t arena_bytes;
    uint32_t peak_ram_predicted;
    uint32_t input_bytes;
    uint32_t output_bytes;
    uint64_t macs;
    uint64_t unfused_macs;
    uint32_t edges;
}} msf_model_info_t;

extern const msf_model_info_t msf_model_info;

/* Runs the model: input HWC int8 (MSF_MODEL_INPUT_BYTES), output int8 (MSF_MODEL_OUTPUT_BYTES).
 * Not reentrant (one static arena). Returns 0. */
int msf_model_run(const int8_t *input, int8_t *output);

/* The same with one buffer per graph output (MSF_MODEL_OUTPUTS of them, in the model file's
 * order; msf_model_run packs them one after another). */
int msf_model_run_outputs(const int8_t *input, int8_t *const *outputs);

{chr(10).join(io.header_lines(model))}
#define MSF_MODEL_STREAM_INPUT {int(model.stream_input)}
#define MSF_MODEL_STREAM_OUTPUT {int(model.stream_output)}
#if MSF_MODEL_STREAM_INPUT && MSF_MODEL_STREAM_OUTPUT
/* Runs the model pulling the input row by row: row_fn writes input row `row` (MSF_MODEL_INPUT_W
 * x MSF_MODEL_INPUT_C values) to dst, asked once per row, in order; every output pixel goes to
 * fn. Neither the input nor the output is ever whole in RAM (the arena keeps a few rows). */
int msf_model_run_streamed(void (*row_fn)(int32_t row, int8_t *dst, void *row_ctx), void *row_ctx,
                           void (*fn)(int32_t row, int32_t col, const int8_t *pixel,
                                      int32_t channels, void *ctx),
                           void *ctx);
#elif MSF_MODEL_STREAM_INPUT
/* Runs the model pulling the input row by row: row_fn writes input row `row` (MSF_MODEL_INPUT_W
 * x MSF_MODEL_INPUT_C values) to dst, asked once per row, in order; the arena keeps the rows
 * the first edge still reads. output: int8 (MSF_MODEL_OUTPUT_BYTES). */
int msf_model_run_streamed(void (*row_fn)(int32_t row, int8_t *dst, void *row_ctx), void *row_ctx,
                           int8_t *output);
#elif MSF_MODEL_STREAM_OUTPUT
/* Runs the model handing every output pixel (row, col, MSF_MODEL_OUTPUT_C values) to fn: the
 * whole output never exists in RAM; the arena stages one pixel. */
int msf_model_run_stream(const int8_t *input,
                         void (*fn)(int32_t row, int32_t col, const int8_t *pixel,
                                    int32_t channels, void *ctx),
                         void *ctx);
#endif

#if MSF_MODEL_STATE_BYTES
/* A streaming model: each run takes the next frame, the state of the past frames kept in the
 * arena (MSF_MODEL_STATE_BYTES of it, counted in arena_bytes). Resets that state to the model
 * file's initial values, as before the first run (which resets it itself). */
void msf_model_reset(void);
#endif

/* The arena, for RAM measurements. */
int8_t *msf_model_arena(void);

#ifdef MSF_MEASURE_ARENA
/* Runs the model twice, painting the arena around every edge; returns the arena high-water:
 * the most bytes any edge reads or writes (a streamed output is discarded: output unused; a
 * streaming model runs its first frame twice, and the next run continues from it). */
uint32_t msf_model_measure_arena(const int8_t *input, int8_t *output);
#endif

#ifdef __cplusplus
}}
#endif
#endif /* MSF_MODEL_H */
"""

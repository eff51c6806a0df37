"""The exact cost model against independent counts: explicit loops over pixels, taps and tiles."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msf_pio.fusion import blocks, geometry
from msf_pio.fusion import exact_cost as ec
from msf_pio.fusion.schemes.tiles import TILE_ROWS
from msf_pio.fusion.graph import build_graph
from msf_pio.model import ir, load_model
from msf_pio.model.spec import spec_to_model
from msf_pio.numerics import nearest_index
from tests.random_models import small_specs


def valid_rows(layer, out_row):
    """Input rows a window layer's output row reads (padding rows dropped)."""
    start = out_row * layer.stride_h - layer.pad_top
    return {r for r in range(start, start + layer.kernel_h) if 0 <= r < layer.in_shape[0]}


def read_rows(layer, out_row):
    """Input rows any layer's output row reads (one input), tap by tap: a window's valid rows,
    the input rows whose transposed-conv taps land on it, a resize's nearest row."""
    if layer.has_window:
        return valid_rows(layer, out_row)
    if layer.op == ir.TRANSPOSE_CONV:
        k, s, pad = layer.window(0)
        return {i for i in range(layer.in_shape[0]) if 0 <= out_row + pad - i * s < k}
    if layer.op == ir.RESIZE_NEAREST:
        return {int(nearest_index(layer.in_shape[0], layer.out_shape[0], layer.align_corners,
                                  layer.half_pixel)[out_row])}
    return {out_row}


def valid_cols(layer, out_col):
    start = out_col * layer.stride_w - layer.pad_left
    return {c for c in range(start, start + layer.kernel_w) if 0 <= c < layer.in_shape[1]}


def assert_layer_pixels(model, e, computed):
    """The cost model's pixels per layer of edge e (what benchmarks weigh time by) equal what
    the reference computed: computed maps (layer, row, column) -> times (or channel parts)."""
    end = max(l for l, _, _ in computed)
    counted = {l: 1 for l in range(end + 1, e.last + 1)}     # a head layer runs once, 1x1
    for (l, _, _), n in computed.items():
        counted[l] = counted.get(l, 0) + n
    assert ec.edge_layer_pixels(model, e) == counted


def pixel_macs(layer, row, col):
    """MACs of one output pixel (all channels), counted tap by tap."""
    if layer.op in ir.WINDOW_OPS:
        taps = len(valid_rows(layer, row)) * len(valid_cols(layer, col))
        return taps * (layer.cin * layer.cout if layer.op == ir.CONV else layer.cout)
    if layer.op == ir.GLOBAL_AVGPOOL:
        h, w, c = layer.in_shape
        return h * w * c
    if layer.op == ir.DENSE:
        h, w, c = layer.in_shape
        return h * w * c * layer.cout
    if layer.op == ir.TRANSPOSE_CONV:     # input pixels whose taps land on (row, col)
        lands = [sum(0 <= pos + layer.pad[a] - i * layer.stride[a] < layer.kernel[a]
                     for i in range(layer.in_shape[a])) for a, pos in ((0, row), (1, col))]
        return lands[0] * lands[1] * layer.cin * layer.cout
    return 0


def brute_layer_macs(layer):
    h, w, _ = layer.out_shape
    return sum(pixel_macs(layer, r, c) for r in range(h) for c in range(w))


def brute_block(model, first, end, tile_rows=1):
    """MACs and ring rows of the block first..end (spatial), tile by tile with row sets, and
    the rows the input ring of a depthwise written over it would hold (its tile's rows and, up
    from the first output row r0, rows r0 s - p on: the output's delay).

    A tensor provides a contiguous run of rows per tile and of columns per sweep (the hull of
    what its consumers read; only a window with stride > kernel leaves gaps in it)."""
    layers, macs, rows_max, delayed = model.layers, 0, {}, {}
    cols = {end + 1: set(range(layers[end].out_shape[1]))}
    for l in range(end, first - 1, -1):
        layer = layers[l]
        ins = set().union(*(valid_cols(layer, c) for c in cols[l + 1])) if layer.has_window \
            else cols[l + 1]
        for t in model.inputs(l):
            if t >= first:
                cols[t] = set(range(max(cols.get(t, set()) | ins) + 1))
    height = layers[end].out_shape[0]
    for y in range(0, height, tile_rows):
        need = {end + 1: set(range(y, min(y + tile_rows, height)))}
        for l in range(end, first - 1, -1):
            layer = layers[l]
            rows = need[l + 1]
            macs += sum(pixel_macs(layer, r, c) for r in rows for c in cols[l + 1])
            ins = set().union(*(valid_rows(layer, r) for r in rows)) if layer.has_window else rows
            for t in model.inputs(l):
                if t >= first:
                    rows_t = need.get(t, set()) | ins
                    need[t] = set(range(min(rows_t), max(rows_t) + 1))
        for t in range(first + 1, end + 1):
            rows_max[t] = max(rows_max.get(t, 0), len(need[t]))
            layer = layers[t]
            if layer.op == ir.DEPTHWISE:
                held = need[t] | {min(need[t + 1]) * layer.stride_h - layer.pad_top}
                delayed[t] = max(delayed.get(t, 0), max(held) - min(held) + 1)
    return macs, rows_max, delayed


def brute_line_buffer(model, first, end):
    """MACs of the block first..end as a line buffer: every layer computes, once and over the
    whole width, its output rows up to the last row a consumer reads."""
    layers, macs = model.layers, 0
    last_row = {end + 1: layers[end].out_shape[0] - 1}
    for l in range(end, first - 1, -1):
        layer = layers[l]
        rows = range(last_row[l + 1] + 1)
        macs += sum(pixel_macs(layer, r, c) for r in rows for c in range(layer.out_shape[1]))
        reads = max(set().union(*(read_rows(layer, r) for r in rows)), default=-1)
        for t in model.inputs(l):
            if t > first:
                last_row[t] = max(last_row.get(t, -1), reads)
    return macs


def check_model(model):
    graph = build_graph(model, "exact")
    assert graph.unfused_macs == sum(brute_layer_macs(l) for l in model.layers)
    for e in graph.edges:
        if not e.fused:
            assert e.macs == brute_layer_macs(model.layers[e.first])
            continue
        end = e.last
        while model.layers[end].op in ir.HEAD_OPS:
            end -= 1
        head = sum(brute_layer_macs(model.layers[l]) for l in range(end + 1, e.last + 1))
        rings = {b["tensor"]: b for b in e.detail["scratch"] if b["kind"] == "ring"}
        if e.scheme == "line-buffer":          # ring rows: tests/test_line_buffer.py
            assert e.macs == brute_line_buffer(model, e.first, end) + head
            assert e.macs <= sum(brute_layer_macs(model.layers[l])
                                 for l in range(e.first, e.last + 1))      # F <= 1
            for t, b in rings.items():
                assert b["cols"] == model.tensor_shape(t)[1]
                assert b["bytes"] == b["rows"] * model.tensor_bytes(t) // model.tensor_shape(t)[0]
            continue
        if e.scheme == "channel-split":   # the tiles' MACs and rows (buffers: test_channel_split)
            macs, rows, _ = brute_block(model, e.first, end, e.tile_rows)
            assert e.macs == macs and {t: b["rows"] for t, b in rings.items()} == rows
            continue
        assert e.scheme in ("h-cache", "tiles") and (e.tile_rows == 1) == (e.scheme == "h-cache")
        macs, rows, delayed = brute_block(model, e.first, end, e.tile_rows)
        assert e.macs == macs + head
        for t, b in rings.items():
            if b["rows"] == 0:        # a depthwise output over its input's ring (reuse.py)
                assert model.layers[t - 1].op == ir.DEPTHWISE and b["bytes"] == 0
                rows = {**rows, t: 0, t - 1: delayed[t - 1]}
        assert {t: b["rows"] for t, b in rings.items()} == rows
        staging = [b for b in e.detail["scratch"] if b["kind"] == "staging"]
        assert all(b["bytes"] == e.tile_rows * model.layers[end].cout for b in staging)


def test_every_block_has_every_scheme():
    """Every fusion block of two or more spatial layers is an H-cache edge, a line-buffer edge
    and a tiles edge per tile height (capped at the block's output height); an inverted-residual
    triple also a channel-split edge per tile height and group."""
    model = load_model("mcunet-vww-5fps")
    graph = build_graph(model, "exact")
    blocks, split = {}, {}
    for e in graph.edges:
        if e.scheme == "channel-split":
            split.setdefault((e.first, e.last), set()).add((e.detail["g"], e.tile_rows))
            continue
        blocks.setdefault((e.first, e.last), set()).add((e.scheme, e.tile_rows))
    triples = [i for i in range(model.n_layers - 2)
               if [l.op for l in model.layers[i:i + 3]] == [ir.CONV, ir.DEPTHWISE, ir.CONV] and
               model.layers[i].kernel == model.layers[i + 2].kernel == (1, 1)]
    groups = lambda i: [g for g in (8, 16, 24, 32, 48)
                        if model.layers[i].cout % g == 0 < model.layers[i].cout - g]
    assert set(split) == {(i, i + 2) for i in triples if groups(i)}
    for (first, last), options in split.items():
        height = model.layers[last].out_shape[0]
        assert options == {(g, min(t, height)) for g in groups(first) for t in (1, *TILE_ROWS)}
    for (first, last), schemes in blocks.items():
        end = max((l for l in range(first, last + 1) if model.layers[l].op in ir.SPATIAL_OPS),
                  default=first)
        spatial = end - first + 1
        tiles = {("tiles", min(t, model.layers[end].out_shape[0])) for t in TILE_ROWS} - \
            {("tiles", 1)}
        assert schemes == ({("single", 1)} if first == last else
                           {("h-cache", 1), ("line-buffer", 1)} | tiles if spatial > 1
                           else {("h-cache", 1)})
    only = build_graph(model, "exact", schemes=("h-cache",))
    assert {e.scheme for e in only.edges} == {"single", "h-cache"}
    assert {e.scheme for e in build_graph(model, "exact", schemes=("tiles",)).edges} == \
        {"single", "tiles"}


def test_tiny_model_counts():
    check_model(load_model("tiny"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(max_layers=9))
def test_random_models_counts(spec):
    check_model(spec_to_model(spec))


def test_residual_tensors_stay_alive_and_adds_write_in_place():
    model = load_model("mbv2-w0.35-r144")
    graph = build_graph(model, "exact")
    single = {e.first: e for e in graph.edges if not e.fused}
    # vanilla peak: block 2's stride-2 depthwise reads 72x72x48 and writes 36x36x48
    dw = next(i for i, l in enumerate(model.layers) if l.name == "ir2.dw")
    assert single[dw].ram == 72 * 72 * 48 + 36 * 36 * 48
    assert max(e.ram for e in single.values()) == single[dw].ram
    # block 3 (36x36, 8 -> 8, expand 6) keeps its 36x36x8 input alive until its add
    dw = next(i for i, l in enumerate(model.layers) if l.name == "ir3.dw")
    assert single[dw].ram == 2 * 36 * 36 * 48 + 36 * 36 * 8
    add = next(i for i, l in enumerate(model.layers) if l.name == "ir3.add")
    assert single[add].ram == 2 * 36 * 36 * 8 and single[add].detail["in_place"]


@pytest.mark.parametrize("name", ["mcunet-vww-5fps", "mlperf-tiny-ic"])
def test_blocks_never_cut_a_residual_inside(name):
    """A block may not end between a tensor it makes and a later layer that reads it (a skip
    and its add, a stage input and its shortcut conv)."""
    model = load_model(name)
    last_reader = model.last_reader()
    for e in build_graph(model, "exact").edges:
        for t in range(e.first + 1, e.last + 1):
            assert last_reader[t] <= e.last


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(max_layers=10), data=st.data())
def test_a_wider_window_answers_a_narrower_one(spec, data):
    """geometry keeps a model's sweeps and schedules per block end, the widest window asked
    answering every narrower one (a tensor's rows and columns depend only on the layers after
    it): asked in any order, each equals its own window simulated afresh."""
    model = spec_to_model(spec)
    for end, layer in enumerate(model.layers):
        if layer.op not in ir.SPATIAL_OPS:
            continue
        for lo in data.draw(st.permutations(range(blocks.lowest_first(model, end), end + 1))):
            for axis in (0, 1):
                oldest, fresh = {}, {}
                assert geometry.demand_sweep(model, end, lo, axis, oldest) == \
                    geometry._sweep(model, end, lo, axis, fresh) and oldest == fresh
            for tile_rows in (1, 2):
                kept = geometry.block_schedule(model, end, lo, tile_rows)
                new = geometry._block_schedule(model, end, lo, tile_rows, None)
                assert (kept.end, kept.lowest_first, kept.ring_cols, kept.layer_macs) == \
                    (new.end, new.lowest_first, new.ring_cols, new.layer_macs)
                for t in new.row_lo:
                    assert kept.row_lo[t].tolist() == new.row_lo[t].tolist()
                    assert kept.row_hi[t].tolist() == new.row_hi[t].tolist()
                assert kept.row_lo.keys() == new.row_lo.keys()

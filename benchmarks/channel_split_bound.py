"""How low mn2-vww5-paper's least RAM can go at F max 1.3 / 1.4 / 1.5 (issue 8's last three rows):
the channel-split scheme's plans, and a lower bound over a wider family.

Exact cost model, the paper's convention (network input and output in the caller's buffers).

1. The channel split (msf_pio/fusion/schemes/channel_split.py,
   library/src/schemes/channel_split.c): an inverted-residual triple as H-cache tiles of t
   output rows whose expansion is computed g channels at a time into int32 sums of the tile's
   output. Its edges are the fusion graph's own; P1 is solved per F max with and without them.
2. The bound. The 20x20x16 tensors (6,400 B) are the crux: a plan has an edge that reads, writes
   or crosses the first of them (T6). Tensors 1-5 and 7-8 are whole > 12 kB, so that edge is a
   block from T0 or T6 to T6, T9, T12, T14 or a narrow tensor after. The bound credits such a
   block with more than any of our schemes can do: every internal tensor pipelined pixel by pixel
   (a k x k consumer keeps k - 1 rows and k pixels of its input, a 1x1 consumer one pixel), input
   and output sharing bytes pixel by pixel, and per stage the cheapest of: the wide tensor kept
   (line buffer), recomputed per tile of t rows from a ring of the narrow input with a column
   cache (any channel group g, int32 sums), or recomputed per output pixel; the width cut into
   S column strips (halos recomputed); all of the budget F - 1 spent in this one block.
Run: python benchmarks/channel_split_bound.py
"""
import math
import sys

import numpy as np

from cache_schemes import paper_row, target    # benchmarks/: the bar per F max
from msf_pio.fusion import geometry as geo
from msf_pio.fusion import paper_table, solvers
from msf_pio.fusion.graph import build_graph
from msf_pio.model import ir, load_model

MODEL = "mn2-vww5-paper"
FMAX = (1.3, 1.4, 1.5, math.inf)
STRIPS = (1, 2, 3)


def triples(model):
    """First layers of the inverted-residual triples."""
    L = model.layers
    for i in range(model.n_layers - 2):
        if L[i].op == ir.CONV and L[i].kernel == (1, 1) and L[i + 1].op == ir.DEPTHWISE and \
                L[i + 1].kernel_h > 1 and L[i + 2].op == ir.CONV and L[i + 2].kernel == (1, 1):
            yield i


# -- 2. the bound ---------------------------------------------------------------------------
class Bound:
    """Optimistic bytes of blocks of the stem (conv, depthwise, 1x1) and triples."""

    def __init__(self, model):
        self.m, self.L = model, model.layers
        self.unfused = geo.unfused_macs(model)
        self.stages = [0] + list(triples(model))
        L = self.L
        if not (L[0].op == ir.CONV and L[1].op == ir.DEPTHWISE and L[2].kernel == (1, 1)
                and self.stages[1] == 3):
            sys.exit(f"{model.name}: the bound expects a stem conv, depthwise, 1x1, then triples")

    def strips(self, S: int, end: int) -> dict:
        """Column interval of every tensor up to `end` for each of S strips of tensor `end`."""
        cut = np.linspace(0, self.m.tensor_shape(end)[1], S + 1).round().astype(int)
        iv = {end: [(cut[j], cut[j + 1] - 1) for j in range(S)]}
        for l in range(end - 1, -1, -1):
            lay = self.L[l]
            iv[l] = [geo.input_span(lay, a, b, 1) for a, b in iv[l + 1]]
        return iv

    def stage(self, i: int, iv: dict, start: int, end: int) -> list[tuple[float, float]]:
        """(bytes, extra MACs) options of the stage from layer i (its narrow input free if it is
        the block input; no project if the block ends at the depthwise output)."""
        m, L = self.m, self.L
        width = lambda t: max(b - a + 1 for a, b in iv[t])
        ring = lambda t, k: 0 if t == start > 0 else \
            (((k - 1) * width(t) + k) * m.tensor_shape(t)[2] if k > 1 else m.tensor_shape(t)[2])
        last = min(i + 2, end - 1)
        strip = sum(geo.layer_macs(L[l]) * (sum(b - a + 1 for a, b in iv[l + 1]) /
                                            m.tensor_shape(l + 1)[1] - 1)
                    for l in range(i, last + 1))
        f_strip = sum(b - a + 1 for a, b in iv[i + 1]) / m.tensor_shape(i + 1)[1]
        d = L[i + 1]
        rt, ct = geo.row_taps(d), geo.col_taps(d)
        h, w = d.in_shape[:2]
        px = rt.sum() * ct.sum() / (h * w) * f_strip
        if i == 0:       # conv from the input, depthwise, 1x1: keep the conv's output or not
            conv = geo.layer_macs(L[0])
            return [(ring(1, 3) + 16, strip),
                    (9 * 16 + 16, conv * (rt.sum() / h * f_strip - 1) + strip),
                    (9 + 64 + 16, conv * (px - 1) + strip)]
        k, ce = d.kernel_h, L[i].cout
        sums = 0 if last == i + 1 else width(i + 3) * L[i + 2].cout * 4   # per output row
        expand = geo.layer_macs(L[i])
        opts = [(m.tensor_shape(i)[2] + ring(i + 1, k) + ce, strip)]
        for t in (1, 2, 3, 4):
            lo, hi = geo.tile_starts(d.out_shape[0], t)
            a = np.maximum(lo * d.stride_h - d.pad_top, 0)
            b = np.minimum((hi - 1) * d.stride_h - d.pad_top + k, h)
            rows = int((b - a).max())
            narrow = 0 if i == start > 0 else ((rows - 1) * width(i) + k) * m.tensor_shape(i)[2]
            extra = expand * ((b - a).sum() / h * f_strip - 1) + strip
            opts += [(narrow + rows * k * g + t * g + (0 if g == ce else t * sums), extra)
                     for g in (ce, 8, 1)]
        opts += [(ring(i, k) + k * k * g + g + (0 if g == ce or not sums else
                                                  L[i + 2].cout * 4), expand * (px - 1) + strip)
                 for g in (ce, 1)]
        return opts

    def io(self, start: int, end: int) -> int:
        """Input and output sharing bytes pixel by pixel: output pixel j over input pixels no
        later output pixel reads (reuse.py's shift, per pixel instead of per row)."""
        m = self.m
        a, b = geo.arena_tensor_bytes(m, start), geo.arena_tensor_bytes(m, end)
        if not a:
            return b
        (ho, wo, cb), (ha, wa, ca) = m.tensor_shape(end), m.tensor_shape(start)
        first = []
        for axis, n in ((0, ho), (1, wo)):
            lo = np.arange(n)
            for l in range(end - 1, start - 1, -1):
                _, s, p = self.L[l].window(axis)
                lo = np.maximum(lo * s - p, 0)
            first.append(lo)
        top_left = (first[0][:, None] * wa + first[1][None, :]).ravel()
        dead = np.append(np.minimum.accumulate(top_left[::-1])[::-1][1:], ha * wa)
        shift = int((dead * ca - (np.arange(ho * wo) + 1) * cb).min())
        return max(a - min(shift, 0), b)

    def block(self, start: int, end: int, fmax: float) -> int | None:
        """Least optimistic bytes of the block from tensor `start` to tensor `end`."""
        best = None
        for S in STRIPS:
            iv = self.strips(S, end)
            front = [(0.0, 0.0)]
            for i in [s for s in self.stages if start <= s < end]:
                pairs = sorted((r + o[0], x + o[1]) for r, x in front
                               for o in self.stage(i, iv, start, end))
                front, least = [], math.inf
                for r, x in pairs:            # keep the (bytes, MACs) Pareto front
                    if x < least:
                        front.append((r, x))
                        least = x
            ok = [r for r, x in front if x <= (fmax - 1) * self.unfused + 0.5]
            if ok:
                total = int(min(ok)) + self.io(start, end)
                best = total if best is None else min(best, total)
        return best


def main() -> int:
    model = load_model(MODEL)
    graphs = {"schemes": build_graph(model, "exact", ("h-cache", "tiles", "line-buffer")),
              "+split": build_graph(model, "exact")}
    bound = Bound(model)
    paper = paper_table.published()
    pinned = 6
    ends = [t for t in range(pinned, 25) if t in bound.stages or
            (t - 2 in bound.stages and model.tensor_bytes(t) < model.tensor_bytes(t - 1))]
    print(f"{MODEL}: least RAM (exact cost model, input and output in the caller's buffers)")
    print(f"{'F max':>5s} {'target B':>9s} {'schemes B':>10s} {'+split B':>9s} {'F':>6s} "
          f"{'bound B':>8s}  block of the bound")
    for fmax in FMAX:
        plans = {k: solvers.p1_min_ram(g, fmax) for k, g in graphs.items()}
        cands = [(b, s, e) for s in (0, pinned) for e in ends if e >= pinned and e > s
                 if (b := bound.block(s, e, fmax)) is not None]
        b, s, e = min(cands)
        bar = target(fmax, round(paper[paper_row(fmax)][MODEL[:-len("-paper")]][0] * 1000))
        print(f"{fmax:>5g} {bar:9d} {plans['schemes'].peak_ram:10d} "
              f"{plans['+split'].peak_ram:9d} {plans['+split'].overhead:6.3f} {b:8d}  T{s}->T{e}")
    print(f"bound: no plan of the family beats it (every plan has an edge at T{pinned}; blocks "
          f"from T0/T{pinned} to T{min(ends)}..T{max(ends)} enumerated, longer ones add stages)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

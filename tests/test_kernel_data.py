"""The kernels' fast requantization (msf_pio/codegen/kernel_data.py, msf_rq_fast2 in
msf/requant.h) against TFLite's double-rounding steps (numerics.multiply_by_quantized_multiplier)
on accumulators at the bound the generator allows it for, ties included."""
import numpy as np

from msf_pio import numerics
from msf_pio.codegen import kernel_data


def test_fast_output_is_tflites_requantization():
    rng = np.random.default_rng(0)
    n = 200_000
    right = rng.integers(1, 31, n)
    mult = rng.integers(1 << 30, 1 << 31, n)
    zero = rng.integers(-128, 128, n)
    acc = rng.integers(-(1 << 30) + 1, 1 << 30, n)
    # ties: odd accumulators under a multiplier of 2^30 (the high product ends in half a
    # unit), then even ones whose halves end in half a unit of the right shift
    mult[:2000] = 1 << 30
    acc[:1000] = 2 * rng.integers(-(1 << 28), 1 << 28, 1000) + 1
    right[1000:2000] = rng.integers(1, 11, 1000)
    half = np.int64(1) << (right[1000:2000] - 1)
    acc[1000:2000] = 2 * (rng.integers(-(1 << 17), 1 << 17, 1000) * 2 * half + half)
    round_ = (np.int64(1) << (right - 1)) + (zero << right)
    want = numerics.multiply_by_quantized_multiplier(acc, mult, -right) + zero
    assert np.array_equal(kernel_data.fast_output(acc, mult, round_, right), want)


def test_code_budget_bounds_the_specialised_kernels():
    """The generator specialises the shapes that save the most instructions per byte of code
    within the code budget (fusion/kernel_counts.choose): a larger budget keeps a superset,
    the kept instances fit the budget, at most LIMIT per kind whatever the budget; the shapes
    kept save more per byte than any left out; a MobileNetV2 of more shapes than the default
    budget holds (mbv2-w0.35-paper) leaves some out; its generated C defines one kernel per
    kept shape and mode, only its layers use them, and a zero budget defines none."""
    from dataclasses import replace
    from msf_pio.fusion.kernel_counts import (DEFAULT_BUDGET, INSTANCE_BYTES, LIMIT, choose,
                                              saved_instructions, special_key, specialised)
    from msf_pio.codegen.generate import generate
    from msf_pio.fusion.planner import plan_model
    from msf_pio.verify import quantized_model

    model = quantized_model("mbv2-w0.35-paper")
    saved = saved_instructions(model)
    budgets = (0, 4096, 20_000, DEFAULT_BUDGET, float("inf"))
    chosen = [choose(model, b) for b in budgets]
    for b, keys, more in zip(budgets, chosen, chosen[1:]):
        assert set(keys) <= set(more)
        assert sum(INSTANCE_BYTES[k[0]] for k in keys) <= b
    assert chosen[0] == [] and 0 < len(chosen[1]) < len(chosen[3]) < len(chosen[4])
    for kind in ("conv", "depthwise"):
        assert 0 < sum(k[0] == kind for k in chosen[4]) <= LIMIT
        per_byte = lambda k: saved[k] / INSTANCE_BYTES[k[0]]
        left = [per_byte(k) for k in saved if k not in chosen[3]]
        assert min(per_byte(k) for k in chosen[3]) >= max(left, default=0)
    assert specialised(model) == specialised(model, DEFAULT_BUDGET)
    plan = plan_model(model, "vanilla")[0]
    for budget, keys in ((None, chosen[3]), (0, [])):
        m = replace(model, code_budget=budget)
        source = generate(m, plan).source
        defined = {line.split("(")[1].split(",")[0] for line in source.splitlines()
                   if line.startswith("MSF_") and "_KERNEL(" in line}
        used = {line.split(".column = ")[1].split(",")[0] for line in source.splitlines()
                if ".column = " in line}
        assert used == defined and len(defined) >= len(keys) and bool(defined) == bool(keys)
        assert {special_key(m.layers[i]) for i in specialised(m)} == set(keys)

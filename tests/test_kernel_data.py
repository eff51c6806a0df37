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


def test_specialised_kernels_are_few_and_the_heaviest():
    """The generator specialises at most LIMIT kernels per kind, shared by the layers
    of one shape (any output channel count), and those of the shapes with the most MACs: a
    MobileNetV2 of more conv shapes than that (mbv2-w0.35-paper) keeps LIMIT of them; its
    generated C defines one kernel per kept shape and mode, and only its layers use them."""
    from msf_pio.fusion.kernel_counts import LIMIT, special_key, specialised
    from msf_pio.codegen.generate import generate
    from msf_pio.fusion.geometry import layer_macs
    from msf_pio.fusion.planner import plan_model
    from msf_pio.verify import quantized_model

    model = quantized_model("mbv2-w0.35-paper")
    keep = specialised(model)
    macs: dict = {}
    for layer in model.layers:
        if special_key(layer):
            macs[special_key(layer)] = macs.get(special_key(layer), 0) + \
                layer_macs(layer)
    kept = {special_key(model.layers[i]) for i in keep}
    for kind in ("conv", "depthwise"):
        mine = {k for k in macs if k[0] == kind}
        assert len(kept & mine) == min(len(mine), LIMIT), kind
        assert min(macs[k] for k in kept & mine) >= max((macs[k] for k in mine - kept),
                                                        default=0), kind
    assert len({k for k in macs if k[0] == "conv"}) > LIMIT
    source = generate(model, plan_model(model, "vanilla")[0]).source
    defined = [line for line in source.splitlines() if line.startswith("MSF_")
               and "_KERNEL(" in line]
    assert 0 < len(defined) <= 2 * LIMIT
    used = {line.split(".column = ")[1].split(",")[0] for line in source.splitlines()
            if ".column = " in line}
    assert used == {line.split("(")[1].split(",")[0] for line in defined}

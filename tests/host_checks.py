"""The checks every generated plan passes on the host: the expected output bytes, the predicted
MACs counted, the predicted arena high-water measured by painting, and (optionally) the same
bytes under ASan/UBSan."""
import numpy as np

from msf_pio.codegen.generate import generate
from msf_pio.codegen.host import HostBuild


def check_plan_in_c(model, plan, x, expected, sanitize=True):
    build = HostBuild(generate(model, plan))
    try:
        assert np.array_equal(build.run(x).output, expected)
        assert build.run(x, "count").figures["macs_counted"] == plan.macs
        assert build.run(x, "measure").figures["arena_measured"] == plan.peak_ram
        if sanitize:
            assert np.array_equal(build.run(x, "sanitize").output, expected)
    finally:
        build.close()

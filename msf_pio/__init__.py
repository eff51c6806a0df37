"""msf-pio: multi-stage fusion (msf-CNN) for int8 CNNs on microcontrollers, inside PlatformIO."""
import os

# One BLAS thread unless the user asks for more (read when numpy loads, so here, before it):
# the float pass that quantizes a model multiplies small matrices (a batch of 4 images), where
# OpenBLAS's threads spin more CPU than they save: MobileNetV2 1.0 at 224's convolutions take
# 1.85 s of CPU with two threads, 0.15 s with one (and far more wall time on a busy machine).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def _version() -> str:
    """The one version of the Python package and the PlatformIO library: library.json's. It lies
    beside the package in a checkout, an sdist and an installed PlatformIO library; a wheel
    carries it in its metadata, which setup.cfg took from here when the wheel was built."""
    import json
    from pathlib import Path
    manifest = Path(__file__).resolve().parent.parent / "library.json"
    try:
        return json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("msf-pio")
        except PackageNotFoundError:
            return "0+unknown"


__version__ = _version()

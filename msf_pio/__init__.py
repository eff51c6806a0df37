"""msf-pio: multi-stage fusion (msf-CNN) for int8 CNNs on microcontrollers, inside PlatformIO."""


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

"""Models shipped with the package, usable by name wherever a model path is accepted. The
ones in large/ (MobileNetV3-Small and EfficientNet-lite0, megabytes of weights; the SSDLite
detector with six graph outputs) are not among zoo_names() unless asked for: the tests that run
every zoo model run the small ones; benchmarks/zoo_boards.py runs these on qemu_f767zi."""
from pathlib import Path

ZOO_DIR = Path(__file__).parent
# Models whose size is the point: planning at the scale of real networks (benchmarks/
# planner_speed.py). Running their generated C or the numpy reference takes minutes, so the
# tests that do leave them out; the smaller zoo models have every layer kind they have.
SCALE = ("mbv2-w1.0-r224",)


def zoo_names(scale: bool = True, large: bool = False) -> list[str]:
    """The zoo's model names; `scale`: with the SCALE models; `large`: with those of large/."""
    folders = [ZOO_DIR, ZOO_DIR / "large"] if large else [ZOO_DIR]
    return sorted(p.stem for d in folders for p in d.glob("*.yaml")
                  if scale or p.stem not in SCALE)


def zoo_path(name: str) -> Path | None:
    for folder in (ZOO_DIR, ZOO_DIR / "large"):
        path = folder / f"{name}.yaml"
        if path.is_file():
            return path
    return None

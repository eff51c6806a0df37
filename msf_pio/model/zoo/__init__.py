"""Models shipped with the package, usable by name wherever a model path is accepted."""
from pathlib import Path

ZOO_DIR = Path(__file__).parent
# Models whose size is the point: planning at the scale of real networks (benchmarks/
# planner_speed.py). Running their generated C or the numpy reference takes minutes, so the
# tests that do leave them out; the smaller zoo models have every layer kind they have.
SCALE = ("mbv2-w1.0-r224",)


def zoo_names(scale: bool = True) -> list[str]:
    """The zoo's model names; `scale`: with the SCALE models."""
    return sorted(p.stem for p in ZOO_DIR.glob("*.yaml") if scale or p.stem not in SCALE)


def zoo_path(name: str) -> Path | None:
    path = ZOO_DIR / f"{name}.yaml"
    return path if path.is_file() else None

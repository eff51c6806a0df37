"""Models shipped with the package, usable by name wherever a model path is accepted."""
from pathlib import Path

ZOO_DIR = Path(__file__).parent


def zoo_names() -> list[str]:
    return sorted(p.stem for p in ZOO_DIR.glob("*.yaml"))


def zoo_path(name: str) -> Path | None:
    path = ZOO_DIR / f"{name}.yaml"
    return path if path.is_file() else None

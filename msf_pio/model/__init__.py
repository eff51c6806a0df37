"""Model front ends: YAML spec, ONNX, .tflite, the zoo; all produce the one IR of `ir.py`."""
from __future__ import annotations

from pathlib import Path

from ..errors import MsfError
from .ir import Model
from .limits import check_model
from .zoo import zoo_names, zoo_path

_SUFFIXES = (".yaml", ".yml", ".onnx", ".tflite")


def load_model(ref: str | Path) -> Model:
    """A zoo name, a YAML spec, an ONNX or a .tflite file -> IR model (weights of a YAML spec or
    a float ONNX file are materialized lazily; int8 QDQ ONNX and .tflite come quantized)."""
    ref = str(ref)
    path = zoo_path(ref) if "/" not in ref and not ref.endswith(_SUFFIXES) else None
    if path is None:
        path = Path(ref)
        if not path.exists():
            raise MsfError(f"no such model file, and not a zoo model (zoo: {', '.join(zoo_names())})",
                           source=ref)
    if path.suffix in (".yaml", ".yml"):
        from .spec import load_spec
        return load_spec(path)          # checks the limits itself, naming spec layers
    if path.suffix == ".onnx":
        from .onnx_import import load_onnx
        model = load_onnx(path)
    elif path.suffix == ".tflite":
        from .tflite_import import load_tflite
        model = load_tflite(path)
    else:
        raise MsfError("unknown model format: expected .yaml, .yml, .onnx or .tflite",
                       source=str(path))
    check_model(model)
    return model

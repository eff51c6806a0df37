"""Model front ends: YAML spec, ONNX, .tflite, the zoo; all produce the one IR of `ir.py`."""
from __future__ import annotations

from pathlib import Path

from ..errors import MsfError
from .ir import Model
from .limits import check_model
from .zoo import zoo_names, zoo_path

_SUFFIXES = (".yaml", ".yml", ".onnx", ".tflite")


def load_model(ref: str | Path, input_shape: tuple[int, int, int] | None = None) -> Model:
    """A zoo name, a YAML spec, an ONNX or a .tflite file -> IR model (weights of a YAML spec or
    of a float file are materialized lazily; int8 QDQ ONNX and .tflite come quantized).
    `input_shape` (H, W, C) fixes a file's dynamic input dimensions."""
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
    if path.suffix not in (".onnx", ".tflite"):
        raise MsfError("unknown model format: expected .yaml, .yml, .onnx or .tflite",
                       source=str(path))
    model = read_model(path, input_shape)[0]
    check_model(model)
    return model


def read_model(path: str | Path, input_shape: tuple[int, int, int] | None = None
               ) -> tuple[Model, list | None]:
    """An ONNX or .tflite file -> (quantized IR model, None), or for a float file (weightless
    IR model, its float weights per layer)."""
    from .lowering import lower
    if Path(path).suffix == ".onnx":
        from .onnx_import import onnx_graph
        return lower(onnx_graph(path, input_shape))
    from .tflite_import import read_tflite
    return lower(read_tflite(path, input_shape))

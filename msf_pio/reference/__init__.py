"""The numpy int8 reference executor: the project's oracle for TFLM parity and fused C code."""
from .executor import run_layer, run_model
from .macs import layer_macs, model_macs

__all__ = ["run_layer", "run_model", "layer_macs", "model_macs"]

"""Exporters of a quantized IR model to other runtimes' formats (for cross-checking)."""

"""Fusion graph (tensors as nodes, single layers and fusion blocks as edges), cost models, solvers."""

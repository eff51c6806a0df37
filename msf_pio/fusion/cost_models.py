"""Registry of cost models: each module offers edges(model) and unfused_macs(model)."""
from __future__ import annotations

from ..errors import MsfError

NAMES = ("exact", "paper")


def get(name: str):
    if name == "paper":
        from . import paper_cost
        return paper_cost
    if name == "exact":
        from . import exact_cost
        return exact_cost
    raise MsfError(f"unknown cost model {name!r} (expected one of {', '.join(NAMES)})",
                   where="cost_model")

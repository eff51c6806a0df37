"""Compare two folders of plan JSON (benchmarks/planner_speed.py --save): the same plans before
and after a change to the planner must have the same peak RAM, MACs and predicted cycles; the
blocks and schemes chosen are compared too (among plans equal in all three a solver may pick
another).

Run: python benchmarks/plan_diff.py BEFORE_DIR AFTER_DIR
Exit status 0 when every plan's figures match, 1 otherwise.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

FIGURES = ("feasible", "peak_ram_bytes", "macs", "predicted_cycles")


def plans(path: Path) -> list[dict]:
    text = path.read_text().strip()
    if not text:
        return []
    data = json.loads(text)
    return data if isinstance(data, list) else [data]


def blocks(plan: dict) -> list:
    return [(b["first"], b["last"], b["scheme"], b.get("tile_rows"), b.get("g"))
            for b in plan.get("blocks", [])]


def compare(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.glob("*.json")} | {p.name for p in after.glob("*.json")})
    bad = other_blocks = 0
    for name in names:
        a, b = before / name, after / name
        if not a.is_file() or not b.is_file():
            print(f"{name}: only in {'after' if b.is_file() else 'before'}")
            bad += 1
            continue
        pa, pb = plans(a), plans(b)
        if len(pa) != len(pb):
            print(f"{name}: {len(pa)} plans before, {len(pb)} after")
            bad += 1
            continue
        for i, (x, y) in enumerate(zip(pa, pb)):
            diff = {k: (x.get(k), y.get(k)) for k in FIGURES if x.get(k) != y.get(k)}
            if diff:
                print(f"{name}[{i}]: " + ", ".join(f"{k} {u} -> {v}" for k, (u, v) in diff.items()))
                bad += 1
            elif blocks(x) != blocks(y):
                print(f"{name}[{i}]: same figures, other blocks")
                other_blocks += 1
    total = sum(len(plans(before / n)) for n in names if (before / n).is_file())
    print(f"{len(names)} files, {total} plans: {bad} differ in figures, "
          f"{other_blocks} same figures with other blocks")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(compare(Path(sys.argv[1]), Path(sys.argv[2])))

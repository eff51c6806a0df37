"""The code's one direction, read from its own imports: model -> IR -> fusion graph -> plan ->
C -> firmware -> monitor. No import circle and no import that runs back up a layer, among the
Python modules (every import statement, those inside functions too) and among the C runtime's
files (#include and calls of a function another file defines); a cache scheme builds on the
shared geometry and edge walker, and the registry and the dispatch build on the schemes."""
from __future__ import annotations

import ast
import re
from fnmatch import fnmatch
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]

# Bottom first: a module may import modules of its own layer and of those below it. A module's
# layer is that of the longest pattern naming it (a package: it and its modules; `.*`: its
# modules; `=`: that module alone); within a layer, TIERS order its modules the same way (a
# module no tier names is in the layer's top tier).
LAYERS = [
    ["=msf_pio", "msf_pio.errors", "msf_pio.options", "msf_pio.progress"],   # used by all
    ["msf_pio.model.ir"],
    ["msf_pio.numerics"],                                   # TFLite int8 arithmetic on the IR
    ["msf_pio.model"],                                      # front ends: spec, importers, zoo
    ["msf_pio.fusion"],                                     # graph, costs, plans
    ["msf_pio.reference", "msf_pio.codegen", "msf_pio.export"],
    ["msf_pio.verify", "msf_pio.report"],                   # a plan checked, a plan reported
    ["msf_pio.pio"],                                        # firmware, boards, monitor
    ["msf_pio.cli"],
]
TIERS = {
    "msf_pio.fusion": [
        ["msf_pio.fusion.edge", "msf_pio.fusion.geometry"],          # shared geometry: a leaf
        ["msf_pio.fusion.reuse", "msf_pio.fusion.stream_input", "msf_pio.fusion.kernel_counts"],
        ["msf_pio.fusion.blocks"],                                   # the shared edge walker
        ["msf_pio.fusion.schemes.*"],                                # one module a scheme
        ["msf_pio.fusion.schemes"],                                  # the registry
    ],
    "msf_pio.reference": [
        ["msf_pio.reference.*"],                    # layers whole, regions, rings, overlaps
        ["msf_pio.reference.schemes.*"],            # one executor a scheme
        ["msf_pio.reference.schemes"],              # found through the scheme registry
        ["msf_pio.reference.plan"],
    ],
}
# -- Python --------------------------------------------------------------------------------
def python_modules(package: Path) -> dict[str, Path]:
    """Module name -> file, for every .py file of `package` (a package is its __init__)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def python_imports(modules: dict[str, Path]) -> nx.DiGraph:
    """module -> module it imports, among `modules`; `from package import name` is an import of
    the submodule `name` where there is one (as Python resolves it), else of the package."""
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph.add_edge(name, target)
    return graph


def rank(name: str, layers: list[list[str]], tiers: dict[str, list[list[str]]]) -> tuple:
    """(layer, tier) of a module: the longest pattern that names it decides (none: an error)."""
    def match(pattern: str) -> int:
        if pattern.startswith("="):
            return len(pattern) if name == pattern[1:] else -1
        if "*" in pattern:
            return len(pattern) if fnmatch(name, pattern) else -1
        return len(pattern) if name == pattern or name.startswith(pattern + ".") else -1
    layer = max(range(len(layers)), key=lambda i: max(match(p) for p in layers[i]))
    assert max(match(p) for p in layers[layer]) >= 0, f"{name}: in no layer"
    prefix = max(layers[layer], key=match)
    inner = tiers.get(prefix, [])
    best = max(range(len(inner)), key=lambda i: max(match(p) for p in inner[i]), default=None)
    tier = best if best is not None and max(match(p) for p in inner[best]) >= 0 else len(inner)
    return layer, tier


def upward(graph: nx.DiGraph, rank_of) -> list[str]:
    return sorted(f"{a} -> {b}" for a, b in graph.edges if rank_of(b) > rank_of(a))


def circles(graph: nx.DiGraph) -> list[list[str]]:
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def python_rank(name: str) -> tuple:
    return rank(name, LAYERS, TIERS)


def test_python_imports_have_no_circle_and_run_down():
    graph = python_imports(python_modules(ROOT / "msf_pio"))
    assert graph.number_of_edges() > 100            # the scan sees the imports
    assert circles(graph) == []
    assert upward(graph, python_rank) == []


def test_the_shared_geometry_imports_no_scheme():
    """The geometry every scheme shares and the edge walker import no scheme, no registry; a
    scheme imports no registry (nor what reads it)."""
    graph = python_imports(python_modules(ROOT / "msf_pio"))
    schemes = {m for m in graph if m.startswith("msf_pio.fusion.schemes.")}
    assert {"msf_pio.fusion.schemes.h_cache", "msf_pio.fusion.schemes.line_buffer"} <= schemes
    for leaf in ("msf_pio.fusion.geometry", "msf_pio.fusion.blocks"):
        assert not (nx.descendants(graph, leaf) & (schemes | {"msf_pio.fusion.schemes"})), leaf
    assert sorted(nx.descendants(graph, "msf_pio.fusion.geometry")) == ["msf_pio.model.ir"]
    for s in schemes:
        assert "msf_pio.fusion.schemes" not in nx.descendants(graph, s), s


def test_the_scan_finds_a_circle_and_an_upward_import(tmp_path):
    """The checks above fail on what issue 23 found: a cost module and a scheme importing each
    other, and a lower layer importing a higher one."""
    pkg = tmp_path / "msf_pio"
    (pkg / "fusion").mkdir(parents=True)
    (pkg / "model").mkdir()
    for init in (pkg, pkg / "fusion", pkg / "model"):
        (init / "__init__.py").write_text("")
    (pkg / "fusion" / "exact_cost.py").write_text("from .line_buffer import row_sweep\n")
    (pkg / "fusion" / "line_buffer.py").write_text("def f():\n    from . import exact_cost\n")
    (pkg / "model" / "ir.py").write_text("from ..fusion import exact_cost\n")
    graph = python_imports(python_modules(pkg))
    assert circles(graph) == [["msf_pio.fusion.exact_cost", "msf_pio.fusion.line_buffer"]]
    assert upward(graph, python_rank) == ["msf_pio.model.ir -> msf_pio.fusion.exact_cost"]

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
    ["=msf_pio", "msf_pio.text", "msf_pio.errors", "msf_pio.options",
     "msf_pio.progress"],                                   # used by all
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
C_TIERS = [      # bottom first, as units (a file, with its header of the same name) under library/
    ["include/*"],
    # msf/kernels.h: the kernels' templates the generated code instantiates (specialise.py)
    ["src/kernels/*", "include/msf/kernels", "src/board/*", "src/measure", "src/profile"],
    ["src/edge"],                                   # the shared edge walker
    ["src/schemes/*"],                              # one executor a cache scheme
    # the one dispatch; msf/dispatch.h: its templates the generated code instantiates
    ["src/executor", "include/msf/dispatch"],
]


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
    assert sorted(nx.descendants(graph, "msf_pio.fusion.geometry")) == [
        "msf_pio.model.ir", "msf_pio.numerics"]           # a resize's maps: TFLite's float32
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


# -- C ---------------------------------------------------------------------------------------
C_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else", "case",
              "static", "inline", "const", "void", "struct", "enum", "typedef", "unsigned"}


def _scan_c(text: str) -> tuple[list[str], dict[str, bool], set[str]]:
    """What a C file includes ("..."), the functions it defines (name -> external linkage) and
    the identifiers it uses in function bodies, initializers and macros (a declaration at file
    scope uses nothing)."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S).replace("\\\n", " ")
    text = re.sub(r"#\s*ifdef\s+__cplusplus.*?#\s*endif", " ", text, flags=re.S)   # extern "C"
    includes = re.findall(r'^\s*#\s*include\s*"([^"]+)"', text, flags=re.M)
    text = re.sub(r'"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'', " ", text)
    used: set[str] = set()
    code = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            if re.match(r"\s*#\s*define\s+\w+", line):      # a macro's body uses its names
                used |= set(re.findall(r"[A-Za-z_]\w*", line.split(None, 2)[-1]))
        else:
            code.append(line)
    defined: dict[str, bool] = {}
    depth, head, body = 0, [], False
    for tok in re.findall(r"[A-Za-z_]\w*|[{}();]", "\n".join(code)):
        if depth == 0:
            if tok == "{":
                body = head[-1:] == [")"]
                if body:                                   # name ( ... ) {: a definition
                    i, parens = len(head) - 1, 0
                    while True:
                        parens += {")": 1, "(": -1}.get(head[i], 0)
                        if parens == 0:
                            break
                        i -= 1
                    # MSF_INLINE is `static inline` (msf/requant.h): file-local too
                    defined[head[i - 1]] = not {"static", "MSF_INLINE"} & set(head)
                depth = 1
            elif tok == ";":
                head = []
            else:
                head.append(tok)
        elif tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
            if depth == 0 and body:
                head = []
        elif tok[0].isalpha() or tok[0] == "_":
            used.add(tok)
    return includes, defined, used - C_KEYWORDS


def c_units(library: Path) -> nx.DiGraph:
    """Unit -> unit it includes or whose function it uses (a call, or a pointer in a table);
    a unit is a file with its header of the same name, named by its path under `library`."""
    library = library.resolve()
    unit = lambda p: p.resolve().relative_to(library).with_suffix("").as_posix()
    scans = {p: _scan_c(p.read_text()) for p in sorted(library.rglob("*"))
             if p.suffix in (".c", ".h")}
    owners: dict[str, set[str]] = {}           # function -> the units that may define it
    for p, (_, defined, _) in scans.items():
        for name, external in defined.items():
            if external or p.suffix == ".h":
                owners.setdefault(name, set()).add(unit(p))
    graph = nx.DiGraph()
    for p, (includes, defined, used) in scans.items():
        graph.add_node(unit(p))
        for inc in includes:
            found = [b / inc for b in (p.parent, library / "include", library / "src")
                     if (b / inc).is_file()]
            if found:
                graph.add_edge(unit(p), unit(found[0]))
        for name in used - set(defined):
            if len(owners.get(name, ())) == 1:     # several: a board's port, chosen by flags
                graph.add_edge(unit(p), next(iter(owners[name])))
    graph.remove_edges_from(list(nx.selfloop_edges(graph)))
    return graph


def c_rank(name: str) -> tuple:
    tiers = [i for i, t in enumerate(C_TIERS) if any(fnmatch(name, p) for p in t)]
    assert tiers, f"{name}: in no tier"
    return (tiers[-1],)


def test_c_runtime_has_no_circle_and_runs_down():
    """The C runtime: the dispatch calls the schemes' executors, they call the shared edge
    walker, which calls the kernels and no executor."""
    graph = c_units(ROOT / "library")
    assert {("src/executor", "src/schemes/h_cache"), ("src/schemes/line_buffer", "src/edge"),
            ("src/edge", "src/kernels/conv2d_s8")} <= set(graph.edges)   # the scan sees calls
    assert circles(graph) == []
    assert upward(graph, c_rank) == []
    assert not [u for u in nx.descendants(graph, "src/edge") if u.startswith("src/schemes/")]


def test_the_c_scan_finds_a_circle_and_an_upward_call(tmp_path):
    """What issue 23 found in C: a scheme's executor calling back into the dispatch file that
    calls it, through the shared walker."""
    (tmp_path / "src" / "schemes").mkdir(parents=True)
    (tmp_path / "src" / "executor.c").write_text(
        "void msf_layer_column(void) {}\nvoid msf_run_edge(void) { msf_run_line_buffer(); }\n")
    (tmp_path / "src" / "schemes" / "line_buffer.c").write_text(
        '#include "../edge.h"\nvoid msf_run_line_buffer(void) { msf_block_column(); }\n')
    (tmp_path / "src" / "edge.h").write_text(
        "static inline void msf_block_column(void) { msf_layer_column(); }\n")
    graph = c_units(tmp_path)
    assert circles(graph) == [["src/edge", "src/executor", "src/schemes/line_buffer"]]
    assert upward(graph, c_rank) == ["src/edge -> src/executor"]

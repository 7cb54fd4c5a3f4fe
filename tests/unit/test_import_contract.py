"""The import contract: each package imports only from its own layer or the layers below, a few pairs that
would be legal by layer are forbidden outright, and no two packages import each other (directly or round a
loop). Read from the source with ``ast``, function-level (lazy) imports included, every form of import
(``import accelbench.x``, ``from accelbench.x import y``, ``from accelbench import x``); imports under
``if TYPE_CHECKING:`` are annotations only and not counted."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import accelbench

SRC = Path(accelbench.__file__).resolve().parent

#: bottom to top; a package may import from its own layer and every layer below
LAYERS: list[set[str]] = [
    {"errors", "redact", "registry", "settings"},
    {"domain"},
    {"catalog", "modelspec"},
    {"plan", "runtimes", "bench", "telemetry", "store", "fleet"},
    {"report"},
    {"deploy"},
    {"services"},
    {"api"},
    {"web"},
    {"server"},
    {"cli"},
]
#: the layers below ``services`` that a shell never imports: the CLI, the API, the pages and the assembled server
#: parse input, call one use case of ``services`` and render its answer (``domain`` and ``report`` they may use
#: to type and render it)
BELOW_SERVICES = ("store", "deploy", "bench", "plan", "catalog", "telemetry", "runtimes", "modelspec")

#: legal by layer, forbidden by design: the planner is handed a context (calibrations, prices) and never reads
#: the store or a benchmark; the load generator knows nothing of what it measures or where it is stored (it is
#: handed a ``bench.recorder.RunRecorder``, which the store satisfies without being named); the shells
#: reach the layers below ``services`` only through it
FORBIDDEN = {
    ("plan", "store"),
    ("plan", "bench"),
    ("bench", "plan"),
    ("bench", "store"),
    ("runtimes", "bench"),
    ("telemetry", "store"),
    *((shell, below) for shell in ("cli", "api", "web", "server") for below in BELOW_SERVICES),
}


#: forbidden even as annotations (``if TYPE_CHECKING:``): the planner takes plain data (measured runs, calibration
#: rows, prices) that ``services.plan`` reads from the store, so it has no use for the store's types either; the
#: load generator writes through the protocol it defines (``bench.recorder``), not the store's class
NOT_EVEN_NAMED = {("plan", "store"), ("bench", "store")}


def _layer(pkg: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if pkg in layer)


def _package(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py") if rel.parts[0] != "__init__.py" else "__init__"


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imported_packages(node: ast.AST, root: Path = SRC) -> list[str]:
    """The accelbench packages one import statement reaches: ``x`` of ``import accelbench.x.y``, of ``from
    accelbench.x import y``, and of ``from accelbench import x`` where ``x`` is a package or module of its own
    (not a name ``accelbench/__init__.py`` defines, such as ``__version__``)."""
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        if node.module == "accelbench":
            return [
                a.name for a in node.names if (root / a.name).is_dir() or (root / f"{a.name}.py").is_file()
            ]
        names = [node.module]
    elif isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        return []
    return [parts[1] for name in names if (parts := name.split("."))[0] == "accelbench" and len(parts) > 1]


def package_imports(root: Path = SRC) -> dict[tuple[str, str], list[str]]:
    """(importer, imported) package pairs -> where (file:line), over the sources under ``root``."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for f in sorted(root.rglob("*.py")):
        tree = ast.parse(f.read_text(), str(f))
        skip = _type_checking_lines(tree)
        rel = f.relative_to(root)
        src = rel.parts[0].removesuffix(".py") if rel.parts[0] != "__init__.py" else "__init__"
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            for dst in imported_packages(node, root):
                if dst != src and src != "__init__":
                    edges[(src, dst)].append(f"{rel}:{node.lineno}")  # type: ignore[attr-defined]
    return edges


def violations(edges: dict[tuple[str, str], list[str]]) -> set[str]:
    """The imports that go up the layers or are forbidden, one line per package pair."""
    return {
        f"{a} -> {b}: {', '.join(where[:3])}"
        for (a, b), where in edges.items()
        if _layer(b) > _layer(a) or (a, b) in FORBIDDEN
    }


def test_every_package_has_a_layer() -> None:
    packages = {_package(f) for f in SRC.rglob("*.py")} - {"__init__"}
    assert packages <= set().union(*LAYERS), packages - set().union(*LAYERS)


def test_imports_go_down_the_layers_only() -> None:
    upward = violations(package_imports())
    assert not upward, "\n".join(sorted(upward))


def test_a_package_imported_by_name_from_accelbench_is_checked_like_any_other(tmp_path: Path) -> None:
    """``from accelbench import store`` in the planner is the forbidden plan -> store as surely as ``from
    accelbench.store import Store``; a name of ``accelbench/__init__.py`` (``__version__``) is no package."""
    for pkg in ("plan", "store", "report"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "plan" / "fit.py").write_text("from accelbench import __version__, store\n")
    (tmp_path / "store" / "rows.py").write_text("def f():\n    from accelbench import report as r\n")
    found = violations(package_imports(tmp_path))
    assert found == {"plan -> store: plan/fit.py:1", "store -> report: store/rows.py:2"}


def test_the_planner_never_names_the_store() -> None:
    """Not in an annotation, nor as a parameter: no ``store`` argument anywhere in ``plan/``."""
    found = []
    for f in sorted(SRC.rglob("*.py")):
        src = _package(f)
        tree = ast.parse(f.read_text(), str(f))
        for node in ast.walk(tree):
            for dst in imported_packages(node):
                if (src, dst) in NOT_EVEN_NAMED:
                    found.append(f"{f.relative_to(SRC)}:{node.lineno} imports accelbench.{dst}")  # type: ignore[attr-defined]
            if src == "plan" and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args.args + node.args.kwonlyargs + node.args.posonlyargs
                found += [
                    f"{f.relative_to(SRC)}:{node.lineno} {node.name}({a.arg})"
                    for a in args
                    if a.arg == "store"
                ]
    assert not found, "\n".join(found)


def test_no_import_cycles_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in package_imports():
        graph[a].add(b)
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in graph[node]:
            if nxt in path:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif len(path) < len(graph) + 1:
                visit(nxt, [*path, nxt])

    for start in list(graph):
        visit(start, [start])
    assert not cycles, sorted(set(cycles))[:10]


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    name = ".".join(rel.parts)
    return name.removesuffix(".__init__")


def module_imports() -> dict[str, set[str]]:
    """accelbench module -> the accelbench modules it imports (``from pkg import mod`` names the module)."""
    files = {_module(f): f for f in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for name, f in files.items():
        tree = ast.parse(f.read_text(), str(f))
        skip = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] == "accelbench":
                    for alias in node.names:
                        sub = f"{node.module}.{alias.name}"
                        targets.append(sub if sub in files else node.module)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "accelbench"]
            for t in targets:
                while t not in files and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t != name:
                    graph[name].add(t)
    return graph


def test_no_import_cycles_between_modules() -> None:
    """Not even lazily, inside a package: a loop of modules means one of them is in the wrong place (the ones
    there were: compare <-> findings, document <-> html/markdown, engines <-> model_store <-> local)."""
    graph = module_imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def strongly_connected(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                strongly_connected(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                comp.append(w)
            comp.append(v)
            if len(comp) > 1:
                loops.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            strongly_connected(v)
    assert not loops, loops

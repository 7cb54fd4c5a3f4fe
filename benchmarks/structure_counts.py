"""The structure counts a newcomer feels: long functions, long parameter lists, long modules, imports hidden
inside functions, file names shared by several modules, and imports from the shells (cli, api, web) that reach
below the application layer (services). Read from the source with ``ast``; generated migrations are left out.

Usage (from the repository root):
    python benchmarks/structure_counts.py            # the counts
    python benchmarks/structure_counts.py --verbose  # and every item behind them

The targets (what "small pieces" means here): no function over 100 lines or 10 parameters, at most 3 modules over
600 lines, under 60 function-level imports, no file name shared by three modules, no shell import below services
(rendering from ``report`` and models from ``domain`` aside). ``duplicates`` (run inside ``src``) counts repeats.
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELLS = {"cli", "api", "web"}
#: what a shell may not import: everything below the application layer, apart from domain models and report rendering
BELOW_SERVICES = {"store", "deploy", "bench", "plan", "catalog", "telemetry", "runtimes", "modelspec"}
LONG_FUNCTION = 100
MANY_PARAMS = 10
LONG_MODULE = 600


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
    return n - (1 if a.args and a.args[0].arg in ("self", "cls") else 0)


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The accelbench packages an import reaches (``from accelbench import x`` included)."""
    if isinstance(node, ast.ImportFrom):
        if node.level or not node.module:
            return []
        names = [f"accelbench.{a.name}" for a in node.names] if node.module == "accelbench" else [node.module]
    else:
        names = [a.name for a in node.names]
    return [p[1] for n in names if (p := n.split("."))[0] == "accelbench" and len(p) > 1]


def _type_checking(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def count(src: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    names: dict[str, list[str]] = defaultdict(list)
    for path in sorted(src.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        rel = path.relative_to(src)
        text = path.read_text()
        tree = ast.parse(text)
        names[path.name].append(str(rel))
        if (n := len(text.splitlines())) > LONG_MODULE:
            found["modules over 600 lines"].append(f"{rel} ({n})")
        annotations_only = _type_checking(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := (node.end_lineno or node.lineno) - node.lineno + 1) > LONG_FUNCTION:
                    found["functions over 100 lines"].append(f"{rel}:{node.name} ({n})")
                if (n := _params(node)) > MANY_PARAMS:
                    found["functions over 10 parameters"].append(f"{rel}:{node.name} ({n})")
                for stmt in ast.walk(node):
                    # nested functions are walked again from their own node, so count direct children only once
                    if isinstance(stmt, (ast.Import, ast.ImportFrom)) and _enclosing(node, stmt):
                        found["function-level imports"].append(f"{rel}:{stmt.lineno}")
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno not in annotations_only:
                shell = rel.parts[0]
                for pkg in _imported(node):
                    if shell in SHELLS and pkg in BELOW_SERVICES:
                        found["shell imports below services"].append(f"{rel}:{node.lineno} -> {pkg}")
                    if shell == "bench" and pkg == "store":
                        found["bench imports of the store"].append(f"{rel}:{node.lineno}")
    for name, where in sorted(names.items()):
        if len(where) >= 3 and name != "__init__.py":
            found["file names shared by 3+ modules"].append(f"{name}: {', '.join(where)}")
    return found


def _enclosing(func: ast.AST, stmt: ast.AST) -> bool:
    """Whether ``func`` is the innermost function holding ``stmt`` (so each import is counted once)."""
    for child in ast.iter_child_nodes(func):
        if child is stmt:
            return True
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if _enclosing(child, stmt):
            return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src" / "accelbench")
    parser.add_argument("--verbose", "-v", action="store_true", help="list every item behind each count")
    args = parser.parse_args()
    found = count(args.src)
    kinds = [
        "shell imports below services",
        "bench imports of the store",
        "functions over 100 lines",
        "functions over 10 parameters",
        "modules over 600 lines",
        "function-level imports",
        "file names shared by 3+ modules",
    ]
    for kind in kinds:
        items = found.get(kind, [])
        print(f"{kind:34} {len(items):5}")
        if args.verbose:
            for item in items:
                print(f"    {item}")


if __name__ == "__main__":
    main()

"""The package's modules import each other without cycles, function-level imports included.

A cycle hidden by an import inside a function still ties two modules into one concept; this
test reads every module's imports (all of them, except those under ``if TYPE_CHECKING:``, which
never run) and fails naming the cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "actorrt"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.AST, modules: set[str]) -> set[str]:
    """actorrt modules imported anywhere in ``tree``, skipping ``if TYPE_CHECKING:`` blocks."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
        for inner in ast.iter_child_nodes(node):
            visit(inner)

    visit(tree)
    return {m for m in found if m in modules}


def import_graph() -> dict[str, set[str]]:
    paths = [p for p in PACKAGE.rglob("*.py") if "v1" not in p.relative_to(PACKAGE).parts]
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _runtime_imports(ast.parse(p.read_text()), modules) - {_module_name(p)} for p in paths}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    done: set[str] = set()
    stack: list[str] = []
    on_stack: set[str] = set()

    def walk(node: str) -> list[str] | None:
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt in on_stack:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in done and (cycle := walk(nxt)):
                return cycle
        stack.pop()
        on_stack.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done and (cycle := walk(start)):
            return cycle
    return None


def test_find_cycle_finds_one_and_only_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_runtime_imports_count_function_level_ones_and_skip_type_checking() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from actorrt import _a\n"
        "if TYPE_CHECKING:\n    from actorrt._b import X\n"
        "def f():\n    from actorrt._c import y\n    import actorrt._d\n"
    )
    modules = {"actorrt", "actorrt._a", "actorrt._b", "actorrt._c", "actorrt._d"}
    assert _runtime_imports(ast.parse(source), modules) == {"actorrt._a", "actorrt._c", "actorrt._d"}


def test_actorrt_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 20
    cycle = find_cycle({m: deps - {"actorrt"} for m, deps in graph.items() if m != "actorrt"})
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_module_but_the_package_and_the_cli_imports_the_package_root() -> None:
    """``import actorrt`` (the root) from a private module would pull every module in and make
    each private module a part of every cycle through the root."""
    graph = import_graph()
    offenders = sorted(m for m, deps in graph.items() if "actorrt" in deps and m not in ("actorrt", "actorrt.__main__"))
    assert not offenders, offenders

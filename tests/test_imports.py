"""The runtime's layers: every import points down, and no two modules import each other.

Each package of ``actorrt`` runs in one kind of process (its ``__init__`` says which, and what it
may import: the "May import" line, which ``LAYERS`` below must match). The layers, lowest first::

    v1 (generated) <- common <- transport <- master, worker <- local <- client <- host <- cli, compat

``master`` and ``worker`` never import each other; ``host`` and ``compat`` take one module each
from ``worker``. Every import counts: module-level, function-level and ``if TYPE_CHECKING:``
ones, since a type-only import still ties two concepts together.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "actorrt"

# What each layer may import, besides itself and the generated messages (actorrt.v1).
LAYERS: dict[str, set[str]] = {
    "common": set(),
    "transport": {"common"},
    "master": {"common", "transport"},
    "worker": {"common", "transport"},
    "local": {"common", "transport", "master", "worker"},
    "client": {"common", "transport", "local"},
    "host": {"common", "transport", "client", "worker.fork_server_link"},
    "cli": {"common", "transport", "master", "worker", "local", "client"},
    "compat": {"common", "transport", "client", "worker.procs"},
}
# The public face (actorrt, actorrt.metrics, python -m actorrt, the mypy plugin) may import any layer.
TOP = {"actorrt", "actorrt.__main__", "actorrt.metrics", "actorrt.mypy_plugin"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(tree: ast.AST, modules: set[str]) -> set[str]:
    """actorrt modules imported anywhere in ``tree``: at module level, inside functions, and
    under ``if TYPE_CHECKING:``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
    return {m for m in found if m in modules}


def import_graph() -> dict[str, set[str]]:
    paths = [p for p in PACKAGE.rglob("*.py") if "v1" not in p.relative_to(PACKAGE).parts]
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): imports_of(ast.parse(p.read_text()), modules) - {_module_name(p)} for p in paths}


def layer_of(module: str) -> str:
    """The layer a module belongs to: ``actorrt.master.table`` -> ``master``; top-level faces -> ``""``."""
    if module in TOP:
        return ""
    return module.split(".")[1]


def allowed(source: str, target: str) -> bool:
    src, dst = layer_of(source), layer_of(target)
    if src == "" or src == dst:
        return True
    rules = LAYERS[src]
    return dst in rules or target.removeprefix("actorrt.") in rules


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


def test_imports_of_counts_function_level_and_type_only_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from actorrt import a\n"
        "if TYPE_CHECKING:\n    from actorrt.b import X\n"
        "def f():\n    from actorrt.c import y\n    import actorrt.d\n"
    )
    modules = {"actorrt", "actorrt.a", "actorrt.b", "actorrt.c", "actorrt.d", "actorrt.e"}
    assert imports_of(ast.parse(source), modules) == {"actorrt.a", "actorrt.b", "actorrt.c", "actorrt.d"}


def test_allowed_reads_the_layers() -> None:
    assert allowed("actorrt.master.table", "actorrt.common.errors")
    assert not allowed("actorrt.common.errors", "actorrt.master.table")
    assert not allowed("actorrt.master.servicer", "actorrt.worker.daemon")  # peers
    assert allowed("actorrt.host.server", "actorrt.worker.fork_server_link")  # one module granted
    assert not allowed("actorrt.host.server", "actorrt.worker.daemon")
    assert allowed("actorrt.metrics", "actorrt.worker.metrics")  # the public face


def test_every_import_points_down_a_layer() -> None:
    graph = import_graph()
    assert {layer_of(m) for m in graph} - {""} == set(LAYERS), "a package without a row in LAYERS"
    upward = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if d != "actorrt" and not allowed(m, d))
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_each_package_says_what_it_may_import_as_the_layers_have_it() -> None:
    for layer, rules in LAYERS.items():
        path = PACKAGE / layer / "__init__.py" if (PACKAGE / layer).is_dir() else PACKAGE / f"{layer}.py"
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        said = re.search(r"May import:(.*?)(?:\n- |\Z)", doc, re.S)
        assert said, f"{path}: its docstring has no 'May import:' line"
        named = set(re.findall(r"``([a-z_.]+)``", said.group(1)))
        assert named == rules, f"{path} says it may import {sorted(named)}; LAYERS has {sorted(rules)}"


def test_actorrt_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 40
    cycle = find_cycle({m: deps - {"actorrt"} for m, deps in graph.items() if m != "actorrt"})
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_module_but_the_package_and_the_cli_imports_the_package_root() -> None:
    """``import actorrt`` (the root) from a private module would pull every module in and make
    each private module a part of every cycle through the root."""
    graph = import_graph()
    offenders = sorted(m for m, deps in graph.items() if "actorrt" in deps and m not in ("actorrt", "actorrt.__main__"))
    assert not offenders, offenders

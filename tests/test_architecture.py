"""Which way imports run between kag's packages, read from the source with ``ast``.

- every module imports, and the module-level imports form no cycle;
- within every package, at any depth, no two parts (modules, sub-packages) import each other,
  even lazily inside a function or under ``TYPE_CHECKING``;
- retrieval never imports generation (generation builds retrievers and passes them an
  embedding function; retrieval receives it), not even lazily inside a function;
- no command module imports another one; shared plumbing lives in the private modules of
  ``kag.commands`` (``_options``, where `kag stats` and its sub-commands find the options
  they share, ``_help``, ``_before``, ``_globs``, ``_trees``, ``_report``, ``_ci``, ``_values``), which
  import no command;
- typer and rich stay at the CLI edge; the library imports neither the commands nor the renderers.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import pytest

KAG = Path(__file__).resolve().parent.parent / "kag"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(KAG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(KAG.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The kag modules an import statement loads (``from pkg import mod`` names ``pkg.mod``)."""
    known = modules()
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".")
            if modules()[module].name != "__init__.py":
                package.pop()
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, base] if base else package)
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    return [name for name in names if name == "kag" or name.startswith("kag.")]


def imports(module: str, top_level_only: bool) -> set[str]:
    """The kag modules ``module`` imports: all of them, or only those its import runs
    (module level, outside ``if TYPE_CHECKING``)."""
    tree = ast.parse(modules()[module].read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.update(_targets(module, node))
            elif isinstance(node, ast.If) and not _is_type_checking(node):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    if top_level_only:
        visit(tree.body)
    else:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.update(_targets(module, node))
    found.discard(module)
    return found


def test_the_parser_sees_lazy_and_module_level_imports() -> None:
    # The checks below are only as good as this reading of import statements.
    assert "kag.retrieval.factory" in imports("kag.generation.config", top_level_only=False)
    assert "kag.retrieval.factory" not in imports("kag.generation.config", top_level_only=True)
    assert "kag.errors" in imports("kag.generation.config", top_level_only=True)
    assert "kag.retrieval.base" in imports("kag.generation.generator", top_level_only=True)


def test_module_level_imports_form_no_cycle() -> None:
    graph = {module: imports(module, top_level_only=True) for module in modules()}
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")
    assert set(order) >= set(modules())


def packages() -> list[str]:
    """``kag`` and every package below it, at any depth."""
    return sorted(module for module, path in modules().items() if path.name == "__init__.py")


def _part(name: str, package: str) -> str:
    """The part of ``package`` that holds module ``name``: ``package`` itself for its
    ``__init__``, else the module or sub-package right below it
    (``kag.grading.mcq.walk`` is part ``kag.grading.mcq`` of ``kag.grading``)."""
    if name == package:
        return package
    return f"{package}.{name[len(package) + 1 :].split('.')[0]}"


def _cycle_pairs(graph: Mapping[str, set[str]]) -> set[frozenset[str]]:
    """The edges (as unordered pairs) that lie on a cycle of ``graph``: those whose two ends
    are in one strongly connected component."""
    component: dict[str, int] = {}
    for i, members in enumerate(_components(graph)):
        component.update(dict.fromkeys(members, i))
    return {
        frozenset((a, b)) for a, targets in graph.items() for b in targets if component[a] == component[b]
    }


def _components(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of ``graph`` (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == node:
                        break
                found.append(members)
    return found


# ``kag`` hands out the Python API (``kag.grade``...) on first attribute access, and every
# module may read ``kag.__version__``: the root package's one lazy import is the API edge.
EXEMPT_EDGES = {("kag", "kag.api")}


def part_cycles(imports_of: Mapping[str, set[str]], package_names: Sequence[str]) -> set[frozenset[str]]:
    """The pairs of parts of one package (modules, sub-packages, its ``__init__``) that
    depend on each other through a cycle, for every package of ``package_names``;
    ``imports_of`` maps each module to every kag module it imports, at any depth."""
    pairs: set[frozenset[str]] = set()
    for package in package_names:
        graph: dict[str, set[str]] = {}
        for module, targets in imports_of.items():
            if not _within(module, package):
                continue
            source = _part(module, package)
            graph.setdefault(source, set())
            for target in targets:
                if _within(target, package) and (module, target) not in EXEMPT_EDGES:
                    part = _part(target, package)
                    if part != source:
                        graph[source].add(part)
                        graph.setdefault(part, set())
        pairs |= _cycle_pairs(graph)
    return pairs


def test_part_cycles_sees_a_cycle_below_the_top_level_packages() -> None:
    imports_of = {
        "kag.a": set(),
        "kag.a.b": set(),
        "kag.a.b.x": {"kag.a.c"},
        "kag.a.b.y": set(),
        "kag.a.c": {"kag.a.b.y"},
        "kag.a.d": {"kag.a.c"},
    }
    assert part_cycles(imports_of, ["kag", "kag.a", "kag.a.b"]) == {frozenset(("kag.a.b", "kag.a.c"))}
    assert part_cycles({**imports_of, "kag.a.c": set()}, ["kag", "kag.a", "kag.a.b"]) == set()


def _all_cycles() -> set[frozenset[str]]:
    return part_cycles({m: imports(m, top_level_only=False) for m in modules()}, packages())


def test_no_package_has_parts_that_import_each_other() -> None:
    """Within every package, at any depth, its modules and sub-packages import one another
    one way only, counting imports inside functions and under ``TYPE_CHECKING``."""
    assert {tuple(sorted(pair)) for pair in _all_cycles()} == set()


def test_retrieval_never_imports_generation() -> None:
    offending = {
        module: sorted(
            name for name in imports(module, top_level_only=False) if name.startswith("kag.generation")
        )
        for module in modules()
        if module.startswith("kag.retrieval")
    }
    assert {module: names for module, names in offending.items() if names} == {}


def _is_shared_plumbing(module: str) -> bool:
    return module == "kag.commands" or module.removeprefix("kag.commands.").startswith("_")


def test_no_command_imports_another_command() -> None:
    assert _is_shared_plumbing("kag.commands._options") and not _is_shared_plumbing("kag.commands.stats")
    offending = {
        module: sorted(
            name
            for name in imports(module, top_level_only=False)
            if name.startswith("kag.commands") and not _is_shared_plumbing(name)
        )
        for module in modules()
        if module.startswith("kag.commands.")
    }
    assert {module: names for module, names in offending.items() if names} == {}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


# The only places a terminal library may be imported: the CLI edge and the rendering package.
TERMINAL_LIBRARIES = ("typer", "rich", "click")
CLI_EDGE = ("kag.cli", "kag.commands", "kag.__main__")
# The Python API is an edge like the CLI (it hands users the JSON document the renderer
# builds); ``kag`` itself reaches it only lazily, through ``kag.__getattr__``.
PYTHON_EDGE = ("kag.api",)
TERMINAL_ALLOWED = ("kag.cli", "kag.console", "kag.commands", "kag.render")


def external_imports(module: str) -> set[str]:
    """The top-level names of the non-relative imports of ``module``, at any depth."""
    tree = ast.parse(modules()[module].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_terminal_libraries_only_at_the_cli_edge() -> None:
    assert "rich" in external_imports("kag.render.triplets")  # inside a function: still seen
    offending = {
        module: sorted(external_imports(module) & set(TERMINAL_LIBRARIES))
        for module in modules()
        if not any(_within(module, allowed) for allowed in TERMINAL_ALLOWED)
    }
    assert {module: names for module, names in offending.items() if names} == {}


def test_library_never_imports_the_cli_edge_or_the_renderers() -> None:
    """Imports run downwards: the library knows neither the commands nor how it is shown."""
    offending = {
        module: sorted(
            name
            for name in imports(module, top_level_only=False)
            if any(_within(name, edge) for edge in CLI_EDGE)
            or (_within(name, "kag.render") and not _within(module, "kag.render"))
        )
        for module in modules()
        if not any(_within(module, edge) for edge in (*CLI_EDGE, *PYTHON_EDGE)) and module != "kag"
    }
    assert {module: names for module, names in offending.items() if names} == {}


def test_nothing_in_the_library_imports_the_python_api() -> None:
    offending = {
        module: sorted(name for name in imports(module, top_level_only=False) if _within(name, "kag.api"))
        for module in modules()
        if module != "kag" and not any(_within(module, edge) for edge in (*CLI_EDGE, *PYTHON_EDGE))
    }
    assert {module: names for module, names in offending.items() if names} == {}


SHARED_FLAGS = {"--datasets", "--results", "--prefix", "--setup", "--dataset", "--format", "--output"}
STATS_FAMILY = ("kag.commands.stats", "kag.commands.find", "kag.commands.compare", "kag.commands.judge")


def test_stats_family_declares_shared_options_only_in_options() -> None:
    """`kag stats` and its sub-commands take --results, --prefix, --format ... from
    kag.commands._options, so that a flag is spelled (and typed) in one place."""
    declared = []
    for module in STATS_FAMILY:
        for node in ast.walk(ast.parse(modules()[module].read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("typer.Option", "Option"):
                flags = {a.value for a in node.args if isinstance(a, ast.Constant)}
                declared += [
                    f"{module} (line {node.lineno}) declares {f}" for f in sorted(flags & SHARED_FLAGS)
                ]
    assert not declared, "\n".join(declared)


def test_every_module_imports_first() -> None:
    """Each module imports in a fresh interpreter, as the first kag module: an import cycle
    through a package's ``__init__`` only shows when the cycle's far end is imported first."""
    names = [m for m in sorted(modules()) if m != "kag.__main__"]
    script = (
        "import importlib, sys\n"
        "failed = []\n"
        f"for name in {names!r}:\n"
        "    for loaded in [m for m in sys.modules if m == 'kag' or m.startswith('kag.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        failed.append(f'{name}: {exc}')\n"
        "print('\\n'.join(failed))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=KAG.parent
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


MAX_LINES = 600


def test_no_module_over_600_lines() -> None:
    sizes = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in modules().items()}
    assert {module: n for module, n in sizes.items() if n > MAX_LINES} == {}

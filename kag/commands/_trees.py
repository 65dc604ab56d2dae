"""The result trees of the ``-r`` values: one bare ``DIR``, or ``LABEL=DIR`` trees whose
setups are reported as ``LABEL/setup``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kag.errors import UsageError

if TYPE_CHECKING:
    from kag.grading.mcq.trees import ResultSource


def parse_trees(values: Sequence[str | Path] | str | Path | None) -> ResultSource:
    """The result trees of the ``-r`` values: one unlabelled tree for none (``.``) or one
    bare ``DIR`` (setups keep their names), else one labelled tree per ``LABEL=DIR``.

    A value is ``LABEL=DIR`` when it is not an existing path and holds ``=``: split on the
    first ``=``. UsageError (exit 2) when the part before it is not a label (empty, with
    ``/``, whitespace or ``*?[]``) or nothing follows it, when bare and labelled values are
    mixed or several bare ones are given, and when a label is given twice.
    """
    from kag.grading.mcq.trees import ResultTree, check_trees, label_problem, one_tree

    if values is None or isinstance(values, (str, Path)):
        values = [] if values is None else [values]
    if not values:
        return one_tree(Path("."))
    parsed: list[tuple[str | None, str]] = []
    for value in map(str, values):
        if "=" not in value or os.path.lexists(value):
            parsed.append((None, value))
            continue
        label, _, root = value.partition("=")
        problem = label_problem(label)
        if problem is not None:
            raise UsageError(f"-r {value}: not a directory, nor LABEL=DIR: {problem}")
        if not root:
            raise UsageError(f"-r {value}: no directory after '='")
        parsed.append((label, str(Path(root))))  # normalized as a bare DIR is
    bare = [root for label, root in parsed if label is None]
    if len(parsed) == 1 and bare:
        return one_tree(Path(bare[0]))
    if len(bare) == len(parsed):
        raise UsageError(
            f"-r given {len(bare)} times without labels: name each tree, -r LABEL=DIR "
            "(its setups are reported as LABEL/setup)"
        )
    if bare:
        raise UsageError(f"-r {bare[0]}: a bare DIR cannot go with LABEL=DIR trees; label every tree")
    trees = tuple(ResultTree(label, root) for label, root in parsed if label is not None)
    check_trees(trees)
    return trees


def _one_bare(values: Sequence[str | Path] | str | Path | None) -> Path | None:
    """The tree of ``values`` when they name one unlabelled tree as :func:`parse_trees`
    reads them (none: ``.``), else None. Decided here, without the grading package that
    ``parse_trees`` loads, so that ``kag stats find`` starts without it."""
    if values is None or isinstance(values, (str, Path)):
        values = [] if values is None else [values]
    if not values:
        return Path(".")
    if len(values) == 1:
        value = str(values[0])
        if "=" not in value or os.path.lexists(value):
            return Path(value)
    return None


def one_tree(values: Sequence[str | Path] | str | Path | None, command: str) -> Path:
    """The one result tree a command reads (``.`` by default); UsageError for several or
    labelled trees, which ``command`` does not report."""
    bare = _one_bare(values)
    if bare is not None:
        return bare
    source = parse_trees(values)
    if source[0].label is None:
        return Path(source[0].root)
    if len(source) > 1:
        given = " ".join(f"-r {t.label}={t.root}" for t in source[:3]) + (" ..." if len(source) > 3 else "")
        raise UsageError(f"{command} reads one result tree: give one -r DIR, not LABEL=DIR (got {given})")
    tree = source[0]
    value = f"-r {tree.label}={tree.root}"
    if os.path.isdir(tree.root):
        raise UsageError(
            f"{command} reads one result tree: give -r DIR, not LABEL=DIR (-r {tree.root}, not {value})"
        )
    raise UsageError(
        f"{command} reads one result tree: give -r DIR, not LABEL=DIR ({value}: neither "
        f"'{tree.label}={tree.root}' nor '{tree.root}' is a directory)"
    )

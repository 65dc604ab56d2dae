"""Several result trees graded as one run.

Each tree has a label; its setups are reported as ``LABEL/setup``, so that the same setup
run twice (two trees) shows as two setups that the comparisons pair by question. Every
tree is graded by :func:`~kag.grading.mcq.walk.grade_tree` with the same rules, and the
runs are merged: the metrics keep their setups apart, the file counters are summed and
the datasets file is counted once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kag.datasets import Datasets
from kag.errors import UsageError
from kag.grading.mcq.metrics import GradeRun
from kag.grading.mcq.walk import grade_tree

#: Between a tree's label and a setup name: a setup name (a file name) never holds it.
SEPARATOR = "/"
# Besides "/", characters that would make a labelled name hard to use: a space or a
# control character in a table cell, a glob character in a `--setup` filter.
_NOT_IN_LABEL = frozenset("/*?[]")


@dataclass(frozen=True)
class LabelledTree:
    """A result tree and the label its setups are reported under."""

    label: str
    root: str


#: What a report grades: one unlabelled tree (setups keep their names) or labelled trees.
ResultSource = str | Path | tuple[LabelledTree, ...]


def label_problem(label: str) -> str | None:
    """Why ``label`` cannot label a tree, or None when it can.

    A label is non-empty and holds no ``/`` (the separator of ``LABEL/setup``), no
    whitespace, no control character and none of the glob characters ``*?[]``.
    """
    if not label:
        return "the label is empty"
    if SEPARATOR in label:
        return f"a label cannot contain '{SEPARATOR}'"
    if any(c in _NOT_IN_LABEL or c.isspace() or not c.isprintable() for c in label):
        return "a label cannot contain whitespace, control characters or the glob characters *?[]"
    return None


def labelled(label: str, setup: str) -> str:
    """``LABEL/setup``: the name of ``setup`` of the tree labelled ``label``."""
    return f"{label}{SEPARATOR}{setup}"


def split_labelled(name: str) -> tuple[str, str]:
    """(label, setup) of a ``LABEL/setup`` name (labels hold no ``/``); ValueError otherwise."""
    label, sep, setup = name.partition(SEPARATOR)
    if not sep:
        raise ValueError(f"{name!r} is not a LABEL{SEPARATOR}setup name")
    return label, setup


def check_trees(trees: Sequence[LabelledTree]) -> None:
    """UsageError when there is no tree, a label is invalid or given twice."""
    if not trees:
        raise UsageError("no result tree to grade")
    seen: set[str] = set()
    for tree in trees:
        problem = label_problem(tree.label)
        if problem is not None:
            raise UsageError(f"-r {tree.label}={tree.root}: {problem}")
        if tree.label in seen:
            raise UsageError(f"-r {tree.label}={tree.root}: the label {tree.label!r} is given twice")
        seen.add(tree.label)


def grade_trees(
    datasets: Datasets,
    trees: Sequence[LabelledTree],
    prefix: str = "",
    *,
    setups: Sequence[str] = (),
    **options: Any,
) -> GradeRun:
    """Grade each tree with :func:`~kag.grading.mcq.walk.grade_tree` and merge the runs.

    - ``tallies``, ``records`` and ``open_records``: the setups are renamed ``LABEL/setup``;
      records are sorted by (dataset, question, labelled setup) as a single tree's are.
    - ``setups`` globs match the labelled name (``run1/*`` selects one tree); ``prefix``
      and the other ``options`` of ``grade_tree`` apply to every tree.
    - ``skipped_files``, ``ignored_files`` and the unreadable files (their real paths, tree
      by tree) are summed over the trees; ``datasets`` and ``scorable_questions`` count the
      one datasets file once.

    Raises UsageError for no tree, an invalid or repeated label; what ``grade_tree``
    raises for a tree (InputError naming a root that is not a directory).
    """
    check_trees(trees)
    runs = [
        (
            tree.label,
            grade_tree(datasets, tree.root, prefix, setups=setups, setup_label=tree.label, **options),
        )
        for tree in trees
    ]
    tallies = {
        (labelled(label, setup), dataset): metrics
        for label, run in runs
        for (setup, dataset), metrics in run.tallies.items()
    }
    records = None
    if all(run.records is not None for _, run in runs):
        records = tuple(
            sorted(
                (
                    dataclasses.replace(r, setup=labelled(label, r.setup))
                    for label, run in runs
                    for r in run.records or ()
                ),
                key=lambda r: (r.dataset, r.question, r.setup),
            )
        )
    open_records = None
    if all(run.open_records is not None for _, run in runs):
        open_records = tuple(
            sorted(
                (
                    dataclasses.replace(r, setup=labelled(label, r.setup))
                    for label, run in runs
                    for r in run.open_records or ()
                ),
                key=lambda r: (r.dataset, r.question, r.setup),
            )
        )
    first = runs[0][1]
    return GradeRun(
        tallies={key: tallies[key] for key in sorted(tallies)},
        datasets=first.datasets,
        scorable_questions=first.scorable_questions,
        skipped_files=sum(run.skipped_files for _, run in runs),
        ignored_files=sum(run.ignored_files for _, run in runs),
        unreadable=tuple(u for _, run in runs for u in run.unreadable),
        records=records,
        open_records=open_records,
    )


def grade_source(
    datasets: Datasets, source: ResultSource, prefix: str = "", *, setups: Sequence[str] = (), **options: Any
) -> GradeRun:
    """:func:`~kag.grading.mcq.walk.grade_tree` for one unlabelled tree (exactly as a report
    over one tree), :func:`grade_trees` for labelled trees."""
    if isinstance(source, (str, Path)):
        return grade_tree(datasets, source, prefix, setups=setups, **options)
    return grade_trees(datasets, source, prefix, setups=setups, **options)


def describe_source(source: ResultSource) -> str:
    """How the trees were given: ``DIR``, or ``LABEL=DIR, LABEL=DIR``."""
    if isinstance(source, (str, Path)):
        return str(source)
    return ", ".join(f"{t.label}={t.root}" for t in source)

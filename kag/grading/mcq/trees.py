"""The result trees a report grades, and several of them graded as one run.

What a report grades is always a tuple of :class:`ResultTree` (:data:`ResultSource`): one
unlabelled tree (label None: its setups keep their names), or labelled trees. Each labelled
tree's setups are reported as ``LABEL/setup``, named so once, here, so that the same setup
run twice (two trees) shows as two setups that the comparisons pair by question. Every
tree is graded by :func:`~kag.grading.mcq.walk.grade_tree` with the same request, and the
runs are merged field by field, a field a measure owns by that measure's merge: the
metrics, records, epochs and evidence keep their setups apart, the file counters are summed
and the datasets file is counted once.
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
from kag.grading.mcq.request import GradeRequest
from kag.grading.mcq.walk import grade_tree
from kag.grading.measures import merge_by_setup, run_fields
from kag.grading.record import GradedFile

#: Between a tree's label and a setup name: a setup name (a file name) never holds it.
SEPARATOR = "/"
# Besides "/", characters that would make a labelled name hard to use: a space or a
# control character in a table cell, a glob character in a `--setup` filter.
_NOT_IN_LABEL = frozenset("/*?[]")


@dataclass(frozen=True)
class ResultTree:
    """A result tree and the label its setups are reported under (None: one tree alone,
    whose setups keep their names)."""

    label: str | None
    root: str


#: What a report grades: ``(ResultTree(None, root),)`` for one tree, else labelled trees.
ResultSource = tuple[ResultTree, ...]


def one_tree(root: str | Path) -> ResultSource:
    """The source of one unlabelled tree."""
    return (ResultTree(None, str(root)),)


def is_labelled(source: ResultSource) -> bool:
    """Whether ``source`` holds labelled trees (setups named ``LABEL/setup``)."""
    return any(tree.label is not None for tree in source)


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


def file_place(source: ResultSource, setup: str) -> tuple[str | None, str, str]:
    """(label, tree root, the setup's name inside its tree) of a setup as a report over
    ``source`` names it (``LABEL/setup`` among labelled trees; label None for one tree)."""
    if not is_labelled(source):
        return None, source[0].root, setup
    label, name = split_labelled(setup)
    for tree in source:
        if tree.label == label:
            return label, tree.root, name
    raise ValueError(f"setup {setup!r}: no tree is labelled {label!r}")


def check_trees(trees: Sequence[ResultTree]) -> None:
    """UsageError when there is no tree, a label is invalid or given twice, or a tree is
    unlabelled among several."""
    if not trees:
        raise UsageError("no result tree to grade")
    if len(trees) == 1 and trees[0].label is None:
        return
    seen: set[str] = set()
    for tree in trees:
        if tree.label is None:
            raise UsageError(f"-r {tree.root}: a bare DIR cannot go with LABEL=DIR trees; label every tree")
        problem = label_problem(tree.label)
        if problem is not None:
            raise UsageError(f"-r {tree.label}={tree.root}: {problem}")
        if tree.label in seen:
            raise UsageError(f"-r {tree.label}={tree.root}: the label {tree.label!r} is given twice")
        seen.add(tree.label)


def grade_trees(
    datasets: Datasets,
    trees: Sequence[ResultTree],
    request: GradeRequest | None = None,
    *,
    workers: int | None = None,
) -> GradeRun:
    """Grade each tree with :func:`~kag.grading.mcq.walk.grade_tree` and merge the runs
    (:func:`merge_runs`: every field, setups renamed ``LABEL/setup``).

    - The ``request`` (None: ``GradeRequest()``) applies to every tree, each with its own
      label: its ``setups`` globs match the labelled name (``run1/*`` selects one tree).
    - ``skipped_files``, ``ignored_files`` and the unreadable files (their real paths, tree
      by tree) are summed over the trees; ``datasets``, ``scorable_questions`` and
      ``scorable_open_questions`` count the one datasets file once.
    - ``epochs`` and ``evidence`` (when asked for) hold each setup's values of its own tree.

    Raises UsageError for no tree, an unlabelled tree, an invalid or repeated label; what ``grade_tree``
    raises for a tree (InputError naming a root that is not a directory).
    """
    check_trees(trees)
    request = request if request is not None else GradeRequest()
    runs: list[tuple[str, GradeRun]] = []
    for tree in trees:
        if tree.label is None:
            raise UsageError(f"-r {tree.root}: grade_trees grades labelled trees (grade_source grades one)")
        runs.append(
            (tree.label, grade_tree(datasets, tree.root, request.of_tree(tree.label), workers=workers))
        )
    return merge_runs(runs)


#: (label, run) of each tree, in the order the trees were given.
LabelledRuns = Sequence[tuple[str, GradeRun]]


def merge_runs(runs: LabelledRuns) -> GradeRun:
    """One run of the labelled runs of several trees: each field a measure owns by that
    measure's merge (:attr:`~kag.grading.measures.registry.Measure.merge_trees`), each of the
    run's own fields by its rule in :func:`_merge_own`.

    - ``tallies``, ``epochs`` and ``evidence`` (keyed by (setup, dataset)): the setups are
      renamed ``LABEL/setup``, keys sorted as a single tree's are.
    - ``records`` and ``open_records``: setups renamed the same way, sorted by (dataset,
      question, labelled setup) as a single tree's are.
    - ``skipped_files``, ``ignored_files`` and ``unreadable``: summed (concatenated) in tree
      order.
    - ``datasets``, ``scorable_questions``, ``scorable_open_questions`` (the datasets file)
      and ``extract`` (an option): the first run's, every tree being graded with the same.

    An optional field (records, open_records, epochs, evidence) is None unless every run
    has it. Raises ValueError when ``runs`` is empty.
    """
    if not runs:
        raise ValueError("no run to merge")
    merged = _merge_own(runs)
    for name, owner in run_fields().items():
        merge = owner.merge_trees
        assert merge is not None  # register() refuses a run field without its merge
        merged[name] = merge([(label, getattr(run, name)) for label, run in runs], labelled)
    # A field with no rule would be dropped, its default in its place: fail instead.
    missing = [f.name for f in dataclasses.fields(GradeRun) if f.name not in merged]
    if missing:
        raise TypeError(f"merge_runs: no rule merges the run field(s) {', '.join(missing)}")
    return GradeRun(**merged)


def _merge_own(runs: LabelledRuns) -> dict[str, Any]:
    """The run's own fields (those no measure owns) merged, one rule each."""
    first = runs[0][1]
    return {
        "tallies": merge_by_setup([(label, run.tallies) for label, run in runs], labelled),
        # The datasets file is the same for every tree: counted once.
        "datasets": first.datasets,
        "scorable_questions": first.scorable_questions,
        "skipped_files": sum(run.skipped_files for _, run in runs),
        "ignored_files": sum(run.ignored_files for _, run in runs),
        "unreadable": tuple(bad for _, run in runs for bad in run.unreadable),
        "records": _records([(label, run.records) for label, run in runs]),
        "open_records": _records([(label, run.open_records) for label, run in runs]),
    }


def _records(parts: Sequence[tuple[str, tuple[GradedFile, ...] | None]]) -> tuple[GradedFile, ...] | None:
    """Per-file records, the setups labelled; None unless every run kept them."""
    if any(part is None for _, part in parts):
        return None
    return tuple(
        sorted(
            (
                dataclasses.replace(r, setup=labelled(label, r.setup))
                for label, part in parts
                for r in part or ()
            ),
            key=lambda r: (r.dataset, r.question, r.setup),
        )
    )


def grade_source(
    datasets: Datasets,
    source: ResultSource,
    request: GradeRequest | None = None,
    *,
    workers: int | None = None,
) -> GradeRun:
    """:func:`~kag.grading.mcq.walk.grade_tree` for one unlabelled tree (exactly as a report
    over one tree), :func:`grade_trees` for labelled trees."""
    if not is_labelled(source):
        check_trees(source)
        return grade_tree(datasets, source[0].root, request, workers=workers)
    return grade_trees(datasets, source, request, workers=workers)


def describe_source(source: ResultSource) -> str:
    """How the trees were given: ``DIR``, or ``LABEL=DIR, LABEL=DIR``."""
    return ", ".join(t.root if t.label is None else f"{t.label}={t.root}" for t in source)

"""The answers of labelled result trees (setups named ``LABEL/setup``), so that the
comparisons pair the setups of different trees by question as they pair those of one."""

from __future__ import annotations

__all__ = ["answer_set_from_source", "answers_from_trees", "load_source_answers", "tree_part"]

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from kag.datasets import Datasets
from kag.grading.compare.records import (
    AnswerSet,
    answer_set,
    answer_set_from_run,
    answers_from_run,
)
from kag.grading.mcq.metrics import GradeRun
from kag.grading.mcq.trees import (
    SEPARATOR,
    LabelledTree,
    ResultSource,
    grade_source,
    labelled,
    split_labelled,
)
from kag.grading.record import GradedFile


def answers_from_trees(
    run: GradeRun,
    datasets: Datasets,
    trees: Sequence[LabelledTree],
    prefix: str = "",
    *,
    extracted: bool = False,
) -> list[GradedFile]:
    """The records of a ``grade_trees(..., keep_records=True)`` run (:func:`answers_from_run`),
    named ``LABEL/setup``, whose path is the real file in the tree labelled LABEL and whose
    evidence hit is that file's.

    Sorted by (dataset, question, labelled setup). Raises ValueError when the run kept no
    records or a record's label names none of ``trees``.
    """
    if run.records is None:
        raise ValueError("the grading run kept no per-file records (grade_trees(..., keep_records=True))")
    known = {t.label for t in trees}
    for r in run.records:
        label, _ = split_labelled(r.setup)
        if label not in known:
            raise ValueError(f"record of setup {r.setup!r}: no tree is labelled {label!r}")
    answers: list[GradedFile] = []
    for tree in trees:
        answers.extend(
            dataclasses.replace(a, setup=labelled(tree.label, a.setup))
            for a in answers_from_run(
                tree_part(run, tree.label), datasets, tree.root, prefix, extracted=extracted
            )
        )
    answers.sort(key=lambda a: (a.dataset, a.question, a.setup))
    return answers


def tree_part(run: GradeRun, label: str) -> GradeRun:
    """The part of a merged run (:func:`~kag.grading.mcq.trees.merge_runs`) that is the tree
    labelled ``label``'s, its setups named as that tree graded alone names them: the
    records, open records, tallies, epochs and evidence of its setups only. The other
    fields (the file counters, the datasets file) are the merged run's."""
    return dataclasses.replace(
        run,
        tallies=_own_keys(run.tallies, label),
        records=None if run.records is None else _own_records(run.records, label),
        open_records=None if run.open_records is None else _own_records(run.open_records, label),
        epochs=None if run.epochs is None else _own_keys(run.epochs, label),
        evidence=None if run.evidence is None else _own_keys(run.evidence, label),
    )


def _unlabelled(name: str, label: str) -> str | None:
    """The setup of ``LABEL/setup`` when LABEL is ``label``, else None."""
    mine, _, setup = name.partition(SEPARATOR)
    return setup if mine == label else None


_V = TypeVar("_V")


def _own_records(records: tuple[GradedFile, ...], label: str) -> tuple[GradedFile, ...]:
    return tuple(
        dataclasses.replace(r, setup=setup)
        for r in records
        if (setup := _unlabelled(r.setup, label)) is not None
    )


def _own_keys(mapping: Mapping[tuple[str, str], _V], label: str) -> dict[tuple[str, str], _V]:
    """The entries of a mapping keyed by (setup, dataset) whose setup is of ``label``'s tree."""
    return {
        (setup, dataset): value
        for (name, dataset), value in mapping.items()
        if (setup := _unlabelled(name, label)) is not None
    }


def answer_set_from_source(
    run: GradeRun, datasets: Datasets, source: ResultSource, prefix: str = "", *, extracted: bool = False
) -> AnswerSet:
    """:func:`~kag.grading.compare.records.answer_set_from_run` of one unlabelled tree, or
    the same for labelled trees (:func:`answers_from_trees`; the summary and the mean scores
    over epochs of the merged run, under the labelled names)."""
    if isinstance(source, (str, Path)):
        return answer_set_from_run(run, datasets, source, prefix, extracted=extracted)
    answers = answers_from_trees(run, datasets, source, prefix, extracted=extracted)
    return answer_set(run, answers, extracted=extracted)


def load_source_answers(
    datasets: Datasets,
    source: ResultSource,
    prefix: str = "",
    setups: Sequence[str] = (),
    dataset_globs: Sequence[str] = (),
    workers: int | None = None,
    *,
    extract: str | None = None,
    extracted: bool = False,
    evidence: bool = False,
    epochs: bool = False,
) -> AnswerSet:
    """Grade one tree or labelled trees like `kag stats` (same rules, filters, warnings and
    summary) and return the answers with the profile of each setup (:func:`setup_configs`).

    ``extract``: the ``--extract`` spec; ``extracted``: pair on the extracted grade;
    ``evidence``: with each answer's evidence hit; ``epochs``: with the per-question mean
    scores over the epochs (``AnswerSet.means``)."""
    run = grade_source(
        datasets,
        source,
        prefix,
        setups=setups,
        dataset_globs=dataset_globs,
        keep_records=True,
        workers=workers,
        extract=extract,
        evidence=evidence,
        epochs=epochs,
    )
    return answer_set_from_source(run, datasets, source, prefix, extracted=extracted)

"""The answers of labelled result trees (setups named ``LABEL/setup``), so that the
comparisons pair the setups of different trees by question as they pair those of one."""

from __future__ import annotations

__all__ = ["answer_set_from_source", "answers_from_trees", "load_source_answers"]

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from kag.datasets import Datasets
from kag.grading.compare.records import (
    Answer,
    AnswerSet,
    answer_set_from_run,
    answers_from_run,
    setup_configs,
    setup_profiles,
)
from kag.grading.mcq.metrics import GradeRun
from kag.grading.mcq.rule import GradedFile
from kag.grading.mcq.summary import summarize
from kag.grading.mcq.trees import LabelledTree, ResultSource, grade_source, labelled, split_labelled


def answers_from_trees(
    run: GradeRun,
    datasets: Datasets,
    trees: Sequence[LabelledTree],
    prefix: str = "",
    *,
    extracted: bool = False,
) -> list[Answer]:
    """One :class:`Answer` per record of a ``grade_trees(..., keep_records=True)`` run,
    named ``LABEL/setup``, whose path is the real file in the tree labelled LABEL.

    Sorted by (dataset, question, labelled setup). Raises ValueError when the run kept no
    records or a record's label names none of ``trees``.
    """
    if run.records is None:
        raise ValueError("the grading run kept no per-file records (grade_trees(..., keep_records=True))")
    by_label: dict[str, list[GradedFile]] = {t.label: [] for t in trees}
    for r in run.records:
        label, setup = split_labelled(r.setup)
        if label not in by_label:
            raise ValueError(f"record of setup {r.setup!r}: no tree is labelled {label!r}")
        by_label[label].append(dataclasses.replace(r, setup=setup))
    answers: list[Answer] = []
    for tree in trees:
        own = dataclasses.replace(run, records=tuple(by_label[tree.label]))
        answers.extend(
            dataclasses.replace(a, setup=labelled(tree.label, a.setup))
            for a in answers_from_run(own, datasets, tree.root, prefix, extracted=extracted)
        )
    answers.sort(key=lambda a: (a.dataset, a.question, a.setup))
    return answers


def answer_set_from_source(
    run: GradeRun, datasets: Datasets, source: ResultSource, prefix: str = "", *, extracted: bool = False
) -> AnswerSet:
    """:func:`~kag.grading.compare.records.answer_set_from_run` of one unlabelled tree, or
    the same for labelled trees (:func:`answers_from_trees`)."""
    if isinstance(source, (str, Path)):
        return answer_set_from_run(run, datasets, source, prefix, extracted=extracted)
    answers = answers_from_trees(run, datasets, source, prefix, extracted=extracted)
    return AnswerSet(tuple(answers), summarize(run), setup_profiles(answers, setup_configs(answers)))


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

"""The answers of the result trees a report grades: one tree, or labelled trees (setups
named ``LABEL/setup`` by :func:`kag.grading.mcq.trees.merge_runs`, and only there), so that
the comparisons pair the setups of different trees by question as they pair those of one."""

from __future__ import annotations

__all__ = ["answer_set_from_source", "answers_from_trees", "load_source_answers"]


from kag.datasets import Datasets
from kag.grading.compare.records import (
    AnswerSet,
    answer_set,
    answer_set_from_run,
    paired_records,
)
from kag.grading.mcq.metrics import GradeRun
from kag.grading.mcq.request import RECORDS, GradeRequest
from kag.grading.mcq.trees import ResultSource, file_place, grade_source, is_labelled, split_labelled
from kag.grading.record import GradedFile


def answers_from_trees(
    run: GradeRun,
    datasets: Datasets,
    trees: ResultSource,
    prefix: str = "",
    *,
    extracted: bool = False,
) -> list[GradedFile]:
    """The records of a :func:`~kag.grading.mcq.trees.grade_trees` run that kept them
    (:func:`answers_from_run`), named ``LABEL/setup`` as the run names them; each record's
    path is its real file, in the tree labelled LABEL, and its evidence hit that file's.

    Sorted by (dataset, question, labelled setup). Raises ValueError when the run kept no
    records or a record's label names none of ``trees``.
    """
    if run.records is None:
        raise ValueError("the grading run kept no per-file records (a request asking for 'records')")
    known = {t.label for t in trees}
    for r in run.records:
        label, _ = split_labelled(r.setup)
        if label not in known:
            raise ValueError(f"record of setup {r.setup!r}: no tree is labelled {label!r}")

    def place(setup: str) -> tuple[str, str]:
        _label, root, name = file_place(trees, setup)
        return root, name

    return paired_records(run, datasets, place, prefix, extracted=extracted)


def answer_set_from_source(
    run: GradeRun, datasets: Datasets, source: ResultSource, prefix: str = "", *, extracted: bool = False
) -> AnswerSet:
    """:func:`~kag.grading.compare.records.answer_set_from_run` of one unlabelled tree, or
    the same for labelled trees (:func:`answers_from_trees`; the summary and the mean scores
    over epochs of the merged run, under the labelled names)."""
    if not is_labelled(source):
        return answer_set_from_run(run, datasets, source[0].root, prefix, extracted=extracted)
    answers = answers_from_trees(run, datasets, source, prefix, extracted=extracted)
    return answer_set(run, answers, extracted=extracted)


def load_source_answers(
    datasets: Datasets,
    source: ResultSource,
    request: GradeRequest | None = None,
    *,
    extracted: bool = False,
    workers: int | None = None,
) -> AnswerSet:
    """Grade one tree or labelled trees like `kag stats` (same rules, filters, warnings and
    summary) as ``request`` asks, each file's record always kept, and return the answers
    with the profile of each setup (:func:`setup_configs`).

    ``extracted``: pair on the extracted grade (the request's ``extract`` spec); asking for
    ``evidence``: each answer with its evidence hit; for ``epochs``: with the per-question
    mean scores over the epochs (``AnswerSet.means``)."""
    request = (request if request is not None else GradeRequest()).asking({RECORDS})
    run = grade_source(datasets, source, request, workers=workers)
    return answer_set_from_source(run, datasets, source, request.prefix, extracted=extracted)

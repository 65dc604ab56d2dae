"""Repeated samples (epochs) in `kag stats`: reading a question's later epochs, and the
``epochs`` blocks of the report.

Layout (:func:`kag.results.epoch_result_path`): epoch 1 is the usual
``<question>/<prefix><setup>.json``; epoch n >= 2 is
``<question>/epochs/<n>/<prefix><setup>.json``. The walk of :mod:`.walk` grades epoch 1 as
always and hands the ``epochs`` folder of a question here (in the same worker process); what
comes back is one small tuple of :class:`~kag.grading.epochs.EpochOutcome` per (setup,
question), only for the setups that have an epoch file in that question.

A question's outcomes run from epoch 1 up to its first missing, unreadable or out-of-tree
epoch (a symbolic link, a file where a folder belongs): with a gap, the later epochs do not
count, and the question is ``incomplete`` when the setup has more epochs elsewhere
(:func:`kag.grading.epochs.summarize_epochs`). Unreadable epoch files are logged as
warnings but not counted in ``unreadable_files``, which stays epoch 1's like every other
field of the report.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from kag.grading.epochs import EpochOutcome, EpochSummary, extracted_outcomes, summarize_epochs
from kag.grading.extract import ExtractSpec
from kag.grading.mcq.extracted import extracted_grade
from kag.grading.mcq.rule import AnswerKey, grade_fields
from kag.grading.record import GradedFile, Outcome
from kag.results.codec import parse_grading_fields
from kag.results.io import read_result_bytes
from kag.results.tree import result_file_setup, scandir_entries

# An epoch folder's name: n >= 2 in decimal, no leading zeros (as epoch_result_path writes it).
_EPOCH_NAME = re.compile(r"[1-9][0-9]*")

#: (setup, dataset) -> question -> the outcomes of that setup's epochs, epoch 1 first (only
#: the questions with an epoch folder holding a file of the setup).
EpochOutcomes = Mapping[tuple[str, str], Mapping[str, tuple[EpochOutcome, ...]]]


def epoch_outcome(graded: GradedFile, extracted_answer: str | None = None) -> EpochOutcome:
    """What one graded file contributes to the epoch measures (an error file has no answer);
    with its extracted grade when the file has one (``extracted_answer``: the key extracted)."""
    extracted = None
    if graded.extracted is not None:
        extracted = EpochOutcome(graded.extracted is Outcome.OK, extracted_answer)
    return EpochOutcome(graded.outcome is Outcome.OK, graded.response, extracted)


def epoch_paths(folder: str, prefix: str, keep_setup: Callable[[str], bool]) -> dict[str, dict[int, str]]:
    """setup -> epoch n (>= 2) -> the path of its file, for every setup with a file in
    ``folder`` (a question's ``epochs`` folder; none when it is missing). ``keep_setup``
    selects the setups, as it does epoch 1's files. No link is followed: an epoch folder
    or file that is a symbolic link is not there."""
    paths: dict[str, dict[int, str]] = {}
    for entry in scandir_entries(folder):
        if not _EPOCH_NAME.fullmatch(entry.name) or entry.name == "1":
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        epoch = int(entry.name)
        for f in scandir_entries(entry.path):
            setup = result_file_setup(f, prefix)
            if setup is not None and keep_setup(setup):
                paths.setdefault(setup, {})[epoch] = f.path
    return paths


def grade_later_epochs(
    paths: Mapping[int, str],
    key: AnswerKey,
    *,
    dataset: str,
    question: str,
    setup: str,
    abstention: re.Pattern[str],
    spec: ExtractSpec | None,
    logs: list[tuple[int, str]],
) -> Iterator[tuple[int, str, GradedFile, str | None]]:
    """(epoch, path, graded file, extracted answer) of epochs 2, 3, ... of one setup's
    question (``paths``: :func:`epoch_paths`' entry of the setup), up to the first missing
    or unreadable one; an unreadable file adds a warning to ``logs``. ``spec`` (the
    ``--extract`` spec) adds each epoch's extracted grade, as epoch 1 has it."""
    epoch = 2
    while (path := paths.get(epoch)) is not None:
        try:
            fields = parse_grading_fields(read_result_bytes(path), False)
            graded = grade_fields(fields, key, dataset, question, setup, abstention)
        except OSError as exc:
            logs.append((logging.WARNING, f"{path}: unreadable epoch file: {exc.strerror or exc}"))
            return
        except Exception as exc:  # noqa: BLE001 - one bad file must never stop the walk
            logs.append((logging.WARNING, f"{path}: unreadable epoch file: {exc}"))
            return
        answer = None
        if spec is not None:
            # Outside the try above, as for epoch 1: a regex timeout is the pattern's fault.
            extracted, answer = extracted_grade(spec, graded.response, key)
            graded = replace(graded, extracted=extracted, extracted_key=answer)
        yield epoch, path, graded, answer
        epoch += 1


def question_epochs(
    folder: str,
    firsts: Mapping[str, EpochOutcome],
    key: AnswerKey,
    *,
    dataset: str,
    question: str,
    prefix: str,
    keep_setup: Callable[[str], bool],
    abstention: re.Pattern[str],
    spec: ExtractSpec | None = None,
) -> tuple[list[tuple[str, tuple[EpochOutcome, ...]]], list[tuple[int, str]]]:
    """The outcomes of every setup with an epoch file in ``folder`` (a question's
    ``epochs`` folder), epoch 1 (from ``firsts``, by setup) first, sorted by setup; and the
    log lines of the files that could not be read (:func:`epoch_paths`,
    :func:`grade_later_epochs`)."""
    logs: list[tuple[int, str]] = []
    paths = epoch_paths(folder, prefix, keep_setup)
    found: list[tuple[str, tuple[EpochOutcome, ...]]] = []
    for setup in sorted(paths):
        first = firsts.get(setup)
        outcomes: list[EpochOutcome] = []
        if first is not None:
            outcomes.append(first)
            later = grade_later_epochs(
                paths[setup],
                key,
                dataset=dataset,
                question=question,
                setup=setup,
                abstention=abstention,
                spec=spec,
                logs=logs,
            )
            outcomes.extend(epoch_outcome(graded, answer) for _, _, graded, answer in later)
        found.append((setup, tuple(outcomes)))
    return found, logs


@dataclass(frozen=True)
class SetupEpochs:
    """The ``epochs`` blocks of one setup: overall, and per dataset (None: no question of
    that dataset has all ``n`` epochs, or the dataset has no epoch file)."""

    overall: EpochSummary | None
    per_dataset: Mapping[str, EpochSummary | None]


def extracted_epochs(outcomes: EpochOutcomes) -> EpochOutcomes:
    """The same outcomes under the extracted grade (a run graded with ``--extract``);
    ValueError when the run has none."""
    return {
        key: {question: extracted_outcomes(sequence) for question, sequence in questions.items()}
        for key, questions in outcomes.items()
    }


def summarize_setup_epochs(
    outcomes: EpochOutcomes, first_epochs: Mapping[tuple[str, str], int]
) -> dict[str, SetupEpochs]:
    """Per setup with epochs: the blocks, all measured at the setup's N (the most epochs
    any of its questions has), so that the per-dataset blocks and the overall block compare
    the same k.

    ``first_epochs`` counts the graded epoch-1 files per (setup, dataset) (the blocks'
    ``total``): a question graded in epoch 1 without an epoch folder has one epoch, so it
    counts as ``incomplete`` (a run still going). A setup whose questions all have fewer
    than 2 usable epochs has nothing to measure across epochs: its blocks are None.
    """
    grouped: dict[str, dict[str, list[tuple[EpochOutcome, ...]]]] = {}
    for (setup, dataset), questions in outcomes.items():
        grouped.setdefault(setup, {})[dataset] = list(questions.values())
    for setup, dataset in first_epochs:
        if setup in grouped:
            grouped[setup].setdefault(dataset, [])
    result: dict[str, SetupEpochs] = {}
    for setup, per_dataset in grouped.items():
        n = max((len(q) for qs in per_dataset.values() for q in qs), default=0)
        names = sorted(per_dataset)
        alone = {d: first_epochs.get((setup, d), 0) - sum(1 for q in per_dataset[d] if q) for d in names}
        result[setup] = SetupEpochs(
            _block(per_dataset, alone, names, n), {d: _block(per_dataset, alone, [d], n) for d in names}
        )
    return result


def _block(
    per_dataset: Mapping[str, Sequence[tuple[EpochOutcome, ...]]],
    alone: Mapping[str, int],
    datasets: Sequence[str],
    n: int,
) -> EpochSummary | None:
    """One block over ``datasets``; ``alone`` counts per dataset the questions graded in
    epoch 1 without an epoch folder (one epoch, fewer than n: incomplete)."""
    summary = summarize_epochs([q for d in datasets for q in per_dataset[d]], n) if n >= 2 else None
    if summary is None:
        return None
    return replace(summary, incomplete=summary.incomplete + sum(max(0, alone[d]) for d in datasets))

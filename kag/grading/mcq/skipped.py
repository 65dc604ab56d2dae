"""The files `kag stats` counts in ``skipped_files``, named: the result files of an MCQ
without an answer key, which a JUnit report lists as skipped testcases.

Only the folders of those questions are listed (the datasets file names them), by the
walk's rules: regular ``<prefix><setup>.json`` files, no symbolic link followed, the same
``--setup`` and ``--dataset`` globs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from kag.datasets import Datasets
from kag.grading.mcq.trees import ResultSource, labelled
from kag.results.tree import glob_filter, matches_any, result_file_setup, sorted_entries


@dataclass(frozen=True, order=True)
class SkippedFile:
    dataset: str
    question: str
    setup: str


def skipped_files(
    datasets: Datasets,
    source: ResultSource,
    prefix: str = "",
    setups: Sequence[str] = (),
    dataset_globs: Sequence[str] = (),
) -> list[SkippedFile]:
    """The skipped files of ``source`` (setups named ``LABEL/setup`` for labelled trees), sorted."""
    found = []
    for label, root in ((t.label, t.root) for t in source):
        keep = glob_filter(tuple(setups), f"{label}/" if label is not None else "")
        for dataset, questions in datasets.datasets.items():
            if not matches_any(dataset, tuple(dataset_globs)):
                continue
            for qid, question in questions.items():
                if question.open is not None or question.mcq is None or question.mcq.answer is not None:
                    continue
                folder = os.path.join(root, dataset, qid)
                if (
                    not os.path.isdir(folder)
                    or os.path.islink(folder)
                    or os.path.islink(os.path.dirname(folder))
                ):
                    continue
                try:
                    entries = sorted_entries(folder)
                except OSError:
                    continue  # the walk warned about it
                for entry in entries:
                    setup = result_file_setup(entry, prefix)
                    if setup is not None and not entry.name.endswith(".tmp") and keep(setup):
                        name = labelled(label, setup) if label is not None else setup
                        found.append(SkippedFile(dataset, qid, name))
    return sorted(found)

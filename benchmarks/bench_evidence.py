"""In-process CPU time of the evidence search per KAG file of the 100k bench tree.

    python benchmarks/bench_evidence.py [--tree .bench/tree-100k] [--questions 1000]

The part of ``bench_stats.py --evidence`` that searches each retrieval text for its
question's gold: for the KAG files of ``--questions`` questions drawn from the tree and the
gold of ``bench_stats.py --evidence``, the ``retrieval_quality`` record in exact mode and the
``evidence`` record of each file, best of ``--repeat`` passes, in CPU microseconds per file:
with StringZilla (the ``fast`` extra) when it is installed, and with the standard library
alone; and the first pass, which also compiles what each distinct gold name needs (as each
worker of ``kag stats`` does). Each file is parsed right before its search, as ``kag stats``
does (a search of texts parsed long before runs from warmer caches and looks faster); the
parsing is not counted: a pass that only parses is timed beside each pass and taken off.
Both engines must give the same records (checked). The machine is shared: the load average
is printed beside the figures.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_stats import write_evidence_datasets

from kag.datasets import load_datasets
from kag.grading import retrieval_text
from kag.grading.evidence import evidence_record
from kag.grading.retrieval_quality import file_quality, similarity_for
from kag.grading.retrieval_text import RetrievalText
from kag.results.codec import parse_grading_fields

Sample = list[tuple[list[str], list[tuple[str, str, str]], bytes]]


def sample(tree: Path, questions: int) -> Sample:
    """(gold entities, gold triples, file's bytes) of the KAG files with a retrieval text."""
    with tempfile.TemporaryDirectory(prefix="bench-evidence-") as folder:
        datasets = load_datasets(write_evidence_datasets(tree, Path(folder)))
    chosen = random.Random(1).sample(list(datasets.iter_questions()), questions)
    out: Sample = []
    for question in chosen:
        folder = tree / "results" / question.dataset / question.id
        for name in sorted(os.listdir(folder)):
            if not name.endswith("-kag.json"):
                continue
            data = (folder / name).read_bytes()
            if parse_grading_fields(data, retrieval_text=True).retrieval_text is not None:
                out.append((question.evidence, question.evidence_triples, data))
    return out


def one_pass(files: Sample, search: bool = True) -> tuple[float, list[object]]:
    """CPU seconds of a pass that parses each file and (``search``) searches its text."""
    exact = similarity_for("exact")
    records: list[object] = []
    start = time.process_time()
    for entities, triples, data in files:
        fields = parse_grading_fields(data, retrieval_text=True)
        if not search:
            continue
        count = fields.retrieval.relationships if fields.retrieval is not None else None
        prepared = RetrievalText(fields.retrieval_text or "")
        quality = file_quality(entities, triples, prepared, None, True, exact, ("name",), count)
        records.append((quality, evidence_record(entities, prepared, True)))
    return time.process_time() - start, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=REPO / ".bench" / "tree-100k")
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    files = sample(args.tree.resolve(), args.questions)
    print(f"{len(files):,} KAG files, {sum(len(f[2]) for f in files) / len(files):,.0f} bytes a file")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    engines = {"standard library": None}
    if retrieval_text.accelerator() is not None:
        engines = {"stringzilla": retrieval_text._NOT_LOADED, **engines}
    best: dict[str, float] = {}
    answers: dict[str, list[object]] = {}
    first, _ = one_pass(files)
    parsing = one_pass(files, search=False)[0]
    print(
        f"  first pass ({next(iter(engines))}): {(first - parsing) / len(files) * 1e6:.1f} us CPU per KAG file"
    )
    for _ in range(args.repeat):
        for engine, module in engines.items():  # alternating, so that load falls on both
            retrieval_text._stringzilla = module
            spent, answers[engine] = one_pass(files)
            spent -= one_pass(files, search=False)[0]
            best[engine] = min(best.get(engine, float("inf")), spent)
    for engine, spent in best.items():
        print(f"  {engine}: {spent / len(files) * 1e6:.1f} us CPU per KAG file")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if len({repr(a) for a in answers.values()}) != 1:
        raise SystemExit("the engines gave different records")


if __name__ == "__main__":
    main()

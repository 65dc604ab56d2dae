"""Flips (the questions one setup gets right and the other does not) and the retrieval
impact (accuracy by retrieved-subgraph size, and the questions retrieval helped or hurt)."""

from __future__ import annotations

__all__ = [
    "BUCKET_ORDER",
    "EMPTY",
    "NO_RETRIEVAL",
    "SIZE_BUCKETS",
    "Flip",
    "FlipReport",
    "ImpactRow",
    "RetrievalImpact",
    "flips",
    "flips_indexed",
    "impact_indexed",
    "retrieval_impact",
    "size_bucket",
]

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from kag.grading.compare.paired import McNemar, mcnemar
from kag.grading.compare.records import Answer, Indexed, index_answers, paired_keys, question_sort_key
from kag.grading.mcq.metrics import wilson_interval
from kag.grading.record import GradedFile, Outcome
from kag.grading.retrieval_quality import is_reached

# ---------------------------------------------------------------- flips


@dataclass(frozen=True)
class Flip:
    """A question where exactly one of the two setups is correct; both answers attached."""

    dataset: str
    question: str
    gold: str | None
    a: GradedFile
    b: GradedFile


@dataclass(frozen=True)
class FlipReport:
    """Questions A gets right and B not (``a_only``), and the reverse (``b_only``)."""

    a: str
    b: str
    paired: int
    both_correct: int
    both_wrong: int
    a_only: tuple[Flip, ...]
    b_only: tuple[Flip, ...]


def flips(answers: Iterable[GradedFile], a: str, b: str) -> FlipReport:
    """The per-question flips between setups ``a`` and ``b`` on their paired questions.

    A flip is a question where one setup is correct (OK) and the other is not (WRONG or
    ERR). Flips are listed by dataset name, then question id (numeric ids in numeric
    order). ``paired = both_correct + both_wrong + len(a_only) + len(b_only)``.
    Filter ``answers`` by dataset beforehand to restrict the report.
    """
    return flips_indexed(index_answers(answers), a, b)


def flips_indexed(by_setup: Indexed[GradedFile], a: str, b: str) -> FlipReport:
    """:func:`flips` of answers indexed by :func:`index_answers`."""
    mine, theirs = by_setup.get(a, {}), by_setup.get(b, {})
    keys = paired_keys(mine, theirs)
    a_only: list[Flip] = []
    b_only: list[Flip] = []
    both_correct = both_wrong = 0
    for key in keys:
        x, y = mine[key], theirs[key]
        if x.correct and y.correct:
            both_correct += 1
        elif not x.correct and not y.correct:
            both_wrong += 1
        else:
            flip = Flip(key[0], key[1], x.gold if x.gold is not None else y.gold, x, y)
            (a_only if x.correct else b_only).append(flip)
    return FlipReport(a, b, len(keys), both_correct, both_wrong, tuple(a_only), tuple(b_only))


# ---------------------------------------------------------------- retrieval impact


#: Size buckets by retrieved vertex count: (label, low, high) inclusive; None = no bound.
SIZE_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("1-10", 1, 10),
    ("11-100", 11, 100),
    ("101-1000", 101, 1000),
    (">1000", 1001, None),
)
EMPTY = "empty"
NO_RETRIEVAL = "no retrieval stats"
BUCKET_ORDER = (EMPTY, *(label for label, _, _ in SIZE_BUCKETS), NO_RETRIEVAL)


def size_bucket(answer: Answer) -> str:
    """The retrieved-subgraph size bucket of one answer, by its vertex count.

    - "empty": the retrieval returned 0 vertices;
    - "1-10", "11-100", "101-1000", ">1000": inclusive ranges of the vertex count;
    - "no retrieval stats": no vertex count (every ERR file, e.g. a failed retrieval
      phase; OK files without retrieval stats, as `kag stats` defines them).
    """
    v = answer.vertices
    if v is None or v < 0:
        return NO_RETRIEVAL
    if v == 0:
        return EMPTY
    for label, low, high in SIZE_BUCKETS:
        if v >= low and (high is None or v <= high):
            return label
    raise AssertionError("unreachable: the buckets cover every count >= 1")


@dataclass(frozen=True)
class ImpactRow:
    """One bucket (or dataset) of a retrieval-impact report.

    ``n`` answers of the KAG setup, ``correct`` of them OK. With a native setup the rows
    hold paired questions only and ``native_correct``, ``helped`` (KAG right, native not),
    ``hurt`` (native right, KAG not) and ``same`` (both right or both not) are set;
    without one they are None.
    """

    label: str
    n: int
    correct: int
    native_correct: int | None = None
    helped: int | None = None
    hurt: int | None = None
    same: int | None = None

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.n if self.n else None

    @property
    def accuracy_ci95(self) -> tuple[float, float] | None:
        return wilson_interval(self.correct, self.n)

    @property
    def native_accuracy(self) -> float | None:
        return self.native_correct / self.n if self.n and self.native_correct is not None else None


@dataclass(frozen=True)
class RetrievalImpact:
    """Where retrieval helps or hurts one KAG setup.

    ``overall`` covers every analysed answer; ``buckets`` splits them by :func:`size_bucket`
    (in :data:`BUCKET_ORDER`, empty buckets left out); ``per_dataset`` by dataset name.
    With a native setup only paired questions are analysed and ``unpaired`` counts the
    KAG answers left out; ``test`` is McNemar on helped vs hurt; ``hurt_responses`` counts
    what the KAG setup answered on the hurt questions (trimmed response, or "(error)"),
    most frequent first, ties by text, so a shift such as "answers 'maybe'" shows up.
    ``evidence_buckets`` (only when some answer has an evidence hit or miss) splits each
    bucket by whether the retrieval text held an evidence name of the question
    (``"<bucket> · hit"``, ``"<bucket> · missed"``); answers without evidence are left out.
    ``reached_buckets`` likewise by whether the retrieved graph reached the gold evidence
    (:func:`kag.grading.retrieval_quality.is_reached`; ``"<bucket> · reached"``,
    ``"<bucket> · missed"``), only when some answer has a retrieval-quality record.
    """

    setup: str
    native: str | None
    overall: ImpactRow
    buckets: tuple[ImpactRow, ...]
    per_dataset: tuple[ImpactRow, ...]
    unpaired: int
    test: McNemar | None
    hurt_responses: tuple[tuple[str, int], ...] = ()
    evidence_buckets: tuple[ImpactRow, ...] = ()
    reached_buckets: tuple[ImpactRow, ...] = ()


def _impact_row(label: str, items: list[tuple[Answer, Answer | None]], paired: bool) -> ImpactRow:
    correct = sum(1 for k, _ in items if k.correct)
    if not paired:
        return ImpactRow(label, len(items), correct)
    native_correct = sum(1 for _, n in items if n is not None and n.correct)
    helped = sum(1 for k, n in items if n is not None and k.correct and not n.correct)
    hurt = sum(1 for k, n in items if n is not None and n.correct and not k.correct)
    return ImpactRow(label, len(items), correct, native_correct, helped, hurt, len(items) - helped - hurt)


def retrieval_impact(answers: Iterable[Answer], setup: str, native: str | None = None) -> RetrievalImpact:
    """Accuracy of ``setup`` by retrieval size bucket and, against ``native`` (the same model
    without retrieval), the helped / hurt / no-change counts overall, per bucket and per
    dataset. Without ``native`` every answer of ``setup`` is analysed and the paired
    columns are None. Raises ValueError when ``setup`` (or ``native``) has no answers.
    """
    return impact_indexed(index_answers(answers), setup, native)


def impact_indexed(by_setup: Indexed[Answer], setup: str, native: str | None = None) -> RetrievalImpact:
    """:func:`retrieval_impact` of answers indexed by :func:`index_answers`."""
    if setup not in by_setup:
        raise ValueError(f"setup {setup!r} has no graded answers")
    mine = by_setup[setup]
    if native is not None:
        if native not in by_setup:
            raise ValueError(f"setup {native!r} has no graded answers")
        theirs = by_setup[native]
        keys = paired_keys(mine, theirs)
        items: list[tuple[Answer, Answer | None]] = [(mine[k], theirs[k]) for k in keys]
        unpaired = len(mine) - len(keys)
    else:
        items = [(mine[k], None) for k in sorted(mine, key=question_sort_key)]
        unpaired = 0
    paired = native is not None
    by_bucket: dict[str, list[tuple[Answer, Answer | None]]] = {}
    by_dataset: dict[str, list[tuple[Answer, Answer | None]]] = {}
    by_evidence: dict[tuple[str, bool], list[tuple[Answer, Answer | None]]] = {}
    by_reached: dict[tuple[str, bool], list[tuple[Answer, Answer | None]]] = {}
    for item in items:
        bucket = size_bucket(item[0])
        by_bucket.setdefault(bucket, []).append(item)
        by_dataset.setdefault(item[0].dataset, []).append(item)
        if item[0].evidence_hit is not None:
            by_evidence.setdefault((bucket, item[0].evidence_hit), []).append(item)
        quality = item[0].retrieval_quality
        if quality is not None:
            by_reached.setdefault((bucket, is_reached(quality)), []).append(item)
    overall = _impact_row("all", items, paired)
    hurt = Counter(
        "(error)" if k.outcome is Outcome.ERR else " ".join(k.response_or_error.split())
        for k, n in items
        if n is not None and n.correct and not k.correct
    )
    test = (
        mcnemar(overall.helped, overall.hurt)
        if paired and overall.helped is not None and overall.hurt is not None
        else None
    )
    return RetrievalImpact(
        setup=setup,
        native=native,
        overall=overall,
        buckets=tuple(_impact_row(b, by_bucket[b], paired) for b in BUCKET_ORDER if b in by_bucket),
        per_dataset=tuple(_impact_row(d, by_dataset[d], paired) for d in sorted(by_dataset)),
        unpaired=unpaired,
        test=test,
        hurt_responses=tuple(sorted(hurt.items(), key=lambda kv: (-kv[1], kv[0]))),
        evidence_buckets=tuple(
            _impact_row(f"{b} · {'hit' if hit else 'missed'}", by_evidence[(b, hit)], paired)
            for b in BUCKET_ORDER
            for hit in (True, False)
            if (b, hit) in by_evidence
        ),
        reached_buckets=tuple(
            _impact_row(f"{b} · {'reached' if hit else 'missed'}", by_reached[(b, hit)], paired)
            for b in BUCKET_ORDER
            for hit in (True, False)
            if (b, hit) in by_reached
        ),
    )

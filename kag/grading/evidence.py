"""Retrieval evidence: did the retrieved context contain the entities an answer needs?

A dataset entry may list ``evidence`` names; for a setup that retrieved, the rendered
retrieval text (``ok.stats.retrieval.result``) is searched for each name.

Matching: both sides take the triplet grader's canonical form
(:mod:`kag.grading.triplets.normalize`: NFKC, case folded, ``_`` as a space, whitespace
collapsed, punctuation stripped at the ends; names also lose one trailing legal suffix,
as titles do), and a name is found when it occurs in the text bounded by
non-alphanumerics or the ends (``contains_words``): ``"Vitamin C"`` is found in
``(n)-[name]->("vitamin c")`` but ``"Vitamin C"`` is not found in ``"vitamin cd"``.
The text is normalized without the legal-suffix rule (that rule is about a title's end;
the text is not a title) and without the title cache (texts are long and seen once).
A name that normalizes to ``""`` is never found. The search finds exactly that without
normalizing the whole text where it can (:mod:`kag.grading.retrieval_text`).

Per-question records come first (:func:`evidence_record`), aggregation after
(:func:`summarize_evidence`), as in ir_measures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kag.grading.retrieval_text import RetrievalText
from kag.grading.triplets.normalize import normalize_title


def evidence_found(names: Sequence[str], retrieval_text: str | RetrievalText) -> tuple[bool, ...]:
    """For each evidence name, in order, whether it occurs as whole words in the retrieval text
    (given as is, or prepared once for both evidence measures).

    ``contains_words(normalize_prompt(text), normalize_title(name))`` for each name, found
    without normalizing the whole text where it can be (:class:`RetrievalText`); each name
    costs about one substring search.
    """
    text = RetrievalText(retrieval_text) if isinstance(retrieval_text, str) else retrieval_text
    return normalized_found([normalize_title(name) for name in names], text)


def normalized_found(names: Sequence[str], text: RetrievalText) -> tuple[bool, ...]:
    """:func:`evidence_found` of names given normalized (``normalize_title``, as a question's
    gold is once for all of its files: :class:`~kag.grading.retrieval_quality.QuestionGold`)."""
    return tuple(map(text.contains, names))


@dataclass(frozen=True, slots=True)
class EvidenceRecord:
    """One graded question of a retrieving setup: which evidence names were found, and the grade."""

    found: tuple[bool, ...]
    correct: bool

    @property
    def share(self) -> float:
        """The share of the question's evidence names found (the question's recall)."""
        return sum(self.found) / len(self.found)

    @property
    def hit(self) -> bool:
        """Whether at least one evidence name was found."""
        return any(self.found)


def evidence_record(
    names: Sequence[str], retrieval_text: str | RetrievalText | None, correct: bool
) -> EvidenceRecord | None:
    """The record of one question, or None when it does not count.

    A question counts when it lists at least one evidence name and its result file has a
    retrieval text (an error file, or a setup that did not retrieve, has none).
    """
    if not names or retrieval_text is None:
        return None
    return EvidenceRecord(evidence_found(names, retrieval_text), correct)


@dataclass(frozen=True, slots=True)
class EvidenceSummary:
    """The ``evidence`` block of a setup; an accuracy is None when its bucket is empty."""

    questions: int
    recall: float
    hit_rate: float
    accuracy_when_hit: float | None
    accuracy_when_missed: float | None


def summarize_evidence(records: Iterable[EvidenceRecord]) -> EvidenceSummary | None:
    """Aggregate per-question evidence records; None when no question counts.

    With Q records, r[q] = (names found) / (names listed) and hit[q] = r[q] > 0:

    - ``questions`` = Q
    - ``recall`` = (1/Q) Σ_q r[q] (a macro average: every question weighs the same)
    - ``hit_rate`` = (1/Q) Σ_q hit[q]
    - ``accuracy_when_hit`` = correct hits / hits, None when no question is a hit
    - ``accuracy_when_missed`` = correct misses / misses, None when every question is a hit
    """
    return EvidenceCounts.of(records).summary()


@dataclass(slots=True)
class EvidenceCounts:
    """What :func:`summarize_evidence` sums over records: each record's share, and the hits
    and right answers among hits and misses. Counts of groups of records add up to the
    counts of all of them (:meth:`joined`)."""

    shares: list[float]
    hits: int = 0
    hit_correct: int = 0
    missed_correct: int = 0

    @classmethod
    def of(cls, records: Iterable[EvidenceRecord]) -> EvidenceCounts:
        """The counts of ``records``. Records take a handful of values: each value's share
        and hit are read once."""
        counts = cls([])
        shares = counts.shares
        hits = hit_correct = missed_correct = 0
        known: dict[tuple[bool, ...], tuple[float, bool]] = {}
        for record in records:
            found = record.found
            read = known.get(found)
            if read is None:
                read = known[found] = (record.share, record.hit)
            shares.append(read[0])
            if read[1]:
                hits += 1
                hit_correct += record.correct
            else:
                missed_correct += record.correct
        counts.hits, counts.hit_correct, counts.missed_correct = hits, hit_correct, missed_correct
        return counts

    @classmethod
    def joined(cls, parts: Iterable[EvidenceCounts]) -> EvidenceCounts:
        """The counts of the records of every part together."""
        out = cls([])
        for part in parts:
            out.shares += part.shares
            out.hits += part.hits
            out.hit_correct += part.hit_correct
            out.missed_correct += part.missed_correct
        return out

    def summary(self) -> EvidenceSummary | None:
        """The block of the records counted (see :func:`summarize_evidence`)."""
        count, hits = len(self.shares), self.hits
        if count == 0:
            return None
        misses = count - hits
        return EvidenceSummary(
            questions=count,
            # fsum: exactly rounded, so the figure does not depend on the order of the records.
            recall=math.fsum(self.shares) / count,
            hit_rate=hits / count,
            accuracy_when_hit=self.hit_correct / hits if hits else None,
            accuracy_when_missed=self.missed_correct / misses if misses else None,
        )

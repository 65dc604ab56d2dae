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
A name that normalizes to ``""`` is never found.

Per-question records come first (:func:`evidence_record`), aggregation after
(:func:`summarize_evidence`), as in ir_measures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kag.grading.triplets.normalize import contains_words, normalize_prompt, normalize_title


def _normalize_text_body(text: str) -> str:
    """`normalize_prompt` of ``text`` except that punctuation at its two ends may stay.

    Stripping the ends scans the whole of a long text for a trailing punctuation run
    (~1.4 ms on a 16 kB KAG context, 13 times the rest). It cannot change what
    `contains_words` finds: a normalized name starts and ends with a character that is
    neither punctuation nor space, so it never lies in a stripped end, and the stripped
    characters are not alphanumeric, so they bound a word as the string's end does.
    The ``x`` sentinels make both ends alphanumeric, which lets `normalize_prompt` skip
    the strip; they are cut off again afterwards.
    """
    return normalize_prompt(f"x {text} x")[2:-2]


def evidence_found(names: Sequence[str], retrieval_text: str) -> tuple[bool, ...]:
    """For each evidence name, in order, whether it occurs as whole words in the retrieval text.

    The text is normalized once, whatever the number of names; each name costs one
    substring search in it.
    """
    text = _normalize_text_body(retrieval_text)
    return tuple(contains_words(text, normalize_title(name)) for name in names)


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


def evidence_record(names: Sequence[str], retrieval_text: str | None, correct: bool) -> EvidenceRecord | None:
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
    count = 0
    shares: list[float] = []
    hits = hit_correct = missed_correct = 0
    for record in records:
        count += 1
        shares.append(record.share)
        if record.hit:
            hits += 1
            hit_correct += record.correct
        else:
            missed_correct += record.correct
    if count == 0:
        return None
    misses = count - hits
    return EvidenceSummary(
        questions=count,
        # fsum: exactly rounded, so the figure does not depend on the order of the records.
        recall=math.fsum(shares) / count,
        hit_rate=hits / count,
        accuracy_when_hit=hit_correct / hits if hits else None,
        accuracy_when_missed=missed_correct / misses if misses else None,
    )

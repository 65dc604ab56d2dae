"""The compatible layout of a report: the order of a block's JSON keys, of the stats
table's columns and of the epochs block's keys, as the Rust tool writes them and as the
reports of earlier versions kept them (docs/architecture.md).

The order interleaves measures (the accuracy's keys, then timing, retrieval, the interval,
then the accuracy's abstentions), so it is declared here once, as one sequence per
layout, rather than by registration order. :func:`in_layout` puts what the measures
declare in that order; a key or column none of these sequences names (a measure added
later) comes after, in registration order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")

#: The keys of a block of ``kag stats --format json``: the Rust tool's first (through
#: ``retrieval``), then the additive ones, the optional ones last.
BLOCK_KEYS: tuple[str, ...] = (
    "total",
    "correct",
    "incorrect",
    "errors",
    "parsed",
    "accuracy",
    "precision",
    "coverage",
    "avg_generation_secs",
    "total_generation_secs",
    "avg_context_length",
    "retrieval",
    "accuracy_ci95",
    "abstentions",
    "non_option_answers",
    "usage",
    "epochs",
    "evidence",
    "retrieval_quality",
    "extracted",
    "open",
    "judge",
)

#: The columns of the stats table, by their header (the text table's are the Rust tool's).
STATS_HEADERS: tuple[str, ...] = (
    "ACC%",
    "ACC 95% CI",
    "PREC%",
    "COVER%",
    "OK",
    "WRONG",
    "ERR",
    "TOT",
    "GEN(s)",
    "CTX_LEN",
    "XACC%",
    "RET(s)",
    "VERTICE",
    "RELATION",
    "PROPERTY",
    "PROMPT_TOK",
    "COMPL_TOK",
    "COST($)",
    "JUDGE%",
    "AGREE%",
    "REACHED%",
    "E-RECALL%",
    "T-RECALL%",
)

#: The keys of an ``epochs`` block.
EPOCH_KEYS: tuple[str, ...] = (
    "n",
    "mean_accuracy",
    "stderr",
    "pass_at_k",
    "pass_at",
    "maj_at_k",
    "consistent",
    "questions",
    "incomplete",
)

#: The columns of the epochs table of the text report, by their header.
EPOCH_HEADERS: tuple[str, ...] = ("EPOCHS", "Q", "INC", "MEAN%", "SE%", "MAJ%", "CONS%", "PASS@k%")


def in_layout(items: Iterable[T], name: Callable[[T], str], layout: Sequence[str]) -> tuple[T, ...]:
    """``items`` (in registration order) sorted by the place of ``name(item)`` in ``layout``;
    the items it does not name keep their order, after those it names."""
    place = {key: i for i, key in enumerate(layout)}
    ranked = sorted(enumerate(items), key=lambda pair: (place.get(name(pair[1]), len(place)), pair[0]))
    return tuple(item for _, item in ranked)

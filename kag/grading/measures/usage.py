"""Token usage (``usage``): the prompt and completion tokens of ``ok.stats.usage``, summed
over the files with a usage sample (:func:`kag.grading.usage.usage_sample`, which also
decides the files whose counts are past belief); their cost is priced from the records
(:func:`kag.grading.usage.price_records`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kag.grading.measures.declarations import MD_HTML, Block, Column, JsonKey, Shown
from kag.grading.measures.registry import Counters, Measure, register
from kag.grading.percent import fixed
from kag.grading.record import GradedFile
from kag.grading.usage import usage_beyond_bound, usage_sample


@dataclass(slots=True)
class UsageCounts(Counters):
    """Token sums of a block."""

    usage_samples: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Files whose usage has a count above MAX_COUNT: left out of the usage, and warned about.
    unbelievable_usage: int = 0


def add(counts: UsageCounts, graded: GradedFile) -> None:
    """Add the file's usage sample, or count it as past belief."""
    tokens = usage_sample(graded)
    if tokens is not None:
        counts.prompt_tokens += tokens[0]
        counts.completion_tokens += tokens[1]
        counts.usage_samples += 1
    elif usage_beyond_bound(graded):
        counts.unbelievable_usage += 1


@dataclass(frozen=True, slots=True)
class UsageMetrics:
    """Token counts summed over ``samples`` >= 1 files (see :func:`kag.grading.usage.usage_sample`)."""

    samples: int
    prompt_tokens: int
    completion_tokens: int

    @property
    def avg_prompt_tokens(self) -> float:
        """prompt_tokens / samples."""
        return self.prompt_tokens / self.samples

    @property
    def avg_completion_tokens(self) -> float:
        """completion_tokens / samples."""
        return self.completion_tokens / self.samples

    @property
    def avg_tokens(self) -> float:
        """(prompt_tokens + completion_tokens) / samples: the mean tokens per question."""
        return (self.prompt_tokens + self.completion_tokens) / self.samples


def usage_metrics(counts: UsageCounts) -> UsageMetrics | None:
    """Token sums and means over the files with a usage sample; None when there is none."""
    if counts.usage_samples == 0:
        return None
    return UsageMetrics(counts.usage_samples, counts.prompt_tokens, counts.completion_tokens)


def usage_to_json(b: Block) -> dict[str, Any] | None:
    """The ``usage`` object of a block, with ``cost_usd`` (the block's cost) when the run
    was priced; None without samples."""
    u = b.metrics.usage
    if u is None:
        return None
    out: dict[str, Any] = {
        "samples": u.samples,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "avg_prompt_tokens": u.avg_prompt_tokens,
        "avg_completion_tokens": u.avg_completion_tokens,
    }
    if b.report.costs is not None:
        out["cost_usd"] = b.cost
    return out


def _shows_usage(b: Block) -> bool:
    return bool(b.report.shows_usage)


def _tokens(mean: Callable[[UsageMetrics], float]) -> Callable[[Block], str]:
    def cell(b: Block) -> str:
        u = b.metrics.usage
        return "-" if u is None else fixed(mean(u), 1)

    return cell


def _cost(b: Block) -> str:
    return fixed(b.cost, 4)


def _used(s: Shown) -> bool:
    return s.usage


def _priced(s: Shown) -> bool:
    return s.usage and s.priced


MEASURE = register(
    Measure(
        "usage",
        UsageCounts,
        add,
        needs=frozenset({"usage"}),
        # Token sums and means over the files with a usage sample; None when there is none.
        values={"usage": usage_metrics},
        json=(JsonKey("usage", usage_to_json, when=_shows_usage),),
        columns=(
            Column("PROMPT_TOK", _tokens(lambda u: u.avg_prompt_tokens), MD_HTML, when=_used),
            Column("COMPL_TOK", _tokens(lambda u: u.avg_completion_tokens), MD_HTML, when=_used),
            Column("COST($)", _cost, MD_HTML, when=_priced),
        ),
    )
)

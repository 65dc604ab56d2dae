"""Score head and tail prediction files against an IRT2 dataset: the whole pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kag.errors import UsageError
from kag.grading.irt2.io.dataset import GroundTruth, load_truth
from kag.grading.irt2.io.predictions import iter_prediction_blocks
from kag.grading.irt2.metrics import exact_mean, hits_at_k, query_means, reciprocal_rank
from kag.grading.irt2.model import (
    Averaged,
    Evaluation,
    Mode,
    Scores,
    Side,
    SideSummary,
    Split,
    TargetRanks,
    Task,
    TieMode,
)
from kag.grading.irt2.ranking import PairCounts, count_side, rank_targets
from kag.grading.irt2.worker import run_both

DEFAULT_KS = (1, 10, 100)  # the IRT2 paper reports hits@1, hits@10 and hits@100
DEFAULT_MAX_RANK = 100  # as the reference CLI


@dataclass(frozen=True)
class Request:
    dataset: Path
    task: Task
    split: Split
    head: Path
    tail: Path
    mode: Mode = Mode.ORIGINAL
    max_rank: int | None = DEFAULT_MAX_RANK
    ks: tuple[int, ...] = DEFAULT_KS
    ties: TieMode = TieMode.FIRST


def parse_max_rank(text: str) -> int | None:
    """``--max-rank``: a positive integer, or ``none`` for no cut-off."""
    if text.strip().lower() == "none":
        return None
    return _positive_int(text, f"--max-rank must be a positive integer or 'none', got {text!r}")


def _positive_int(text: str, message: str) -> int:
    """``int(text)`` when it is >= 1; UsageError(message) otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise UsageError(message) from None
    if value < 1:
        raise UsageError(message)
    return value


def parse_ks(text: str) -> tuple[int, ...]:
    """``--ks``: comma-separated positive integers; duplicates dropped, order kept."""
    ks: list[int] = []
    for part in text.split(","):
        k = _positive_int(part, f"--ks must be comma-separated positive integers, got {text!r}")
        if k not in ks:
            ks.append(k)
    return tuple(ks)


def evaluate(request: Request) -> Evaluation:
    """Load the ground truth, rank every gold target of both sides, and aggregate.

    The head file answers the head-side queries and the tail file the tail-side ones
    (see ``kag.grading.irt2.io.dataset.SOURCES``). Raises InputError for malformed input.
    """
    if request.max_rank is not None and request.max_rank < 1:
        raise UsageError(f"--max-rank must be a positive integer or 'none', got {request.max_rank}")
    if not request.ks or any(k < 1 for k in request.ks):
        raise UsageError(f"--ks must be positive integers, got {','.join(map(str, request.ks))}")
    truth = load_truth(request.dataset, request.task, request.split, request.mode)
    sides = ((truth.head, request.head), (truth.tail, request.tail))

    def count(ground: GroundTruth, path: Path) -> PairCounts:
        label = f"{request.task.value} {request.split.value} {ground.side.value} (mode {request.mode.value})"
        return count_side(ground, iter_prediction_blocks(path), path, label)

    counted = run_both(
        lambda: count(*sides[0]), lambda: count(*sides[1]), parallel=_worth_a_process(request.tail)
    )
    records = []
    summaries = []
    for (ground, path), counts in zip(sides, counted):
        ranks = rank_targets(ground, counts, request.ties, request.max_rank)
        records.append(ranks)
        summaries.append(_summary(ground, counts, ranks, path))
    head, tail = records
    head_values, tail_values = side_values(head, request.ks), side_values(tail, request.ks)
    metrics = {
        Side.HEAD.value: average([head_values], request.ks),
        Side.TAIL.value: average([tail_values], request.ks),
        "all": average([head_values, tail_values], request.ks),
    }
    return Evaluation(
        dataset=truth.config.name,
        dataset_path=str(request.dataset),
        task=request.task,
        split=request.split,
        mode=request.mode,
        max_rank=request.max_rank,
        ks=request.ks,
        ties=request.ties,
        samples_dropped=truth.samples_dropped,
        sides=(summaries[0], summaries[1]),
        metrics=metrics,
        records=(head, tail),
    )


# A file smaller than this is counted in this process: the child would cost more than it saves.
PARALLEL_MIN_BYTES = 16 << 20


def _worth_a_process(path: Path) -> bool:
    try:
        return path.stat().st_size >= PARALLEL_MIN_BYTES
    except OSError:  # the count says what is wrong with the file
        return False


@dataclass(frozen=True, eq=False)
class SideValues:
    """Metric values of one side, per target and per query: ``"mrr"`` -> RR, ``k`` -> hits@k."""

    per_target: dict[str | int, np.ndarray]
    per_query: dict[str | int, np.ndarray]


def side_values(records: TargetRanks, ks: tuple[int, ...]) -> SideValues:
    per_target: dict[str | int, np.ndarray] = {"mrr": reciprocal_rank(records.rank)}
    per_target |= {k: hits_at_k(records.rank, k) for k in ks}
    per_query = {key: query_means(values, records.query_ptr) for key, values in per_target.items()}
    return SideValues(per_target, per_query)


def average(sides: list[SideValues], ks: tuple[int, ...]) -> Averaged:
    """Micro and macro MRR and hits@k over the pooled values of ``sides``.

    Micro: mean over every (query, target) pair; macro: mean over every query of the
    query's own mean. Pooling two sides pools their pairs and their queries.
    """

    def scores(columns: list[dict[str | int, np.ndarray]]) -> Scores:
        mean = {key: exact_mean(np.concatenate([c[key] for c in columns])) for key in columns[0]}
        return Scores(mrr=mean["mrr"], hits=tuple((k, mean[k]) for k in ks))

    return Averaged(micro=scores([s.per_target for s in sides]), macro=scores([s.per_query for s in sides]))


def _summary(ground: GroundTruth, counts: PairCounts, ranks: TargetRanks, path: Path) -> SideSummary:
    found = int(counts.found.sum())
    return SideSummary(
        side=ground.side,
        samples_file=ground.source.name,
        predictions_file=str(path),
        queries=ground.queries,
        targets=ground.pairs,
        rows=counts.rows,
        queries_without_row=int((~counts.has_row).sum()),
        targets_found=found,
        targets_cut=found - int((ranks.rank > 0).sum()),
        tie_dependent=int(ranks.tie_dependent.sum()),
    )

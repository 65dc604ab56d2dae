"""Closed option sets and the result model of an IRT2 evaluation."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np


class Task(StrEnum):
    """IRT2 task. ``linking`` is called ``kgc`` (open-world KG completion) in the reference."""

    LINKING = "linking"
    RANKING = "ranking"

    @classmethod
    def parse(cls, value: str) -> Task:
        """``linking``, ``kgc`` (the reference's name for linking) or ``ranking``."""
        key = value.strip().lower()
        if key == "kgc":
            return cls.LINKING
        return cls(key)


class Split(StrEnum):
    VALIDATION = "validation"
    TEST = "test"


class Mode(StrEnum):
    """``original`` drops open-world samples whose vertex is in no closed-world triple; ``full`` keeps all."""

    ORIGINAL = "original"
    FULL = "full"


class Side(StrEnum):
    HEAD = "head"
    TAIL = "tail"


class TieMode(StrEnum):
    """How a gold target is ranked among non-gold candidates with the same score.

    - ``first``: stable sort, equal scores keep row order (the reference evaluator).
    - ``optimistic``: before every equal-scored candidate.
    - ``pessimistic``: after every equal-scored candidate.
    - ``realistic``: the mean of the two (may be a half-integer).
    """

    FIRST = "first"
    OPTIMISTIC = "optimistic"
    PESSIMISTIC = "pessimistic"
    REALISTIC = "realistic"


@dataclass(frozen=True)
class Scores:
    """One cell of the report: MRR and hits@k for each requested k (in request order)."""

    mrr: float
    hits: tuple[tuple[int, float], ...]

    def as_dict(self) -> dict[str, float]:
        out = {"mrr": self.mrr}
        out |= {f"hits_at_{k}": value for k, value in self.hits}
        return out


@dataclass(frozen=True)
class Averaged:
    micro: Scores
    macro: Scores


@dataclass(frozen=True, eq=False)
class TargetRanks:
    """Per-target records of one side: one entry per gold (query, target) pair.

    Arrays are aligned with the ground truth's pairs (queries sorted by (entity, relation),
    targets ascending within a query). Ranks are float64 because ``realistic`` ties give
    half-integers; 0 means a miss (no row, gold not in the row, or cut by ``max_rank``).
    """

    side: Side
    query_entity: np.ndarray  # int64, per pair
    query_relation: np.ndarray  # int64, per pair
    target: np.ndarray  # int64, per pair
    query_ptr: np.ndarray  # int64, CSR offsets of queries into the pair arrays
    raw: np.ndarray  # float64: position in the sorted row (other gold targets counted)
    filtered: np.ndarray  # float64: target-filtered rank before the max-rank cut
    rank: np.ndarray  # float64: the rank the metrics use (filtered, 0 above max_rank)
    tie_dependent: np.ndarray  # bool: optimistic and pessimistic scored ranks differ

    @property
    def queries(self) -> int:
        return len(self.query_ptr) - 1

    @property
    def targets(self) -> int:
        return len(self.target)


@dataclass(frozen=True)
class SideSummary:
    """Counts that show what was scored on one side."""

    side: Side
    samples_file: str  # the dataset file the ground truth was built from
    predictions_file: str
    queries: int
    targets: int
    rows: int  # prediction rows read
    queries_without_row: int
    targets_found: int  # gold targets present in their query's row
    targets_cut: int  # found, but the filtered rank is above max_rank
    tie_dependent: int  # targets whose scored rank depends on tie order


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Everything `kag irt2` reports: ground truth used, counts, metrics, per-target records."""

    dataset: str  # config.yaml create.name
    dataset_path: str
    task: Task
    split: Split
    mode: Mode
    max_rank: int | None
    ks: tuple[int, ...]
    ties: TieMode
    samples_dropped: int  # open-world samples dropped by mode=original (both files)
    sides: tuple[SideSummary, SideSummary]  # head, tail
    metrics: dict[str, Averaged]  # "head", "tail", "all"
    records: tuple[TargetRanks, TargetRanks]  # head, tail

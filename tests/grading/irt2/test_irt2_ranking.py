"""Target-filtered ranks: hand cases, the reference algorithm by brute force, and row errors.

``reference_ranks`` below restates the reference evaluator's ``Ranks._strip_raw`` and
``Ranks._add`` (irt2 1.1.0, irt2/evaluation.py): sort the row's pairs by score with
Python's stable ``sorted(..., reverse=True)``, then the k-th gold target met (0-based)
at 0-based position p gets raw rank p + 1 and filtered rank p + 1 - k.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kag.errors import InputError
from kag.grading.irt2 import ranking
from kag.grading.irt2.io.dataset import GroundTruth
from kag.grading.irt2.io.predictions import iter_prediction_blocks
from kag.grading.irt2.model import Side, TieMode
from kag.grading.irt2.ranking import count_side, ragged_arange, rank_targets

Pairs = list[tuple[int, float]]


def reference_ranks(row: Pairs, gold: set[int]) -> dict[int, tuple[int, int]]:
    """target -> (raw rank, filtered rank), as the reference computes them."""
    ordered = sorted(row, key=lambda pair: pair[1], reverse=True)
    found: dict[int, tuple[int, int]] = {}
    for position, (candidate, _) in enumerate(ordered):
        if candidate in gold:
            found[candidate] = (position + 1, position + 1 - len(found))
    return found


def tie_rank(row: Pairs, gold: set[int], target: int, ties: TieMode, raw: bool) -> float:
    """Optimistic / pessimistic / realistic rank straight from the definitions."""
    score = next(s for c, s in row if c == target)
    others = [(c, s) for c, s in row if c != target and (raw or c not in gold)]
    higher = sum(s > score for _, s in others)
    equal = sum(s == score for _, s in others)
    return {
        TieMode.OPTIMISTIC: 1.0 + higher,
        TieMode.PESSIMISTIC: 1.0 + higher + equal,
        TieMode.REALISTIC: 1.0 + higher + equal / 2,
    }[ties]


def write_rows(folder: Path, rows: dict[tuple[int, int], Pairs]) -> Path:
    path = folder / "pred.csv"
    path.write_text(
        "".join(
            f"{e},{r}," + ",".join(f"{c},{s!r}" for c, s in pairs) + "\n" for (e, r), pairs in rows.items()
        )
    )
    return path


def score(truth: GroundTruth, path: Path, ties: TieMode = TieMode.FIRST, max_rank: int | None = None):  # type: ignore[no-untyped-def]
    counts = count_side(truth, iter_prediction_blocks(path), path, "the test truth")
    return counts, rank_targets(truth, counts, ties, max_rank)


def by_target(records) -> dict[tuple[int, int, int], tuple[float, float, float]]:  # type: ignore[no-untyped-def]
    keys = zip(records.query_entity.tolist(), records.query_relation.tolist(), records.target.tolist())
    values = zip(records.raw.tolist(), records.filtered.tolist(), records.rank.tolist())
    return dict(zip(keys, values))


def test_ragged_arange() -> None:
    assert ragged_arange(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist() == [5, 6, 9, 10, 11]
    assert ragged_arange(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == []


def test_hand_case(tmp_path: Path) -> None:
    # Query (1, 0) has gold {10, 11, 12}. Sorted row: 20 (.9), 10 (.8), 21 (.7), 11 (.7), 12 (.1).
    # 10: raw 2, filtered 2; 11: raw 4, one gold before -> 3; 12: raw 5, two gold before -> 3.
    # Query (2, 0) has gold {10}, missing from its row; query (3, 1) has no row at all.
    truth = GroundTruth.from_pairs(Side.HEAD, [1, 1, 1, 2, 3], [0, 0, 0, 0, 1], [10, 11, 12, 10, 10])
    path = write_rows(
        tmp_path, {(1, 0): [(21, 0.7), (11, 0.7), (20, 0.9), (12, 0.1), (10, 0.8)], (2, 0): [(11, 0.5)]}
    )
    counts, records = score(truth, path)
    assert by_target(records) == {
        (1, 0, 10): (2.0, 2.0, 2.0),
        (1, 0, 11): (4.0, 3.0, 3.0),  # 21 and 11 tie at .7; 21 is earlier in the row, so first
        (1, 0, 12): (5.0, 3.0, 3.0),
        (2, 0, 10): (0.0, 0.0, 0.0),
        (3, 1, 10): (0.0, 0.0, 0.0),
    }
    assert counts.found.tolist() == [True, True, True, False, False]
    assert counts.has_row.tolist() == [True, True, False]
    assert counts.rows == 2
    assert records.tie_dependent.tolist() == [False, True, False, False, False]


def test_max_rank_cuts_the_filtered_rank_not_the_raw_one(tmp_path: Path) -> None:
    truth = GroundTruth.from_pairs(Side.HEAD, [1, 1, 1], [0, 0, 0], [10, 11, 12])
    path = write_rows(tmp_path, {(1, 0): [(21, 0.7), (11, 0.7), (20, 0.9), (12, 0.1), (10, 0.8)]})
    _, records = score(truth, path, max_rank=3)
    assert records.raw.tolist() == [2.0, 4.0, 5.0]
    assert records.rank.tolist() == [2.0, 3.0, 3.0]  # raw ranks 4 and 5 are above 3, filtered ones are not
    _, records = score(truth, path, max_rank=2)
    assert records.rank.tolist() == [2.0, 0.0, 0.0]
    assert records.filtered.tolist() == [2.0, 3.0, 3.0]  # kept for the per-query file


def test_repeated_non_gold_candidate_takes_two_places(tmp_path: Path) -> None:
    truth = GroundTruth.from_pairs(Side.TAIL, [1], [0], [10])
    path = write_rows(tmp_path, {(1, 0): [(7, 0.9), (7, 0.8), (99999, 0.85), (10, 0.5)]})
    _, records = score(truth, path)
    assert records.filtered.tolist() == [4.0]  # unknown id 99999 is an ordinary competitor


@pytest.mark.parametrize(
    ("ties", "rank"),
    [(TieMode.FIRST, 3.0), (TieMode.OPTIMISTIC, 2.0), (TieMode.PESSIMISTIC, 5.0), (TieMode.REALISTIC, 3.5)],
)
def test_tie_modes_by_hand(tmp_path: Path, ties: TieMode, rank: float) -> None:
    # 9 scores higher; 4, 6, 0 tie with the gold 2; 4 comes before it in the row, 6 and 0 after.
    truth = GroundTruth.from_pairs(Side.HEAD, [101], [0], [2])
    path = write_rows(tmp_path, {(101, 0): [(4, 0.5), (2, 0.5), (6, 0.5), (0, 0.5), (9, 0.9)]})
    _, records = score(truth, path, ties)
    assert records.filtered.tolist() == [rank]
    assert records.tie_dependent.tolist() == [True]


def test_ties_among_gold_targets_do_not_matter(tmp_path: Path) -> None:
    truth = GroundTruth.from_pairs(Side.HEAD, [5, 5], [0, 0], [6, 7])
    path = write_rows(tmp_path, {(5, 0): [(7, 0.4), (6, 0.4), (1, 0.5)]})
    for ties in TieMode:
        _, records = score(truth, path, ties)
        assert records.filtered.tolist() == [2.0, 2.0], ties
        assert records.tie_dependent.tolist() == [False, False]


def test_a_tie_beyond_max_rank_is_not_tie_dependent(tmp_path: Path) -> None:
    truth = GroundTruth.from_pairs(Side.HEAD, [1], [0], [10])
    path = write_rows(tmp_path, {(1, 0): [(1, 0.9), (2, 0.9), (3, 0.5), (10, 0.5)]})
    _, records = score(truth, path, TieMode.FIRST, max_rank=2)
    assert records.tie_dependent.tolist() == [False]  # optimistic 3, pessimistic 4: both cut to 0
    _, records = score(truth, path, TieMode.FIRST, max_rank=3)
    assert records.tie_dependent.tolist() == [True]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            "1,0,10,0.5\n9,9,10,0.5\n",
            r"pred.csv:2: query \(9, 9\) is not in the ground truth of the test truth",
        ),
        (
            "1,0,10,0.5\n2,0,10,0.5\n1,0,11,0.1\n",
            r"pred.csv:3: query \(1, 0\) appears twice \(first on line 1\)",
        ),
        (
            "2,0,10,0.5\n1,0,10,0.5,11,0.2,10,0.1\n",
            r"pred.csv:2: gold candidate 10 appears twice in the row of query \(1, 0\)",
        ),
        # The earliest problem is reported, whatever its kind.
        ("1,0,10,0.5,10,0.4\n9,9,10,0.5\n", r"pred.csv:1: gold candidate 10 appears twice"),
        ("9,9,10,0.5\n1,0,10,0.5,10,0.4\n", r"pred.csv:1: query \(9, 9\) is not in the ground truth"),
        ("9,9,10,0.5\n1,0,10\n", r"pred.csv:1: query \(9, 9\) is not in the ground truth"),
        ("1,0,10,0.5\n1,0\n", r"pred.csv:2: row without a"),
    ],
)
def test_row_errors_name_file_and_line(tmp_path: Path, rows: str, message: str) -> None:
    truth = GroundTruth.from_pairs(Side.HEAD, [1, 1, 2], [0, 0, 0], [10, 11, 10])
    path = tmp_path / "pred.csv"
    path.write_text(rows)
    with pytest.raises(InputError, match=message):
        score(truth, path)


def test_query_twice_across_blocks(tmp_path: Path) -> None:
    truth = GroundTruth.from_pairs(Side.HEAD, [1, 2], [0, 0], [10, 10])
    path = tmp_path / "pred.csv"
    path.write_text("1,0,10,0.5\n2,0,10,0.5\n1,0,10,0.5\n")
    blocks = iter_prediction_blocks(path, block_bytes=8)  # one line per block
    with pytest.raises(InputError, match=r"pred.csv:3: query \(1, 0\) appears twice \(first on line 1\)"):
        count_side(truth, blocks, path, "x")


# ------------------------------------------------------------ against brute force

ids = st.integers(min_value=0, max_value=12)
scores = st.sampled_from([0.0, 0.25, 0.5, 0.5, 1.0, -1.0, 3.0])  # few values: many ties


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[tuple[int, int], set[int]], dict[tuple[int, int], Pairs]]:
    queries = draw(st.lists(st.tuples(ids, st.integers(0, 2)), min_size=1, max_size=6, unique=True))
    gold = {q: set(draw(st.lists(ids, min_size=1, max_size=9, unique=True))) for q in queries}
    rows = {}
    for q in draw(st.lists(st.sampled_from(queries), unique=True)):
        pairs = draw(st.lists(st.tuples(st.integers(0, 14), scores), min_size=1, max_size=20))
        seen: set[int] = set()
        kept = []
        for candidate, value in pairs:  # a gold candidate may appear once per row
            if candidate in gold[q] and candidate in seen:
                continue
            seen.add(candidate)
            kept.append((candidate, value))
        rows[q] = kept
    return gold, rows


@settings(max_examples=120, deadline=None)
@given(
    cases(), st.sampled_from(list(TieMode)), st.sampled_from([None, 1, 2, 5]), st.booleans(), st.booleans()
)
def test_ranks_equal_the_reference_algorithm(
    case, ties: TieMode, max_rank: int | None, tiny_batches: bool, one_length: bool
) -> None:  # type: ignore[no-untyped-def]
    gold, rows = case
    if one_length and rows:  # rows of one length are compared as a grid
        shortest = min(map(len, rows.values()))
        rows = {q: row[:shortest] for q, row in rows.items()}
    flat = [(e, r, t) for (e, r), targets in gold.items() for t in targets]
    truth = GroundTruth.from_pairs(Side.HEAD, *map(list, zip(*flat)))
    limit = ranking.EXPANSION_LIMIT
    ranking.EXPANSION_LIMIT = 3 if tiny_batches else limit  # batches split rows and gold runs
    try:
        with tempfile.TemporaryDirectory() as tmp:
            _, records = score(truth, write_rows(Path(tmp), rows), ties, max_rank)
    finally:
        ranking.EXPANSION_LIMIT = limit
    got = by_target(records)
    for (e, r), targets in gold.items():
        row = rows.get((e, r), [])
        expected = reference_ranks(row, targets)
        for t in targets:
            raw, filtered = expected.get(t, (0, 0))
            if ties is not TieMode.FIRST and t in expected:
                raw, filtered = tie_rank(row, targets, t, ties, True), tie_rank(row, targets, t, ties, False)
            cut = 0.0 if max_rank is not None and filtered > max_rank else float(filtered)
            assert got[(e, r, t)] == (float(raw), float(filtered), cut), (e, r, t)


@settings(max_examples=60, deadline=None)
@given(cases())
def test_matching_by_comparison_and_by_search_agree(case) -> None:  # type: ignore[no-untyped-def]
    gold, rows = case
    flat = [(e, r, t) for (e, r), targets in gold.items() for t in targets]
    truth = GroundTruth.from_pairs(Side.HEAD, *map(list, zip(*flat)))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_rows(Path(tmp), rows)
        results = []
        for padded in (0, 100):  # 0: always binary search; 100: always direct comparison
            saved = ranking._PADDED_GOLDS
            ranking._PADDED_GOLDS = padded
            try:
                counts, _ = score(truth, path)
            finally:
                ranking._PADDED_GOLDS = saved
            results.append(np.stack([counts.greater, counts.equal, counts.equal_before, counts.raw_greater]))
    assert (results[0] == results[1]).all()


def test_huge_target_ids_use_dense_codes(tmp_path: Path) -> None:
    # Targets 2**62 apart: (row, target - min) keys would overflow int64.
    big = 2**62
    truth = GroundTruth.from_pairs(Side.HEAD, [1] * 8, [0] * 8, [-big, big, 1, 2, 3, 4, 5, 6])
    path = write_rows(tmp_path, {(1, 0): [(0, 0.99), (big, 0.9), (7, 0.95), (-big, 0.1), (-5, 0.2)]})
    _, records = score(truth, path)
    assert by_target(records)[(1, 0, big)] == (3.0, 3.0, 3.0)
    assert by_target(records)[(1, 0, -big)] == (5.0, 4.0, 4.0)  # gold `big` before it is filtered

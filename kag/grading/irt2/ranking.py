"""Where each gold target stands in its query's prediction row: target-filtered ranks.

The reference sorts a row's ``(candidate, score)`` pairs by score, descending, with a
stable sort (equal scores keep row order); a gold target at 0-based position ``p`` with
``s`` gold targets before it gets the raw rank ``p + 1`` and the filtered rank
``p + 1 - s``, i.e. ``1 + the number of non-gold candidates before it``. A candidate ``j``
comes before target ``i`` exactly when ``score[j] > score[i]``, or the scores are equal
and ``j`` is earlier in the row, so no sort is needed: for every gold occurrence numpy
compares it with the rest of its row and counts. Those counts also give the other tie
rules (see ``TieMode``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kag.errors import InputError
from kag.grading.irt2.io.dataset import GroundTruth
from kag.grading.irt2.io.predictions import RowBlock
from kag.grading.irt2.model import TargetRanks, TieMode

# Gold occurrences are compared with their rows in batches of about this many elements.
EXPANSION_LIMIT = 1 << 22
_KEY_LIMIT = 1 << 62
# Rows whose queries have at most this many gold targets are matched by direct comparison.
_PADDED_GOLDS = 6


@dataclass(frozen=True, eq=False)
class PairCounts:
    """Counts per gold (query, target) pair, aligned with ``GroundTruth.targets``.

    ``greater``/``equal``/``equal_before`` count the *non-gold* candidates of the row with
    a higher score, an equal score, and an equal score earlier in the row; the ``raw_``
    versions count every other candidate of the row (other gold targets included).
    All are 0 where ``found`` is False (no row for the query, or target not in the row).
    """

    found: np.ndarray  # bool
    greater: np.ndarray  # int64
    equal: np.ndarray
    equal_before: np.ndarray
    raw_greater: np.ndarray
    raw_equal: np.ndarray
    raw_equal_before: np.ndarray
    has_row: np.ndarray  # bool, per query
    rows: int


def ragged_arange(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(starts[i], starts[i] + lengths[i])`` over ``i``."""
    lengths = lengths.astype(np.int64, copy=False)
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    out_starts = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) - np.repeat(out_starts - starts, lengths)


class _Counter:
    def __init__(self, truth: GroundTruth, path: Path, label: str) -> None:
        self.truth = truth
        self.path = path
        self.label = label
        pairs = truth.pairs
        self.found = np.zeros(pairs, dtype=bool)
        self.counts = np.zeros((6, pairs), dtype=np.int64)
        self.first_line = np.zeros(truth.queries, dtype=np.int64)  # 0: no row yet
        self.rows = 0
        targets = truth.targets
        self.tmin = int(targets.min()) if pairs else 0
        self.span = int(targets.max()) - self.tmin + 1 if pairs else 1

    def add(self, block: RowBlock) -> None:
        query, error = self._queries(block)
        if error is not None:
            # Rows before the bad one are checked first: their errors come earlier in the file.
            bad_row, message = error
            if bad_row:
                self.add(block.head(bad_row))
            raise InputError(message)
        self.first_line[query] = block.lines
        self.rows += block.rows
        if not self.truth.pairs:
            return
        sizes = np.diff(block.offsets)
        # Rows of one length (the usual file) are compared as a (rows, width) grid.
        width = int(sizes[0]) if (sizes == sizes[0]).all() else 0
        first = self.truth.ptr[query]
        golds = self.truth.ptr[query + 1] - first
        if width and golds.max() <= _PADDED_GOLDS:
            pair = self._match_grid(block.candidates.reshape(-1, width), first, golds)
            where = np.flatnonzero(pair >= 0)
            rows = where // width
        else:
            row_of = np.repeat(np.arange(block.rows, dtype=np.int64), sizes)
            if golds.max() <= _PADDED_GOLDS:
                pair = self._match_few(block.candidates, row_of, first, golds)
            else:
                pair = self._match_many(block.candidates, row_of, first, golds)
            where = np.flatnonzero(pair >= 0)
            rows = row_of[where]
        self._check_repeats(block, pair[where], rows)
        self._count(block, where, rows, pair[where], width)

    def _queries(self, block: RowBlock) -> tuple[np.ndarray, tuple[int, str] | None]:
        """Query number of each row, and the first row that is unknown or repeated."""
        query = self.truth.lookup(block.entity, block.relation)
        known = query >= 0
        # A query may have one row only (target filtering needs the whole row at once).
        again = known & (self.first_line[np.where(known, query, 0)] > 0)
        _, first = np.unique(query, return_index=True)
        repeated_here = np.ones(block.rows, dtype=bool)
        repeated_here[first] = False
        again |= repeated_here & known
        bad = np.flatnonzero(~known | again)
        if not len(bad):
            return query, None
        i = int(bad[0])
        where = f"{self.path}:{int(block.lines[i])}: query ({int(block.entity[i])}, {int(block.relation[i])})"
        if not known[i]:
            return query, (i, f"{where} is not in the ground truth of {self.label}")
        earlier = int(self.first_line[query[i]]) or int(block.lines[np.flatnonzero(query == query[i])[0]])
        return query, (i, f"{where} appears twice (first on line {earlier})")

    def _match_few(
        self, candidates: np.ndarray, row_of: np.ndarray, first: np.ndarray, golds: np.ndarray
    ) -> np.ndarray:
        """Pair number of each candidate that is a gold target of its row's query, else -1.

        For rows with few gold targets: compare every candidate with the row's j-th gold
        target, for each j (rows with fewer targets repeat their first one).
        """
        pair = np.full(len(candidates), -1, dtype=np.int64)
        for j in range(int(golds.max())):
            pair_j = np.where(golds > j, first + j, first)
            hit = candidates == self.truth.targets[pair_j][row_of]
            pair[hit] = pair_j[row_of[hit]]
        return pair

    def _match_grid(self, grid: np.ndarray, first: np.ndarray, golds: np.ndarray) -> np.ndarray:
        """As ``_match_few`` for rows of one length, ``grid[row]`` holding a row's candidates."""
        pair = np.full(grid.shape, -1, dtype=np.int64)
        for j in range(int(golds.max())):
            pair_j = np.where(golds > j, first + j, first)[:, None]
            pair = np.where(grid == self.truth.targets[pair_j], pair_j, pair)
        return pair.ravel()

    def _match_many(
        self, candidates: np.ndarray, row_of: np.ndarray, first: np.ndarray, golds: np.ndarray
    ) -> np.ndarray:
        """As ``_match_few``, by binary search of (row, target) keys: any number of targets."""
        rows = len(first)
        gold = ragged_arange(first, golds)  # pair numbers, row by row
        gold_row = np.repeat(np.arange(rows, dtype=np.int64), golds)
        targets = self.truth.targets[gold]
        if rows * self.span < _KEY_LIMIT:
            lo, span = self.tmin, self.span
            inside = (candidates >= lo) & (candidates <= lo + span - 1)
            cand_code = np.where(inside, candidates - lo, 0)
            gold_code = targets - lo
        else:
            codes = np.unique(self.truth.targets)  # dense codes: (row, code) keys cannot overflow
            at = np.minimum(np.searchsorted(codes, candidates), len(codes) - 1)
            inside = codes[at] == candidates
            cand_code, span = at, len(codes)
            gold_code = np.searchsorted(codes, targets)
        hay = gold_row * span + gold_code  # sorted: rows ascending, targets ascending per query
        needle = row_of * span + cand_code
        at = np.minimum(np.searchsorted(hay, needle), len(hay) - 1)
        hit = inside & (hay[at] == needle)
        return np.where(hit, gold[at], -1)

    def _check_repeats(self, block: RowBlock, pairs: np.ndarray, rows: np.ndarray) -> None:
        order = np.argsort(pairs, kind="stable")
        repeated = np.flatnonzero(pairs[order][1:] == pairs[order][:-1])
        if len(repeated):
            first_bad = order[repeated + 1].min()
            row = int(rows[first_bad])
            target = int(self.truth.targets[pairs[first_bad]])
            raise InputError(
                f"{self.path}:{int(block.lines[row])}: gold candidate {target} appears twice in the row"
                f" of query ({int(block.entity[row])}, {int(block.relation[row])})"
            )

    def _count(
        self, block: RowBlock, where: np.ndarray, rows: np.ndarray, pairs: np.ndarray, width: int
    ) -> None:
        """Counts for the gold occurrences at flat positions ``where`` (ascending) of ``rows``;
        ``width`` is the length of every row, or 0 when the lengths differ."""
        if not len(where):
            return
        self.found[pairs] = True
        scores = block.scores
        own = scores[where]
        if width:
            every = tally_grid(own, where - rows * width, scores.reshape(-1, width), rows)
        else:
            starts = block.offsets[rows]
            every = tally(own, where, scores, None, starts, block.offsets[rows + 1] - starts)
        # The gold occurrences of one row are a run in ``where``: tally them among themselves
        # and subtract, which leaves the non-gold candidates.
        run_start = np.searchsorted(rows, rows, side="left")
        run_length = np.searchsorted(rows, rows, side="right") - run_start
        if run_length.max() == 1:
            gold = np.zeros_like(every)
            gold[1] = 1
        else:
            gold = tally(own, where, own, where, run_start, run_length)
        self.counts[:, pairs] = np.concatenate((every - gold, every))
        self.counts[4, pairs] -= 1  # the target itself is among the equal scores


def tally(
    own: np.ndarray,
    own_position: np.ndarray,
    values: np.ndarray,
    positions: np.ndarray | None,
    starts: np.ndarray,
    lengths: np.ndarray,
) -> np.ndarray:
    """Count, for each item ``i``, how many of ``values[starts[i]:starts[i] + lengths[i]]`` beat it.

    Row 0: values greater than ``own[i]``; row 1: values equal to it; row 2: values equal
    to it at a position before ``own_position[i]`` (a value's position is
    ``positions[j]``, or ``j`` itself when ``positions`` is None). Each range holds the
    item itself, so row 1 is at least 1. Returns int64 ``(3, n)``. The ranges are laid
    out flat and compared in batches of about ``EXPANSION_LIMIT`` values.
    """
    out = np.empty((3, len(own)), dtype=np.int64)
    ends = np.cumsum(lengths)
    begin = 0
    while begin < len(own):
        base = int(ends[begin - 1]) if begin else 0
        stop = max(int(np.searchsorted(ends, base + EXPANSION_LIMIT, side="right")), begin + 1)
        part = slice(begin, stop)
        size = lengths[part]
        idx = ragged_arange(starts[part], size)
        seg = np.cumsum(size) - size
        mine = np.repeat(own[part], size)
        other = values[idx]
        out[0, part] = np.add.reduceat(other > mine, seg, dtype=np.int64)
        equal = other == mine
        if np.count_nonzero(equal) == len(seg):  # no ties: each item equals only itself
            out[1, part] = 1
            out[2, part] = 0
        else:
            out[1, part] = np.add.reduceat(equal, seg, dtype=np.int64)
            position = idx if positions is None else positions[idx]
            before = equal & (position < np.repeat(own_position[part], size))
            out[2, part] = np.add.reduceat(before, seg, dtype=np.int64)
        begin = stop
    return out


def tally_grid(own: np.ndarray, column: np.ndarray, grid: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """As ``tally`` when item ``i`` is ``grid[rows[i], column[i]]`` and its range the whole
    row ``grid[rows[i]]``: positions are columns. Compared in batches of about
    ``EXPANSION_LIMIT`` values."""
    out = np.empty((3, len(own)), dtype=np.int64)
    width = grid.shape[1]
    step = max(EXPANSION_LIMIT // max(width, 1), 1)
    for begin in range(0, len(own), step):
        part = slice(begin, begin + step)
        mine = own[part, None]
        other = grid[rows[part]]
        out[0, part] = np.count_nonzero(other > mine, axis=1)
        equal = other == mine
        out[1, part] = np.count_nonzero(equal, axis=1)
        if int(out[1, part].sum()) == len(mine):  # no ties: each item equals only itself
            out[2, part] = 0
        else:
            before = equal & (np.arange(width) < column[part, None])
            out[2, part] = np.count_nonzero(before, axis=1)
    return out


def count_side(truth: GroundTruth, blocks: Iterable[RowBlock], path: Path, label: str) -> PairCounts:
    """Read every row of one side's prediction file and count, per gold pair, who beats it.

    Raises InputError (naming file and line) for a query outside ``truth`` (``label``
    describes it), a query given twice, or a gold candidate given twice in a row.
    """
    counter = _Counter(truth, path, label)
    for block in blocks:
        counter.add(block)
    c = counter.counts
    has_row = counter.first_line > 0
    return PairCounts(counter.found, c[0], c[1], c[2], c[3], c[4], c[5], has_row, counter.rows)


def rank_targets(truth: GroundTruth, counts: PairCounts, ties: TieMode, max_rank: int | None) -> TargetRanks:
    """Per-target records: raw rank, target-filtered rank, and the rank after the cut.

    ``first`` (the reference): ``1 + greater + equal_before``; ``optimistic``:
    ``1 + greater``; ``pessimistic``: ``1 + greater + equal``; ``realistic``: their mean.
    The raw rank applies the same rule counting every candidate. A target not found has
    rank 0 everywhere; a filtered rank above ``max_rank`` scores 0. ``tie_dependent``
    marks targets whose scored rank differs between optimistic and pessimistic.
    """

    def rule(greater: np.ndarray, equal: np.ndarray, before: np.ndarray, mode: TieMode) -> np.ndarray:
        if mode is TieMode.FIRST:
            rank = 1.0 + greater + before
        elif mode is TieMode.OPTIMISTIC:
            rank = 1.0 + greater
        elif mode is TieMode.PESSIMISTIC:
            rank = 1.0 + greater + equal
        else:
            rank = 1.0 + greater + equal / 2.0
        return np.where(counts.found, rank, 0.0)

    def cut(rank: np.ndarray) -> np.ndarray:
        return rank if max_rank is None else np.where(rank > max_rank, 0.0, rank)

    filtered = rule(counts.greater, counts.equal, counts.equal_before, ties)
    raw = rule(counts.raw_greater, counts.raw_equal, counts.raw_equal_before, ties)
    optimistic = cut(rule(counts.greater, counts.equal, counts.equal_before, TieMode.OPTIMISTIC))
    pessimistic = cut(rule(counts.greater, counts.equal, counts.equal_before, TieMode.PESSIMISTIC))
    sizes = np.diff(truth.ptr)
    return TargetRanks(
        side=truth.side,
        query_entity=np.repeat(truth.entity, sizes),
        query_relation=np.repeat(truth.relation, sizes),
        target=truth.targets,
        query_ptr=truth.ptr,
        raw=raw,
        filtered=filtered,
        rank=cut(filtered),
        tie_dependent=optimistic != pessimistic,
    )

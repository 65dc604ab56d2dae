"""``--shard K/N``: the K-th of N deterministic, disjoint slices of a benchmark's tasks.

A task's shard is decided by a hash of its (dataset, question id, setup) names alone, never
by its position in the task list: the same task lands in the same shard whatever the
``--limit``, whether the run is new or ``--continue``d, on every machine and Python (the
hash is BLAKE2b, not Python's salted ``hash``). The N shards cover every task exactly once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from kag.errors import UsageError

_SHARD = re.compile(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*")
#: The most shards a run can be cut into: far more machines than any cluster has, and few
#: enough that the modulo bias of the 64-bit hash stays below 2**-44.
MAX_SHARDS = 1_000_000
# How much of a rejected --shard value a message repeats.
_SHOWN = 40
# Written into every digest: a different use of BLAKE2b over the same names gives other bits.
_PERSON = b"kag-shard-v1"


def shard_number(dataset: str, question: str, setup: str, count: int) -> int:
    """The 1-based shard (of ``count``) that the task (dataset, question, setup) belongs to:
    ``1 + (BLAKE2b-64(names) mod count)``.

    The three names are hashed with their UTF-8 lengths, so no two different triples give
    the same input (``("ab", "c")`` is not ``("a", "bc")``). The modulo bias of a 64-bit
    hash is below 2**-40 for any count a cluster has.
    """
    if count < 1:
        raise ValueError(f"shard count must be at least 1 (got {count})")
    digest = hashlib.blake2b(digest_size=8, person=_PERSON)
    for name in (dataset, question, setup):
        raw = name.encode("utf-8", "surrogatepass")
        digest.update(len(raw).to_bytes(8, "big"))
        digest.update(raw)
    return 1 + int.from_bytes(digest.digest(), "big") % count


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise ValueError(f"shard {self.index}/{self.count}: K must be between 1 and N")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def contains(self, dataset: str, question: str, setup: str) -> bool:
        """Whether the task (dataset, question id, setup) is in this shard."""
        return self.count == 1 or shard_number(dataset, question, setup, self.count) == self.index


def _bounded(digits: str) -> int | None:
    """The number the ASCII ``digits`` write, or None past :data:`MAX_SHARDS` (without
    building a huge int: Python refuses to read one of more than 4300 digits)."""
    digits = digits.lstrip("0") or "0"
    if len(digits) > len(str(MAX_SHARDS)):
        return None
    number = int(digits)
    return number if number <= MAX_SHARDS else None


def parse_shard(text: str, option: str = "--shard") -> Shard:
    """``"K/N"`` (1 <= K <= N <= :data:`MAX_SHARDS`) as a Shard; ``UsageError`` naming
    ``option`` (and the value, cut short when it is long) otherwise."""
    shown = repr(text) if len(text) <= _SHOWN else f"{text[:_SHOWN]!r}... ({len(text)} characters)"
    match = _SHARD.fullmatch(text)
    if match is None:
        raise UsageError(f"{option}: expected K/N, as in 2/8 (got {shown})")
    index, count = _bounded(match[1]), _bounded(match[2])
    if count is None:
        raise UsageError(f"{option}: N must be at most {MAX_SHARDS} (got {shown})")
    if count < 1:
        raise UsageError(f"{option}: N must be at least 1 (got {shown})")
    if index is None or not 1 <= index <= count:
        raise UsageError(f"{option}: K must be between 1 and N, counting from 1 (got {shown})")
    return Shard(index, count)

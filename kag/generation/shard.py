"""``--shard K/N``: the K-th of N deterministic, disjoint slices of a benchmark's tasks.

A task's shard is decided by a hash of its (dataset, question id, setup) names alone, never
by its position in the task list: the same task lands in the same shard whatever the
``--limit``, whether the run is new or ``--continue``d, on every machine and Python (the
hash is BLAKE2b, not Python's salted ``hash``). The N shards cover every task exactly once.

``--shard auto`` takes K and N from the scheduler that started the process: the task of a
Slurm job array (``SLURM_ARRAY_TASK_ID`` and the array's ``SLURM_ARRAY_TASK_MIN``, ``_MAX``,
``_COUNT``, ``_STEP``) or the pod of a Kubernetes indexed Job (``JOB_COMPLETION_INDEX``, and
the Job's completions in ``JOB_COMPLETIONS``, which the Job's pod template sets).

Shards of one N share a result tree, each under its own lock; a run cut into other slices
(another N, or no shard) is refused while they write (:func:`check_other_slicings`).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kag.errors import UsageError
from kag.results.io import LOCK_NAME, TreeBusy
from kag.results.model import TMP_SUFFIX

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


#: The value of ``--shard`` that reads K and N from the scheduler's environment.
AUTO = "auto"
_ADVICE = "or give --shard K/N"


def _variable(environ: Mapping[str, str], name: str, option: str) -> int:
    """The non-negative integer in the environment variable ``name``; UsageError naming it
    when it is absent, not a number or past :data:`MAX_SHARDS`."""
    text = environ.get(name)
    if text is None:
        raise UsageError(f"{option} auto: {name} is not set; {_ADVICE}")
    shown = repr(text) if len(text) <= _SHOWN else f"{text[:_SHOWN]!r}... ({len(text)} characters)"
    digits = text.strip()
    if not digits.isascii() or not digits.isdigit():
        raise UsageError(f"{option} auto: {name} is not a whole number (got {shown}); {_ADVICE}")
    number = _bounded(digits)
    if number is None:
        raise UsageError(f"{option} auto: {name} is past {MAX_SHARDS} (got {shown}); {_ADVICE}")
    return number


def _slurm_shard(environ: Mapping[str, str], option: str) -> tuple[Shard, str]:
    """The shard of a Slurm array task. Array ids need not start at 1 (``--array=0-3`` is
    as common as ``--array=1-4``): K counts from the array's first id. Only an array of
    consecutive ids from 0 or 1 is read, since any other is most likely a part of an array
    resubmitted on its own, whose ids no longer tell its slices."""
    task = _variable(environ, "SLURM_ARRAY_TASK_ID", option)
    first = _variable(environ, "SLURM_ARRAY_TASK_MIN", option)
    last = _variable(environ, "SLURM_ARRAY_TASK_MAX", option)
    count = _variable(environ, "SLURM_ARRAY_TASK_COUNT", option)
    step = _variable(environ, "SLURM_ARRAY_TASK_STEP", option) if "SLURM_ARRAY_TASK_STEP" in environ else 1
    ids = f"{first}-{last}" + (f":{step}" if step != 1 else "")
    if step != 1 or last < first or count != last - first + 1 or not first <= task <= last:
        raise UsageError(
            f"{option} auto: the Slurm array (ids {ids}, {count} task(s)) is not a range of"
            f" consecutive ids; submit it with --array=1-N, {_ADVICE}"
        )
    if first not in (0, 1):
        raise UsageError(
            f"{option} auto: the Slurm array starts at id {first}, not at 0 or 1: a part of an"
            " array submitted on its own cannot tell its slices; submit the whole array again"
            f" (--continue skips what is done), requeue the task (scontrol requeue), {_ADVICE}"
        )
    if count == 1:
        raise UsageError(
            f"{option} auto: the Slurm array has a single task (id {task}), which would be the"
            " whole run, not one slice of it; submit the whole array again (--continue skips"
            f" what is done), requeue the task (scontrol requeue), {_ADVICE}"
        )
    shard = Shard(task - first + 1, count)
    return shard, f"Slurm array task {task} of {ids}"


def _kubernetes_shard(environ: Mapping[str, str], option: str) -> tuple[Shard, str]:
    """The shard of a pod of a Kubernetes indexed Job: index 0 is shard 1. The pod does not
    see the Job's completions: its template passes them in ``JOB_COMPLETIONS``."""
    index = _variable(environ, "JOB_COMPLETION_INDEX", option)
    if "JOB_COMPLETIONS" not in environ:
        raise UsageError(
            f"{option} auto: JOB_COMPLETION_INDEX is set (a Kubernetes indexed Job) but"
            f" JOB_COMPLETIONS is not: set it to the Job's completions in the pod's env, {_ADVICE}"
        )
    count = _variable(environ, "JOB_COMPLETIONS", option)
    if not index < count:
        raise UsageError(
            f"{option} auto: JOB_COMPLETION_INDEX {index} is not below JOB_COMPLETIONS {count}"
            f" (the index counts from 0); {_ADVICE}"
        )
    return Shard(index + 1, count), f"Kubernetes indexed Job, index {index} of {count}"


def shard_from_environment(environ: Mapping[str, str], option: str = "--shard") -> tuple[Shard, str]:
    """``--shard auto``: the shard of the scheduler's task this process runs as, and where it
    was read (for a message). A Slurm array task (``SLURM_ARRAY_TASK_ID`` is set) comes
    first, then a Kubernetes indexed Job (``JOB_COMPLETION_INDEX``); UsageError naming the
    variable when neither is set, a value is not a number, or the ids do not make slices."""
    if "SLURM_ARRAY_TASK_ID" in environ:
        return _slurm_shard(environ, option)
    if "JOB_COMPLETION_INDEX" in environ:
        return _kubernetes_shard(environ, option)
    if "SLURM_JOB_ID" in environ:
        raise UsageError(
            f"{option} auto: this Slurm job is not an array task (SLURM_ARRAY_TASK_ID is not"
            f" set); submit it with sbatch --array=1-N, {_ADVICE}"
        )
    raise UsageError(
        f"{option} auto: no scheduler's task found (SLURM_ARRAY_TASK_ID of a Slurm job array,"
        f" JOB_COMPLETION_INDEX of a Kubernetes indexed Job); {_ADVICE}"
    )


_LOCK_FILE = re.compile(re.escape(LOCK_NAME) + r"(?:-shard-([0-9]+)-of-([0-9]+))?" + re.escape(TMP_SUFFIX))


def lock_part(shard: Shard | None) -> str | None:
    """The name of the share of a result tree whose lock a run of ``shard`` takes (None: the
    whole tree's)."""
    return f"shard-{shard.index}-of-{shard.count}" if shard is not None else None


def _holder(path: Path) -> str | None:
    """The pid written in the lock file at ``path`` while a live process holds its lock;
    None when it is free (left by a run that was killed), not a regular file, or cannot be
    opened (the run that owns that name reports it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        return None  # free: closing the descriptor lets the probe's lock go at once
    finally:
        os.close(fd)


def check_other_slicings(root: str | Path, shard: Shard | None) -> None:
    """TreeBusy when another run writes the tree at ``root`` cut into other slices: shards
    of another N, or a run without ``--shard`` beside shards (or shards beside it). Their
    tasks overlap this run's, so both would run some tasks. Shards of one N share the tree.

    Called with this run's own lock held: of two such runs starting together, the one that
    looks second sees the other's lock (both may refuse; neither runs a task twice). A lock
    file left by a killed run holds no lock and does not count."""
    folder = Path(root)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    for name in names:
        match = _LOCK_FILE.fullmatch(name)
        if match is None:
            continue
        count = int(match[2]) if match[2] else None
        if shard is not None and count == shard.count:
            continue  # a slice of the same cut (this run's own lock among them)
        if shard is None and count is None:
            continue  # this run's own lock
        holder = _holder(folder / name)
        if holder is None:
            continue
        other = f"--shard {match[1]}/{match[2]}" if count is not None else "no --shard"
        this = f"--shard {shard}" if shard is not None else "no --shard"
        raise TreeBusy(
            f"{folder}: another kag benchmark (pid {holder}) is writing this result tree with {other};"
            f" with {this} some tasks would run twice: wait for it to end, or give every run the"
            f" same N (lock file {folder / name})"
        )

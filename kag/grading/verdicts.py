"""The judge's verdicts as an input of the graded record: the cache that ``kag stats judge``
fills, read by the walk of ``kag stats`` (and the judge itself) under the judge's own key.

The cache lives in the result tree: ``<results>/.kag-judge/<judge>/<key>.verdict``. The key
(:func:`verdict_key_of`) is the SHA-256 of the judge (provider, model, and the server it is
asked at), the prompt template's SHA-256, the question, the reference and the response: a
change to any of them is another verdict. A :class:`JudgeKey` holds what the key needs
besides the answer, so that a walk reads the verdict of each file without asking the judge
or loading its configuration. Every folder and file is opened without following a link.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import orjson

from kag.errors import InputError
from kag.results import LinkInTree, temporary_name, write_atomic

CACHE_FOLDER = ".kag-judge"
CACHE_SUFFIX = ".verdict"
# The judge's reply is kept beside its verdict for a reader who wants to know why; a
# reasoning model's essay is cut to this many characters.
MAX_STORED_REPLY = 4000
# 2: the key holds the judge's endpoint (a verdict cached by version 1 is asked for again).
CACHE_VERSION = 2
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class Verdict(StrEnum):
    CORRECT = "CORRECT"
    INCORRECT = "INCORRECT"
    UNUSABLE = "UNUSABLE"  # the reply named neither word


@dataclass(frozen=True)
class Judge:
    """The judging model: a provider of the configuration and a model name at it."""

    provider: str
    model: str


@dataclass(frozen=True)
class JudgeKey:
    """What keys a judge's verdicts besides the answer: the judge, the server it is asked at
    (``kag.grading.judge.judge_endpoint``) and its prompt template's SHA-256."""

    provider: str
    model: str
    endpoint: tuple[str, ...]
    prompt_sha256: str

    @property
    def judge(self) -> Judge:
        return Judge(self.provider, self.model)


def verdict_key_of(key: JudgeKey, question_text: str, reference: str, response: str, *again: float) -> str:
    """The cache key of a verdict: SHA-256 (hex) of the judge, the server it is asked at,
    the prompt's SHA-256, the question text, the reference and the response (the prompt's
    three variables), and ``again`` (the repeat and the temperature) unless all 0. The same
    provider name and model behind another URL is another judge: its verdicts are its own."""
    payload = [
        CACHE_VERSION,
        key.provider,
        key.model,
        list(key.endpoint),
        key.prompt_sha256,
        question_text,
        reference,
        response,
    ]
    if any(again):
        payload += list(again)
    return hashlib.sha256(orjson.dumps(payload)).hexdigest()


def mcq_texts(question: str, options: Mapping[str, str], answer: str) -> tuple[str, str]:
    """(question text, reference) the judge is shown for an MCQ: the input, a blank line and
    one ``key: text`` line per option in key order; the key and its option's text."""
    choices = "\n".join(f"{k}: {options[k]}" for k in sorted(options))
    return f"{question}\n\n{choices}", f"{answer}: {options[answer]}"


def open_texts(question: str, answers: tuple[str, ...]) -> tuple[str, str]:
    """(question text, reference) the judge is shown for an open question: the input, and
    the accepted answers one per line."""
    return question, "\n".join(answers)


def judge_folder(judge: Judge) -> str:
    """``<provider>-<model>`` made a safe folder name (characters other than letters,
    digits, ``.``, ``_`` and ``-`` become ``_``; at most 80 of them), then ``-`` and 12 hex
    of the SHA-256 of the exact pair, so that two judges whose names read alike never share
    a folder."""
    readable = _UNSAFE_NAME.sub("_", f"{judge.provider}-{judge.model}")[:80]
    digest = hashlib.sha256(orjson.dumps([judge.provider, judge.model])).hexdigest()[:12]
    return f"{readable}-{digest}"


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class VerdictCache:
    """The verdicts of one judge in the result tree at ``root``."""

    root: Path
    judge: Judge

    def relative(self, key: str) -> tuple[str, ...]:
        return (CACHE_FOLDER, judge_folder(self.judge), f"{key}{CACHE_SUFFIX}")

    def path(self, key: str) -> Path:
        return self.root.joinpath(*self.relative(key))

    def check(self) -> None:
        """LinkInTree when a symbolic link (or a file) sits where a folder of the cache
        belongs: found before any request is sent."""
        shown = self.root
        for part in self.relative("00")[:2]:
            shown = shown / part
            try:
                info = os.lstat(shown)
            except FileNotFoundError:
                return
            if not stat.S_ISDIR(info.st_mode):
                raise LinkInTree(f"{shown}: a symbolic link or a file where the judge's cache folder belongs")

    def check_writable(self) -> None:
        """InputError naming the full path of the folder when the verdicts cannot be written
        there (a read-only tree, a folder of another user): found before any request is
        sent, so that no verdict is asked for and thrown away. The deepest folder of
        ``<root>/.kag-judge/<judge>`` that exists gets a probe file, created and removed at
        once; no folder is created and no link followed (LinkInTree)."""
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise InputError(
                f"{os.path.abspath(self.root)}: cannot open the result tree ({exc.strerror})"
            ) from None
        shown = self.root
        try:
            for part in self.relative("00")[:-1]:
                try:
                    inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise LinkInTree(
                            f"{shown / part}: a symbolic link or a file where a folder belongs"
                        ) from None
                    raise InputError(f"{os.path.abspath(shown / part)}: {exc.strerror}") from None
                os.close(fd)
                fd = inner
                shown = shown / part
            probe = temporary_name(".kag-judge-probe")
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                os.close(os.open(probe, flags, 0o600, dir_fd=fd))
            except OSError as exc:
                raise InputError(
                    f"{os.path.abspath(shown)}: cannot write the judge's verdicts here ({exc.strerror});"
                    " no request was sent"
                ) from None
            os.unlink(probe, dir_fd=fd)
        finally:
            os.close(fd)

    def read(self, key: str) -> Verdict | None:
        """The cached verdict, or None when there is none (or it is unreadable: asked again).
        Every folder and the file are opened without following a link (LinkInTree)."""
        entry = self.read_entry(key)
        return entry[0] if entry is not None else None

    def read_entry(self, key: str) -> tuple[Verdict, str] | None:
        """The cached verdict and the judge's reply (empty when the file holds none), as :meth:`read`."""
        raw = self.read_raw(key)
        return (Verdict(raw[0]), raw[1]) if raw is not None and raw[0] in Verdict.__members__ else None

    def read_raw(self, key: str) -> tuple[str, str] | None:
        """:meth:`read_entry` with the verdict as the text stored (a pairwise verdict)."""
        fd = self.open_folder()
        if fd is None:
            return None
        try:
            return self._read_in(fd, key)
        finally:
            os.close(fd)

    def read_many(self, keys: Iterable[str]) -> dict[str, Verdict]:
        """The cached verdicts of ``keys`` (those with none, or an unreadable one, left
        out), as :meth:`read` reads each, the folders opened once for all of them."""
        found: dict[str, Verdict] = {}
        fd = self.open_folder()
        if fd is None:
            return found
        try:
            for key in keys:
                raw = self._read_in(fd, key)
                if raw is not None and raw[0] in Verdict.__members__:
                    found[key] = Verdict(raw[0])
        finally:
            os.close(fd)
        return found

    def open_folder(self) -> int | None:
        """The judge's folder, each folder on the way opened without following a link
        (LinkInTree); None when there is none."""
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        shown = self.root
        for part in self.relative("00")[:-1]:
            shown = shown / part
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                os.close(fd)
                return None
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise LinkInTree(f"{shown}: a symbolic link or a file where a folder belongs") from None
                raise
            os.close(fd)
            fd = inner
        return fd

    def _read_in(self, fd: int, key: str) -> tuple[str, str] | None:
        """(verdict, reply) of ``key``'s file in the judge's folder ``fd``; None when it is
        missing, a planted link (asked again and replaced) or not a verdict's; InputError
        when something other than a file sits there."""
        name = self.relative(key)[-1]
        try:
            # O_NONBLOCK: a FIFO planted at a verdict file must not wait for a writer.
            file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=fd)
        except OSError:
            return None
        if not stat.S_ISREG(os.fstat(file_fd).st_mode):
            os.close(file_fd)
            raise InputError(f"{self.path(key)}: not a regular file where a verdict file belongs; remove it")
        with os.fdopen(file_fd, "rb") as handle:
            return _parse(handle.read(MAX_STORED_REPLY * 8 + 4096))

    def write(self, key: str, verdict: str, reply: str) -> None:
        """Store a verdict (a :class:`Verdict` or a pairwise one) and the (redacted) reply it
        was read from, atomically."""
        body = {"verdict": str(verdict), "reply": reply[:MAX_STORED_REPLY]}
        write_atomic(self.path(key), (orjson.dumps(body),), root=self.root, mode=0o644)


def _parse(data: bytes) -> tuple[str, str] | None:
    """(verdict, reply) of a verdict file's bytes; None when they are not a verdict's."""
    try:
        raw = orjson.loads(data)
        verdict = raw["verdict"]
    except (orjson.JSONDecodeError, TypeError, KeyError):
        return None
    reply = raw.get("reply", "")  # a mapping: raw["verdict"] was read from it
    return (verdict, reply if isinstance(reply, str) else "") if isinstance(verdict, str) else None

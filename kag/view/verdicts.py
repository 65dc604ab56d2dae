"""The judge's cached verdicts of `kag stats judge`, read for a question's page.

A verdict file (``<tree>/.kag-judge/<judge>/<key>.verdict``) records the verdict and the
judge's reply, not what was judged: the key is a SHA-256 of the judge, its server, the
prompt and the texts it was shown. So the view is told the judge the way `kag stats judge`
is (provider, model, configuration file, prompt file) and computes each answer's key with
the judge's own functions; only a verdict that exists under that key is shown. Nothing is
ever asked or written: files are opened read-only, no link followed (as the judge reads
its cache), a FIFO is not waited on, and a file that is not a verdict shows as none.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import orjson

from kag.datasets import Question
from kag.grading.judge import (
    MAX_STORED_REPLY,
    Judge,
    Verdict,
    VerdictCache,
    _mcq_item,  # the judge's own texts for an MCQ answer: the key is computed over them
    check_judge,
    judge_endpoint,
    verdict_key,
)
from kag.grading.judge_prompt import load_judge_prompt

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_READ_LIMIT = MAX_STORED_REPLY * 8 + 4096


@dataclass(frozen=True)
class CachedVerdict:
    """A verdict found in the cache, and the judge's reply it was read from (its reason)."""

    verdict: str
    reason: str
    judge: str  # "provider/model"


class VerdictReader:
    """The verdicts of one judge, as `kag stats judge -p PROVIDER -m MODEL -c CONFIG
    [--prompt FILE]` keeps them."""

    def __init__(self, provider: str, model: str, config: Path, prompt: Path | None) -> None:
        from kag.generation.config import load_config

        cfg = load_config(config)
        self.judge = Judge(provider, model)
        check_judge(cfg, self.judge)
        self.endpoint = judge_endpoint(cfg, self.judge)
        self.prompt_sha256 = load_judge_prompt(prompt).sha256

    def read(self, root: str, question: Question, response: str) -> CachedVerdict | None:
        """The cached verdict of ``response`` (an answer to the MCQ ``question``) in the tree
        at ``root``, or None when the judge has none (or its file is not a verdict)."""
        if question.mcq is None or question.mcq.answer is None:
            return None
        item = _mcq_item(question, "", response, "")
        key = verdict_key(self.judge, self.prompt_sha256, item, self.endpoint)
        body = _read_below(root, VerdictCache(Path(root), self.judge).relative(key))
        if body is None:
            return None
        try:
            raw = orjson.loads(body)
            verdict = Verdict(raw["verdict"]).value
            reply = raw.get("reply", "")
        except (orjson.JSONDecodeError, TypeError, KeyError, ValueError, AttributeError):
            return None
        reason = reply if isinstance(reply, str) else ""
        return CachedVerdict(verdict, reason, f"{self.judge.provider}/{self.judge.model}")


def _read_below(root: str, parts: tuple[str, ...]) -> bytes | None:
    """The head of the file ``root/parts...``, every folder and the file opened without
    following a link; None when any of them is missing, a link, unreadable or not what it
    should be (a page shows no verdict rather than an error)."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                return None
            os.close(fd)
            fd = inner
        try:
            file_fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
        except OSError:
            return None
        with os.fdopen(file_fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            return handle.read(_READ_LIMIT)
    finally:
        os.close(fd)

"""The judge's cached verdicts of `kag stats judge`, read for a question's page (the
overview counts the first judge's through the index's records: :mod:`kag.view.verdict_rows`).

A verdict file (``<tree>/.kag-judge/<judge>/<key>.verdict``) records the verdict and the
judge's reply, not what was judged: the key is a SHA-256 of the judge, its server, the
prompt and the texts it was shown. So the view is told the judge the way `kag stats judge`
is (provider, model, configuration file, prompt file) and computes each answer's key with
the judge's own functions; only a verdict that exists under that key is shown. Nothing is
ever asked or written: files are opened read-only, no link followed (as the judge reads
its cache), a FIFO is not waited on, and a file that is not a verdict shows as none.

Several judges (and repeats, each cached under its own key) are read as `kag stats judge`
combines them: a judge's verdict is the majority of its repeats, the answer's the majority
of the judges (a tie is UNUSABLE).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kag.datasets import Question
from kag.errors import KagError
from kag.grading.judge import (
    Judge,
    VerdictCache,
    check_judge,
    judge_endpoint,
    mcq_item,
    verdict_key,
)
from kag.grading.judge_prompt import load_judge_prompt
from kag.grading.judge_stats import majority
from kag.grading.verdicts import JudgeKey, Verdict


@dataclass(frozen=True)
class CachedVerdict:
    """A verdict found in the cache, and the judge's reply it was read from (its reason)."""

    verdict: str
    reason: str
    judge: str  # "provider/model"


@dataclass(frozen=True)
class JudgeVerdicts:
    """Every named judge's verdict of one answer (None: that judge has none cached), and
    their majority (None when no judge has a verdict)."""

    found: tuple[tuple[str, CachedVerdict | None, tuple[str | None, ...]], ...]  # judge, verdict, repeats'
    majority: str | None


class VerdictReader:
    """The verdicts of one or more judges, as `kag stats judge -p PROVIDER -m MODEL -c CONFIG
    [--prompt FILE] [--repeats N] [--temperature T]` keeps them."""

    def __init__(
        self,
        provider: str,
        model: str,
        config: Path,
        prompt: Path | None,
        *,
        others: Sequence[Judge] = (),
        repeats: int = 1,
        temperature: float = 0.0,
    ) -> None:
        """The reader of the judge ``provider``/``model`` and of ``others`` after it."""
        from kag.generation.config import load_config

        cfg = load_config(config)
        self.judges = tuple(dict.fromkeys((Judge(provider, model), *others)))
        self.judge = self.judges[0]
        for judge in self.judges:
            check_judge(cfg, judge)
        self.endpoints = {judge: judge_endpoint(cfg, judge) for judge in self.judges}
        self.endpoint = self.endpoints[self.judge]
        self.prompt_sha256 = load_judge_prompt(prompt).sha256
        self.repeats = repeats
        self.temperature = temperature

    @property
    def key(self) -> JudgeKey:
        """The first judge's key as `kag stats --judge PROVIDER/MODEL` reads its verdicts
        (its first answer at temperature 0): the verdicts the index's records carry."""
        return JudgeKey(self.judge.provider, self.judge.model, self.endpoint, self.prompt_sha256)

    def read(self, root: str, question: Question, response: str) -> CachedVerdict | None:
        """The first judge's cached verdict of ``response`` (an answer to the MCQ ``question``)
        in the tree at ``root`` (its first repeat), or None when it has none."""
        return self._read(self.judge, 0, root, question, response)

    def read_all(self, root: str, question: Question, response: str) -> JudgeVerdicts:
        """Every judge's verdict of ``response``: with repeats, the majority of those cached,
        its reason the first repeat's that gave it."""
        found: list[tuple[str, CachedVerdict | None, tuple[str | None, ...]]] = []
        for judge in self.judges:
            name = f"{judge.provider}/{judge.model}"
            each = [self._read(judge, r, root, question, response) for r in range(self.repeats)]
            got = [v for v in each if v is not None]
            if not got:
                found.append((name, None, tuple(None for _ in each)))
                continue
            verdict = majority(Verdict(v.verdict) for v in got).value if len(got) > 1 else got[0].verdict
            reason = next((v.reason for v in got if v.verdict == verdict), got[0].reason)
            found.append(
                (
                    name,
                    CachedVerdict(verdict, reason, name),
                    tuple(v.verdict if v is not None else None for v in each),
                )
            )
        given = [Verdict(v.verdict) for _, v, _ in found if v is not None]
        return JudgeVerdicts(tuple(found), majority(given).value if given else None)

    def _read(
        self, judge: Judge, repeat: int, root: str, question: Question, response: str
    ) -> CachedVerdict | None:
        if question.mcq is None or question.mcq.answer is None:
            return None
        item = mcq_item(question, "", response, "")  # the judge's own texts: its own key
        key = verdict_key(judge, self.prompt_sha256, item, self.endpoints[judge], repeat, self.temperature)
        try:
            entry = VerdictCache(Path(root), judge).read_entry(key)
        except (KagError, OSError):
            return None  # a planted link or a file that is not a verdict: a page shows none
        if entry is None:
            return None
        verdict, reason = entry[0].value, entry[1]
        return CachedVerdict(verdict, reason, f"{judge.provider}/{judge.model}")

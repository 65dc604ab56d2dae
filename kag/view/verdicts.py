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
        item = mcq_item(question, "", response, "")  # the judge's own texts: its own key
        key = verdict_key(self.judge, self.prompt_sha256, item, self.endpoint)
        try:
            entry = VerdictCache(Path(root), self.judge).read_entry(key)
        except (KagError, OSError):
            return None  # a planted link or a file that is not a verdict: a page shows none
        if entry is None:
            return None
        verdict, reason = entry[0].value, entry[1]
        return CachedVerdict(verdict, reason, f"{self.judge.provider}/{self.judge.model}")

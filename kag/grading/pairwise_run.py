"""Asking the judge for pairwise verdicts: the questions both setups answered, one request
per question, criterion and order, each verdict cached in the result tree like the judge's
other verdicts (:class:`kag.grading.judge.VerdictCache`, under a key of its own).

Any question both setups answered with an ``ok`` file is compared (no reference is
needed: a free-form question is compared too); error files and unreadable files are
passed over.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from kag.datasets import Datasets
from kag.generation.config import Config
from kag.generation.generator import NullReporter, Reporter
from kag.generation.templates import format_choices
from kag.grading.judge import (
    CACHE_VERSION,
    Judge,
    JudgeAsk,
    JudgeOptions,
    VerdictCache,
    ask_judge,
    check_judge,
    judge_endpoint,
)
from kag.grading.judge_prompt import JudgePrompt
from kag.grading.pairwise import CRITERIA, Choice, PairOutcome, parse_choice
from kag.results import ErrorResult, UnreadableResult, list_results, read_result_nofollow


@dataclass(frozen=True)
class Pair:
    """One question both setups answered: A's and B's responses."""

    dataset: str
    question: str
    question_text: str
    answer_a: str
    answer_b: str


def collect_pairs(datasets: Datasets, root: str | Path, a: str, b: str, prefix: str = "") -> tuple[Pair, ...]:
    """The questions of ``datasets`` that setups ``a`` and ``b`` both answered (ok files) in the
    tree at ``root``, sorted by dataset and question. No link is followed."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for file in list_results(root, prefix).files:
        if file.setup not in (a, b) or datasets.get(file.dataset, file.question) is None:
            continue
        try:
            result = read_result_nofollow(file.path)
        except UnreadableResult:
            continue
        if not isinstance(result, ErrorResult):
            found.setdefault((file.dataset, file.question), {})[file.setup] = result.result
    pairs = []
    for (dataset, question), answers in sorted(found.items()):
        if a in answers and b in answers:
            q = datasets.get(dataset, question)
            assert q is not None
            text = q.input if q.mcq is None else f"{q.input}\n\n{format_choices(q.mcq.options)}"
            pairs.append(Pair(dataset, question, text, answers[a], answers[b]))
    return tuple(pairs)


def pairwise_key(judge: Judge, endpoint: Sequence[str], prompt_sha256: str, variables: dict[str, str]) -> str:
    """SHA-256 (hex) of the judge, its server, the prompt and every variable of the request
    (the order of the two answers included)."""
    payload = [
        "pairwise",
        CACHE_VERSION,
        judge.provider,
        judge.model,
        list(endpoint),
        prompt_sha256,
        variables,
    ]
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True)
class PairwiseRun:
    outcomes: tuple[PairOutcome, ...]
    requests: int
    cached: int
    failures: int
    seconds: float


def run_pairwise(
    config: Config,
    judge: Judge,
    prompt: JudgePrompt,
    pairs: Sequence[Pair],
    criteria: Sequence[str],
    cache: VerdictCache,
    options: JudgeOptions | None = None,
    reporter: Reporter | None = None,
) -> PairwiseRun:
    """Every pair judged on every criterion in both orders (A shown first, then B first):
    from the cache when asked before, else from the judge; a failed request is UNUSABLE and
    not cached. Every prompt is rendered before the first request."""
    check_judge(config, judge)
    cache.check()
    options = options or JudgeOptions()
    reporter = reporter or NullReporter()
    endpoint = judge_endpoint(config, judge)
    requests: list[tuple[str, str, str]] = []  # label, prompt, key
    for pair in pairs:
        for criterion in criteria:
            for first, second, order in (
                (pair.answer_a, pair.answer_b, "a"),
                (pair.answer_b, pair.answer_a, "b"),
            ):
                variables = {
                    "QUESTION": pair.question_text,
                    "ANSWER_1": first,
                    "ANSWER_2": second,
                    "CRITERION": criterion,
                    "DEFINITION": CRITERIA.get(criterion, ""),
                }
                label = f"{pair.dataset}/{pair.question}/{criterion}/{order}-first"
                text = prompt.template.render(variables)
                requests.append((label, text, pairwise_key(judge, endpoint, prompt.sha256, variables)))
    choices: list[Choice | None] = [None] * len(requests)
    for index, (_, _, key) in enumerate(requests):
        raw = cache.read_raw(key)
        if raw is not None and raw[0] in {c.value for c in Choice}:
            choices[index] = Choice(raw[0])
    todo = [i for i, c in enumerate(choices) if c is None]
    cached = len(requests) - len(todo)
    if todo:
        cache.check_writable()
    started = time.perf_counter()
    failures = [0]

    def answered(index: int, reply: str) -> None:
        choice = parse_choice(reply)
        cache.write(requests[index][2], choice.value, reply)
        choices[index] = choice

    def failed(index: int, _message: str) -> None:
        failures[0] += 1
        choices[index] = Choice.UNUSABLE

    asks = {i: JudgeAsk(requests[i][0], Path(requests[i][0]), requests[i][1]) for i in todo}
    ask_judge(config, judge, options, reporter, asks, answered, failed)
    outcomes = []
    position = 0
    for pair in pairs:
        for criterion in criteria:
            a_first, b_first = choices[position], choices[position + 1]
            assert a_first is not None and b_first is not None
            outcomes.append(PairOutcome(pair.dataset, pair.question, criterion, a_first, b_first))
            position += 2
    return PairwiseRun(tuple(outcomes), len(todo), cached, failures[0], time.perf_counter() - started)

"""A model as judge: ask a model whether each graded answer matches the reference.

Per-answer records first (:class:`JudgeItem`, collected from the result tree by
:func:`collect_items`), verdicts next (:func:`run_judge`, with a cache so that a verdict is
asked for once), aggregation last (:func:`summarize_verdicts`).

What is judged: every ``ok`` result file of an open question (``"type": "Open"``) and, with
``with_mcq``, of an MCQ with an answer key. Error files are not answers and are not judged.

The cache lives in the result tree: ``<results>/.kag-judge/<judge>/<key>.verdict``. Its
folder is hidden: `kag stats` passes over hidden folders at the dataset level without
counting them, and `kag stats find` skips them unless ``--hidden``, so no report of the tree
changes. The key is the SHA-256 of the judge (provider, model, and the server it is asked
at: :func:`judge_endpoint`), the prompt template's SHA-256, the question, the reference and
the response: a change to any of them asks again. Files are written with
:func:`kag.results.write_atomic` below the tree's root, folders created and opened without
following a link; reading opens every folder with ``O_NOFOLLOW`` as well.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from kag.datasets import Datasets, Question
from kag.generation.config import Config, check_generation
from kag.generation.generator import NullReporter, Reporter, RetryNotice, TaskOutcome
from kag.generation.providers import ChatRequest, open_provider
from kag.generation.retry import ProviderError, RetryPolicy, call_with_retries
from kag.generation.secrets import Redactor
from kag.grading.extract import strip_think
from kag.grading.judge_prompt import JudgePrompt
from kag.grading.open_answers import exact_match
from kag.grading.open_grading import check_open_gold
from kag.grading.rule import is_correct  # the strict MCQ grade (the one import of it here)
from kag.grading.verdicts import (
    CACHE_FOLDER,
    CACHE_SUFFIX,
    CACHE_VERSION,
    MAX_STORED_REPLY,
    Judge,
    JudgeKey,
    Verdict,
    VerdictCache,
    judge_folder,
    mcq_texts,
    open_texts,
    verdict_key_of,
)
from kag.results import ErrorResult, UnreadableResult, list_results, read_result_nofollow

# Re-exported: the cache, the verdicts and the key are kag.grading.verdicts', which the walk
# of `kag stats` reads without the judge's requests.
__all__ = [
    "CACHE_FOLDER",
    "CACHE_SUFFIX",
    "CACHE_VERSION",
    "MAX_STORED_REPLY",
    "Judge",
    "JudgeKey",
    "Verdict",
    "VerdictCache",
    "judge_folder",
    "verdict_key_of",
]

# Whole words only: "INCORRECT" must not be read as "CORRECT". Case-sensitive, as the
# prompt asks for the upper-case word; "correct" inside an explanation is not a verdict.
_VERDICT = re.compile(r"(?<![A-Za-z0-9_])(INCORRECT|CORRECT)(?![A-Za-z0-9_])")


class Kind(StrEnum):
    OPEN = "open"
    MCQ = "mcq"


@dataclass(frozen=True)
class JudgeItem:
    """One answer to judge. ``exact`` is the strict grade (SQuAD exact match for an open
    answer, :func:`kag.grading.rule.is_correct` for an MCQ), against which agreement is measured."""

    dataset: str
    question: str
    setup: str
    kind: Kind
    question_text: str
    reference: str
    response: str
    exact: bool
    path: str = ""


@dataclass(frozen=True)
class Collected:
    """What :func:`collect_items` found: the items, the unreadable files passed over, and
    every setup of the tree (before the ``--setup`` filter, for messages)."""

    items: tuple[JudgeItem, ...]
    unreadable: tuple[str, ...]
    setups_in_tree: tuple[str, ...]


@dataclass(frozen=True)
class JudgedItem:
    item: JudgeItem
    verdict: Verdict
    cached: bool
    failure: str | None = None  # the request failed (redacted message): not cached, UNUSABLE


@dataclass(frozen=True)
class JudgeSummary:
    """Verdicts of one setup; see :func:`summarize_verdicts` for the formulas."""

    setup: str
    judged: int
    correct: int
    incorrect: int
    unusable: int
    accuracy: float | None
    agreement_with_exact_match: float | None


# ---------------------------------------------------------------- prompt and verdict


def render_judge_prompt(prompt: JudgePrompt, item: JudgeItem) -> str:
    """The text sent to the judge for ``item`` (PromptRenderError naming the template)."""
    return prompt.template.render(
        {"QUESTION": item.question_text, "REFERENCE": item.reference, "RESPONSE": item.response}
    )


def parse_verdict(reply: str) -> Verdict:
    """The first whole word ``CORRECT`` or ``INCORRECT`` of ``reply`` once its
    reasoning blocks are removed (`strip_think`); UNUSABLE when there is none.

    Case-sensitive ("Correct" is not a verdict); a word is delimited by anything but an
    ASCII letter, digit or underscore, so "**CORRECT**" and "CORRECT." count, "INCORRECT"
    is never read as "CORRECT" and "CORRECTLY" is neither. "NOT CORRECT" reads CORRECT:
    the first word wins, as the prompt asks for one word.
    """
    match = _VERDICT.search(strip_think(reply))
    return Verdict.UNUSABLE if match is None else Verdict(match.group(1))


# ---------------------------------------------------------------- what is judged


def mcq_item(question: Question, setup: str, response: str, path: str) -> JudgeItem:
    assert question.mcq is not None and question.mcq.answer is not None
    options, answer = question.mcq.options, question.mcq.answer
    question_text, reference = mcq_texts(question.input, options, answer)
    return JudgeItem(
        question.dataset,
        question.id,
        setup,
        Kind.MCQ,
        question_text,
        reference,
        response,
        is_correct(response, answer),
        path,
    )


def _open_item(question: Question, setup: str, response: str, path: str) -> JudgeItem:
    assert question.open is not None
    answers = question.open.answers
    question_text, reference = open_texts(question.input, answers)
    return JudgeItem(
        question.dataset,
        question.id,
        setup,
        Kind.OPEN,
        question_text,
        reference,
        response,
        exact_match(response, answers) == 1.0,
        path,
    )


def collect_items(
    datasets: Datasets, root: str | Path, prefix: str = "", setups: Sequence[str] = (), with_mcq: bool = False
) -> Collected:
    """The answers to judge in ``<root>/<dataset>/<question>/<prefix><setup>.json``, sorted by
    path: ``ok`` files of open questions and, with ``with_mcq``, of MCQs with an answer key,
    of the setups matching a glob of ``setups`` (all when empty). Files of questions not in
    the datasets file, error files and free-form questions are passed over; unreadable
    files are listed in ``unreadable``. No link is followed. Raises InputError for an
    accepted answer that is no gold (:func:`~kag.grading.open_grading.check_open_gold`)."""
    check_open_gold(datasets)
    listing = list_results(root, prefix)
    items: list[JudgeItem] = []
    unreadable: list[str] = []
    in_tree: set[str] = set()
    for file in listing.files:
        question = datasets.get(file.dataset, file.question)
        if question is None:
            continue
        in_tree.add(file.setup)
        if setups and not any(fnmatchcase(file.setup, g) for g in setups):
            continue
        wanted = question.open is not None or (with_mcq and question.scorable)
        if not wanted:
            continue
        try:
            result = read_result_nofollow(file.path)
        except UnreadableResult as exc:
            unreadable.append(str(exc))
            continue
        if isinstance(result, ErrorResult):
            continue
        make = _open_item if question.open is not None else mcq_item
        items.append(make(question, file.setup, result.result, file.path))
    return Collected(tuple(items), tuple(unreadable), tuple(sorted(in_tree)))


# ---------------------------------------------------------------- the cache


def judge_endpoint(config: Config, judge: Judge) -> tuple[str, ...]:
    """Where the judge is asked: its provider's type, then every URL of the provider (sorted,
    so that reordering a failover list changes nothing), each without its user and password
    (a rotated credential is the same server), scheme and host lower-cased, no final ``/``.
    () for a provider that is not configured or not served over HTTP."""
    provider = config.providers.get(judge.provider)
    urls = getattr(provider, "urls", None)
    if provider is None or not urls:
        return ()
    return (provider.type, *sorted({_endpoint_url(url) for url in urls}))


def _endpoint_url(url: str) -> str:
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), parts.query, ""))


def verdict_key(
    judge: Judge, prompt_sha256: str, item: JudgeItem, endpoint: Sequence[str] = (), *again: float
) -> str:
    """The cache key of ``item``'s verdict (:func:`kag.grading.verdicts.verdict_key_of`): the
    judge, the server it is asked at (:func:`judge_endpoint`), the prompt's SHA-256, the
    question text, the reference and the response (the prompt's three variables), and
    ``again`` (the repeat and the temperature) unless all 0."""
    return verdict_key_of(
        JudgeKey(judge.provider, judge.model, tuple(endpoint), prompt_sha256),
        item.question_text,
        item.reference,
        item.response,
        *again,
    )


# ---------------------------------------------------------------- asking the judge


@dataclass(frozen=True)
class JudgeOptions:
    parallel: int = 1
    timeout: float = 300.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    temperature: float = 0.0


@dataclass(frozen=True)
class JudgeRun:
    """Every item's verdict (in the items' order) and how many were asked for."""

    judged: tuple[JudgedItem, ...]
    requests: int
    seconds: float

    @property
    def cached(self) -> int:
        return sum(1 for j in self.judged if j.cached)

    @property
    def failures(self) -> int:
        return sum(1 for j in self.judged if j.failure is not None)


def check_judge(config: Config, judge: Judge) -> None:
    """ConfigError unless ``judge.provider`` is a configured provider that generates text."""
    check_generation(config.path, "--provider", config, judge.provider, 0.0, None)


def run_judge(
    config: Config,
    judge: Judge,
    prompt: JudgePrompt,
    items: Sequence[JudgeItem],
    cache: VerdictCache,
    options: JudgeOptions = JudgeOptions(),
    reporter: Reporter | None = None,
    repeat: int = 0,
) -> JudgeRun:
    """A verdict for every item: from the cache when there is one, else from the judge
    (``options.parallel`` requests in flight, retried as ``kag benchmark`` retries), each
    new verdict written to the cache as it comes. A request that fails after its retries
    makes an UNUSABLE verdict that is not cached (a later run asks again). Every prompt is
    rendered before the first request, so a template error sends nothing. The reporter gets
    one event per request (cache hits are not reported). ``repeat`` > 0 asks again, cached
    apart (:func:`verdict_key`)."""
    check_judge(config, judge)
    cache.check()
    reporter = reporter or NullReporter()
    prompts = [render_judge_prompt(prompt, item) for item in items]
    endpoint = judge_endpoint(config, judge)
    keys = [verdict_key(judge, prompt.sha256, item, endpoint, repeat, options.temperature) for item in items]
    verdicts: list[JudgedItem | None] = [None] * len(items)
    todo: list[int] = []
    for index, key in enumerate(keys):
        cached = cache.read(key)
        if cached is None:
            todo.append(index)
        else:
            verdicts[index] = JudgedItem(items[index], cached, cached=True)
    if todo:
        cache.check_writable()
    started = time.perf_counter()

    def answered(index: int, reply: str) -> None:
        verdict = parse_verdict(reply)
        cache.write(keys[index], verdict, reply)
        verdicts[index] = JudgedItem(items[index], verdict, cached=False)

    def failed(index: int, message: str) -> None:
        verdicts[index] = JudgedItem(items[index], Verdict.UNUSABLE, cached=False, failure=message)

    asks = {
        i: JudgeAsk(
            f"{items[i].dataset}/{items[i].question}/{items[i].setup}", Path(items[i].path), prompts[i]
        )
        for i in todo
    }
    ask_judge(config, judge, options, reporter, asks, answered, failed)
    done = tuple(v for v in verdicts if v is not None)
    assert len(done) == len(items)
    return JudgeRun(done, len(todo), time.perf_counter() - started)


@dataclass(frozen=True)
class JudgeAsk:
    """One request to the judge: ``label`` names it in progress lines, ``path`` is the file
    its progress event names, ``prompt`` the rendered text."""

    label: str
    path: Path
    prompt: str


def ask_judge(
    config: Config,
    judge: Judge,
    options: JudgeOptions,
    reporter: Reporter,
    asks: Mapping[int, JudgeAsk],
    answered: Callable[[int, str], None],
    failed: Callable[[int, str], None],
) -> None:
    """Send every request of ``asks`` (index -> request, in order; ``options.parallel`` in
    flight, retried as ``kag benchmark`` retries). ``answered(index, reply)`` gets the
    redacted reply, off the event loop (it writes the verdict cache, which ends in an
    fsync); ``failed(index, message)`` the redacted error of a request that failed after its
    retries. The reporter gets one event per request and one per retry."""
    if not asks:
        return
    redact = Redactor.of(config.secrets)
    parallel = max(1, options.parallel)

    async def ask_all() -> None:
        provider = open_provider(config.providers[judge.provider], options.timeout, parallel, redact)
        pending = iter(asks.items())

        async def ask(index: int, asked: JudgeAsk) -> None:
            began = time.perf_counter()
            request = ChatRequest(judge.model, asked.prompt, options.temperature)

            def on_retry(attempt: int, delay: float, error: ProviderError) -> None:
                reporter.retrying(RetryNotice(asked.label, attempt, delay, redact(str(error))))

            try:
                response, attempts = await call_with_retries(
                    lambda: provider.chat(request), options.retry, on_retry
                )
            except ProviderError as exc:
                message = redact(str(exc))
                failed(index, message)
                seconds = time.perf_counter() - began
                reporter.task_done(
                    TaskOutcome(asked.label, asked.path, False, exc.attempts, seconds, message)
                )
                return
            await asyncio.to_thread(answered, index, redact(response.text))
            seconds = time.perf_counter() - began
            reporter.task_done(TaskOutcome(asked.label, asked.path, True, attempts, seconds))

        async def worker() -> None:
            for index, asked in pending:
                await ask(index, asked)

        try:
            await asyncio.gather(*(worker() for _ in range(min(parallel, len(asks)))))
        finally:
            await provider.aclose()

    asyncio.run(ask_all())


# ---------------------------------------------------------------- aggregation


def summarize_verdicts(judged: Iterable[JudgedItem]) -> tuple[JudgeSummary, ...]:
    """Per setup (sorted by name): ``judged`` answers, of which ``correct``, ``incorrect``
    and ``unusable`` verdicts (they sum to ``judged``), counted and reduced by the ``judge``
    measure (:mod:`kag.grading.measures.judge`), as `kag stats` counts the cached verdicts.

    accuracy = correct / (correct + incorrect): an unusable verdict is no verdict, left out.
    agreement_with_exact_match = the share of usable verdicts that equal the strict grade
    (CORRECT where the exact match holds, INCORRECT where not). Both None when none is usable.
    """
    from kag.grading.measures.judge import JudgeCounts, add_verdict, judge_accuracy, judge_agreement

    counts: dict[str, JudgeCounts] = {}
    for j in judged:
        add_verdict(counts.setdefault(j.item.setup, JudgeCounts()), j.verdict, j.item.exact)
    return tuple(
        JudgeSummary(
            setup,
            c.judged,
            c.judged_correct,
            c.judged_incorrect,
            c.judged_unusable,
            judge_accuracy(c),
            judge_agreement(c),
        )
        for setup, c in sorted(counts.items())
    )


def judge_key(config: Config, judge: Judge, prompt: JudgePrompt) -> JudgeKey:
    """What keys ``judge``'s verdicts besides the answer (its server in ``config`` and the
    prompt's SHA-256): what `kag stats --judge` reads the cached verdicts with. ConfigError
    unless the provider is configured and generates text."""
    check_judge(config, judge)
    return JudgeKey(judge.provider, judge.model, judge_endpoint(config, judge), prompt.sha256)

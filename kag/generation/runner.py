"""The benchmark runner: plan the (question, setup) tasks, run them concurrently, write one
result file per task, report progress through callbacks, and never print.

One task = retrieval (KAG setups) -> prompt rendering -> one model call (with retries) ->
one result file written atomically through ``kag.results.write_result``. A task that fails
(retrieval, rendering, or the model after its retries) becomes an ``error`` result file
and the run goes on. Concurrency: ``parallel`` workers pull tasks from one shared
iterator, so at most ``parallel`` model calls are in flight, and a stop request (Ctrl-C)
stops scheduling at once; in-flight calls are cancelled, results already received are
still written: no file is ever half-written, and a cancelled task leaves no file, so
``--continue`` runs it again.

Times in ``ok.stats``: ``time`` is the whole task (retrieval, rendering, every attempt and
wait), as the Rust tool measured it; ``generation_time`` is the successful model call alone.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import signal
import stat
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from kag import __version__
from kag.datasets import Datasets, Question, name_problem
from kag.errors import ConfigError, InputError, KagError, UsageError
from kag.generation.config import Benchmark, Config, Setup
from kag.generation.endpoints import EndpointStats
from kag.generation.fingerprint import task_fingerprint
from kag.generation.providers import ChatRequest, Provider, open_provider
from kag.generation.retry import ProviderError, RetryPolicy, call_with_retries
from kag.generation.secrets import Redactor
from kag.generation.shard import Shard
from kag.generation.templates import PromptRenderError, format_choices, prompt_variables
from kag.results import (
    EPOCHS_FOLDER,
    TMP_OVERHEAD,
    ErrorResult,
    LinkInTree,
    NoSpace,
    OkResult,
    OkStats,
    Result,
    Retrieval,
    Timing,
    UnreadableResult,
    epoch_result_path,
    find_dead_temporaries,
    read_result_nofollow,
    write_result,
)
from kag.retrieval.base import EmbedFn, Retriever

log = logging.getLogger(__name__)

RETRIEVAL_FAILED = "Failed during the knowledge retrieval phase (KAG) on database"
GENERATION_FAILED = "Failed to generate a response from the model"
RENDER_FAILED = "Failed to render the prompt template"
# ---------------------------------------------------------------- options and events


DEFAULT_MAX_CONNECTION_FAILURES = 20


@dataclass(frozen=True)
class RunOptions:
    parallel: int = 1
    timeout: float = 300.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # Tasks in a row whose server could not be reached before the run stops (0: never).
    max_connection_failures: int = DEFAULT_MAX_CONNECTION_FAILURES


@dataclass(frozen=True)
class RetryNotice:
    label: str
    attempt: int
    delay: float
    reason: str


@dataclass(frozen=True)
class TaskOutcome:
    label: str
    path: Path
    ok: bool
    attempts: int
    seconds: float
    error: str | None = None
    kept: bool = False  # an error that left the previous ok result in place


class Reporter(Protocol):
    """Receives the run's events (the command renders them; the runner never prints)."""

    def task_done(self, outcome: TaskOutcome) -> None: ...

    def retrying(self, notice: RetryNotice) -> None: ...


class NullReporter:
    def task_done(self, outcome: TaskOutcome) -> None:
        pass

    def retrying(self, notice: RetryNotice) -> None:
        pass


_current_label: contextvars.ContextVar[str] = contextvars.ContextVar("kag_task_label", default="")


# ---------------------------------------------------------------- generation of one task


class Generator:
    """Runs single generations: opens each provider (one HTTP client) and each
    (retriever, database) pair (one database driver) on first use, for the whole run."""

    def __init__(self, config: Config, options: RunOptions, reporter: Reporter | None = None) -> None:
        self.config = config
        self.options = options
        self.reporter = reporter or NullReporter()
        self.redact = Redactor.for_config(config)
        self._providers: dict[str, Provider] = {}
        self._retrievers: dict[tuple[str, str], Retriever] = {}

    # -- components

    def provider(self, name: str) -> Provider:
        if name not in self._providers:
            self._providers[name] = open_provider(
                self.config.providers[name], self.options.timeout, max(1, self.options.parallel), self.redact
            )
        return self._providers[name]

    def endpoint_stats(self) -> dict[str, tuple[EndpointStats, ...]]:
        """Requests and failures per endpoint of every provider used with more than one URL."""
        stats: dict[str, tuple[EndpointStats, ...]] = {}
        for name, provider in self._providers.items():
            counts = getattr(provider, "endpoint_stats", None)
            if counts is not None and len(endpoints := counts()) > 1:
                stats[name] = endpoints
        return stats

    def _on_retry(self, attempt: int, delay: float, error: ProviderError) -> None:
        self.reporter.retrying(RetryNotice(_current_label.get(), attempt, delay, self.redact(str(error))))

    def embed_function(self, provider_name: str) -> EmbedFn:
        """``embed(model, texts)`` for a retriever, through ``provider_name``, with retries."""

        async def embed(model: str, texts: list[str]) -> list[list[float]]:
            if provider_name not in self.config.providers:
                raise ProviderError(
                    f"embedding provider {provider_name!r} is not configured", transient=False
                )
            provider = self.provider(provider_name)
            vectors, _ = await call_with_retries(
                lambda: provider.embed(model, texts), self.options.retry, self._on_retry
            )
            return vectors

        return embed

    def retriever(self, retriever: str, database: str) -> Retriever:
        key = (retriever, database)
        if key not in self._retrievers:
            from kag.retrieval.factory import open_retriever

            provider_name = self.config.retrievers.get(retriever, {}).get("provider", "")
            self._retrievers[key] = open_retriever(
                retriever,
                database,
                self.config.retrievers,
                self.config.databases,
                self.embed_function(str(provider_name)),
            )
        return self._retrievers[key]

    async def aclose(self) -> None:
        for retriever in self._retrievers.values():
            try:
                await retriever.aclose()
            except Exception as exc:  # noqa: BLE001 - closing must not hide the run's outcome
                log.debug("closing a retriever failed: %s", exc)
        for provider in self._providers.values():
            await provider.aclose()
        self._retrievers.clear()
        self._providers.clear()

    # -- one generation

    async def generate(
        self, setup: Setup, text: str, choices: str | None = None, fingerprint: str | None = None
    ) -> tuple[Result, int]:
        """Retrieval, rendering and the model call for one input; returns (result, attempts).

        Failures become ErrorResult (messages start like the Rust tool's); secrets are
        redacted from every message.
        """
        start = time.perf_counter()
        retrieval: Retrieval | None = None
        aug = setup.augmented_generation
        if aug is not None:
            try:
                retrieval = await self.retriever(aug.retriever, aug.database).retrieve(text)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                if isinstance(exc, KagError | ProviderError):
                    message = str(exc)
                else:  # a driver's or a bug's exception: its type says what happened
                    message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                if not message.startswith(RETRIEVAL_FAILED):
                    message = f"{RETRIEVAL_FAILED} '{aug.database}': {message}"
                return ErrorResult(self.redact(message)), 0
        assert setup.template is not None
        try:
            prompt = setup.template.render(
                prompt_variables(text, choices, retrieval.result if retrieval is not None else None)
            )
        except PromptRenderError as exc:
            return ErrorResult(self.redact(f"{RENDER_FAILED}: {exc}")), 0
        provider = self.provider(setup.provider)
        request = ChatRequest(setup.model, prompt, setup.temperature, setup.tokens)
        call_seconds = [0.0]

        async def attempt() -> Any:
            began = time.perf_counter()
            response = await provider.chat(request)
            call_seconds[0] = time.perf_counter() - began
            return response

        try:
            response, attempts = await call_with_retries(attempt, self.options.retry, self._on_retry)
        except ProviderError as exc:
            message = f"{GENERATION_FAILED}: {exc} (after {exc.attempts} attempt(s))"
            return ErrorResult(self.redact(message)), exc.attempts
        stats = OkStats(
            prompt=prompt,
            retrieval=retrieval,
            config=setup.model_config(),
            time=Timing.from_seconds(time.perf_counter() - start),
            generation_time=Timing.from_seconds(call_seconds[0]),
            usage=response.usage,
            attempts=attempts,
            fingerprint=fingerprint,
            kag_version=__version__,
        )
        return OkResult(response.text, stats), attempts


# ---------------------------------------------------------------- planning


class FileState(Enum):
    """What a task's result file held when the run was planned."""

    MISSING = "missing"  # absent or empty
    OK = "ok"
    ERROR = "error"
    STALE = "stale"  # ok, but its fingerprint differs from the task's
    UNREADABLE = "unreadable"
    EXISTS = "exists"  # present, not inspected (a run without --continue overwrites it)


@dataclass(frozen=True)
class PlanOptions:
    output: Path
    prefix: str = ""
    resume: bool = False  # --continue
    retry_errors: bool = False
    rerun_stale: bool = False
    setups: tuple[str, ...] = ()  # --setup (empty: all)
    datasets: tuple[str, ...] = ()  # --dataset (empty: all)
    skip: tuple[str, ...] = ()  # --skip
    limit: int | None = None
    inspect: bool = False  # read existing files even without --continue (--dry-run)
    shard: Shard | None = None  # --shard K/N: only the tasks of this slice
    epochs: int = 1  # --epochs N: each (question, setup) asked N times


@dataclass(frozen=True)
class Task:
    setup: Setup
    question: Question
    path: Path
    fingerprint: str
    state: FileState
    epoch: int = 1

    @property
    def label(self) -> str:
        epoch = f" epoch {self.epoch}" if self.epoch > 1 else ""
        return f"{self.question.dataset}/{self.question.id} [{self.setup.name}]{epoch}"


@dataclass
class PlanRow:
    """Counts for one (setup, dataset) pair of the plan."""

    setup: str
    dataset: str
    tasks: int = 0
    ok: int = 0
    errors: int = 0
    stale: int = 0
    unreadable: int = 0
    missing: int = 0
    to_run: int = 0


@dataclass(frozen=True)
class Plan:
    tasks: tuple[Task, ...]  # to run, in dataset, question, setup order
    rows: tuple[PlanRow, ...]
    total: int  # every selected (question, setup) pair
    skipped: int  # pairs with a result kept as it is (ok, or error without --retry-errors)
    stale_kept: int  # stale results kept (no --rerun-stale)
    leftovers: tuple[Path, ...]  # `.tmp` files of interrupted writes, to remove
    root: Path | None = None  # the result tree: no link below it is followed when writing

    @property
    def stale(self) -> int:
        return sum(row.stale for row in self.rows)


def _inspect(path: Path, fingerprint: str) -> FileState:
    # lstat and a no-follow read: a link planted at a result file is not a result (it is
    # run again, and the write replaces the link).
    try:
        if path.lstat().st_size == 0:
            return FileState.MISSING
    except FileNotFoundError:
        return FileState.MISSING
    except OSError:
        return FileState.UNREADABLE
    try:
        result = read_result_nofollow(path)
    except UnreadableResult:
        return FileState.UNREADABLE
    if isinstance(result, ErrorResult):
        return FileState.ERROR
    stored = result.stats.fingerprint
    # Files without a fingerprint (the Rust tool's) cannot be checked: they count as done.
    if stored is not None and stored != fingerprint:
        return FileState.STALE
    return FileState.OK


def _check_names(kind: str, names: tuple[str, ...], known: Mapping[str, Any] | list[str], flag: str) -> None:
    for name in names:
        why = name_problem(name)
        if why:
            raise UsageError(f"{flag}: {kind} name {name!r} {why}")
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise UsageError(f"{flag}: unknown {kind} {name!r} (known: {listed})")


MAX_LISTED = 10


def _listing(items: list[str]) -> str:
    shown = "; ".join(items[:MAX_LISTED])
    more = len(items) - MAX_LISTED
    return shown + (f"; and {more} more" if more > 0 else "")


def _limits(output: Path) -> tuple[int, int]:
    """NAME_MAX and PATH_MAX of the file system that holds (or will hold) ``output``."""
    folder = output.absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError):
        return 255, 4096


def _check_lengths(output: Path, folders: list[tuple[str, str]], files: set[str], epochs: int = 1) -> None:
    """UsageError listing every dataset, question and result file name (prefix + setup)
    that the results folder's file system cannot hold, before any request (with
    ``epochs`` > 1, the paths of the deepest epoch files)."""
    name_max, path_max = _limits(output)
    base = len(os.fsencode(output.absolute()))
    problems: list[str] = []
    for dataset in sorted({d for d, _ in folders}):
        if len(os.fsencode(dataset)) > name_max:
            problems.append(f"dataset {dataset[:40]!r}… is {len(os.fsencode(dataset))} bytes")
    longest_file = max((len(os.fsencode(f)) for f in files), default=0) + TMP_OVERHEAD
    if epochs > 1:
        longest_file += len(os.fsencode(f"{EPOCHS_FOLDER}/{epochs}/"))
    for name in sorted(files):
        if len(os.fsencode(name)) + TMP_OVERHEAD > name_max:
            problems.append(
                f"result file name {name[:40]!r}… (prefix + setup) is {len(os.fsencode(name))} bytes"
            )
    for dataset, question in folders:
        size = len(os.fsencode(question))
        if size > name_max:
            problems.append(f"question {dataset}/{question[:40]!r}… is {size} bytes")
        elif base + len(os.fsencode(dataset)) + size + longest_file + 3 > path_max:
            problems.append(f"the path of question {dataset}/{question[:40]!r}… is too long")
    if problems:
        raise UsageError(
            f"{output}: names this file system cannot hold (at most {name_max} bytes per name,"
            f" {TMP_OVERHEAD} of them kept for the temporary file's suffix; {path_max} per path):"
            f" {_listing(problems)}"
        )


def _check_folders(output: Path, folders: list[tuple[str, str]], epochs: int = 1) -> None:
    """LinkInTree listing every symbolic link (or file) where a dataset, question or epoch
    folder of the tree belongs: kag would otherwise read or write outside the tree."""
    bad: list[str] = []
    seen: set[str] = set()
    for dataset, question in folders:
        paths = (
            [output / dataset / question]
            if dataset in seen
            else [output / dataset, output / dataset / question]
        )
        if epochs > 1:
            more = output / dataset / question / EPOCHS_FOLDER
            paths += [more, *(more / str(n) for n in range(2, epochs + 1))]
        for path in paths:
            try:
                mode = path.lstat().st_mode
            except FileNotFoundError:
                continue
            except NotADirectoryError:
                continue  # its parent is already listed
            if not stat.S_ISDIR(mode):
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
                bad.append(f"{path} ({kind})")
        seen.add(dataset)
    if bad:
        unique = list(dict.fromkeys(bad))
        raise LinkInTree(
            f"{output}: where a folder of the result tree belongs: {_listing(unique)};"
            " remove or rename it (kag never writes through a link)"
        )


def check_prefix(prefix: str) -> None:
    for bad, label in (("/", "'/'"), ("\\", "'\\'"), ("\0", "NUL")):
        if bad in prefix:
            raise UsageError(f"--prefix: {prefix!r} contains {label} (it becomes part of a file name)")


def _check_prompts(benchmark: Benchmark, setups: list[Setup], questions: list[Question]) -> None:
    """Render each setup's template once per shape of question (with/without CHOICE), so
    an undefined variable is a ConfigError before any request; a KAG setup is rendered
    with a placeholder RETRIEVAL (an empty retrieval is checked, and only warned about)."""
    shapes = {q.mcq is not None: q for q in questions}
    for setup in setups:
        assert setup.template is not None
        kag = setup.augmented_generation is not None
        for question in shapes.values():
            choices = format_choices(question.mcq.options) if question.mcq is not None else None
            try:
                setup.template.render(
                    prompt_variables(question.input, choices, "(retrieval)" if kag else None)
                )
            except PromptRenderError as exc:
                kind = "multiple-choice" if question.mcq is not None else "free-form"
                raise ConfigError(
                    f"{exc} (for the {kind} question {question.dataset}/{question.id})"
                ) from None
        if kag:
            for question in shapes.values():
                choices = format_choices(question.mcq.options) if question.mcq is not None else None
                try:
                    setup.template.render(prompt_variables(question.input, choices, None))
                except PromptRenderError as exc:
                    log.warning(
                        "%s: [%s]: when retrieval returns nothing the prompt cannot render (%s);"
                        " write {{ RETRIEVAL | default('<empty>') }}: such tasks will be error results",
                        benchmark.path,
                        setup.name,
                        exc,
                    )
                    break


def plan_benchmark(config: Config, benchmark: Benchmark, datasets: Datasets, options: PlanOptions) -> Plan:
    """Every selected (question, setup, epoch) task, what its result file holds, and which run.

    With ``epochs`` N, each (question, setup) pair is N tasks, one file each (see
    ``kag.results.epoch_result_path``); every rule below applies to each file alone. With
    ``shard``, only the tasks of that slice are planned and counted (a pair's epochs share
    its slice), and only their leftover temporaries are removed.

    Without ``resume`` every pair runs (existing files are overwritten, as the Rust tool
    did). With it: missing, empty and unreadable files run; ``error`` files run only with
    ``retry_errors``; ``ok`` files whose fingerprint changed (stale) run only with
    ``rerun_stale``; other ``ok`` files are kept.
    """
    check_prefix(options.prefix)
    _check_names("setup", options.setups, benchmark.setups, "--setup")
    _check_names("setup", options.skip, benchmark.setups, "--skip")
    _check_names("dataset", options.datasets, list(datasets.datasets), "--dataset")
    setups = [
        s
        for name, s in benchmark.setups.items()
        if (not options.setups or name in options.setups) and name not in options.skip
    ]
    for setup in setups:
        for name in setup.datasets or ():
            if name not in datasets.datasets:
                log.warning(
                    "%s: [%s]: dataset %r is not in %s", benchmark.path, setup.name, name, datasets.path
                )
    inspect = options.resume or options.inspect
    folders = [
        (dataset, qid)
        for dataset, questions in datasets.datasets.items()
        if not options.datasets or dataset in options.datasets
        if any(s.runs_on(dataset) for s in setups)
        for qid in (list(questions)[: options.limit] if options.limit is not None else list(questions))
    ]
    if options.epochs < 1:
        raise UsageError(f"--epochs: must be at least 1 (got {options.epochs})")
    _check_lengths(
        options.output, folders, {f"{options.prefix}{s.name}.json" for s in setups}, options.epochs
    )
    _check_folders(options.output, folders, options.epochs)
    shard = options.shard
    tasks: list[Task] = []
    rows: dict[tuple[str, str], PlanRow] = {}
    leftovers: list[Path] = []
    questions_seen: list[Question] = []
    total = skipped = stale_kept = 0
    for dataset, questions in datasets.datasets.items():
        if options.datasets and dataset not in options.datasets:
            continue
        selected = list(questions.values())
        if options.limit is not None:
            selected = selected[: options.limit]
        active = [s for s in setups if s.runs_on(dataset)]
        if active:
            questions_seen.extend(selected)
        for question in selected:
            # A shard owns the files of its own tasks only, temporaries included: it never
            # removes what another shard (on another machine, where a pid means nothing)
            # is writing.
            mine = [s for s in active if shard is None or shard.contains(dataset, question.id, s.name)]
            folder = options.output / dataset / question.id
            if mine and folder.is_dir():
                names = [f"{options.prefix}{s.name}.json" for s in mine]
                leftovers.extend(find_dead_temporaries(folder, names))
                for epoch in range(2, options.epochs + 1):
                    inner = folder / EPOCHS_FOLDER / str(epoch)
                    if inner.is_dir():
                        leftovers.extend(find_dead_temporaries(inner, names))
            fingerprints: dict[str, str] = {}  # per setup: every epoch is the same task
            for setup, epoch in ((s, e) for s in mine for e in range(1, options.epochs + 1)):
                if setup.name not in fingerprints:
                    aug = setup.augmented_generation
                    retriever_table = config.retrievers.get(aug.retriever) if aug else None
                    fingerprints[setup.name] = task_fingerprint(setup, question, retriever_table)
                fingerprint = fingerprints[setup.name]
                path = epoch_result_path(
                    options.output, dataset, question.id, options.prefix, setup.name, epoch
                )
                if inspect:
                    state = _inspect(path, fingerprint)
                else:
                    state = FileState.EXISTS if os.path.lexists(path) else FileState.MISSING
                row = rows.setdefault((setup.name, dataset), PlanRow(setup.name, dataset))
                row.tasks += 1
                total += 1
                if state is FileState.OK:
                    row.ok += 1
                elif state is FileState.ERROR:
                    row.errors += 1
                elif state is FileState.STALE:
                    row.stale += 1
                elif state is FileState.UNREADABLE:
                    row.unreadable += 1
                elif state is FileState.MISSING:
                    row.missing += 1
                run = (
                    not options.resume
                    or state in (FileState.MISSING, FileState.UNREADABLE)
                    or (state is FileState.ERROR and options.retry_errors)
                    or (state is FileState.STALE and options.rerun_stale)
                )
                if run:
                    row.to_run += 1
                    tasks.append(Task(setup, question, path, fingerprint, state, epoch))
                else:
                    skipped += 1
                    if state is FileState.STALE:
                        stale_kept += 1
    _check_prompts(benchmark, setups, questions_seen)
    ordered_rows = sorted(rows.values(), key=lambda r: (list(benchmark.setups).index(r.setup), r.dataset))
    return Plan(
        tuple(tasks), tuple(ordered_rows), total, skipped, stale_kept, tuple(leftovers), options.output
    )


def remove_leftovers(plan: Plan) -> int:
    """Delete the ``.tmp`` files of writes a crash interrupted; returns how many."""
    removed = 0
    for tmp in plan.leftovers:
        try:
            tmp.unlink()
            removed += 1
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise InputError(f"{tmp}: cannot remove the leftover temporary file: {exc.strerror}") from None
    return removed


def check_output(output: Path) -> None:
    """Create the output folder and check that files can be written there (before any
    request, so a read-only tree fails with exit 2, not with one error per task)."""
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{output}: cannot create the output directory: {exc.strerror}") from None
    if not os.access(output, os.W_OK | os.X_OK):
        raise InputError(f"{output}: the output directory is not writable")


# ---------------------------------------------------------------- running


@dataclass
class Summary:
    total: int = 0  # selected pairs
    planned: int = 0  # tasks to run
    ok: int = 0
    errors: int = 0
    skipped: int = 0  # kept results
    stale_kept: int = 0
    kept: int = 0  # failed again, the previous ok result kept (not in ``errors``)
    not_run: int = 0  # never started or cancelled (interrupted)
    interrupted: bool = False
    seconds: float = 0.0
    fatal: str | None = None  # a result file could not be written: the run stopped
    disk_full: bool = False  # the file system refused a result: the run stopped
    unreachable: str | None = None  # the URL no task could reach: the run stopped
    # Requests and failures per endpoint of each provider with more than one URL.
    endpoints: dict[str, tuple[EndpointStats, ...]] = field(default_factory=dict)

    @property
    def done(self) -> int:
        return self.ok + self.errors + self.kept

    @property
    def no_answer(self) -> bool:
        """Tasks ran and not one got an answer."""
        return self.done > 0 and self.ok == 0


def _unreachable(result: Result) -> bool:
    # The providers word every failure to connect (refused, DNS, TLS, no connection in
    # time) "cannot connect to"; a provider with several URLs fails so only once each of
    # them did, or says "no endpoint ... came back" when all stayed set aside.
    return isinstance(result, ErrorResult) and result.error.startswith(
        (f"{GENERATION_FAILED}: cannot connect to ", f"{GENERATION_FAILED}: no endpoint ")
    )


def redact_url(url: str) -> str:
    """``url`` with its user and password (if any) replaced by ``***``."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"***@{host}"))


def store_result(root: Path | None, path: Path, result: Result) -> bool:
    """Write ``result`` at ``path`` unless it is an error and the file holds an ok result
    (a good answer is never replaced by a failure); returns whether it was written."""
    if isinstance(result, ErrorResult):
        try:
            if isinstance(read_result_nofollow(path), OkResult):
                return False
        except UnreadableResult:
            pass
    write_result(path, result, root=root)
    return True


WRITER_THREADS = 8  # parallel fsyncs: measured ~5x the single-thread rate on a virtual disk


async def run_plan(
    plan: Plan,
    generator: Generator,
    reporter: Reporter | None = None,
    stop: asyncio.Event | None = None,
) -> Summary:
    """Run the plan's tasks with ``generator.options.parallel`` workers.

    Returns when every task has a result file, or when ``stop`` is set (in-flight tasks
    are cancelled; the summary says how many did not run), or when a result file cannot
    be written (``summary.fatal``; the other tasks are cancelled).

    Results are written by a small thread pool (``write_result``: temporary file, fsync,
    rename), so a worker takes its next task as soon as its model has answered instead of
    waiting tens of milliseconds for the disk; at most ``2 * parallel + 8`` writes are
    pending. Writes that were started always finish, even on a stop request: a computed
    answer is never thrown away, and no file is ever half-written.
    """
    reporter = reporter or NullReporter()
    parallel = max(1, generator.options.parallel)
    summary = Summary(
        total=plan.total, planned=len(plan.tasks), skipped=plan.skipped, stale_kept=plan.stale_kept
    )
    started = time.perf_counter()
    pending: Iterator[Task] = iter(plan.tasks)
    stopping = asyncio.Event()
    workers: list[asyncio.Task[None]] = []
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(
        max_workers=min(WRITER_THREADS, parallel + 1), thread_name_prefix="kag-write"
    )
    write_slots = asyncio.Semaphore(2 * parallel + WRITER_THREADS)
    writes: set[asyncio.Future[bool]] = set()
    limit = generator.options.max_connection_failures
    failures_in_row = [0]

    def halt() -> None:
        stopping.set()
        current = asyncio.current_task()
        for w in workers:
            if w is not current:
                w.cancel()

    def written(
        task: Task, result: Result, attempts: int, began: float, future: asyncio.Future[bool]
    ) -> None:
        writes.discard(future)
        write_slots.release()
        error = None if future.cancelled() else future.exception()
        if isinstance(error, NoSpace):
            summary.disk_full = True
            halt()
            return
        if error is not None or future.cancelled():
            if summary.fatal is None:
                if isinstance(error, KagError):
                    summary.fatal = str(error)
                else:
                    reason = getattr(error, "strerror", None) or error or "cancelled"
                    summary.fatal = f"{task.path}: cannot write the result file: {reason}"
            halt()
            return
        ok = isinstance(result, OkResult)
        kept = not future.result()
        if ok:
            summary.ok += 1
        elif kept:
            summary.kept += 1
        else:
            summary.errors += 1
        message = result.error if isinstance(result, ErrorResult) else None
        reporter.task_done(
            TaskOutcome(task.label, task.path, ok, attempts, time.perf_counter() - began, message, kept)
        )

    async def run_task(task: Task) -> None:
        _current_label.set(task.label)
        began = time.perf_counter()
        question = task.question
        choices = format_choices(question.mcq.options) if question.mcq is not None else None
        try:
            result, attempts = await generator.generate(task.setup, question.input, choices, task.fingerprint)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must cost one task, not the run
            log.debug("task %s raised", task.label, exc_info=True)
            result = ErrorResult(generator.redact(f"internal error: {type(exc).__name__}: {exc}"))
            attempts = 0
        if _unreachable(result):
            failures_in_row[0] += 1
            if limit and failures_in_row[0] >= limit and summary.unreachable is None:
                provider = generator.config.providers.get(task.setup.provider)
                urls = [redact_url(str(u)) for u in getattr(provider, "urls", ())] or [task.setup.provider]
                summary.unreachable = (
                    urls[0]
                    if len(urls) == 1
                    else f"every URL of provider {task.setup.provider!r} ({', '.join(urls)})"
                )
                halt()
        else:  # the server answered (even with an error)
            failures_in_row[0] = 0
        await write_slots.acquire()
        future = loop.run_in_executor(executor, store_result, plan.root, task.path, result)
        writes.add(future)
        future.add_done_callback(partial(written, task, result, attempts, began))

    async def worker() -> None:
        for task in pending:
            if stopping.is_set():
                return
            await run_task(task)

    workers.extend(asyncio.create_task(worker()) for _ in range(min(parallel, len(plan.tasks))))

    async def watch_stop() -> None:
        assert stop is not None
        await stop.wait()
        summary.interrupted = True
        halt()

    watcher = asyncio.create_task(watch_stop()) if stop is not None else None
    try:
        results = await asyncio.gather(*workers, return_exceptions=True)
        for outcome in results:
            if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
                raise outcome
    finally:
        while writes:
            await asyncio.wait(set(writes))
        executor.shutdown(wait=True)
        if watcher is not None:
            watcher.cancel()
        summary.not_run = summary.planned - summary.done
        summary.seconds = time.perf_counter() - started
    return summary


def _request_stop(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    stop.set()
    # A second Ctrl-C falls back to Python's default handler (KeyboardInterrupt).
    loop.remove_signal_handler(signal.SIGINT)


def run_benchmark(
    plan: Plan,
    config: Config,
    options: RunOptions,
    reporter: Reporter | None = None,
    handle_sigint: bool = True,
) -> Summary:
    """Run ``plan`` in a fresh event loop; with ``handle_sigint``, Ctrl-C stops the run
    cleanly (the summary's ``interrupted`` is then true) instead of raising."""

    async def main() -> Summary:
        generator = Generator(config, options, reporter)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed = False
        if handle_sigint:
            try:
                loop.add_signal_handler(signal.SIGINT, _request_stop, loop, stop)
                installed = True
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                installed = False
        try:
            summary = await run_plan(plan, generator, reporter, stop)
            summary.endpoints = generator.endpoint_stats()
            return summary
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)
            await generator.aclose()

    return asyncio.run(main())


def generate_once(
    config: Config, setup: Setup, text: str, options: RunOptions, reporter: Reporter | None = None
) -> tuple[Result, int]:
    """One generation (``kag generation``): retrieval, rendering, the model call; the
    result carries the fingerprint a benchmark task with this input would have."""
    aug = setup.augmented_generation
    retriever_table = config.retrievers.get(aug.retriever) if aug else None
    fingerprint = task_fingerprint(setup, Question("", "", text, None), retriever_table)

    async def main() -> tuple[Result, int]:
        generator = Generator(config, options, reporter)
        try:
            _current_label.set("generation")
            return await generator.generate(setup, text, None, fingerprint)
        finally:
            await generator.aclose()

    return asyncio.run(main())

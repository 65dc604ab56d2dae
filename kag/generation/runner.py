"""The benchmark runner: run the tasks of a plan (:mod:`kag.generation.plan`) concurrently,
write one result file per task, report progress through callbacks, and never print.

One task = retrieval (KAG setups) -> prompt rendering -> one model call (with retries) ->
one result file written atomically through ``kag.results.write_result``. A task that fails
(retrieval, rendering, or the model after its retries) becomes an ``error`` result file
and the run goes on; one whose request never reached a server (``Unreached``) gets no
file: ``--continue`` runs it once the server is back. Concurrency: ``parallel`` workers pull tasks from one shared
iterator, so at most ``parallel`` model calls are in flight, and a stop request (Ctrl-C)
stops scheduling at once; in-flight calls are cancelled, results already received are
still written: no file is ever half-written, and a cancelled task leaves no file, so
``--continue`` runs it again.

Times in ``ok.stats``: ``time`` is the whole task (retrieval, rendering, every attempt and
wait), comparable with existing trees (see compatibility in docs/architecture.md);
``generation_time`` is the successful model call alone.
"""

import asyncio
import logging
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from kag.errors import KagError
from kag.generation.config import Config
from kag.generation.endpoints import EndpointStats
from kag.generation.generator import (
    Generator,
    NullReporter,
    Reporter,
    RunOptions,
    TaskOutcome,
    Unreached,
    current_label,
)
from kag.generation.plan import Plan, Task
from kag.generation.secrets import display_url
from kag.generation.templates import format_choices
from kag.results import (
    ErrorResult,
    NoSpace,
    OkResult,
    Result,
    UnreadableResult,
    read_result_nofollow,
    write_result,
)

log = logging.getLogger(__name__)


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
    unreached: int = 0  # tasks whose request reached no server: no file written, not run
    # Requests and failures per endpoint of each provider with more than one URL.
    endpoints: dict[str, tuple[EndpointStats, ...]] = field(default_factory=dict)

    @property
    def done(self) -> int:
        return self.ok + self.errors + self.kept

    @property
    def no_answer(self) -> bool:
        """Tasks ran and not one got an answer."""
        return self.done > 0 and self.ok == 0


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
        current_label.set(task.label)
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
        if isinstance(result, Unreached):
            summary.unreached += 1
            failures_in_row[0] += 1
            if limit and failures_in_row[0] >= limit and summary.unreachable is None:
                provider = generator.config.providers.get(task.setup.provider)
                urls = [display_url(str(u)) for u in getattr(provider, "urls", ())] or [task.setup.provider]
                summary.unreachable = (
                    urls[0]
                    if len(urls) == 1
                    else f"every URL of provider {task.setup.provider!r} ({', '.join(urls)})"
                )
                halt()
        else:  # the server answered (even with an error)
            failures_in_row[0] = 0
        if isinstance(result, Unreached):  # a server outage is not a model's answer: no file
            reporter.task_done(
                TaskOutcome(task.label, task.path, False, attempts, time.perf_counter() - began, result.error)
            )
            return
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

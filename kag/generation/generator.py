"""One generation: a ``Generator`` opens the providers and retrievers a run needs and turns one
input into one result (retrieval, prompt rendering, one model call with retries); the run's
options and the events it reports; ``generate_once`` for ``kag generation``."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kag import __version__
from kag.datasets import Question
from kag.errors import KagError
from kag.generation.config import Config, Setup
from kag.generation.endpoints import EndpointFailure, EndpointStats
from kag.generation.fingerprint import task_fingerprint
from kag.generation.providers import ChatRequest, Provider, open_provider
from kag.generation.retry import ProviderError, RetryPolicy, call_with_retries
from kag.generation.secrets import Redactor
from kag.generation.templates import PromptRenderError, prompt_variables
from kag.results import ErrorResult, OkResult, OkStats, Result, Retrieval, Timing
from kag.retrieval.base import RETRIEVAL_FAILED, EmbedFn, RetrievalFailed, Retriever

log = logging.getLogger(__name__)

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
class Unreached:
    """A task whose request never reached a server (refused, not resolved, no connection in
    time, on every endpoint and every attempt): not a model's answer, so no result file."""

    error: str


def never_reached(error: ProviderError) -> bool:
    """Whether ``error`` is a request that no server got."""
    return isinstance(error, EndpointFailure) and not error.reached_any


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


current_label: contextvars.ContextVar[str] = contextvars.ContextVar("kag_task_label", default="")


# ---------------------------------------------------------------- generation of one task


class Generator:
    """Runs single generations: opens each provider (one HTTP client) and each
    (retriever, database) pair (one database driver) on first use, for the whole run."""

    def __init__(self, config: Config, options: RunOptions, reporter: Reporter | None = None) -> None:
        self.config = config
        self.options = options
        self.reporter = reporter or NullReporter()
        self.redact = Redactor.of(config.secrets)
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
        self.reporter.retrying(RetryNotice(current_label.get(), attempt, delay, self.redact(str(error))))

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
    ) -> tuple[Result | Unreached, int]:
        """Retrieval, rendering and the model call for one input; returns (result, attempts).

        Failures become ErrorResult (messages open with the phase that failed: see
        compatibility in docs/architecture.md), except a model call that never reached a
        server (``Unreached``); secrets are redacted from every message.
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
                if not isinstance(exc, RetrievalFailed):
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
        request = ChatRequest(setup.model, prompt, setup.temperature, setup.tokens, setup.settings)
        call_seconds = [0.0]
        reached = [False]  # a server got one of the attempts

        async def attempt() -> Any:
            began = time.perf_counter()
            try:
                response = await provider.chat(request)
            except ProviderError as exc:
                reached[0] = reached[0] or not never_reached(exc)
                raise
            call_seconds[0] = time.perf_counter() - began
            return response

        try:
            response, attempts = await call_with_retries(attempt, self.options.retry, self._on_retry)
        except ProviderError as exc:
            message = self.redact(f"{GENERATION_FAILED}: {exc} (after {exc.attempts} attempt(s))")
            if not reached[0] and never_reached(exc):
                return Unreached(message), exc.attempts
            return ErrorResult(message), exc.attempts
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
            current_label.set("generation")
            result, attempts = await generator.generate(setup, text, None, fingerprint)
            return (ErrorResult(result.error) if isinstance(result, Unreached) else result), attempts
        finally:
            await generator.aclose()

    return asyncio.run(main())

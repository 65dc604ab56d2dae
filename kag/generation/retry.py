"""Retries of transient provider failures: exponential backoff with jitter, honouring
``Retry-After``.

Transient (retried): connect and read timeouts, dropped or reset connections, truncated
bodies, bodies that are not JSON, HTTP 408, 425, 429 and 5xx. Anything else (HTTP 400,
401, 404..., a JSON reply without the expected fields, a complete reply that escapes a lone
surrogate and so is not Unicode text) fails at once: retrying cannot fix a wrong model
name or key, nor a model that writes half a surrogate pair.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


class ProviderError(Exception):
    """One failed call to a model server. ``transient`` says whether a retry may help;
    ``retry_after`` is the server's ``Retry-After`` in seconds when it sent one;
    ``attempts`` is set once retries are exhausted."""

    def __init__(self, message: str, *, transient: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient
        self.retry_after = retry_after
        self.attempts = 1

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` retries after the first attempt (so at most ``retries + 1`` attempts).

    The n-th retry waits ``d = min(max_backoff, backoff * 2**(n-1))`` seconds with equal
    jitter, uniformly in ``[d/2, d]``; when the server sent ``Retry-After``, exactly that
    many seconds instead (capped at ``max_retry_after``).
    """

    retries: int = 3
    backoff: float = 1.0
    max_backoff: float = 60.0
    max_retry_after: float = 600.0


def retry_delay(policy: RetryPolicy, retry: int, retry_after: float | None, unit: float) -> float:
    """Seconds to wait before retry number ``retry`` (1-based); ``unit`` is a uniform draw in
    [0, 1) (injected so the formula is testable)."""
    if retry_after is not None:
        return max(0.0, min(retry_after, policy.max_retry_after))
    ceiling = min(policy.max_backoff, policy.backoff * 2 ** (retry - 1))
    return ceiling / 2 + unit * ceiling / 2


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds (fractions accepted, as some servers send
    them) or an HTTP date; None when absent or unparseable; never negative."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


RetryHook = Callable[[int, float, ProviderError], None]


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    on_retry: RetryHook | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    draw: Callable[[], float] = random.random,
) -> tuple[T, int]:
    """Await ``call()`` until it succeeds; returns (value, attempts).

    Raises the last ProviderError (its ``attempts`` set) when it is not transient or the
    retries are exhausted; any other exception at once. ``on_retry(attempt, delay,
    error)`` runs before each wait. The loop is tenacity's; the waits are
    :func:`retry_delay`'s (Retry-After first).
    """
    import tenacity

    def wait(state: tenacity.RetryCallState) -> float:
        error = _error(state)
        return retry_delay(policy, state.attempt_number, error.retry_after, draw())

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_retry is not None and state.next_action is not None:
            on_retry(state.attempt_number, state.next_action.sleep, _error(state))

    attempts = 0

    async def attempt() -> T:
        nonlocal attempts
        attempts += 1
        return await call()

    retrying = tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(policy.retries + 1),
        wait=wait,
        retry=tenacity.retry_if_exception(lambda e: isinstance(e, ProviderError) and e.transient),
        before_sleep=before_sleep,
        sleep=sleep,
        reraise=True,
    )
    try:
        return await retrying(attempt), attempts
    except ProviderError as exc:
        exc.attempts = attempts
        raise


def _error(state: Any) -> ProviderError:
    assert state.outcome is not None
    error = state.outcome.exception()
    assert isinstance(error, ProviderError)  # only those are retried
    return error

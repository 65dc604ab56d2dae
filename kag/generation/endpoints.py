"""Several model servers behind one provider: least-in-flight routing and failover.

An ``EndpointPool`` holds the base URLs of one provider (``url = ["http://a:8000/v1",
"http://b:8000/v1"]``). Each request goes to the endpoint with the fewest requests in flight
(ties: round robin from where the last pick stopped, so the order is deterministic). A
request that gets no reply because the endpoint is unreachable (refused, DNS, TLS, connect
or read timeout) raises ``EndpointFailure``; so does an error that is the server's own
(HTTP 5xx or 429, a reply that is not HTTP or not JSON, ``answered``): the endpoint is set
aside for a cooldown (``base * factor**(n-1)`` seconds after its n-th failure in a row, at
most ``cap``) and ``EndpointPool.run`` sends the request to an endpoint not yet tried,
within the same attempt of the task's retry policy. A ``Retry-After`` holds that endpoint
alone for as long (at most ``max_hold``). After its cooldown an endpoint gets one trial
request; a success puts it back, a failure sets it aside for longer. When every endpoint is
set aside, the request goes to the one whose cooldown ends first, at once: the retry
policy's backoff paces the requests, so a run whose every URL is dead ends as fast as one
with a single dead URL. When every endpoint is held by ``Retry-After``,
``NoEndpointAvailable`` carries the wait until the first is free.

One event loop drives a pool: a pick and its counting happen without an ``await`` between
them, so concurrent tasks of that loop never see a half-updated pool. URLs in messages and
in ``str()`` have their credentials (user info, query values) replaced by ``***``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kag.generation.retry import ProviderError
from kag.generation.secrets import display_url

T = TypeVar("T")


class EndpointFailure(ProviderError):
    """A request got no reply from its endpoint; raised by the request function inside
    ``EndpointPool.acquire`` or ``EndpointPool.run``, it sets the endpoint aside.

    ``resend``: whether the request may go to another endpoint at once without counting as
    an attempt (the endpoint could not be reached, or never answered in time). A connection
    dropped after the request went out is ``resend=False``: the server may have acted on it,
    so the retry policy decides and the attempt counts. Always transient.

    A request whose every try failed unreached (``reached_any`` false) never reached a
    server: a benchmark writes no result for it.

    ``answered``: the endpoint did answer, with an error that is its own (HTTP 5xx, 429,
    a reply that is not HTTP or not JSON): it counts against the endpoint like a failure
    to connect, and the request goes to another endpoint at once. With ``retry_after``
    (a 429's or 503's ``Retry-After``) the endpoint is held that long, and only it.
    """

    def __init__(
        self, message: str, *, resend: bool = True, answered: bool = False, retry_after: float | None = None
    ) -> None:
        super().__init__(message, transient=True, retry_after=retry_after)
        self.resend = resend
        self.answered = answered
        # Whether this endpoint, or one tried before it for the same request, got the request.
        self.reached_any = self.reached

    @property
    def reached(self) -> bool:
        """Whether the server got the request: it answered, or the connection was lost
        after the request went out."""
        return self.answered or not self.resend


class NoEndpointAvailable(ProviderError):
    """Every endpoint of a pool is held by its server's ``Retry-After`` (transient, with
    ``retry_after`` the time until the first is free: the retry policy waits that long)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=True)


@dataclass(frozen=True)
class Cooldown:
    """How long a failing endpoint is set aside: ``min(cap, base * factor**(n-1))`` seconds
    after its n-th failure in a row; ``max_hold`` bounds how long a server's ``Retry-After``
    holds its endpoint."""

    base: float = 1.0
    factor: float = 2.0
    cap: float = 60.0
    max_hold: float = 600.0

    def seconds(self, failures_in_a_row: int) -> float:
        """The cooldown after ``failures_in_a_row`` (>= 1) failures; never above ``cap``."""
        try:
            return min(self.cap, self.base * self.factor ** max(0, failures_in_a_row - 1))
        except OverflowError:  # a long outage: the power passed the cap long ago
            return self.cap


@dataclass(frozen=True)
class EndpointStats:
    """One endpoint's counts for the run summary; ``url`` is redacted.

    ``requests``: requests sent to it (every try, failover ones included); ``failures``:
    those that raised ``EndpointFailure``; ``in_flight``: requests not finished yet;
    ``set_aside``: whether it is set aside now.
    """

    url: str
    requests: int
    failures: int
    in_flight: int
    set_aside: bool


@dataclass(slots=True)
class _Endpoint:
    """The mutable state of one endpoint (owned by its pool)."""

    url: str
    shown: str
    index: int
    requests: int = 0
    failures: int = 0
    in_flight: int = 0
    streak: int = 0  # failures in a row
    down_until: float | None = None  # set aside until then (None: in service)
    held_until: float | None = None  # its server asked to wait until then (Retry-After)
    probing: bool = False  # its one trial request after a cooldown is in flight
    generation: int = 0  # bumped at each set-aside: older requests' outcomes are stale
    last_error: str = ""


class Lease:
    """One request's hold on an endpoint, from ``EndpointPool.acquire``. ``url`` is the base
    URL to send to (with its credentials); ``shown`` the same URL redacted, for messages."""

    __slots__ = ("_endpoint", "_generation", "_probe")

    def __init__(self, endpoint: _Endpoint, probe: bool) -> None:
        self._endpoint = endpoint
        self._generation = endpoint.generation
        self._probe = probe

    @property
    def url(self) -> str:
        return self._endpoint.url

    @property
    def shown(self) -> str:
        return self._endpoint.shown

    @property
    def index(self) -> int:
        """The endpoint's position in the pool's URL list."""
        return self._endpoint.index

    def __repr__(self) -> str:
        return f"Lease({self.shown!r})"


class EndpointPool:
    """The endpoints of one provider (see the module docstring). ``label`` names the pool
    in messages (for example ``provider 'vllm'``); ``clock`` is injectable for tests.

    With a single URL nothing is ever set aside: there is no other endpoint to go to, and
    the retry policy alone decides, as without a pool.
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        cooldown: Cooldown | None = None,
        label: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not urls:
            raise ValueError("an endpoint pool needs at least one URL")
        self._endpoints = [_Endpoint(url, display_url(url), i) for i, url in enumerate(urls)]
        self.cooldown = cooldown or Cooldown()
        self.label = label
        self._clock = clock
        self._cursor = 0  # where the next tie-break starts

    @property
    def urls(self) -> tuple[str, ...]:
        """The base URLs, with their credentials, in list order."""
        return tuple(e.url for e in self._endpoints)

    def __repr__(self) -> str:
        return f"EndpointPool({[e.shown for e in self._endpoints]!r})"

    __str__ = __repr__

    def stats(self) -> tuple[EndpointStats, ...]:
        """Counts per endpoint, in list order (for the run summary)."""
        now = self._clock()
        return tuple(
            EndpointStats(e.shown, e.requests, e.failures, e.in_flight, self._is_aside(e, now))
            for e in self._endpoints
        )

    # -- picking

    @staticmethod
    def _is_held(endpoint: _Endpoint, now: float) -> bool:
        return endpoint.held_until is not None and now < endpoint.held_until

    @classmethod
    def _is_aside(cls, endpoint: _Endpoint, now: float) -> bool:
        return cls._is_held(endpoint, now) or (
            endpoint.down_until is not None and (now < endpoint.down_until or endpoint.probing)
        )

    def _pick(self, exclude: frozenset[int], force: bool = False) -> Lease | None:
        """The least-loaded usable endpoint not in ``exclude``, counted as acquired; None
        when there is none. With ``force``, when every candidate is set aside after
        failures, the one whose cooldown ends first (as a trial): the retry policy's
        backoff then paces the requests, as with a single URL. An endpoint held by its
        server's ``Retry-After`` is never forced."""
        now = self._clock()
        best: _Endpoint | None = None
        count = len(self._endpoints)
        for step in range(count):
            endpoint = self._endpoints[(self._cursor + step) % count]
            if endpoint.index in exclude or self._is_aside(endpoint, now):
                continue
            if best is None or endpoint.in_flight < best.in_flight:
                best = endpoint
        if best is None and force:
            waiting = [e for e in self._endpoints if e.index not in exclude and not self._is_held(e, now)]
            best = min(waiting, key=lambda e: (e.down_until or now, e.in_flight), default=None)
        if best is None:
            return None
        probe = best.down_until is not None  # its cooldown is over: this is its trial request
        best.probing = probe
        best.in_flight += 1
        best.requests += 1
        self._cursor = (best.index + 1) % count
        return Lease(best, probe)

    def _unavailable(self, exclude: frozenset[int]) -> NoEndpointAvailable:
        now = self._clock()
        candidates = [e for e in self._endpoints if e.index not in exclude] or self._endpoints
        described = ", ".join(f"{e.shown} ({e.last_error})" if e.last_error else e.shown for e in candidates)
        owner = f" of {self.label}" if self.label else ""
        waits = [e.held_until - now for e in candidates if e.held_until is not None]
        error = NoEndpointAvailable(f"every endpoint{owner} asked to wait (Retry-After): {described}")
        error.retry_after = max(0.0, min(waits)) if waits else None
        return error

    async def _wait_for_lease(self, exclude: frozenset[int]) -> Lease:
        lease = self._pick(exclude, force=True)
        if lease is None:
            raise self._unavailable(exclude)
        return lease

    # -- outcomes

    def _release(self, lease: Lease, failure: EndpointFailure | None) -> None:
        endpoint = lease._endpoint
        endpoint.in_flight -= 1
        if lease._probe:
            endpoint.probing = False
        if failure is not None:
            endpoint.failures += 1
            endpoint.last_error = _redact_message(str(failure), endpoint)
            # Requests sent before the endpoint was set aside fail together; only the first
            # of them (or a trial request) makes the cooldown longer.
            if lease._generation == endpoint.generation and len(self._endpoints) > 1:
                endpoint.streak += 1
                endpoint.generation += 1
                endpoint.down_until = self._clock() + self.cooldown.seconds(endpoint.streak)
            if failure.retry_after is not None and len(self._endpoints) > 1:
                endpoint.held_until = self._clock() + min(failure.retry_after, self.cooldown.max_hold)
        elif lease._generation == endpoint.generation:
            endpoint.streak = 0
            endpoint.down_until = None
            endpoint.held_until = None

    @contextlib.asynccontextmanager
    async def acquire(self, exclude: frozenset[int] = frozenset()) -> AsyncIterator[Lease]:
        """Hold the least-loaded usable endpoint (not one whose index is in ``exclude``)
        for one request. An ``EndpointFailure`` raised inside sets it aside and propagates;
        any other exception, or none, counts as a reply (the endpoint answered).

        When every candidate is set aside, takes the one whose cooldown ends first;
        raises ``NoEndpointAvailable`` when every candidate is held by ``Retry-After``.
        """
        lease = await self._wait_for_lease(exclude)
        failure: EndpointFailure | None = None
        try:
            yield lease
        except EndpointFailure as exc:
            failure = exc
            raise
        except asyncio.CancelledError:
            # A cancelled request says nothing about the endpoint; a trial is just undone.
            lease._generation = -1
            raise
        finally:
            self._release(lease, failure)

    async def run(self, send: Callable[[str], Awaitable[T]]) -> T:
        """``await send(base_url)`` on the least-loaded endpoint; when it raises
        ``EndpointFailure`` with ``resend``, again on an endpoint not tried yet, all within
        one attempt of the caller's retry policy. Raises the last ``EndpointFailure`` once
        every endpoint was tried (or at once when ``resend`` is false), and
        ``NoEndpointAvailable`` as ``acquire`` does.
        """
        tried: set[int] = set()
        reached = False  # an endpoint tried before got the request (its error was its own)
        while True:
            index = -1
            try:
                async with self.acquire(frozenset(tried)) as lease:
                    index = lease.index
                    return await send(lease.url)
            except EndpointFailure as exc:  # the endpoint is set aside by now
                tried.add(index)
                exc.reached_any = reached or exc.reached
                reached = exc.reached_any
                if not exc.resend or len(tried) == len(self._endpoints):
                    raise


def _redact_message(message: str, endpoint: _Endpoint) -> str:
    """``message`` with the endpoint's raw URL shown redacted."""
    return message.replace(endpoint.url, endpoint.shown) if endpoint.url != endpoint.shown else message

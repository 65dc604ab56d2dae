"""EndpointPool: least-in-flight routing, set-aside and failover, against real loopback
model servers (aiohttp.web on 127.0.0.1) driven by a real aiohttp client, as a provider
drives them; the pool's state machine also with an injected clock."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import orjson
import pytest
from aiohttp import web

from kag.generation.endpoints import (
    Cooldown,
    EndpointFailure,
    EndpointPool,
    NoEndpointAvailable,
)
from kag.generation.retry import ProviderError, RetryPolicy, call_with_retries
from kag.generation.secrets import display_url
from tests.bench_helpers import bench_args, invoke, make_project
from tests.fakeserver import FakeServer

T = TypeVar("T")
DEADLINE = 60.0  # a wrong pool would hang a test; this turns the hang into a failure


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(DEADLINE):
            return await coro

    return asyncio.run(bounded())


# ---------------------------------------------------------------- loopback servers


class LimitedServer:
    """An OpenAI-style chat server that works on at most ``limit`` requests at a time (the
    rest queue, as behind vLLM's scheduler), each taking ``latency`` seconds, or until
    ``gate`` is set when one is given. Runs in the test's event loop."""

    def __init__(self, limit: int = 8, latency: float = 0.0, gate: asyncio.Event | None = None) -> None:
        self.limit = limit
        self.latency = latency
        self.gate = gate
        self.received = 0  # requests whose body arrived
        self.served = 0  # replies sent
        self.active = 0  # received and not answered yet (queued or working)
        self.peak = 0  # the largest `active` seen
        self._slots = asyncio.Semaphore(limit)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.received += 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            async with self._slots:
                if self.gate is not None:
                    await self.gate.wait()
                if self.latency:
                    await asyncio.sleep(self.latency)
        finally:
            self.active -= 1
        self.served += 1
        reply = {
            "choices": [{"message": {"role": "assistant", "content": body["messages"][0]["content"]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        }
        return web.Response(body=orjson.dumps(reply), content_type="application/json")

    async def start(self) -> LimitedServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        # No grace period on stop: in-flight requests are cut, as when a server dies.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, shutdown_timeout=0.0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def refused_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sender(session: aiohttp.ClientSession, prompt: str, timeout: float = 10.0) -> Callable[[str], Any]:
    """The request of one attempt, classified as a provider classifies it: no connection or
    no reply in time is an endpoint failure that may go elsewhere; a connection dropped
    after the request went out sets the endpoint aside but counts as an attempt."""
    payload = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}]})

    async def send(base: str) -> str:
        url = f"{base}/chat/completions"
        try:
            async with asyncio.timeout(timeout):
                async with session.post(url, data=payload, allow_redirects=False) as response:
                    content = await response.read()
        except TimeoutError:
            raise EndpointFailure(f"no complete reply from {url} within {timeout:g} s") from None
        except aiohttp.ClientConnectorError as exc:
            raise EndpointFailure(f"cannot connect to {url}: {exc.os_error}") from None
        except aiohttp.ClientConnectionResetError as exc:  # found closed before the request went out
            raise EndpointFailure(f"connection to {url} failed: {exc}") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise EndpointFailure(f"connection to {url} failed: {exc}", resend=False) from None
        if response.status >= 400:
            raise ProviderError(f"HTTP {response.status} from {url}", transient=response.status >= 500)
        return str(orjson.loads(content)["choices"][0]["message"]["content"])

    return send


def client() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64, limit_per_host=0), trust_env=False)


async def drive(
    pool: EndpointPool,
    session: aiohttp.ClientSession,
    count: int,
    parallel: int,
    policy: RetryPolicy,
    on_done: Callable[[int], Awaitable[None]] | None = None,
) -> list[tuple[str, int]]:
    """``count`` tasks, ``parallel`` at a time, each one model call with retries through
    the pool; returns (reply, attempts) per task, in task order."""
    results: list[tuple[str, int]] = [("", 0)] * count
    pending = iter(range(count))
    done = 0

    async def no_wait(_: float) -> None:
        await asyncio.sleep(0)

    async def worker() -> None:
        nonlocal done
        for i in pending:
            results[i] = await call_with_retries(
                lambda i=i: pool.run(sender(session, f"task {i}")), policy, sleep=no_wait
            )
            done += 1
            if on_done is not None:
                await on_done(done)

    await asyncio.gather(*(worker() for _ in range(parallel)))
    return results


# ---------------------------------------------------------------- URLs


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("https://user:hunter2@gpu1.lab:8443/v1", "https://***@gpu1.lab:8443/v1"),
        ("https://sk-token@gpu1.lab/v1", "https://***@gpu1.lab/v1"),
        ("https://gpu1.lab/v1?api-key=hunter2&x=1", "https://gpu1.lab/v1?api-key=***&x=***"),
    ],
)
def test_redact_url_hides_user_info_and_query_values(url: str, shown: str) -> None:
    assert display_url(url) == shown


def test_pool_text_never_carries_a_credential() -> None:
    pool = EndpointPool(["https://user:hunter2@a.lab/v1", "https://b.lab/v1?key=hunter2"])
    assert "hunter2" not in str(pool) and "hunter2" not in repr(pool)
    assert all("hunter2" not in s.url for s in pool.stats())
    assert pool.urls[0] == "https://user:hunter2@a.lab/v1"  # requests still get the real URL


def test_pool_needs_a_url() -> None:
    with pytest.raises(ValueError, match="at least one URL"):
        EndpointPool([])


# ---------------------------------------------------------------- the state machine


def test_cooldown_doubles_and_stops_at_the_cap() -> None:
    cooldown = Cooldown(base=0.5, factor=2.0, cap=3.0)
    assert [cooldown.seconds(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert cooldown.seconds(100_000) == 3.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _fail_on(pool: EndpointPool, expected: int) -> None:
    with pytest.raises(EndpointFailure):
        async with pool.acquire() as lease:
            assert lease.index == expected
            raise EndpointFailure("refused")


def test_least_in_flight_with_ties_taken_in_turn() -> None:
    async def go() -> list[int]:
        pool = EndpointPool(["http://a", "http://b", "http://c"])
        picks: list[int] = []
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(6):  # all tied at 0, then at 1: a b c a b c
                picks.append((await stack.enter_async_context(pool.acquire())).index)
            assert [s.in_flight for s in pool.stats()] == [2, 2, 2]
        # Everything released: ties again, taken from where the last pick stopped.
        async with pool.acquire() as first, pool.acquire() as second:
            picks += [first.index, second.index]
            async with pool.acquire() as third:
                picks.append(third.index)
        return picks

    assert run(go()) == [0, 1, 2, 0, 1, 2, 0, 1, 2]


def test_a_busy_endpoint_is_passed_over_until_it_is_the_least_loaded() -> None:
    async def go() -> list[int]:
        pool = EndpointPool(["http://a", "http://b"])
        picks = []
        async with contextlib.AsyncExitStack() as stack:
            held = [await stack.enter_async_context(pool.acquire()) for _ in range(3)]  # a b a
            picks += [lease.index for lease in held]
            async with pool.acquire() as lease:  # b has 1, a has 2
                picks.append(lease.index)
                async with pool.acquire() as again:  # 2 and 2: the turn after b is a's
                    picks.append(again.index)
        return picks

    assert run(go()) == [0, 1, 0, 1, 0]


def test_set_aside_then_one_trial_then_back() -> None:
    async def go() -> None:
        clock = Clock()
        pool = EndpointPool(["http://a", "http://b"], cooldown=Cooldown(base=10, cap=100), clock=clock)
        await _fail_on(pool, 0)
        assert [s.set_aside for s in pool.stats()] == [True, False]
        async with pool.acquire() as one, pool.acquire() as two:  # b, although it is busier
            assert (one.index, two.index) == (1, 1)
        clock.now = 10.0  # the cooldown is over: a gets one trial request, no more
        async with pool.acquire() as trial:
            assert trial.index == 0
            async with pool.acquire() as other:
                assert other.index == 1
            assert pool.stats()[0].set_aside
        assert not pool.stats()[0].set_aside  # the trial succeeded: a is back
        await _fail_on(pool, 0)  # its streak was reset: the cooldown is the base again
        clock.now = 19.9
        async with pool.acquire() as lease:
            assert lease.index == 1
        clock.now = 20.0
        with pytest.raises(EndpointFailure):  # a failed trial doubles the cooldown
            async with pool.acquire() as trial:
                assert trial.index == 0
                raise EndpointFailure("refused again")
        clock.now = 39.9
        async with pool.acquire() as lease:
            assert lease.index == 1
        clock.now = 40.0
        async with pool.acquire() as lease:
            assert lease.index == 0
        assert [(s.requests, s.failures) for s in pool.stats()] == [(5, 3), (5, 0)]

    run(go())


def test_failures_of_requests_sent_together_set_aside_once() -> None:
    """Eight requests in flight when a server dies fail together: one outage, one base
    cooldown, eight failures counted."""

    async def go() -> None:
        clock = Clock()
        pool = EndpointPool(["http://a", "http://b"], cooldown=Cooldown(base=10, cap=1000), clock=clock)

        async def doomed(gate: asyncio.Event) -> None:
            with pytest.raises(EndpointFailure):
                async with pool.acquire(exclude=frozenset({1})):
                    await gate.wait()
                    raise EndpointFailure("connection reset", resend=False)

        gate = asyncio.Event()
        tasks = [asyncio.create_task(doomed(gate)) for _ in range(8)]
        await asyncio.sleep(0)
        assert pool.stats()[0].in_flight == 8
        gate.set()
        await asyncio.gather(*tasks)
        assert pool.stats()[0].failures == 8
        clock.now = 10.0  # back after the base cooldown, not 2**7 times it
        async with pool.acquire(exclude=frozenset({1})) as lease:
            assert lease.index == 0

    run(go())


def test_a_single_url_is_never_set_aside() -> None:
    async def go() -> None:
        pool = EndpointPool(["http://only"], cooldown=Cooldown(base=1000))
        await _fail_on(pool, 0)
        async with pool.acquire() as lease:  # no wait, no NoEndpointAvailable
            assert lease.index == 0
        assert pool.stats()[0].failures == 1 and not pool.stats()[0].set_aside

    run(go())


def test_a_cancelled_trial_leaves_the_endpoint_waiting_for_another() -> None:
    async def go() -> None:
        clock = Clock()
        pool = EndpointPool(["http://a", "http://b"], cooldown=Cooldown(base=5), clock=clock)
        await _fail_on(pool, 0)
        clock.now = 5.0

        async def trial(started: asyncio.Event) -> None:
            async with pool.acquire(exclude=frozenset({1})) as lease:
                assert lease.index == 0
                started.set()
                await asyncio.sleep(3600)

        started = asyncio.Event()
        task = asyncio.create_task(trial(started))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        stats = pool.stats()[0]
        assert (stats.in_flight, stats.failures, stats.set_aside) == (0, 1, False)
        async with pool.acquire(exclude=frozenset({1})) as lease:  # not back: this is the trial
            assert lease.index == 0
            assert pool.stats()[0].set_aside
        assert not pool.stats()[0].set_aside  # that trial succeeded: a is in service

    run(go())


def test_every_endpoint_set_aside_sends_at_once_to_the_first_back() -> None:
    """No request waits for a cooldown: the retry policy's backoff paces them, as with one URL."""

    async def go() -> None:
        clock = Clock()
        pool = EndpointPool(["http://a", "http://b"], cooldown=Cooldown(base=5, cap=50), clock=clock)
        await _fail_on(pool, 0)  # a: back at 5
        clock.now = 1.0
        await _fail_on(pool, 1)  # b: back at 6
        assert await _index_of_next(pool, frozenset()) == 0
        assert [s.set_aside for s in pool.stats()] == [False, True]  # a's trial succeeded

    run(go())


def test_retry_after_holds_its_endpoint_only() -> None:
    async def go() -> None:
        clock = Clock()
        pool = EndpointPool(["http://a", "http://b"], clock=clock)
        with pytest.raises(EndpointFailure):
            async with pool.acquire(exclude=frozenset({1})):
                raise EndpointFailure("HTTP 429", answered=True, retry_after=600)
        for _ in range(3):
            assert await _index_of_next(pool, frozenset()) == 1
        with pytest.raises(NoEndpointAvailable) as held:
            await _index_of_next(pool, frozenset({1}))
        assert held.value.retry_after == 600 and "Retry-After" in str(held.value)
        clock.now = 600.0
        assert await _index_of_next(pool, frozenset({1})) == 0

    run(go())


async def _index_of_next(pool: EndpointPool, exclude: frozenset[int]) -> int:
    async with pool.acquire(exclude) as lease:
        return lease.index


# ---------------------------------------------------------------- real servers


def test_least_in_flight_keeps_every_server_within_its_share() -> None:
    """32 requests at a time over 4 servers of 8 slots, one of them 10 times slower:
    least-in-flight never gives a server more than 32/4 = 8 requests at once, so none ever
    queues; the slow one gets fewer requests (round robin would give each 100 and pile
    requests up at the slow one)."""

    async def go() -> None:
        servers = [await LimitedServer(8, latency).start() for latency in (0.002, 0.002, 0.002, 0.02)]
        pool = EndpointPool([s.url for s in servers])
        try:
            async with client() as session:
                results = await drive(pool, session, 400, 32, RetryPolicy(retries=0))
        finally:
            for server in servers:
                await server.stop()
        assert [reply for reply, _ in results] == [f"task {i}" for i in range(400)]
        assert all(attempts == 1 for _, attempts in results)
        assert sum(s.served for s in servers) == 400
        assert [s.requests for s in pool.stats()] == [s.served for s in servers]
        assert max(s.peak for s in servers) <= 8
        assert [s.in_flight for s in pool.stats()] == [0, 0, 0, 0]
        assert servers[3].served < min(s.served for s in servers[:3])

    run(go())


def test_a_server_that_holds_its_requests_gets_only_its_share() -> None:
    """Server b answers nothing until the end: with 8 requests at a time over a and b, b
    holds exactly 8/2 = 4 and a serves every other task meanwhile."""

    async def go() -> None:
        gate = asyncio.Event()
        fast = await LimitedServer(8).start()
        held = await LimitedServer(8, gate=gate).start()
        pool = EndpointPool([fast.url, held.url])
        seen: list[tuple[int, int, int]] = []

        async def on_done(done: int) -> None:
            if done == 36:  # every task not held by b
                seen.append((fast.served, held.received, pool.stats()[1].in_flight))
                gate.set()

        try:
            async with client() as session:
                results = await drive(pool, session, 40, 8, RetryPolicy(retries=0), on_done)
        finally:
            await fast.stop()
            await held.stop()
        assert seen == [(36, 4, 4)]
        assert all(reply == f"task {i}" for i, (reply, _) in enumerate(results))

    run(go())


def test_a_server_killed_mid_run_costs_no_task() -> None:
    async def go() -> None:
        servers = [await LimitedServer(8, 0.005).start() for _ in range(3)]
        pool = EndpointPool([s.url for s in servers], cooldown=Cooldown(base=30, cap=30))
        killed_at: list[int] = []

        async def on_done(done: int) -> None:
            if done == 100:
                await servers[2].stop()
                # Counted once the stop is over: a request may still arrive while it closes.
                killed_at.append(servers[2].received)

        async with client() as session:
            results = await drive(pool, session, 300, 16, RetryPolicy(retries=2, backoff=0.01), on_done)
        for server in servers[:2]:
            await server.stop()
        assert [reply for reply, _ in results] == [f"task {i}" for i in range(300)]
        assert servers[2].received == killed_at[0]  # nothing reached it after it died
        dead = pool.stats()[2]
        assert dead.failures >= 1 and dead.set_aside
        # Only requests in flight at the kill (at most 16/3 -> 6) may have cost an attempt.
        assert sum(attempts for _, attempts in results) - 300 <= 6
        assert servers[0].served + servers[1].served + servers[2].served >= 300

    run(go())


def test_a_url_that_refuses_from_the_start_costs_no_task() -> None:
    async def go() -> None:
        live = [await LimitedServer(8, 0.002).start() for _ in range(2)]
        dead_url = f"http://127.0.0.1:{refused_port()}/v1"
        pool = EndpointPool([dead_url, live[0].url, live[1].url], cooldown=Cooldown(base=0.05, cap=0.2))
        try:
            async with client() as session:
                # No retry at all: a single counted failure would fail a task.
                results = await drive(pool, session, 120, 8, RetryPolicy(retries=0))
        finally:
            for server in live:
                await server.stop()
        assert [(reply, attempts) for reply, attempts in results] == [(f"task {i}", 1) for i in range(120)]
        dead, *alive = pool.stats()
        assert dead.requests == dead.failures >= 1
        assert live[0].served + live[1].served == 120  # no request answered twice
        assert [s.requests for s in alive] == [s.served for s in live]

    run(go())


def test_every_url_dead_fails_as_fast_as_one_dead_url() -> None:
    async def go() -> None:
        urls = [f"http://user:hunter2@127.0.0.1:{refused_port()}/v1" for _ in range(2)]
        pool = EndpointPool(urls, cooldown=Cooldown(base=60), label="provider 'vllm'")
        async with client() as session:
            with pytest.raises(EndpointFailure) as first:
                await pool.run(sender(session, "q"))
            policy = RetryPolicy(retries=2, backoff=0.001)
            with pytest.raises(ProviderError) as third:
                await call_with_retries(lambda: pool.run(sender(session, "q")), policy)
        assert first.value.transient and "cannot connect" in str(first.value)
        # Each attempt tried every URL at once (no wait for a cooldown): 1 + 3 attempts.
        assert isinstance(third.value, EndpointFailure) and third.value.attempts == 3
        assert [(s.requests, s.failures) for s in pool.stats()] == [(4, 4), (4, 4)]

    run(go())


# ---------------------------------------------------------------- a misbehaving server among healthy ones


@pytest.mark.parametrize("behaviour", ["500", "garbage", "badjson", "429:600", "endless"])
def test_a_misbehaving_server_beside_a_healthy_one_costs_no_task(tmp_path: Path, behaviour: str) -> None:
    with FakeServer(reply="b") as bad, FakeServer(reply="b") as healthy:
        bad.set_faults({}, default=behaviour)
        root = make_project(tmp_path, n=20)  # 2 setups: 40 tasks
        (root / "config.toml").write_text(
            f'[providers.oa]\ntype = "OpenAI"\nurl = ["{bad.url}/v1", "{healthy.url}/v1"]\nkey = "k"\n\n'
            f'[providers.ol]\ntype = "Ollama"\nurl = ["{bad.url}", "{healthy.url}"]\n'
        )
        result = invoke(bench_args(root, "-p", "4", "--timeout", "60"))
        assert result.exit_code == 0, result.stderr
        assert "0 error(s)" in result.stderr and "40 ok" in result.stderr
        assert len(healthy.chat_requests()) == 40
        if behaviour.startswith("429"):  # held for its Retry-After: asked once per provider
            assert len(bad.chat_requests()) <= 2 * 4

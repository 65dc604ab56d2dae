"""Providers against the loopback fake server (the real OpenAI and Ollama wire formats),
and the retry policy (formula, Retry-After, exhaustion)."""

from __future__ import annotations

import asyncio
import email.utils
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kag.generation.config import OllamaProvider, OpenAIProvider
from kag.generation.providers import ChatRequest, OllamaClient, OpenAIClient, open_provider
from kag.generation.retry import (
    ProviderError,
    RetryPolicy,
    call_with_retries,
    parse_retry_after,
    retry_delay,
)
from kag.results import Usage
from tests.bench_helpers import fresh, server_fixture
from tests.fakeserver import FakeServer, fake_embedding, make_certificate

REQUEST = ChatRequest("tiny", "Which key? MARK", 0.0, 32)


server = server_fixture("B")


@pytest.fixture(autouse=True)
def _reset(server: FakeServer) -> None:
    fresh(server)


def openai(server: FakeServer, key: str = "sk-test", timeout: float = 5.0) -> OpenAIClient:
    return OpenAIClient(OpenAIProvider("o", key, f"{server.url}/v1"), timeout, 4)


def ollama(server: FakeServer, timeout: float = 5.0) -> OllamaClient:
    return OllamaClient(OllamaProvider("l", server.url), timeout, 4)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _call(client: Any, method: str, *args: Any) -> Any:
    try:
        return await getattr(client, method)(*args)
    finally:
        await client.aclose()


# ---------------------------------------------------------------- wire formats


def test_openai_chat_request_and_reply(server: FakeServer) -> None:
    response = run(_call(openai(server), "chat", REQUEST))
    assert response.text == "B"
    assert response.usage == Usage(prompt_tokens=3, completion_tokens=1)  # the fake counts words
    (logged,) = server.requests
    assert logged.path == "/v1/chat/completions"
    assert logged.authorization == "Bearer sk-test"
    assert logged.body == {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Which key? MARK"}],
        "temperature": 0.0,
        "max_tokens": 32,
    }


def test_openai_without_key_sends_no_authorization_and_no_max_tokens(server: FakeServer) -> None:
    run(_call(openai(server, key=""), "chat", ChatRequest("tiny", "hi", 0.7)))
    (logged,) = server.requests
    assert logged.authorization is None
    assert logged.body is not None and "max_tokens" not in logged.body and logged.body["temperature"] == 0.7


def test_ollama_chat_sends_num_ctx_and_no_stream(server: FakeServer) -> None:
    response = run(_call(ollama(server), "chat", REQUEST))
    assert response.text == "B" and response.usage == Usage(3, 1)
    (logged,) = server.requests
    assert logged.path == "/api/chat"
    assert logged.body == {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Which key? MARK"}],
        "stream": False,
        "options": {"temperature": 0.0, "num_ctx": 32},
    }


@pytest.mark.parametrize("make", [openai, ollama])
def test_embeddings_in_input_order(server: FakeServer, make: Any) -> None:
    texts = ["alpha", "beta", "gamma"]
    vectors = run(_call(make(server), "embed", "emb-model", texts))
    assert vectors == [fake_embedding(t) for t in texts]
    (logged,) = server.requests
    assert logged.texts == texts and logged.model == "emb-model"


def test_open_provider_picks_the_client(server: FakeServer) -> None:
    client = open_provider(OllamaProvider("l", server.url), 1.0, 1)
    assert isinstance(client, OllamaClient)
    run(client.aclose())


@pytest.mark.parametrize("make", [openai, ollama])
def test_connections_are_kept_alive_and_bounded(server: FakeServer, make: Any) -> None:
    """Sequential calls share one connection; 20 concurrent calls with 4 slots use at most
    4 connections (the session's pool)."""
    client = make(server)  # 4 connection slots

    async def go() -> list[str]:
        try:
            for i in range(5):
                await client.chat(ChatRequest("m", f"seq {i}", 0.0))
            server.state.latency = 0.1
            return [
                r.text
                for r in await asyncio.gather(
                    *(client.chat(ChatRequest("m", f"p{i}", 0.0)) for i in range(20))
                )
            ]
        finally:
            server.state.latency = 0.0
            await client.aclose()

    assert run(go()) == ["B"] * 20
    sequential = {r.connection for r in server.requests[:5]}
    concurrent = {r.connection for r in server.requests[5:]}
    assert len(sequential) == 1 and 1 <= len(concurrent) <= 4 and len(server.requests) == 25


@pytest.mark.parametrize("behaviour", ["chunked", "gzip", "eofbody", "closeafter"])
@pytest.mark.parametrize("make", [openai, ollama])
def test_body_framings_and_a_dropped_idle_connection(server: FakeServer, make: Any, behaviour: str) -> None:
    """Chunked, gzip and close-delimited bodies parse; after `closeafter` the pooled
    connection is dead, and the next call quietly uses a new one."""
    server.set_faults({"FRAME": [behaviour]})
    client = make(server)

    async def go() -> list[str]:
        try:
            first = await client.chat(ChatRequest("m", "FRAME", 0.0))
            while behaviour in ("eofbody", "closeafter") and (
                server.requests[-1].connection not in server.state.closed_ports
            ):
                await asyncio.sleep(0.005)  # let the server finish closing
            second = await client.chat(ChatRequest("m", "plain", 0.0))
            return [first.text, second.text]
        finally:
            await client.aclose()

    assert run(go()) == ["B", "B"]
    assert [r.behaviour for r in server.requests] == [behaviour, "ok"]


def test_a_connection_the_server_closed_is_not_reused(server: FakeServer) -> None:
    """The server closes each connection right after its reply (no `Connection: close`):
    the pool sees the close before reuse, so every call succeeds at its first attempt
    (no retries allowed) on a new connection."""
    server.set_faults({}, default="closeafter")
    client = openai(server)

    async def go() -> list[tuple[str, int]]:
        out = []
        try:
            for i in range(4):
                response, attempts = await call_with_retries(
                    lambda i=i: client.chat(ChatRequest("m", f"q{i}", 0.0)), RetryPolicy(retries=0)
                )
                out.append((response.text, attempts))
                while server.requests[-1].connection not in server.state.closed_ports:
                    await asyncio.sleep(0.005)  # until the server has really closed it
            return out
        finally:
            await client.aclose()

    assert run(go()) == [("B", 1)] * 4
    assert len({r.connection for r in server.requests}) == 4 and len(server.requests) == 4


def test_a_reused_connection_closed_after_the_request_is_an_attempt_not_a_silent_resend(
    server: FakeServer,
) -> None:
    """The server reads the second request on a kept-alive connection and closes it without
    a reply. It may have acted on the request (a crash after generating, a proxy), so the
    client must not send it again on its own: with no retries allowed the call fails
    (transient, naming the URL) and the server saw the request once; with one retry the
    policy sends it again, and the two attempts are counted."""
    server.set_faults({"FIRST": ["dropnext"], "AGAIN": ["dropnext"]})
    client = openai(server)

    async def go(first: str, retries: int) -> tuple[str, int]:
        try:
            await client.chat(ChatRequest("m", first, 0.0))
            response, attempts = await call_with_retries(
                lambda: client.chat(ChatRequest("m", "second", 0.0)),
                RetryPolicy(retries=retries),
                sleep=_no_wait,
            )
            return response.text, attempts
        finally:
            await client.aclose()

    with pytest.raises(ProviderError) as info:
        run(go("FIRST", 0))
    assert info.value.transient and info.value.attempts == 1
    assert str(info.value).startswith(f"connection to {server.url}/v1/chat/completions failed: ")
    assert [(r.behaviour, r.prompt) for r in server.requests] == [
        ("dropnext", "FIRST"),
        ("dropped", "second"),
    ]

    client = openai(server)
    assert run(go("AGAIN", 1)) == ("B", 2)
    first, dropped, resent = server.requests[2:]
    assert (first.behaviour, dropped.behaviour, resent.behaviour) == ("dropnext", "dropped", "ok")
    assert dropped.prompt == resent.prompt == "second"
    assert first.connection == dropped.connection != resent.connection


async def _no_wait(seconds: float) -> None:
    return None


def test_a_new_connection_closed_without_a_reply_is_not_resent(server: FakeServer) -> None:
    """The same clean close on a connection that was not reused is a transient failure for
    the retry policy: the client does not resend it on its own."""
    server.set_faults({"MARK": ["noreply"]})
    with pytest.raises(ProviderError) as info:
        run(_call(openai(server), "chat", REQUEST))
    assert info.value.transient
    assert str(info.value).startswith(f"connection to {server.url}/v1/chat/completions failed: ")
    assert [r.behaviour for r in server.requests] == ["noreply"]


def test_a_close_the_event_loop_has_not_read_yet_costs_at_most_one_attempt(server: FakeServer) -> None:
    """The server closes each connection after its reply, and the client's event loop is
    kept busy until the close has happened, so the pool still holds the dead connection
    when the next request takes it. Either aiohttp finds the connection closed when it
    comes to write the request (resent at once, on a new connection, no attempt counted),
    or the request goes out and meets a clean end of stream (the server's FIN is read
    before its reset), which the client cannot tell from a server that acted on it: one
    attempt for the retry policy. Every call succeeds with one retry allowed, and the
    server, whose socket was closed, sees each request exactly once."""
    import time

    server.set_faults({}, default="closeafter")
    client = openai(server)

    async def go() -> list[tuple[str, int]]:
        try:
            out = []
            for i in range(4):
                response, attempts = await call_with_retries(
                    lambda i=i: client.chat(ChatRequest("m", f"q{i}", 0.0)),
                    RetryPolicy(retries=1),
                    sleep=_no_wait,
                )
                out.append((response.text, attempts))
                deadline = time.monotonic() + 60  # a hang guard
                while server.requests[-1].connection not in server.state.closed_ports:
                    assert time.monotonic() < deadline, "the server did not close the connection"
                    time.sleep(0.005)  # noqa: ASYNC251 - blocks the loop on purpose: the FIN stays unread
            return out
        finally:
            await client.aclose()

    results = run(go())
    assert [text for text, _ in results] == ["B"] * 4
    assert all(attempts in (1, 2) for _, attempts in results)
    assert [r.prompt for r in server.requests] == ["q0", "q1", "q2", "q3"]
    assert len({r.connection for r in server.requests}) == 4


def test_https_goes_through_the_same_client_and_checks_certificates(
    server: FakeServer, tmp_path: Path
) -> None:
    """An HTTPS server whose self-signed certificate is not trusted: the TLS handshake fails
    the certificate check, a transient connect error naming the URL; nothing is sent."""
    cert, key = make_certificate(tmp_path)
    with FakeServer(tls=(cert, key)) as tls:
        assert tls.url.startswith("https://")
        with pytest.raises(ProviderError) as info:
            run(_call(openai(tls), "chat", REQUEST))
        assert info.value.transient
        assert str(info.value).startswith(f"cannot connect to {tls.url}/v1/chat/completions: ")
        assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
        assert tls.requests == []


def test_aiohttp_is_imported_only_when_a_request_is_sent(server: FakeServer) -> None:
    """The CLI, the runner and an opened provider do not import aiohttp (`kag --help` stays
    fast); the first request does."""
    code = (
        "import sys, asyncio, kag.cli, kag.commands.benchmark, kag.generation.runner,"
        " kag.generation.generator, kag.generation.plan\n"
        "from kag.generation.config import OllamaProvider\n"
        "from kag.generation.providers import ChatRequest, open_provider\n"
        f"client = open_provider(OllamaProvider('l', {server.url!r}), 5.0, 1)\n"
        "print('aiohttp' in sys.modules)\n"
        "async def go():\n"
        "    try:\n"
        "        return (await client.chat(ChatRequest('m', 'hi', 0.0))).text\n"
        "    finally:\n"
        "        await client.aclose()\n"
        "print(asyncio.run(go()), 'aiohttp' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n") == ["False", "B True", ""]


# ---------------------------------------------------------------- failures, classified


@pytest.mark.parametrize(
    ("behaviour", "transient", "fragment"),
    [
        ("500", True, "HTTP 500 Internal Server Error from http://127.0.0.1:"),
        ("503", True, "HTTP 503 Service Unavailable"),
        ("429", True, "HTTP 429 Too Many Requests"),
        ("404", False, "HTTP 404 Not Found"),
        ("400", False, "injected HTTP 400"),
        ("401", False, "HTTP 401 Unauthorized"),
        ("truncate", True, "connection to http://127.0.0.1:"),
        ("reset", True, "connection to http://127.0.0.1:"),
        ("badjson", True, "is not valid JSON"),
        ("garbage", True, "malformed HTTP response"),
        ("empty", False, "unexpected reply from"),
        ("hang", True, "no complete reply from"),
    ],
)
@pytest.mark.parametrize("make", [openai, ollama])
def test_failures_are_classified(
    server: FakeServer, make: Any, behaviour: str, transient: bool, fragment: str
) -> None:
    server.set_faults({"MARK": [behaviour]})
    # Only the hang needs a short timeout; the others answer at once, and a loaded machine
    # must not turn their reply into a timeout.
    timeout = 0.3 if behaviour == "hang" else 30.0
    with pytest.raises(ProviderError) as info:
        run(_call(make(server, timeout=timeout), "chat", REQUEST))
    assert info.value.transient is transient
    assert fragment in str(info.value)


def test_retry_after_is_read_from_429(server: FakeServer) -> None:
    server.set_faults({"MARK": ["429:7"]})
    with pytest.raises(ProviderError) as info:
        run(_call(openai(server), "chat", REQUEST))
    assert info.value.retry_after == 7.0


def test_connection_refused_is_transient() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OllamaClient(OllamaProvider("l", f"http://127.0.0.1:{port}"), 2.0, 1)
    with pytest.raises(ProviderError) as info:
        run(_call(client, "chat", REQUEST))
    assert info.value.transient and "cannot connect to" in str(info.value)


def test_embedding_replies_are_checked() -> None:
    from kag.generation.providers import _vectors

    assert _vectors("u", [[1, 2.5]], 1) == [[1.0, 2.5]]
    for bad, count in (([[1.0]], 2), (None, 1), ([["x"]], 1), ([[True]], 1)):
        with pytest.raises(ProviderError) as info:
            _vectors("u", bad, count)
        assert not info.value.transient and "unexpected reply from u" in str(info.value)


# ---------------------------------------------------------------- retry policy


def test_retry_delay_formula_hand_computed() -> None:
    policy = RetryPolicy(retries=5, backoff=1.0, max_backoff=6.0)
    # d = min(6, 1 * 2**(n-1)); delay = d/2 + u*d/2
    assert retry_delay(policy, 1, None, 0.0) == 0.5
    assert retry_delay(policy, 1, None, 0.5) == 0.75
    assert retry_delay(policy, 3, None, 1.0) == 4.0
    assert retry_delay(policy, 4, None, 0.0) == 3.0  # capped: d = 6
    assert retry_delay(policy, 10, None, 0.5) == 4.5
    assert retry_delay(policy, 1, 2.5, 0.9) == 2.5  # Retry-After wins
    assert retry_delay(RetryPolicy(max_retry_after=10.0), 1, 3600.0, 0.0) == 10.0


@given(
    st.integers(min_value=1, max_value=60),
    st.floats(min_value=0.0, max_value=10.0),
    st.floats(min_value=0.0, max_value=100.0),
    st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
)
def test_retry_delay_stays_within_the_jitter_window(
    retry: int, backoff: float, cap: float, unit: float
) -> None:
    policy = RetryPolicy(backoff=backoff, max_backoff=cap)
    ceiling = min(cap, backoff * 2 ** (retry - 1))
    delay = retry_delay(policy, retry, None, unit)
    assert ceiling / 2 <= delay <= ceiling + 1e-12
    assert delay <= cap + 1e-12


def test_parse_retry_after() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None
    assert parse_retry_after(email.utils.formatdate(now + 30, usegmt=True), now=now) == 30.0
    assert parse_retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0


class Flaky:
    def __init__(self, errors: list[ProviderError]) -> None:
        self.errors = errors
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def _retries(flaky: Flaky, policy: RetryPolicy) -> tuple[Any, list[float], list[int]]:
    slept: list[float] = []
    seen: list[int] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    def on_retry(attempt: int, delay: float, error: ProviderError) -> None:
        seen.append(attempt)

    async def go() -> Any:
        return await call_with_retries(flaky, policy, on_retry, sleep=sleep, draw=lambda: 0.0)

    return asyncio.run(go()), slept, seen


def test_retries_then_success_counts_attempts_and_honours_retry_after() -> None:
    flaky = Flaky(
        [
            ProviderError("500", transient=True),
            ProviderError("429", transient=True, retry_after=2.0),
        ]
    )
    (value, attempts), slept, seen = _retries(flaky, RetryPolicy(retries=3, backoff=1.0))
    assert (value, attempts, flaky.calls) == ("done", 3, 3)
    assert slept == [0.5, 2.0] and seen == [1, 2]


def test_exhausted_retries_raise_the_last_error_with_attempts() -> None:
    flaky = Flaky([ProviderError(f"e{i}", transient=True) for i in range(10)])
    with pytest.raises(ProviderError) as info:
        _retries(flaky, RetryPolicy(retries=2, backoff=1.0))
    assert info.value.message == "e2" and info.value.attempts == 3 and flaky.calls == 3


def test_permanent_errors_are_not_retried() -> None:
    flaky = Flaky([ProviderError("404", transient=False)])
    with pytest.raises(ProviderError) as info:
        _retries(flaky, RetryPolicy(retries=5))
    assert info.value.attempts == 1 and flaky.calls == 1


def test_zero_retries_means_one_attempt() -> None:
    flaky = Flaky([ProviderError("500", transient=True)])
    with pytest.raises(ProviderError):
        _retries(flaky, RetryPolicy(retries=0))
    assert flaky.calls == 1


def test_retry_against_the_server_honours_retry_after(server: FakeServer) -> None:
    """The server sees the retry no sooner than its Retry-After (a lower bound only)."""
    server.set_faults({"MARK": ["429:0.4", "ok"]})

    async def go() -> tuple[Any, int]:
        client = openai(server)
        try:
            return await call_with_retries(lambda: client.chat(REQUEST), RetryPolicy(retries=1, backoff=0.0))
        finally:
            await client.aclose()

    response, attempts = run(go())
    assert response.text == "B" and attempts == 2
    first, second = server.requests
    assert (first.behaviour, second.behaviour) == ("429:0.4", "ok")
    assert second.time - first.time >= 0.39


# ---------------------------------------------------------------- FastEmbed (in-process)


def test_fastembed_provider_embeds_in_process_and_cannot_chat() -> None:
    """The bundled MiniLM through the FastEmbed provider: unit vectors, in input order,
    the same text twice gives the same vector; asking it to generate is a permanent error."""
    from kag.generation.config import FastEmbedProvider
    from kag.generation.providers import FastEmbedClient

    client = FastEmbedClient(FastEmbedProvider("fe", None))

    async def go() -> list[list[float]]:
        try:
            return await client.embed("", ["scurvy and vitamin C", "insulin", "scurvy and vitamin C"])
        finally:
            await client.aclose()

    vectors = run(go())
    assert len(vectors) == 3 and all(len(v) == 384 for v in vectors)
    assert all(abs(sum(x * x for x in v) - 1.0) < 1e-5 for v in vectors)
    assert vectors[0] == pytest.approx(vectors[2]) and vectors[0] != pytest.approx(vectors[1])
    with pytest.raises(ProviderError) as info:
        run(client.chat(REQUEST))
    assert not info.value.transient and "cannot generate text" in str(info.value)


@pytest.mark.parametrize("make", [openai, ollama])
def test_a_lone_surrogate_in_the_reply_is_permanent_and_sent_once(make: Any) -> None:
    with FakeServer(reply="\ud800 half a pair") as fake:
        client = make(fake)

        async def go() -> Any:
            try:
                return await call_with_retries(
                    lambda: client.chat(REQUEST), RetryPolicy(retries=3, backoff=0)
                )
            finally:
                await client.aclose()

        with pytest.raises(ProviderError) as info:
            run(go())
        assert len(fake.chat_requests()) == 1
    assert info.value.transient is False and info.value.attempts == 1
    assert "lone surrogate" in str(info.value)


def test_bodies_that_are_not_json_are_still_retried(server: FakeServer) -> None:
    server.set_faults({"MARK": ["badjson", "ok"]})
    client = openai(server)

    async def go() -> Any:
        try:
            return await call_with_retries(lambda: client.chat(REQUEST), RetryPolicy(retries=3, backoff=0))
        finally:
            await client.aclose()

    response, attempts = run(go())
    assert response.text == "B" and attempts == 2


# ---------------------------------------------------------------- several URLs


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_bad_reply_names_the_endpoint_that_sent_it(server: FakeServer) -> None:
    dead = f"http://127.0.0.1:{_dead_port()}/v1"
    client = OpenAIClient(OpenAIProvider("o", "", dead, urls=(dead, f"{server.url}/v1")), 5.0, 4)
    server.set_faults({}, default="empty")
    with pytest.raises(ProviderError) as info:
        run(_call(client, "chat", REQUEST))
    assert (
        str(info.value)
        == f"unexpected reply from {server.url}/v1/chat/completions: no 'choices[0].message.content' text"
    )
    assert [(s.requests, s.failures) for s in client.endpoint_stats()] == [(1, 1), (1, 0)]


def test_every_url_unreachable_is_one_failure_naming_a_url_without_its_credentials() -> None:
    urls = (f"http://bob:pw-4242@127.0.0.1:{_dead_port()}/v1", f"http://127.0.0.1:{_dead_port()}/v1")
    client = OpenAIClient(OpenAIProvider("o", "", urls[0], urls=urls), 5.0, 4)
    with pytest.raises(ProviderError) as info:
        run(_call(client, "chat", REQUEST))
    assert info.value.transient and str(info.value).startswith("cannot connect to http://127.0.0.1:")
    stats = client.endpoint_stats()
    assert [(s.requests, s.failures, s.set_aside) for s in stats] == [(1, 1, True), (1, 1, True)]
    assert stats[0].url.startswith("http://***@127.0.0.1:") and "pw-4242" not in repr(stats)


def test_a_slow_reply_counts_as_an_attempt_and_sets_nothing_aside(server: FakeServer) -> None:
    other = f"http://127.0.0.1:{_dead_port()}/v1"
    client = OpenAIClient(
        OpenAIProvider("o", "", f"{server.url}/v1", urls=(f"{server.url}/v1", other)), 0.3, 4
    )
    server.set_faults({}, default="slow:2")
    with pytest.raises(ProviderError) as info:
        run(_call(client, "chat", REQUEST))
    assert str(info.value) == f"no complete reply from {server.url}/v1/chat/completions within 0.3 s"
    first = client.endpoint_stats()[0]
    assert (first.requests, first.failures, first.set_aside) == (1, 0, False)
    assert client.endpoint_stats()[1].requests == 0  # not resent elsewhere: the attempt counts


def test_no_connection_within_the_deadline_sets_the_endpoint_aside(server: FakeServer) -> None:
    # A listener whose accept queue is full: the kernel drops further SYNs, the connect hangs.
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        port = full.getsockname()[1]
        fillers: list[socket.socket] = []
        for _ in range(8):  # connect until the queue is full (a connect times out)
            try:
                fillers.append(socket.create_connection(("127.0.0.1", port), timeout=0.3))
            except TimeoutError:
                break
        else:
            pytest.skip("this kernel accepted every connection: no way to make a connect hang")
        try:
            stuck = f"http://127.0.0.1:{port}/v1"
            client = OpenAIClient(OpenAIProvider("o", "", stuck, urls=(stuck, f"{server.url}/v1")), 0.5, 4)
            response = run(_call(client, "chat", REQUEST))
        finally:
            for sock in fillers:
                sock.close()
    assert response.text == "B"
    stats = client.endpoint_stats()
    assert [(s.requests, s.failures) for s in stats] == [(1, 1), (1, 0)] and stats[0].set_aside


@pytest.mark.parametrize("behaviour", ["endless", f"huge:{80 * 1024 * 1024}"])
def test_a_reply_past_the_size_cap_is_a_clear_error_read_no_further(
    server: FakeServer, behaviour: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kag.generation import providers

    monkeypatch.setattr(providers, "MAX_REPLY_BYTES", 1 << 20)  # the same rule at 1 MiB
    server.set_faults({}, default=behaviour)
    with pytest.raises(ProviderError) as caught:
        run(_call(openai(server, timeout=60), "chat", ChatRequest("m", "hi", 0.0)))
    assert "is larger than the 1 MiB cap for a reply" in str(caught.value)
    if behaviour.startswith("huge"):
        assert f"it announced {80 * 1024 * 1024:,} bytes" in str(caught.value)

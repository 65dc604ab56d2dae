"""Providers against the loopback fake server (the real OpenAI and Ollama wire formats),
and the retry policy (formula, Retry-After, exhaustion)."""

from __future__ import annotations

import asyncio
import email.utils
import socket
from collections.abc import Iterator
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
from tests.fakeserver import FakeServer, fake_embedding

REQUEST = ChatRequest("tiny", "Which key? MARK", 0.0, 32)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with FakeServer(reply="B") as fake:
        yield fake


@pytest.fixture(autouse=True)
def _reset(server: FakeServer) -> None:
    server.reset()
    server.set_faults({}, default="ok")


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


def test_connections_are_spread_over_small_clients(server: FakeServer) -> None:
    """20 slots -> 3 clients of at most 7 connections; 20 concurrent calls all succeed and
    every client carries some (the least busy client takes each request)."""
    server.state.latency = 0.2
    client = OllamaClient(OllamaProvider("l", server.url), 5.0, 20)
    seen: list[int] = []

    async def one(i: int) -> str:
        index = min(range(len(client._clients)), key=client._busy.__getitem__)
        seen.append(index)
        return (await client.chat(ChatRequest("m", f"p{i}", 0.0))).text

    async def go() -> list[str]:
        try:
            return list(await asyncio.gather(*(one(i) for i in range(20))))
        finally:
            await client.aclose()

    try:
        assert run(go()) == ["B"] * 20
    finally:
        server.state.latency = 0.0
    assert len(client._clients) == 3 and set(seen) == {0, 1, 2}
    assert len(server.chat_requests()) == 20


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
        ("empty", False, "unexpected reply from"),
        ("hang", True, "no complete reply from"),
    ],
)
@pytest.mark.parametrize("make", [openai, ollama])
def test_failures_are_classified(
    server: FakeServer, make: Any, behaviour: str, transient: bool, fragment: str
) -> None:
    server.set_faults({"MARK": [behaviour]})
    with pytest.raises(ProviderError) as info:
        run(_call(make(server, timeout=0.3), "chat", REQUEST))
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

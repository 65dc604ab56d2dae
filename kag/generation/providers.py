"""Model providers: one client per configured provider for the whole run.

- ``Ollama``: native API, ``POST /api/chat`` (``stream: false``; ``tokens`` is sent as
  ``options.num_ctx`` (see compatibility in docs/architecture.md), ``max_tokens`` as
  ``options.num_predict``, the other settings under their own names in ``options``, the
  setup's ``options`` table merged last) and ``POST /api/embed``;
- ``OpenAI``: any OpenAI-compatible server, ``POST <url>/chat/completions`` (``tokens`` and
  ``max_tokens`` are ``max_tokens``, the other settings body keys of their own names, the
  setup's ``extra_body`` table merged last) and ``POST <url>/embeddings``;
- ``FastEmbed``: in-process ONNX embeddings (``kag.embedding``) run in a worker thread;
  it cannot generate.

The prompt goes as one user message (see compatibility in docs/architecture.md), after the
setup's ``system`` message when it has one. Each method makes one attempt and raises
``ProviderError`` (transient or not); retries live in ``retry``. aiohttp is imported when a
provider sends its first request, not with this module.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from kag.generation.config import (
    NO_SETTINGS,
    FastEmbedProvider,
    GenerationSettings,
    OllamaProvider,
    OpenAIProvider,
    ProviderConfig,
)
from kag.generation.endpoints import EndpointFailure, EndpointPool, EndpointStats
from kag.generation.retry import ProviderError, parse_retry_after
from kag.generation.secrets import Redactor, display_url, url_credentials
from kag.results import MAX_RESULT_BYTES, Usage

if TYPE_CHECKING:
    import aiohttp

MAX_ERROR_BODY = 300
# What is redacted of an error body before it is cut to MAX_ERROR_BODY: far longer than any
# key can reach from inside the kept part, short enough that a 1 GB error page costs nothing.
REDACTED_WINDOW = 64 * 1024


@dataclass(frozen=True)
class ChatRequest:
    model: str
    prompt: str
    temperature: float
    tokens: int | None = None
    settings: GenerationSettings = NO_SETTINGS

    def messages(self) -> list[dict[str, str]]:
        """The setup's ``system`` message (when it has one), then the prompt as the user's."""
        system = self.settings.system
        head = [{"role": "system", "content": system}] if system is not None else []
        return [*head, {"role": "user", "content": self.prompt}]


# The settings sent under their own names: OpenAI-compatible body keys and Ollama options.
SHARED_SETTINGS = ("seed", "top_p", "top_k", "presence_penalty", "frequency_penalty")


def _shared(settings: GenerationSettings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in SHARED_SETTINGS:
        value = getattr(settings, name)
        if value is not None:
            out[name] = value
    if settings.stop is not None:
        out["stop"] = list(settings.stop)
    return out


@dataclass(frozen=True)
class ChatResponse:
    text: str
    usage: Usage | None = None


class Provider(Protocol):
    name: str

    async def chat(self, request: ChatRequest) -> ChatResponse: ...

    async def embed(self, model: str, texts: list[str]) -> list[list[float]]: ...

    async def aclose(self) -> None: ...


Redact = Callable[[str], str]


def _error_detail(content: bytes, redact: Redact) -> str:
    """The server's own error message when it sent one in JSON, else the body's start;
    redacted before it is cut to ``MAX_ERROR_BODY`` characters (a key straddling the cut
    would otherwise keep its first part)."""
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return redact(error["message"][:REDACTED_WINDOW])[:MAX_ERROR_BODY]
        if isinstance(error, str):
            return redact(error[:REDACTED_WINDOW])[:MAX_ERROR_BODY]
    text = redact(content[:REDACTED_WINDOW].decode("utf-8", "replace"))[:MAX_ERROR_BODY].strip()
    return text or "(empty body)"


def _lone_surrogate(content: bytes) -> bool:
    """Whether ``content`` is JSON that orjson refused only for a ``\\ud800``-style escape
    of a lone surrogate: valid JSON syntax (Python's parser takes it) but not Unicode text,
    so no retry can make it readable."""
    if b"\\u" not in content:
        return False
    try:
        json.loads(content)
    except (ValueError, RecursionError):
        return False
    return True


def _one_line(detail: object) -> str:
    """An exception's text on one line (aiohttp's parser errors span several, with a caret
    under the offending byte); an OSError without errno is its message alone, not
    "[Errno None] ..."."""
    if isinstance(detail, OSError) and detail.errno is None and detail.strerror:
        detail = detail.strerror
    return " ".join(str(detail).split()).removesuffix(" ^")


def _is_transient_status(status: int) -> bool:
    return status in (408, 425, 429) or status >= 500


#: Largest reply body read (bytes, after any content decoding): the size cap of a result
#: file, which a longer answer could not be stored in anyway. A server that streams an
#: endless body costs this much memory at most.
MAX_REPLY_BYTES = MAX_RESULT_BYTES


class _ReplyTooLarge(Exception):
    def __init__(self, size: int | None) -> None:
        super().__init__(size)
        self.size = size


async def _read_capped(response: aiohttp.ClientResponse) -> bytes:
    """The body of ``response``, read in chunks; _ReplyTooLarge as soon as it passes
    MAX_REPLY_BYTES (or announces a length past it), before the rest is read."""
    length = response.content_length
    if length is not None and length > MAX_REPLY_BYTES:
        raise _ReplyTooLarge(length)
    parts: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise _ReplyTooLarge(None)
        parts.append(chunk)
    return b"".join(parts)


def _too_large(url: str, exc: _ReplyTooLarge) -> str:
    announced = f" (it announced {exc.size:,} bytes)" if exc.size is not None else ""
    return f"the reply from {url} is larger than the {MAX_REPLY_BYTES // (1024 * 1024)} MiB cap for a reply{announced}"


@dataclass(frozen=True)
class _Reply:
    status: int
    reason: str
    retry_after: str | None
    content: bytes


# Whether the current task's last request went out on a pooled (reused) connection: set by
# the connector below in the task that sends the request, read by ``_exchange`` after a failure.
_reused: contextvars.ContextVar[bool] = contextvars.ContextVar("kag_connection_reused", default=False)
# Whether the current task's request got a connection at all: a deadline that passes before
# it did is an unreachable endpoint, one that passes after is a slow reply.
_connected: contextvars.ContextVar[bool] = contextvars.ContextVar("kag_connected", default=False)
_connector_class: type[aiohttp.TCPConnector] | None = None


def _make_connector(limit: int) -> aiohttp.TCPConnector:
    """An ``aiohttp.TCPConnector`` (at most ``limit`` connections) that records in
    ``_reused`` whether each connection it hands out was one it had handed out before."""
    global _connector_class
    if _connector_class is None:
        import aiohttp

        class ReuseAwareConnector(aiohttp.TCPConnector):
            def __init__(self, **kwargs: Any) -> None:
                super().__init__(**kwargs)
                self._seen: weakref.WeakSet[Any] = weakref.WeakSet()

            async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:
                connection = await super().connect(req, traces, timeout)
                protocol = connection.protocol
                _reused.set(protocol in self._seen)
                _connected.set(True)
                self._seen.add(protocol)
                return connection

        _connector_class = ReuseAwareConnector
    return _connector_class(limit=limit, limit_per_host=0, keepalive_timeout=KEEPALIVE_SECONDS)


def _not_sent(exc: BaseException) -> bool:
    """Whether a failed exchange provably did not deliver the request: aiohttp found the
    connection closed when it came to write it (``ClientConnectionResetError``, raised as
    such or as the cause of "Can not write request body"). A request that did not go out
    whole cannot have been acted on, so it may be sent again at once.

    A clean close after the request went out (``ServerDisconnectedError``) is not such a
    case: the server may have read the request, generated, and closed without a reply (a
    crash, a proxy, a graceful shutdown). That one is an attempt for the retry policy,
    counted and logged, never a silent second send.
    """
    import aiohttp

    reset = aiohttp.ClientConnectionResetError
    return isinstance(exc, reset) or isinstance(exc.__cause__, reset)


# aiohttp drops a connection idle for this long itself, before the usual idle timeouts of
# model servers (uvicorn, under llama.cpp's Python server and vLLM: 5 s) can cross a request.
KEEPALIVE_SECONDS = 4.0


class HttpProvider:
    """One ``aiohttp.ClientSession`` shared by every task of the run (opened on the first
    request, inside the running event loop), with at most ``connections`` keep-alive
    connections, a total deadline per request (``timeout`` seconds from sending the request
    to the last byte of the reply), no proxies from the environment, no redirects followed.

    ``base_urls`` (one URL or several servers of the same model) go into an
    ``EndpointPool``: each request goes to the endpoint with the fewest requests in flight.
    An endpoint that cannot be reached (refused, DNS, TLS, no connection within the
    deadline) is set aside for a while and the request goes to another one at once, within
    the same attempt of the retry policy. A connection lost after the request went out is
    an ``EndpointFailure`` that counts as an attempt (the server may have acted on it). A
    deadline that passes after the connection was made is a slow reply, not a dead server:
    a plain transient ProviderError, which counts as an attempt and sets nothing aside, so
    one prompt too long for the deadline cannot set every healthy endpoint aside in turn.

    A pooled connection that the server closed while it was idle is normally seen closed
    before reuse (the event loop reads the server's FIN and aiohttp drops it from the
    pool), and aiohttp itself drops connections idle for ``KEEPALIVE_SECONDS``, before the
    usual server idle timeouts. aiohttp resends requests after a dropped connection for
    idempotent methods only, and every call here is a POST: ``_exchange`` resends it once,
    on a new connection, only when the reused connection was found closed before the
    request went out (see ``_not_sent``). Anything else (a clean close after the request
    went out, a reset, a truncated reply) is a transient ProviderError: the retry policy
    decides, and the attempt counts.
    """

    def __init__(
        self,
        name: str,
        base_urls: str | Sequence[str],
        timeout: float,
        connections: int,
        headers: dict[str, str] | None = None,
        redact: Redact | None = None,
        secrets: frozenset[str] = frozenset(),
    ) -> None:
        urls = (base_urls,) if isinstance(base_urls, str) else tuple(base_urls)
        self.name = name
        self.base_url = urls[0]
        # Messages name the URL without its credentials; everything else a message quotes
        # (a server's echo, an aiohttp error) goes through the run's redactor and this
        # provider's own secrets, before any truncation.
        self.shown_url = display_url(urls[0])
        self._shown = {url: display_url(url) for url in urls}
        own = Redactor.of(secrets.union(*(url_credentials(url) for url in urls)))
        self._redact: Redact = own if redact is None else (lambda text: own(redact(text)))
        self.pool = EndpointPool(urls, label=f"provider {name!r}")
        self.timeout = timeout
        self.connections = max(1, connections)
        self._headers = {"content-type": "application/json", **(headers or {})}
        self._session: aiohttp.ClientSession | None = None  # opened in the running event loop

    def endpoint_stats(self) -> tuple[EndpointStats, ...]:
        """Requests and failures per endpoint (URLs redacted), in configuration order."""
        return self.pool.stats()

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        self._session = aiohttp.ClientSession(
            connector=_make_connector(self.connections),
            headers=self._headers,
            # The deadline is post_json's asyncio.timeout (one timer per request, covering
            # the body too); aiohttp's own timers would only duplicate it.
            timeout=aiohttp.ClientTimeout(total=None, connect=None, sock_read=None, sock_connect=None),
            trust_env=False,
        )
        return self._session

    async def _exchange(self, session: aiohttp.ClientSession, url: str, body: bytes) -> _Reply:
        import aiohttp

        for last in (False, True):
            _reused.set(False)
            try:
                async with session.post(url, data=body, allow_redirects=False) as response:
                    content = await _read_capped(response)
                    return _Reply(
                        response.status, response.reason or "", response.headers.get("retry-after"), content
                    )
            except aiohttp.ClientConnectionError as exc:
                if last or not (_reused.get() and _not_sent(exc)):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def post_json(self, path: str, payload: dict[str, Any]) -> tuple[Any, str]:
        """POST ``payload`` to an endpoint of the pool; the parsed JSON reply and the URL it
        came from (credentials hidden, for messages about the reply), or ProviderError (its
        message redacted)."""
        body = orjson.dumps(payload)
        try:
            return await self.pool.run(lambda base: self._post_once(base, path, body))
        except ProviderError as exc:
            exc.message = self._redact(exc.message)
            raise

    async def _post_once(self, base: str, path: str, body: bytes) -> tuple[Any, str]:
        target = f"{base}{path}"
        url = f"{self._shown.get(base) or display_url(base)}{path}"
        session = self._session or self._open()
        import aiohttp

        _connected.set(False)
        try:
            async with asyncio.timeout(self.timeout):
                reply = await self._exchange(session, target, body)
        except _ReplyTooLarge as exc:
            # The server's fault (another endpoint may answer in size): counts against it.
            raise EndpointFailure(_too_large(url, exc), answered=True) from None
        except TimeoutError:
            if not _connected.get():
                raise EndpointFailure(f"cannot connect to {url} within {self.timeout:g} s") from None
            raise ProviderError(
                f"no complete reply from {url} within {self.timeout:g} s", transient=True
            ) from None
        except aiohttp.ClientConnectorError as exc:
            cause = (
                exc.certificate_error
                if isinstance(exc, aiohttp.ClientConnectorCertificateError)
                else exc.os_error
            )
            raise EndpointFailure(
                f"cannot connect to {url}: {_one_line(cause) or type(exc).__name__}"
            ) from None
        except aiohttp.ClientResponseError as exc:
            # raise_for_status is off: this is a reply that is not HTTP (the server's fault).
            raise EndpointFailure(
                f"connection to {url} failed: malformed HTTP response: {_one_line(exc.message)}",
                answered=True,
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise EndpointFailure(
                f"connection to {url} failed: {_one_line(exc) or type(exc).__name__}", resend=_not_sent(exc)
            ) from None
        if reply.status >= 400:
            message = (
                f"HTTP {reply.status} {reply.reason} from {url}: {_error_detail(reply.content, self._redact)}"
            )
            if _is_transient_status(reply.status):  # the server's own trouble: another one may answer
                raise EndpointFailure(
                    message, answered=True, retry_after=parse_retry_after(reply.retry_after)
                )
            raise ProviderError(message, transient=False)
        try:
            return orjson.loads(reply.content), url
        except orjson.JSONDecodeError as exc:
            if _lone_surrogate(reply.content):
                # A complete reply the server would send again as it is: retrying cannot help.
                raise ProviderError(
                    f"the reply from {url} is not valid JSON text: it escapes a lone surrogate ({exc})",
                    transient=False,
                ) from None
            start = self._redact(reply.content[:REDACTED_WINDOW].decode("utf-8", "replace"))[:80]
            raise EndpointFailure(
                f"the reply from {url} is not valid JSON: {start!r}", answered=True
            ) from None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _bad_reply(url: str, what: str) -> ProviderError:
    return ProviderError(f"unexpected reply from {url}: {what}", transient=False)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _vectors(url: str, vectors: Any, count: int) -> list[list[float]]:
    if not isinstance(vectors, list) or len(vectors) != count:
        raise _bad_reply(url, f"expected {count} embedding(s)")
    out: list[list[float]] = []
    for vector in vectors:
        if not isinstance(vector, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in vector
        ):
            raise _bad_reply(url, "an embedding is not an array of numbers")
        out.append([float(x) for x in vector])
    return out


class OllamaClient(HttpProvider):
    def __init__(
        self, config: OllamaProvider, timeout: float, connections: int, redact: Redact | None = None
    ) -> None:
        super().__init__(config.name, config.urls, timeout, connections, redact=redact)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        settings = request.settings
        options: dict[str, Any] = {"temperature": request.temperature}
        if request.tokens is not None:
            options["num_ctx"] = request.tokens
        options |= _shared(settings)
        if settings.max_tokens is not None:
            options["num_predict"] = settings.max_tokens
        options |= settings.passthrough
        payload = {
            "model": request.model,
            "messages": request.messages(),
            "stream": False,
            "options": options,
        }
        data, url = await self.post_json("/api/chat", payload)
        message = data.get("message") if isinstance(data, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise _bad_reply(url, "no 'message.content' text")
        usage = Usage(_int_or_none(data.get("prompt_eval_count")), _int_or_none(data.get("eval_count")))
        return ChatResponse(content, usage if usage != Usage() else None)

    async def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        data, url = await self.post_json("/api/embed", {"model": model, "input": texts})
        return _vectors(url, data.get("embeddings") if isinstance(data, dict) else None, len(texts))


class OpenAIClient(HttpProvider):
    def __init__(
        self, config: OpenAIProvider, timeout: float, connections: int, redact: Redact | None = None
    ) -> None:
        headers = {"authorization": f"Bearer {config.key}"} if config.key else {}
        secrets = frozenset({config.key}) if config.key else frozenset()
        super().__init__(config.name, config.urls, timeout, connections, headers, redact, secrets)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        settings = request.settings
        payload: dict[str, Any] = {
            "model": request.model,
            "messages": request.messages(),
            "temperature": request.temperature,
        }
        if request.tokens is not None:
            payload["max_tokens"] = request.tokens
        payload |= _shared(settings)
        if settings.max_tokens is not None:
            payload["max_tokens"] = settings.max_tokens
        payload |= settings.passthrough
        data, url = await self.post_json("/chat/completions", payload)
        choices = data.get("choices") if isinstance(data, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise _bad_reply(url, "no 'choices[0].message.content' text")
        raw_usage = data.get("usage")
        usage = None
        if isinstance(raw_usage, dict):
            usage = Usage(
                _int_or_none(raw_usage.get("prompt_tokens")), _int_or_none(raw_usage.get("completion_tokens"))
            )
        return ChatResponse(content, usage)

    async def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        data, url = await self.post_json("/embeddings", {"model": model, "input": texts})
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise _bad_reply(url, "no 'data' array")
        ordered = sorted(items, key=lambda item: _int_or_none(item.get("index")) or 0)
        return _vectors(url, [item.get("embedding") for item in ordered], len(texts))


class FastEmbedClient:
    """Embeds in-process; one model loaded per name, on first use, in a worker thread."""

    def __init__(self, config: FastEmbedProvider) -> None:
        self.name = config.name
        self.model = config.model
        self._embedders: dict[str | None, Any] = {}
        self._lock = threading.Lock()

    def _embedder(self, model: str | None) -> Any:
        with self._lock:
            if model not in self._embedders:
                from kag.embedding import load_embedder

                self._embedders[model] = load_embedder(model)
            return self._embedders[model]

    def _embed_sync(self, model: str | None, texts: list[str]) -> list[list[float]]:
        matrix = self._embedder(model).embed(texts)
        return [[float(x) for x in row] for row in matrix]

    async def chat(self, request: ChatRequest) -> ChatResponse:
        raise ProviderError(f"provider {self.name!r} (FastEmbed) cannot generate text", transient=False)

    async def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        # The retriever's `model` wins; the provider's own `model` is the fallback.
        try:
            return await asyncio.to_thread(self._embed_sync, model or self.model, texts)
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 - EmbeddingError and onnxruntime failures alike
            raise ProviderError(f"FastEmbed provider {self.name!r}: {exc}", transient=False) from None

    async def aclose(self) -> None:
        self._embedders.clear()


def open_provider(
    config: ProviderConfig, timeout: float, connections: int, redact: Redact | None = None
) -> Provider:
    """A client for ``config``; ``connections`` bounds its HTTP connection pool; ``redact``
    (the run's redactor) cleans every error message before it is cut, on top of the
    provider's own key and URL credentials."""
    if isinstance(config, OllamaProvider):
        return OllamaClient(config, timeout, connections, redact)
    if isinstance(config, OpenAIProvider):
        return OpenAIClient(config, timeout, connections, redact)
    return FastEmbedClient(config)

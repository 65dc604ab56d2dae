"""Model providers: one client per configured provider for the whole run.

- ``Ollama``: native API, ``POST /api/chat`` (``stream: false``; ``tokens`` is sent as
  ``options.num_ctx`` as the Rust tool does) and ``POST /api/embed``;
- ``OpenAI``: any OpenAI-compatible server, ``POST <url>/chat/completions`` (``tokens`` is
  ``max_tokens``) and ``POST <url>/embeddings``;
- ``FastEmbed``: in-process ONNX embeddings (``kag.embedding``) run in a worker thread;
  it cannot generate.

The prompt goes as one user message, as the Rust tool sent it. Each method makes one
attempt and raises ``ProviderError`` (transient or not); retries live in ``retry``.
httpx is imported when a provider is opened, not with this module.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from kag.generation.config import FastEmbedProvider, OllamaProvider, OpenAIProvider, ProviderConfig
from kag.generation.retry import ProviderError, parse_retry_after
from kag.results import Usage

if TYPE_CHECKING:
    import httpx

MAX_ERROR_BODY = 300


@dataclass(frozen=True)
class ChatRequest:
    model: str
    prompt: str
    temperature: float
    tokens: int | None = None


@dataclass(frozen=True)
class ChatResponse:
    text: str
    usage: Usage | None = None


class Provider(Protocol):
    name: str

    async def chat(self, request: ChatRequest) -> ChatResponse: ...

    async def embed(self, model: str, texts: list[str]) -> list[list[float]]: ...

    async def aclose(self) -> None: ...


def _error_detail(response: httpx.Response) -> str:
    """The server's own error message when it sent one in JSON, else the body's start."""
    try:
        data = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:MAX_ERROR_BODY]
        if isinstance(error, str):
            return error[:MAX_ERROR_BODY]
    text = response.content[:MAX_ERROR_BODY].decode("utf-8", "replace").strip()
    return text or "(empty body)"


def _is_transient_status(status: int) -> bool:
    return status in (408, 425, 429) or status >= 500


def _import_httpx() -> Any:
    import importlib.util
    import sys

    # httpcore asks `import sniffio` on every request to learn the async library; anyio
    # >= 4.5 no longer installs sniffio, and a failed import walks sys.path each time
    # (~1 ms per request, the largest client cost measured). Caching the absence makes
    # the ImportError instant; an installed sniffio is left alone.
    if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
        sys.modules["sniffio"] = None  # type: ignore[assignment]
    import httpx

    return httpx


class HttpProvider:
    """One ``httpx.AsyncClient`` shared by every task of the run, with a total deadline per
    request (``timeout`` seconds from sending to the last byte of the reply) and at most
    ``connections`` connections. ``http://`` servers go through the lean ``StreamTransport``
    (see ``transport``: httpx's default one cost ~15x more CPU per request);
    ``https://`` ones through httpx's default transport."""

    def __init__(
        self,
        name: str,
        base_url: str,
        timeout: float,
        connections: int,
        headers: dict[str, str] | None = None,
    ) -> None:
        httpx = _import_httpx()
        from kag.generation.transport import make_transport

        self.name = name
        self.base_url = base_url
        self.timeout = timeout
        self._httpx = httpx
        self._client = httpx.AsyncClient(
            base_url=base_url,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            transport=make_transport(base_url, connections),
            headers={"content-type": "application/json", **(headers or {})},
            follow_redirects=False,
            trust_env=False,
        )

    async def post_json(self, path: str, payload: dict[str, Any]) -> Any:
        """POST ``payload``; the parsed JSON reply, or ProviderError."""
        httpx = self._httpx
        url = f"{self.base_url}{path}"
        try:
            async with asyncio.timeout(self.timeout):
                response = await self._client.post(path.lstrip("/"), content=orjson.dumps(payload))
        except (TimeoutError, httpx.TimeoutException):
            raise ProviderError(
                f"no complete reply from {url} within {self.timeout:g} s", transient=True
            ) from None
        except httpx.ConnectError as exc:
            raise ProviderError(
                f"cannot connect to {url}: {exc or type(exc).__name__}", transient=True
            ) from None
        except httpx.TransportError as exc:
            raise ProviderError(
                f"connection to {url} failed: {exc or type(exc).__name__}", transient=True
            ) from None
        if response.status_code >= 400:
            raise ProviderError(
                f"HTTP {response.status_code} {response.reason_phrase} from {url}: {_error_detail(response)}",
                transient=_is_transient_status(response.status_code),
                retry_after=parse_retry_after(response.headers.get("retry-after")),
            )
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError:
            start = response.content[:80].decode("utf-8", "replace")
            raise ProviderError(
                f"the reply from {url} is not valid JSON: {start!r}", transient=True
            ) from None

    async def aclose(self) -> None:
        await self._client.aclose()


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
    def __init__(self, config: OllamaProvider, timeout: float, connections: int) -> None:
        super().__init__(config.name, config.url, timeout, connections)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        options: dict[str, Any] = {"temperature": request.temperature}
        if request.tokens is not None:
            options["num_ctx"] = request.tokens
        payload = {
            "model": request.model,
            "messages": [{"role": "user", "content": request.prompt}],
            "stream": False,
            "options": options,
        }
        data = await self.post_json("/api/chat", payload)
        url = f"{self.base_url}/api/chat"
        message = data.get("message") if isinstance(data, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise _bad_reply(url, "no 'message.content' text")
        usage = Usage(_int_or_none(data.get("prompt_eval_count")), _int_or_none(data.get("eval_count")))
        return ChatResponse(content, usage if usage != Usage() else None)

    async def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        data = await self.post_json("/api/embed", {"model": model, "input": texts})
        url = f"{self.base_url}/api/embed"
        return _vectors(url, data.get("embeddings") if isinstance(data, dict) else None, len(texts))


class OpenAIClient(HttpProvider):
    def __init__(self, config: OpenAIProvider, timeout: float, connections: int) -> None:
        headers = {"authorization": f"Bearer {config.key}"} if config.key else {}
        super().__init__(config.name, config.url, timeout, connections, headers)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        payload: dict[str, Any] = {
            "model": request.model,
            "messages": [{"role": "user", "content": request.prompt}],
            "temperature": request.temperature,
        }
        if request.tokens is not None:
            payload["max_tokens"] = request.tokens
        data = await self.post_json("/chat/completions", payload)
        url = f"{self.base_url}/chat/completions"
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
        data = await self.post_json("/embeddings", {"model": model, "input": texts})
        url = f"{self.base_url}/embeddings"
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
        except Exception as exc:  # EmbeddingError and onnxruntime failures alike
            raise ProviderError(f"FastEmbed provider {self.name!r}: {exc}", transient=False) from None

    async def aclose(self) -> None:
        self._embedders.clear()


def open_provider(config: ProviderConfig, timeout: float, connections: int) -> Provider:
    """A client for ``config``; ``connections`` bounds its HTTP connection pool."""
    if isinstance(config, OllamaProvider):
        return OllamaClient(config, timeout, connections)
    if isinstance(config, OpenAIProvider):
        return OpenAIClient(config, timeout, connections)
    return FastEmbedClient(config)

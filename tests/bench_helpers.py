"""Setup shared by the tests that run `kag benchmark` (or another command calling a provider)
against the loopback FakeServer: the module's server and its reset between tests, the
provider config that reaches it through ``FAKE_URL``/``FAKE_KEY``, bench.toml setups, a
small MCQ project, the argument list and the CliRunner call."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from tests.fakeserver import FakeServer

SECRET = "sk-planted-7c1d2e9f-secret"

# The OpenAI provider "oa" and the Ollama provider "ol", both at the FakeServer named by
# FAKE_URL (rendered when the config is loaded, so the file never holds the port or the key).
FAKE_CONFIG = """
[providers.oa]
type = "OpenAI"
url = "{{ env('FAKE_URL') }}/v1"
key = "{{ env('FAKE_KEY') }}"

[providers.ol]
type = "Ollama"
url = "{{ env('FAKE_URL') }}"
"""

PROMPT = "Question: {{INPUT}}\nChoices:\n{{ CHOICE }}\nAnswer with the key.\n"


def server_fixture(reply: str) -> Callable[[], Iterator[FakeServer]]:
    """A module-scoped ``server`` fixture: one FakeServer answering ``reply`` for every test
    of the module that assigns it (``server = server_fixture("b")``)."""

    @pytest.fixture(scope="module")
    def server() -> Iterator[FakeServer]:
        with FakeServer(reply=reply) as fake:
            yield fake

    return server


def fresh(server: FakeServer, monkeypatch: pytest.MonkeyPatch | None = None, key: str | None = None) -> None:
    """Put ``server`` back as a new one (empty log, every request answered, no latency); with
    ``monkeypatch``, point FAKE_URL at it, and FAKE_KEY at ``key`` when given."""
    server.reset()
    server.set_faults({}, default="ok")
    server.state.latency = 0.0
    if monkeypatch is not None:
        monkeypatch.setenv("FAKE_URL", server.url)
        if key is not None:
            monkeypatch.setenv("FAKE_KEY", key)


def setup_toml(
    name: str, provider: str, model: str, temperature: float = 0.0, tokens: int | None = None
) -> str:
    """One ``[name]`` setup of a bench.toml, its system prompt the project's prompt.md."""
    lines = [f"[{name}]", f'provider = "{provider}"', f'model = "{model}"', f"temperature = {temperature}"]
    if tokens is not None:
        lines.append(f"tokens = {tokens}")
    lines.append("system_prompt = '''{{ file('prompt.md') }}'''")
    return "\n".join(lines) + "\n"


def bench_toml(*setups: str) -> str:
    """A bench.toml of the given setups (from `setup_toml`), a blank line between them."""
    return "\n" + "\n".join(setups)


BENCH = bench_toml(setup_toml("s1", "oa", "m1"), setup_toml("s2", "ol", "m2", tokens=128))


def mcq(text: str, answer: str = "a") -> dict[str, Any]:
    return {"input": text, "output": {"type": "MCQ", "options": {"a": "yes", "b": "no"}, "answer": answer}}


def make_project(root: Path, n: int = 4, questions: dict[str, Any] | None = None) -> Path:
    """config.toml (`FAKE_CONFIG`), bench.toml (`BENCH`), prompt.md and ``n`` MCQ questions
    (answers alternating a, b) in datasets.json, below ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.toml").write_text(FAKE_CONFIG)
    (root / "bench.toml").write_text(BENCH)
    (root / "prompt.md").write_text(PROMPT)
    data = questions or {"mcq": {str(i): mcq(f"question number {i}", "ab"[i % 2]) for i in range(n)}}
    (root / "datasets.json").write_bytes(orjson.dumps(data))
    return root


def bench_args(root: Path, *extra: str, out: str = "out") -> list[str]:
    """`kag benchmark` on the project at ``root``, writing below ``root / out``."""
    return [
        "benchmark",
        "-c",
        str(root / "config.toml"),
        "-b",
        str(root / "bench.toml"),
        "-d",
        str(root / "datasets.json"),
        "-o",
        str(root / out),
        "--backoff",
        "0",
        *extra,
    ]


def invoke(argv: list[str], **kwargs: Any) -> Any:
    return CliRunner().invoke(app, argv, **kwargs)


def tree_files(out: Path, pattern: str = "*") -> list[Path]:
    """The files of the result tree ``out`` matching ``pattern`` at any depth, sorted, kag's
    own ``.kag/`` folder (run records) left out: every one is a result (or a ``.tmp``)."""
    return sorted(p for p in out.rglob(pattern) if p.is_file() and ".kag" not in p.relative_to(out).parts)

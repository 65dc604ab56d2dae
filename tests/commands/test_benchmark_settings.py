"""Generation settings reach the servers: the request bodies a loopback OpenAI-compatible
server and a loopback Ollama server see, and a changed setting makes the result stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench_helpers import SECRET, bench_args, fresh, invoke, make_project, server_fixture
from tests.fakeserver import FakeServer

server = server_fixture("a")


@pytest.fixture(autouse=True)
def _reset(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh(server, monkeypatch, key=SECRET)


SETTINGS = """seed = 42
top_p = 0.5
top_k = 7
stop = ["END", "STOP"]
max_tokens = 33
presence_penalty = 0.25
frequency_penalty = -0.5
system = "You are terse."
"""


def settings_bench(extra_oa: str = "", extra_ol: str = "") -> str:
    head = "model = 'm'\ntemperature = 0.0\nsystem_prompt = '''{{ file('prompt.md') }}'''\n"
    return (
        f"[s1]\nprovider = 'oa'\n{head}{SETTINGS}"
        f"extra_body = {{ chat_template_kwargs = {{ enable_thinking = false }} }}\n{extra_oa}\n"
        f"[s2]\nprovider = 'ol'\n{head}tokens = 4096\n{SETTINGS}options = {{ num_gpu = 2 }}\n{extra_ol}"
    )


def test_request_bodies_carry_every_setting(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, n=1)
    (root / "bench.toml").write_text(settings_bench())
    result = invoke(bench_args(root))
    assert result.exit_code == 0, result.stderr
    bodies = {r.path: r.body for r in server.chat_requests()}
    openai, ollama = bodies["/v1/chat/completions"], bodies["/api/chat"]
    assert openai is not None and ollama is not None
    for body in (openai, ollama):
        assert body["messages"][0] == {"role": "system", "content": "You are terse."}
        assert body["messages"][1]["role"] == "user"
        assert body["messages"][1]["content"].startswith("Question: question number 0")
    assert {k: openai[k] for k in ("seed", "top_p", "top_k", "stop", "max_tokens")} == {
        "seed": 42,
        "top_p": 0.5,
        "top_k": 7,
        "stop": ["END", "STOP"],
        "max_tokens": 33,
    }
    assert openai["presence_penalty"] == 0.25 and openai["frequency_penalty"] == -0.5
    assert openai["chat_template_kwargs"] == {"enable_thinking": False} and openai["temperature"] == 0.0
    assert ollama["options"] == {
        "temperature": 0.0,
        "num_ctx": 4096,
        "seed": 42,
        "top_p": 0.5,
        "top_k": 7,
        "stop": ["END", "STOP"],
        "num_predict": 33,
        "presence_penalty": 0.25,
        "frequency_penalty": -0.5,
        "num_gpu": 2,
    }
    assert "max_tokens" not in ollama and ollama["stream"] is False


def test_a_setup_without_settings_sends_what_it_always_sent(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, n=1)
    assert invoke(bench_args(root)).exit_code == 0
    bodies = {r.path: r.body for r in server.chat_requests()}
    openai, ollama = bodies["/v1/chat/completions"], bodies["/api/chat"]
    assert openai is not None and ollama is not None
    assert set(openai) == {"model", "messages", "temperature"}
    assert set(ollama) == {"model", "messages", "stream", "options"}
    assert ollama["options"] == {"temperature": 0.0, "num_ctx": 128}
    assert [m["role"] for m in openai["messages"]] == ["user"]


def test_a_changed_setting_makes_the_result_stale_and_rerun(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, n=2)
    (root / "bench.toml").write_text(settings_bench())
    assert invoke(bench_args(root)).exit_code == 0
    server.reset()
    same = invoke(bench_args(root, "--continue"))
    assert same.exit_code == 0 and server.chat_requests() == []
    (root / "bench.toml").write_text(settings_bench(extra_ol="").replace("seed = 42", "seed = 43", 1))
    plan = invoke(bench_args(root, "--continue", "--dry-run"))
    assert plan.exit_code == 0
    total = plan.stdout.splitlines()[-2].split()
    assert total[0] == "total" and total[4] == "2"  # the s1 results are stale; s2 is current
    rerun = invoke(bench_args(root, "--rerun-stale"))
    assert rerun.exit_code == 0, rerun.stderr
    seen = server.chat_requests()
    assert len(seen) == 2 and all(r.path == "/v1/chat/completions" and r.body["seed"] == 43 for r in seen)

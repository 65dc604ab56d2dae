"""`kag benchmark` and `kag generation` under hostile input: templates that reach for Python
internals run nothing, files nested past the parsers' limits are exit 2, secrets (keys in
every spelling, credentials in a URL) never reach stderr or a result file, and a reply
that is not Unicode text is not retried."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import orjson
import pytest

from kag.results import ErrorResult, OkResult, read_result
from tests.bench_helpers import bench_args, bench_toml, fresh, invoke, server_fixture, setup_toml, tree_files
from tests.fakeserver import FakeServer

# '"' and '\\' make its JSON-escaped spelling differ from the raw one.
SECRET = 'sk-proj_Zq8-vW3_secretTail/9+x"q\\z'
PASSWORD = "s3cret-Pa55word"


def results(out: Path) -> dict[str, Any]:
    return {str(p.relative_to(out)): read_result(p) for p in tree_files(out, "*.json")}


server = server_fixture("b")


@pytest.fixture(autouse=True)
def _reset(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh(server, monkeypatch)


def project(root: Path, config: str, bench: str, prompt: str = "Q: {{ INPUT }}\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.toml").write_text(config)
    (root / "bench.toml").write_text(bench)
    (root / "prompt.md").write_text(prompt)
    options = {"a": "yes", "b": "no"}
    data = {
        "mcq": {
            str(i): {"input": f"question {i}", "output": {"type": "MCQ", "options": options}}
            for i in range(2)
        }
    }
    (root / "datasets.json").write_bytes(orjson.dumps(data))
    return root


OLLAMA = """
[providers.ol]
type = "Ollama"
url = "{{ env('FAKE_URL') }}"
"""

BENCH = bench_toml(setup_toml("s1", "ol", "m"))


# ---------------------------------------------------------------- sandboxed templates


def payload(marker: Path) -> str:
    return "{{ cycler.__init__.__globals__.os.popen('touch " + str(marker) + "').read() }}"


def test_a_prompt_file_reaching_for_python_internals_runs_nothing_even_in_a_dry_run(
    tmp_path: Path, server: FakeServer
) -> None:
    marker = tmp_path / "pwned"
    root = project(tmp_path / "p", OLLAMA, BENCH, prompt=payload(marker) + "{{ INPUT }}")
    result = invoke(bench_args(root, "--dry-run"))
    assert not marker.exists()
    assert result.exit_code == 2
    assert result.stderr.startswith(f"kag: error: {root / 'bench.toml'}: [s1] system_prompt: ")
    assert "reaches for Python internals" in result.stderr and "'__init__'" in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert server.requests == []


def test_config_file_reaching_for_python_internals_is_exit_2_naming_it(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    root = project(tmp_path / "p", OLLAMA + f"# {payload(marker)}\n", BENCH)
    result = invoke(bench_args(root, "--dry-run"))
    assert not marker.exists()
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"kag: error: {root / 'config.toml'}: the template reaches for Python internals"
    )


def test_the_sandbox_stops_internals_reached_without_a_dotted_name(tmp_path: Path) -> None:
    """``attr('__init__')`` hides the name from the source check: the sandbox refuses it."""
    marker = tmp_path / "pwned"
    sneaky = "{{ (cycler|attr('__init__')|attr('__globals__'))['os'].popen('touch " + str(marker) + "') }}"
    root = project(tmp_path / "p", OLLAMA + f"# {sneaky}\n", BENCH)
    result = invoke(bench_args(root, "--dry-run"))
    assert not marker.exists()
    assert result.exit_code == 2
    assert f"{root / 'config.toml'}: the template reaches for Python internals" in result.stderr
    # A name built at render time escapes the source check; the sandbox still refuses it.
    built = sneaky.replace("'__init__'", "'_' ~ '_init__'").replace("'__globals__'", "'_' ~ '_globals__'")
    (root / "config.toml").write_text(OLLAMA + f"# {built}\n")
    result = invoke(bench_args(root, "--dry-run"))
    assert not marker.exists()
    assert result.exit_code == 2
    assert result.stderr.startswith(f"kag: error: {root / 'config.toml'}: ")


def test_a_prompt_on_standard_input_reaching_for_internals_runs_nothing(
    tmp_path: Path, server: FakeServer
) -> None:
    marker = tmp_path / "pwned"
    root = project(tmp_path / "p", OLLAMA, BENCH)
    argv = ["generation", "-c", str(root / "config.toml"), "-p", "ol", "-m", "m", "-t", "0", "-"]
    result = invoke(argv, input=payload(marker))
    assert not marker.exists()
    assert result.exit_code == 2
    assert result.stderr.startswith("kag: error: the prompt: the template reaches for Python internals")
    assert server.requests == []


def test_question_text_is_never_a_template(tmp_path: Path, server: FakeServer) -> None:
    marker = tmp_path / "pwned"
    root = project(tmp_path / "p", OLLAMA, BENCH)
    question = payload(marker) + " {{ 7 * 6 }}"
    data = {"mcq": {"1": {"input": question, "output": {"type": "MCQ", "options": {"a": "x"}}}}}
    (root / "datasets.json").write_bytes(orjson.dumps(data))
    result = invoke(bench_args(root))
    assert result.exit_code == 0, result.stderr
    assert not marker.exists()
    stored = read_result(root / "out" / "mcq" / "1" / "s1.json")
    assert isinstance(stored, OkResult) and stored.stats.prompt == f"Q: {question}"
    assert server.chat_requests()[0].prompt == f"Q: {question}"


# ---------------------------------------------------------------- datasets file through the CLI


def test_option_keys_differing_by_case_stop_the_benchmark_before_any_request(
    tmp_path: Path, server: FakeServer
) -> None:
    root = project(tmp_path / "p", OLLAMA, BENCH)
    data = {"mcq": {"q7": {"input": "?", "output": {"type": "MCQ", "options": {"A": "x", "a": "y"}}}}}
    (root / "datasets.json").write_bytes(orjson.dumps(data))
    result = invoke(bench_args(root))
    assert result.exit_code == 2
    assert "mcq/q7: option keys 'A' and 'a' differ only by case" in result.stderr
    assert server.requests == [] and not (root / "out").exists()


# ---------------------------------------------------------------- nested past the limits


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("config.toml", OLLAMA + "deep = " + "[" * 100_000 + "\n"),
        ("config.toml", OLLAMA + "{% if true %}" * 300 + "{% endif %}" * 300),
        ("config.toml", OLLAMA + "# {{ " + "(" * 5000 + "1" + ")" * 5000 + " }}\n"),
        (
            "bench.toml",
            BENCH.replace(
                "{{ file('prompt.md') }}",
                "{% raw %}" + "{% if INPUT %}" * 300 + "{% endif %}" * 300 + "{% endraw %}",
            ),
        ),
        ("prompt.md", "{{ " + "[" * 5000 + "INPUT" + "]" * 5000 + " }}"),
    ],
)
def test_files_nested_past_the_parsers_limits_are_exit_2(tmp_path: Path, where: str, text: str) -> None:
    root = project(tmp_path / "p", OLLAMA, BENCH)
    (root / where).write_text(text)
    result = invoke(bench_args(root, "--dry-run"))
    assert result.exit_code == 2, result.stderr
    named = "bench.toml" if where == "prompt.md" else where  # the prompt is read through file()
    assert result.stderr.startswith(f"kag: error: {root / named}: ")
    assert "nested too deeply" in result.stderr
    assert result.stderr.count("\n") == 1 and "Recursion" not in result.stderr


# ---------------------------------------------------------------- every form of a key, redacted before the cut


class _Scripted(BaseHTTPRequestHandler):
    body = b""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(401)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echo() -> Iterator[tuple[str, type[_Scripted]]]:
    handler = type("Echo", (_Scripted,), {})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


SWAPPED = SECRET.translate(str.maketrans("-_", "_-"))


@pytest.mark.parametrize(
    "body",
    [
        json.dumps({"error": {"message": "x" * 280 + SECRET}}),  # the key across the 300-character cut
        "y" * 280 + SECRET,  # a plain-text body cut at the same place
        "token " + json.dumps(json.dumps({"key": SECRET})),  # JSON-escaped twice
        "token " + json.dumps(SECRET),
        "url ?key=" + quote(SECRET, safe=""),
        "url ?key=" + quote(SECRET),
        "form key=" + quote_plus(SECRET),
        "upper " + SECRET.upper(),
        "swapped " + SWAPPED,
        "swapped upper " + SWAPPED.upper(),
    ],
)
def test_every_form_of_the_key_is_redacted_before_the_message_is_cut(
    tmp_path: Path, echo: tuple[str, type[_Scripted]], monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    url, handler = echo
    handler.body = body.encode()
    monkeypatch.setenv("ECHO_URL", url)
    monkeypatch.setenv("ECHO_KEY", SECRET)
    config = tmp_path / "config.toml"
    config.write_text(
        '[providers.oa]\ntype = "OpenAI"\nurl = "{{ env(\'ECHO_URL\') }}/v1"\nkey = \'{{ env("ECHO_KEY") }}\'\n'
    )
    argv = ["generation", "-c", str(config), "-p", "oa", "-m", "m", "-t", "0", "--format", "json", "hello"]
    result = invoke(argv)
    assert result.exit_code == 1
    assert "HTTP 401" in result.stderr and "***" in result.stderr + result.stdout
    for text in (result.stdout, result.stderr):
        for fragment in ("Zq8", "vW3", "secretTail", "ZQ8", "SECRETTAIL"):
            assert fragment not in text


# ---------------------------------------------------------------- credentials in a provider URL


def creds_config(url: str, key: str | None = None) -> str:
    scheme, rest = url.split("://")
    text = f'[providers.ol]\ntype = "Ollama"\nurl = "{scheme}://alice:{PASSWORD}@{rest}"\n'
    if key is not None:
        text = text.replace('"Ollama"', '"OpenAI"') + f'key = "{key}"\n'
    return text


def test_url_credentials_are_sent_and_never_shown(tmp_path: Path, server: FakeServer) -> None:
    root = project(tmp_path / "p", creds_config(server.url), BENCH)
    server.set_faults({"question 1": ["404"]})
    result = invoke(["-vv", *bench_args(root)])
    sent = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    assert {r.authorization for r in server.chat_requests()} == {sent}
    files = results(root / "out")
    assert isinstance(files["mcq/0/s1.json"], OkResult)
    error = files["mcq/1/s1.json"]
    assert isinstance(error, ErrorResult)
    assert f"from http://***@{server.url.removeprefix('http://')}/api/chat" in error.error
    raw_files = b"".join(p.read_bytes() for p in (root / "out").rglob("*.json"))  # run records too
    for text in (result.stdout, result.stderr, raw_files.decode()):
        assert PASSWORD not in text and "alice:" not in text
    assert "http://***@" in result.stderr


def test_url_credentials_are_redacted_when_the_server_is_down(tmp_path: Path) -> None:
    root = project(tmp_path / "p", creds_config("http://127.0.0.1:9"), BENCH)
    result = invoke(["-vv", *bench_args(root, "--retries", "0")])
    assert results(root / "out") == {}  # an outage is not an answer: no result file
    assert "http://***@127.0.0.1:9/api/chat" in result.stderr
    assert PASSWORD not in result.stderr + result.stdout


def test_url_credentials_and_a_key_are_a_configuration_error(tmp_path: Path, server: FakeServer) -> None:
    root = project(tmp_path / "p", creds_config(server.url + "/v1", key="sk-other-key-123"), BENCH)
    result = invoke(bench_args(root))
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"kag: error: {root / 'config.toml'}: providers.ol: 'url' carries credentials"
    )
    assert PASSWORD not in result.stderr and "sk-other-key-123" not in result.stderr
    assert server.requests == [] and not (root / "out").exists()


# ---------------------------------------------------------------- a lone surrogate is not retried


def test_a_reply_with_a_lone_surrogate_is_a_permanent_error_at_once(tmp_path: Path) -> None:
    with FakeServer(reply="\ud800 broken") as fake:
        config = tmp_path / "config.toml"
        config.write_text(f'[providers.ol]\ntype = "Ollama"\nurl = "{fake.url}"\n')
        argv = [
            "generation",
            "-c",
            str(config),
            "-p",
            "ol",
            "-m",
            "m",
            "-t",
            "0",
            "--retries",
            "3",
            "--backoff",
            "0",
            "hi",
        ]
        result = invoke(argv)
        assert len(fake.chat_requests()) == 1
    assert result.exit_code == 1
    assert "lone surrogate" in result.stderr and "after 1 attempt(s)" in result.stderr

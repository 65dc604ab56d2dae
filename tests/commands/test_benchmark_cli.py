"""`kag benchmark` and `kag generation` from the command line, against the misbehaving
loopback server: exit codes, resumption, crash safety (SIGKILL, SIGINT in a real
subprocess), bad configuration before any request, and secrets kept out of everything."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from kag.results import ErrorResult, OkResult, read_result
from tests.bench_helpers import (
    BENCH,
    FAKE_CONFIG,
    PROMPT,
    SECRET,
    bench_args,
    fresh,
    invoke,
    make_project,
    server_fixture,
    tree_files,
)
from tests.conftest import REPO
from tests.fakeserver import FakeServer, make_certificate

server = server_fixture("b")


@pytest.fixture(autouse=True)
def _reset(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh(server, monkeypatch, key=SECRET)


def results(root: Path) -> dict[str, Any]:
    """Every file of the output tree, parsed (read_result raises on any unreadable file)."""
    out = root / "out"
    return {str(p.relative_to(out)): read_result(p) for p in tree_files(out, "*") if p.is_file()}


def prompts_seen(server: FakeServer) -> set[tuple[str, str]]:
    return {(r.model or "", (r.prompt or "").split("\n")[0]) for r in server.chat_requests()}


def task_key(relpath: str) -> tuple[str, str]:
    """'mcq/3/s2.json' -> ('m2', 'Question: question number 3'), as the server saw it."""
    _, question, name = relpath.split("/")
    return ("m1" if name == "s1.json" else "m2", f"Question: question number {question}")


def all_keys(n: int) -> set[str]:
    return {f"mcq/{i}/{s}.json" for i in range(n) for s in ("s1", "s2")}


# ---------------------------------------------------------------- a normal run


def test_benchmark_writes_one_file_per_task_and_a_summary(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path)
    result = invoke(bench_args(root, "-p", "3"))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert "kag: benchmark: 8 task(s) run: 8 ok, 0 error(s)" in result.stderr
    files = results(root)
    assert set(files) == all_keys(4)
    first = files["mcq/0/s1.json"]
    assert isinstance(first, OkResult) and first.result == "b"
    assert first.stats.prompt == "Question: question number 0\nChoices:\na: yes\nb: no\nAnswer with the key."
    assert first.stats.config is not None and first.stats.config.provider == "oa"
    assert len(server.chat_requests()) == 8


def test_dry_run_prints_the_plan_and_sends_nothing(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, n=3)
    assert invoke(bench_args(root, "--setup", "s1")).exit_code == 0
    server.reset()
    result = invoke(bench_args(root, "--dry-run", "--continue", "--limit", "2"))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "setup",
        "dataset",
        "tasks",
        "ok",
        "error",
        "stale",
        "unreadable",
        "missing",
        "to",
        "run",
    ]
    assert lines[1].split() == ["s1", "mcq", "2", "2", "0", "0", "0", "0", "0"]
    assert lines[2].split() == ["s2", "mcq", "2", "0", "0", "0", "0", "2", "2"]
    assert lines[3].split() == ["total", "4", "2", "0", "0", "0", "2", "2"]
    assert lines[4] == "2 task(s) to run; --continue: kept files are skipped."
    assert server.requests == []
    assert len(results(root)) == 3  # nothing written


def test_continue_runs_only_missing_and_without_it_everything_reruns(
    tmp_path: Path, server: FakeServer
) -> None:
    root = make_project(tmp_path)
    assert invoke(bench_args(root, "--setup", "s2", "--limit", "2")).exit_code == 0
    server.reset()
    result = invoke(bench_args(root, "--continue", "-p", "2"))
    assert result.exit_code == 0
    assert "6 task(s) run: 6 ok" in result.stderr and "2 skipped (kept from earlier runs)" in result.stderr
    assert prompts_seen(server) == {task_key(k) for k in all_keys(4) - {"mcq/0/s2.json", "mcq/1/s2.json"}}
    server.reset()
    assert invoke(bench_args(root, "--skip", "s1")).exit_code == 0
    assert len(server.chat_requests()) == 4  # no --continue: overwrite, as the Rust tool did


def test_retry_errors_reruns_only_error_files(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, n=5)
    server.set_faults({"number 1\n": ["404"], "number 3\n": ["500"]})
    result = invoke(bench_args(root, "--retries", "1", "-p", "4"))
    assert result.exit_code == 0  # error files are results: exit 0 without --fail-on-error
    assert "4 error(s)" in result.stderr
    errors = {k for k, v in results(root).items() if isinstance(v, ErrorResult)}
    assert errors == {"mcq/1/s1.json", "mcq/1/s2.json", "mcq/3/s1.json", "mcq/3/s2.json"}
    assert "kag: warning: mcq/1 [s1]: Failed to generate a response from the model: HTTP 404" in result.stderr
    server.reset()
    server.set_faults({})
    assert invoke(bench_args(root, "--continue")).exit_code == 0
    assert server.chat_requests() == []  # error files are kept by --continue
    result = invoke(bench_args(root, "--retry-errors", "-p", "2"))
    assert result.exit_code == 0, result.stderr
    assert prompts_seen(server) == {task_key(k) for k in errors} and len(server.chat_requests()) == 4
    assert all(isinstance(v, OkResult) for v in results(root).values())


def test_fail_on_error_exit_codes(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, n=2)
    assert invoke(bench_args(root, "--fail-on-error")).exit_code == 0
    server.set_faults({"number 0\n": ["404"]})
    result = invoke(bench_args(root, "--fail-on-error"))
    assert result.exit_code == 1
    assert result.stderr.rstrip().endswith("kag: error: 2 task(s) ended in error (--fail-on-error)")
    assert len(results(root)) == 4  # the other tasks still ran


def test_stale_results_are_reported_and_rerun_on_request(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, n=3)
    assert invoke(bench_args(root)).exit_code == 0
    (root / "prompt.md").write_text(PROMPT.replace("Answer with the key.", "Reply with one letter."))
    server.reset()
    result = invoke(bench_args(root, "--continue", "--setup", "s1"))
    assert result.exit_code == 0
    assert "kag: warning: 3 result file(s) are stale" in result.stderr
    assert "3 stale result(s) kept (--rerun-stale re-runs them)" in result.stderr
    assert server.chat_requests() == []
    result = invoke(bench_args(root, "--rerun-stale", "--setup", "s1"))
    assert result.exit_code == 0 and len(server.chat_requests()) == 3
    new = results(root)["mcq/0/s1.json"]
    assert (
        isinstance(new, OkResult)
        and new.stats.prompt is not None
        and new.stats.prompt.endswith("one letter.")
    )


# ---------------------------------------------------------------- bad configuration: exit 2, no request


def _bad(root: Path, name: str, text: str) -> None:
    (root / name).write_text(text)


@pytest.mark.parametrize(
    ("file", "text", "expected"),
    [
        (
            "bench.toml",
            BENCH.replace('provider = "ol"', 'provider = "ghost"'),
            r"bench.toml: \[s2\]: provider 'ghost' is missing from the configuration",
        ),
        ("bench.toml", BENCH + "\n[broken\n", r"bench.toml: not valid TOML: .*line"),
        (
            "prompt.md",
            "{{ QUESTION }}",
            r"bench.toml: \[s1\] system_prompt: undefined template variable 'QUESTION'",
        ),
        (
            "config.toml",
            FAKE_CONFIG.replace('type = "Ollama"', 'type = "Olama"'),
            r"config.toml: providers.ol: unknown provider type 'Olama'",
        ),
        (
            "config.toml",
            FAKE_CONFIG + "\n[providers.x]\n",
            r"config.toml: providers.x: missing required key 'type'",
        ),
        (
            "datasets.json",
            '{"../evil": {"1": {"input": "x"}}}',
            r"datasets.json: 1 problem\(s\).*'../evil' contains '/'",
        ),
        ("datasets.json", '{"mcq": {"1": {"input": "x"}}}', r"\[s1\] system_prompt: 'CHOICE' is undefined"),
    ],
)
def test_bad_input_exits_2_before_any_request(
    tmp_path: Path, server: FakeServer, file: str, text: str, expected: str
) -> None:
    import re

    root = make_project(tmp_path)
    _bad(root, file, text)
    result = invoke(bench_args(root))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("kag: error: ") and "Traceback" not in result.stderr
    assert re.search(expected, result.stderr, re.DOTALL), result.stderr
    assert server.requests == []
    assert not (root / "out").exists()


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--setup", "s9"], "--setup s9 matches no setup in {root}/bench.toml (setups: s1, s2)"),
        (["--setup", "x*"], "--setup x* matches no setup in {root}/bench.toml (setups: s1, s2)"),
        (["--skip", "s1,nope"], "--skip nope matches no setup in {root}/bench.toml (setups: s1, s2)"),
        (
            ["--dataset", "other"],
            "--dataset other matches no dataset in {root}/datasets.json (datasets: mcq)",
        ),
        (["--prefix", "../x-"], "--prefix: '../x-' contains '/' (it becomes part of a file name)"),
    ],
)
def test_bad_flags_exit_2(tmp_path: Path, server: FakeServer, extra: list[str], expected: str) -> None:
    root = make_project(tmp_path)
    result = invoke(bench_args(root, *extra))
    assert result.exit_code == 2 and result.stderr.strip() == f"kag: error: {expected.format(root=root)}"
    assert server.requests == []


def _planned_setups(result: Any) -> list[str]:
    """The setups of the --dry-run table's rows (not the header, not the total)."""
    rows = result.stdout.splitlines()[1:-2]
    return sorted({row.split()[0] for row in rows})


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--setup", "s*"], ["s1", "s2"]),
        (["--setup", "s1"], ["s1"]),  # an exact name is a glob matching itself
        (["--setup", "*2"], ["s2"]),
        (["--setup", "s*", "--skip", "s1"], ["s2"]),
        (["--skip", "s1", "--skip", "s2,s1"], []),
        (["--skip", "s?"], []),
        (["--dataset", "m*"], ["s1", "s2"]),
    ],
)
def test_setup_dataset_and_skip_are_globs(tmp_path: Path, extra: list[str], expected: list[str]) -> None:
    """As in `kag stats`: --setup, --dataset and --skip are shell globs; --skip repeats and
    still takes commas."""
    root = make_project(tmp_path)
    result = invoke([*bench_args(root, *extra), "--dry-run"])
    assert result.exit_code == 0, result.stderr
    assert _planned_setups(result) == expected


def test_missing_default_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project(tmp_path)
    monkeypatch.chdir(tmp_path / "..")
    result = invoke(["benchmark", "-b", str(root / "bench.toml"), "-d", str(root / "datasets.json")])
    assert (
        result.exit_code == 2
        and result.stderr.strip() == "kag: error: config.toml: configuration file not found"
    )


def test_parallel_must_be_positive(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    result = invoke(bench_args(root, "-p", "0"))
    assert result.exit_code == 2 and "Invalid value for '--parallel'" in result.stderr


# ---------------------------------------------------------------- secrets


def test_a_planted_key_reaches_the_server_and_nothing_else(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, n=4)
    server.set_faults({"number 0\n": ["echo401"], "number 1\n": ["500"], "ECHOKEY": ["echo401"]})
    result = invoke(["-vv", *bench_args(root, "--retries", "1", "-p", "2")])
    assert result.exit_code == 0
    assert any(r.authorization == f"Bearer {SECRET}" for r in server.chat_requests())
    assert "Incorrect API key provided: ***" in result.stderr
    generation = invoke(
        [
            "-vv",
            "generation",
            "-c",
            str(root / "config.toml"),
            "-p",
            "oa",
            "-m",
            "m1",
            "-t",
            "0",
            "--format",
            "json",
            "ECHOKEY",
        ]
    )
    assert generation.exit_code == 1 and "***" in generation.stdout
    dry = invoke(bench_args(root, "--dry-run", "--continue"))
    outputs = [result.stdout, result.stderr, generation.stdout, generation.stderr, dry.stdout, dry.stderr]
    outputs += [p.read_text() for p in tree_files(root / "out", "*") if p.is_file()]
    assert len(outputs) == 6 + 8
    assert not [text for text in outputs if SECRET in text]


# ---------------------------------------------------------------- kag generation


def gen(root: Path, *extra: str, **kwargs: Any) -> Any:
    return invoke(
        ["generation", "-c", str(root / "config.toml"), "-p", "ol", "-m", "m2", "-t", "0.2", *extra], **kwargs
    )


def test_generation_prints_the_answer(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path)
    result = gen(root, "What is {{ 1 + 1 }}?")
    assert result.exit_code == 0 and result.stdout == "b\n"
    assert server.chat_requests()[0].prompt == "What is 2?"  # without -s, the prompt is the template


def test_generation_json_with_system_prompt_and_stdin(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path)
    (root / "sys.md").write_text("Answer briefly: {{INPUT}}\n")
    result = gen(
        root, "-s", str(root / "sys.md"), "-n", "256", "--format", "json", "-", input="Why is the sky blue?\n"
    )
    assert result.exit_code == 0, result.stderr
    data = orjson.loads(result.stdout)
    assert data["ok"]["result"] == "b"
    assert data["ok"]["stats"]["prompt"] == "Answer briefly: Why is the sky blue?\n"
    assert data["ok"]["stats"]["config"] == {
        "augmented_generation": None,
        "provider": "ol",
        "model": "m2",
        "temperature": 0.2,
        "tokens": 256,
    }
    assert server.chat_requests()[0].body["options"] == {"temperature": 0.2, "num_ctx": 256}  # type: ignore[index]


def test_generation_errors(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path)
    result = gen(root, "-r", "ret", "x")
    assert (
        result.exit_code == 2
        and result.stderr.strip() == "kag: error: --retriever and --database go together"
    )
    result = gen(root, "{{ CHOICE }}")
    assert result.exit_code == 2 and result.stderr.strip() == "kag: error: the prompt: 'CHOICE' is undefined"
    result = gen(root, "-t", "2.0", "hot")
    assert (
        result.exit_code == 0
        and "kag: warning:" in result.stderr
        and "high temperature (2.0)" in result.stderr
    )
    server.set_faults({"FAILS": ["404"]})
    result = gen(root, "FAILS")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("kag: error: Failed to generate a response from the model: HTTP 404")
    assert server.chat_requests()[-1].prompt == "FAILS"


def test_generation_config_errors_name_the_config_file_once(tmp_path: Path, server: FakeServer) -> None:
    """An unknown --provider, and a retriever whose provider section is missing: one line,
    exit 2, the configuration file named once, nothing sent."""
    root = make_project(tmp_path)
    config = root / "config.toml"
    result = invoke(["generation", "-c", str(config), "-p", "ghost", "-m", "m", "-t", "0", "hi"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        f"kag: error: {config}: kag generation: provider 'ghost' is missing from the configuration"
        " (providers: oa, ol)\n"
    )
    with config.open("a") as handle:
        handle.write('\n[databases.g]\ntype = "Ladybug"\npath = "graph.lbdb"\n')
        handle.write('\n[retrievers.r]\ntype = "Embedder"\nprovider = "ghost"\n')
    result = gen(root, "-r", "r", "-d", "g", "hi")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        f"kag: error: {config}: kag generation: retrievers.r: provider 'ghost' is not defined"
        " (providers: oa, ol)\n"
    )
    assert server.requests == []


def test_generation_over_https_verifies_the_certificate(tmp_path: Path) -> None:
    """`kag generation` against an HTTPS server (a real process, so that the trust store is
    read afresh): its self-signed certificate trusted through SSL_CERT_FILE, the answer;
    not trusted, a one-line certificate error after the retries, exit 1."""
    cert, key = make_certificate(tmp_path)
    root = make_project(tmp_path / "project")
    with FakeServer(reply="b", tls=(cert, key)) as tls:
        env = dict(os.environ, PYTHONPATH=str(REPO), FAKE_URL=tls.url, FAKE_KEY=SECRET)
        env.pop("SSL_CERT_DIR", None)
        command = [sys.executable, "-m", "kag", "generation", "-c", str(root / "config.toml")]
        command += ["-p", "oa", "-m", "m1", "-t", "0", "--retries", "1", "--backoff", "0", "hello"]
        trusted = subprocess.run(
            command, env=dict(env, SSL_CERT_FILE=str(cert)), capture_output=True, text=True, check=False
        )
        assert (trusted.returncode, trusted.stdout, trusted.stderr) == (0, "b\n", "")
        assert [r.prompt for r in tls.chat_requests()] == ["hello"]
        assert tls.chat_requests()[0].authorization == f"Bearer {SECRET}"
        untrusted = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert untrusted.returncode == 1 and untrusted.stdout == ""
    assert untrusted.stderr.startswith(
        f"kag: error: Failed to generate a response from the model: cannot connect to {tls.url}/v1/chat/completions: "
    )
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr and untrusted.stderr.endswith(
        "(after 2 attempt(s))\n"
    )
    assert untrusted.stderr.count("\n") == 1 and SECRET not in untrusted.stderr
    assert len(tls.chat_requests()) == 1  # nothing reached the server without the certificate


# ---------------------------------------------------------------- crash safety in a real process


def spawn(root: Path, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), KAG_WIDTH="200")
    return subprocess.Popen(
        [sys.executable, "-m", "kag", *bench_args(root, *extra)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_files(root: Path, count: int, process: subprocess.Popen[str], limit: float = 60.0) -> int:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = len(list(tree_files(root / "out", "*.json"))) if (root / "out").exists() else 0
        if found >= count:
            return found
        if process.poll() is not None:
            raise AssertionError(f"the benchmark ended early: {process.communicate()}")
        time.sleep(0.02)
    raise AssertionError("no progress")


def check_tree_and_resume(root: Path, server: FakeServer, n: int) -> None:
    out = root / "out"
    every = [p for p in tree_files(out, "*") if p.is_file()]
    # A kill may leave a temporary (a write cut short) and the lock file: both end in
    # `.tmp`, are never a result, and are gone after the next run.
    assert all(p.name.endswith((".json", ".tmp")) for p in every)
    done = {str(p.relative_to(out)) for p in every if p.name.endswith(".json")}
    for name in done:
        read_result(out / name)  # every result file parses: nothing partial
    missing = all_keys(n) - done
    assert missing, "the run finished before it was stopped"
    server.state.latency = 0.0
    server.reset()
    result = invoke(bench_args(root, "--continue", "-p", "4"))
    assert result.exit_code == 0, result.stderr
    assert prompts_seen(server) == {task_key(k) for k in missing}
    assert len(server.chat_requests()) == len(missing)  # exactly the missing tasks, once each
    final = results(root)
    assert set(final) == all_keys(n)  # complete, and no .tmp left behind


def signalled_mid_run(
    tmp_path: Path, server: FakeServer, n: int, signum: signal.Signals
) -> tuple[Path, subprocess.Popen[str]]:
    """A run of ``n`` questions in a real subprocess, sent ``signum`` once the 6 files of
    questions 0-2 are written: the calls of the later questions are held by the server (the
    run is then mid-way, 4 calls in flight, until the test resets the server)."""
    root = make_project(tmp_path, n=n)
    server.hold(lambda r: int((r.prompt or "").split()[3]) >= 3)  # "Question: question number N"
    process = spawn(root, "-p", "4")
    wait_for_files(root, 6, process)
    process.send_signal(signum)
    return root, process


def test_sigkill_mid_run_leaves_only_whole_files_and_continue_completes(
    tmp_path: Path, server: FakeServer
) -> None:
    n = 20
    root, process = signalled_mid_run(tmp_path, server, n, signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL
    check_tree_and_resume(root, server, n)


def test_sigint_stops_cleanly_with_exit_130_and_a_summary(tmp_path: Path, server: FakeServer) -> None:
    n = 20
    root, process = signalled_mid_run(tmp_path, server, n, signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "kag: benchmark interrupted:" in stderr and "Run again with --continue to resume." in stderr
    assert "Traceback" not in stderr and stdout == ""
    assert not list((root / "out").rglob("*.tmp"))
    check_tree_and_resume(root, server, n)


def test_v_and_q_after_the_options_set_the_verbosity(tmp_path: Path, server: FakeServer) -> None:
    """-v/-q work anywhere on the line: a retry is shown with -v at the end, the summary
    is hidden with -q at the end."""
    root = make_project(tmp_path, n=1)
    server.set_faults({"number 0\n": ["500", "ok"]})
    verbose = invoke([*bench_args(root, "--setup", "s1"), "-v"])
    assert verbose.exit_code == 0, verbose.stderr
    assert "kag: retry: " in verbose.stderr
    server.set_faults({"number 0\n": ["500", "ok"]})
    plain = invoke(bench_args(root, "--setup", "s1"))
    assert plain.exit_code == 0
    assert "kag: retry: " not in plain.stderr
    assert "kag: benchmark: 1 task(s) run" in plain.stderr
    quiet = invoke([*bench_args(root, "--setup", "s1"), "-q"])
    assert quiet.exit_code == 0
    assert quiet.stderr == ""
    assert (root / "out/mcq/0/s1.json").is_file()


def test_a_run_without_continue_warns_how_many_ok_results_it_replaces(
    tmp_path: Path, server: FakeServer
) -> None:
    root = make_project(tmp_path, n=3)
    assert invoke(bench_args(root)).exit_code == 0
    (root / "out" / "mcq" / "0" / "s1.json").write_bytes(b"{not a result")  # not counted
    server.reset()
    again = invoke(bench_args(root))
    assert again.exit_code == 0, again.stderr
    lines = again.stderr.splitlines()
    warning = next(i for i, line in enumerate(lines) if "will be replaced" in line)
    assert "5 ok result(s)" in lines[warning] and "--continue keeps them" in lines[warning]
    assert warning < next(i for i, line in enumerate(lines) if "task(s) to run" in line)
    fresh_run = invoke(bench_args(root, out="other"))
    assert "will be replaced" not in fresh_run.stderr
    kept = invoke(bench_args(root, "--continue"))
    assert "will be replaced" not in kept.stderr


def test_continue_says_how_many_kept_files_are_errors(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, n=2)
    server.set_faults({}, default="400")
    invoke(bench_args(root, "--setup", "s1"))
    server.set_faults({}, default="ok")
    kept = invoke(bench_args(root, "--continue"))
    assert kept.exit_code == 0, kept.stderr
    assert "2 kept result file(s) are errors (graded as ERR); --retry-errors runs them again" in kept.stderr
    retried = invoke(bench_args(root, "--retry-errors"))
    assert "kept result file(s) are errors" not in retried.stderr

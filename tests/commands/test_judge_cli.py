"""`kag stats judge` against the loopback fake server: hand-computed verdict counts, the
cache (a second run sends nothing), secrets kept out of the cache and the output, links
refused, and the README example."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.grading.judge import CACHE_FOLDER
from kag.grading.judge_prompt import DEFAULT_PROMPT
from tests.bench_helpers import FAKE_CONFIG, fresh, server_fixture
from tests.conftest import REPO
from tests.fakeserver import FakeServer
from tests.judge_helpers import REPLIES, make_tree, marker
from tests.unprivileged import unprivileged

SECRET = "sk-judge-4f1a9c-planted-secret"

server = server_fixture("Maybe, hard to say.")


@pytest.fixture(autouse=True)
def _reset(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh(server, monkeypatch, key=SECRET)
    server.state.replies = dict(REPLIES)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_tree(tmp_path / "results")
    (tmp_path / "config.toml").write_text(FAKE_CONFIG)
    monkeypatch.chdir(tmp_path)
    return tmp_path


BASE = [
    "stats",
    "judge",
    "-c",
    "config.toml",
    "-p",
    "oa",
    "-m",
    "judge-m",
    "-d",
    "datasets.json",
    "-r",
    "results",
]


def judge(*extra: str) -> object:
    return CliRunner().invoke(app, [*BASE, *extra])


COUNTS = ("judged", "correct", "incorrect", "unusable", "accuracy", "agreement_with_exact_match")


def rows(stdout: str) -> dict[str, dict[str, object]]:
    """The verdict counts of each setup entry (the entries hold the statistics too)."""
    report = orjson.loads(stdout)
    return {row["setup"]: {k: row[k] for k in COUNTS} for row in report["setups"]}


def test_open_answers_hand_computed_then_the_cache_sends_nothing(project: Path, server: FakeServer) -> None:
    first = judge("--format", "json")
    assert first.exit_code == 0, first.stderr
    # s1: paris CORRECT (EM 1), five INCORRECT (EM 0), the blue whale. unusable.
    # s2: Lyon INCORRECT (EM 0), four INCORRECT (EM 1: disagrees); its geo/3 is an error file.
    assert rows(first.stdout) == {
        "s1": {"judged": 3, "correct": 1, "incorrect": 1, "unusable": 1, "accuracy": 1 / 2,
               "agreement_with_exact_match": 1.0},
        "s2": {"judged": 2, "correct": 0, "incorrect": 2, "unusable": 0, "accuracy": 0.0,
               "agreement_with_exact_match": 0.5},
    }  # fmt: skip
    report = orjson.loads(first.stdout)
    default_sha = hashlib.sha256(DEFAULT_PROMPT.encode()).hexdigest()
    assert report["judge"] == {"provider": "oa", "model": "judge-m", "prompt_sha256": default_sha}
    sent = server.chat_requests()
    assert len(sent) == 5 and {r.model for r in sent} == {"judge-m"}
    assert all(r.body is not None and r.body["temperature"] == 0.0 for r in sent)
    assert "5 request(s) sent" in first.stderr and "kag: progress:" not in first.stdout

    server.reset()
    second = judge("--format", "json")
    assert second.exit_code == 0, second.stderr
    assert server.chat_requests() == []  # every verdict came from the cache
    assert second.stdout == first.stdout
    assert "5 verdict(s) from the cache, 0 request(s) sent" in second.stderr

    # --mcq adds the two MCQ answers: only they are asked for.
    server.reset()
    with_mcq = judge("--format", "json", "--mcq", "-j", "3")
    assert with_mcq.exit_code == 0, with_mcq.stderr
    assert sorted(
        r.prompt.split("Response to grade:\n")[1].split("\n")[0] for r in server.chat_requests()
    ) == [
        "The answer is a",
        "a",
    ]
    # s1 adds mc/1 "a" CORRECT (strict: correct); s2 adds "The answer is a" CORRECT (strict: wrong).
    assert rows(with_mcq.stdout) == {
        "s1": {"judged": 4, "correct": 2, "incorrect": 1, "unusable": 1, "accuracy": 2 / 3,
               "agreement_with_exact_match": 1.0},
        "s2": {"judged": 3, "correct": 1, "incorrect": 2, "unusable": 0, "accuracy": 1 / 3,
               "agreement_with_exact_match": 1 / 3},
    }  # fmt: skip
    # Nothing was written where a reader of the tree looks for results.
    outside_cache = {
        p for p in (project / "results").rglob("*") if p.is_file() and CACHE_FOLDER not in p.parts
    }
    assert len(outside_cache) == 9 and all(p.suffix == ".json" for p in outside_cache)


def test_text_table_and_options_before_the_sub_command(project: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["stats", "-d", "datasets.json", "-r", "results", "--setup", "s1", "judge", "-c", "config.toml",
         "-p", "oa", "-m", "judge-m"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "SETUP  JUDGED  CORRECT  INCORRECT  UNUSABLE   ACC%  AGREE%\n"
        "s1          3        1          1         1  50.00  100.00\n"
    )


def test_readme_example_is_this_output(project: Path) -> None:
    result = judge("--mcq")
    assert result.exit_code == 0, result.stderr
    for page in (REPO / "README.md", REPO / "docs" / "judge.md"):
        assert result.stdout in page.read_text(), page


def test_a_custom_prompt_is_sandboxed_and_keys_the_cache(project: Path, server: FakeServer) -> None:
    (project / "judge.md").write_text("Q={{ QUESTION }} | R={{ RESPONSE }} | ref={{ REFERENCE }}\n")
    server.state.replies = {"R=paris |": "CORRECT", "R=Lyon |": "CORRECT"}
    result = judge("--prompt", "judge.md", "--format", "json")
    assert result.exit_code == 0, result.stderr
    prompts = sorted(r.prompt for r in server.chat_requests())
    assert "Q=Capital of France? | R=paris | ref=Paris\nCity of Paris" in prompts and len(prompts) == 5
    report = orjson.loads(result.stdout)
    assert report["judge"]["prompt_sha256"] == hashlib.sha256((project / "judge.md").read_bytes()).hexdigest()
    assert rows(result.stdout)["s2"]["correct"] == 1 and rows(result.stdout)["s2"]["unusable"] == 1
    # Another prompt is another key: the built-in prompt asks again.
    server.reset()
    assert judge().exit_code == 0 and len(server.chat_requests()) == 5

    (project / "bad.md").write_text("{{ INPUT }}")
    bad = judge("--prompt", "bad.md")
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr.startswith("kag: error: bad.md: undefined template variable 'INPUT'")
    (project / "evil.md").write_text("{{ RESPONSE.__class__ }}")
    evil = judge("--prompt", "evil.md")
    assert evil.exit_code == 2 and "Python internals" in evil.stderr


def test_the_key_never_reaches_the_cache_or_the_output(project: Path, server: FakeServer) -> None:
    server.state.replies = {marker("paris"): f"CORRECT (key {SECRET})", marker("Lyon"): f"INCORRECT {SECRET}"}
    server.set_faults({marker("five"): ["echo401"]})  # a server quoting the rejected key back
    result = judge("--format", "json", "--retries", "0")
    assert result.exit_code == 0, result.stderr
    sent = server.chat_requests()
    assert sent and all(r.authorization == f"Bearer {SECRET}" for r in sent)  # the key was used
    assert rows(result.stdout)["s1"]["correct"] == 1 and rows(result.stdout)["s1"]["unusable"] == 2
    assert "Incorrect API key provided: ***" in result.stderr and "1 failed" in result.stderr
    assert SECRET not in result.stdout + result.stderr
    cached = [p for p in (project / "results" / CACHE_FOLDER).rglob("*") if p.is_file()]
    assert len(cached) == 4  # the failed request is not cached
    for path in cached:
        assert SECRET not in path.read_text() and SECRET not in str(path)
    assert any("(key ***)" in p.read_text() for p in cached)
    # The failure is asked again; the rest comes from the cache.
    server.reset()
    server.set_faults({})
    again = judge("--format", "json")
    assert again.exit_code == 0 and [r.prompt.count("five") for r in server.chat_requests()] == [1]


def test_a_link_at_the_cache_folder_is_refused_before_any_request(
    project: Path, server: FakeServer, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, project / "results" / CACHE_FOLDER)
    result = judge()
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("kag: error: results/.kag-judge: a symbolic link or a file")
    assert server.chat_requests() == [] and list(outside.iterdir()) == []


def test_usage_errors(project: Path, server: FakeServer) -> None:
    missing = judge("--setup", "nope*")
    assert (
        missing.exit_code == 2
        and "--setup nope* matches no setup in results (setups: s1, s2)" in missing.stderr
    )
    unknown = CliRunner().invoke(app, ["stats", "judge", "-c", "config.toml", "-p", "zz", "-m", "m",
                                       "-d", "datasets.json", "-r", "results"])  # fmt: skip
    assert unknown.exit_code == 2 and "provider 'zz' is missing from the configuration" in unknown.stderr
    fmt = judge("--format", "csv")
    assert (
        fmt.exit_code == 2
        and "--format csv: not available here (text, json, markdown, html, junit)" in fmt.stderr
    )
    no_data = CliRunner().invoke(app, ["stats", "judge", "-c", "config.toml", "-p", "oa", "-m", "m"])
    assert no_data.exit_code == 2 and "missing option '--datasets'" in no_data.stderr
    only_mcq = judge("--prefix", "x-")
    assert (
        only_mcq.exit_code == 2
        and "no open answer (--mcq judges MCQ answers too) to judge" in only_mcq.stderr
    )
    assert server.chat_requests() == []
    for result in (missing, unknown, fmt, no_data, only_mcq):
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_every_request_failing_is_an_error(project: Path, server: FakeServer) -> None:
    server.set_faults({}, default="404")
    result = judge("--retries", "0")
    assert result.exit_code == 2 and result.stdout == ""
    assert "kag: error: no judge request got an answer (5 failed)" in result.stderr
    assert not (project / "results" / CACHE_FOLDER).exists()


def test_ollama_judge(project: Path, server: FakeServer) -> None:
    result = CliRunner().invoke(app, [*BASE[:4], "-p", "ol", *BASE[6:], "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert {r.path for r in server.chat_requests()} == {"/api/chat"}
    assert rows(result.stdout)["s1"]["judged"] == 3


def test_the_cache_changes_no_other_report_of_the_tree(project: Path) -> None:
    runner = CliRunner()
    reports = (
        ["stats", "-d", "datasets.json", "-r", "results", "--format", "json", "-v"],
        ["stats", "-d", "datasets.json", "-r", "results"],
        ["stats", "find", "-r", "results", "--format", "json", "."],
    )
    before = [runner.invoke(app, argv) for argv in reports]
    assert judge("--mcq").exit_code == 0 and (project / "results" / CACHE_FOLDER).is_dir()
    after = [runner.invoke(app, argv) for argv in reports]
    for old, new in zip(before, after, strict=True):
        assert (new.exit_code, new.stdout) == (old.exit_code, old.stdout)
    assert after[0].stderr == before[0].stderr  # no new ignored-file line either
    assert "s1" in after[0].stdout and "paris" in after[2].stdout


def test_on_a_terminal_the_bar_says_judge(project: Path) -> None:
    """stderr on a terminal (a pseudo-terminal here): the bar names the judging, not the benchmark."""
    import pty
    import re
    import select
    import subprocess
    import sys
    import time

    main, secondary = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(REPO), KAG_WIDTH="120", TERM="xterm")
    process = subprocess.Popen(
        [sys.executable, "-m", "kag", *BASE, "--format", "json"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=secondary,
    )
    os.close(secondary)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if select.select([main], [], [], 1.0)[0]:
                try:
                    data = os.read(main, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif process.poll() is not None:
                break
        stdout, _ = process.communicate(timeout=60)
    finally:
        os.close(main)
    assert process.returncode == 0
    assert rows(stdout.decode())["s1"]["judged"] == 3
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode())
    bars = [line.split("\r")[-1] for line in shown.splitlines() if " 5/5 " in line]
    assert bars and bars[-1].startswith("judge ━") and "0 error(s)" in bars[-1]
    assert "benchmark" not in shown
    assert "kag: judge: 5 answer(s): 0 verdict(s) from the cache, 5 request(s) sent" in shown


def test_a_judge_without_one_usable_verdict_is_warned(project: Path, server: FakeServer) -> None:
    server.state.replies = {}  # every reply is the default "Maybe, hard to say.": no verdict
    result = judge("--format", "json")
    assert result.exit_code == 0, result.stderr
    assert {row["accuracy"] for row in rows(result.stdout).values()} == {None}
    assert (
        "kag: warning: the judge gave no usable verdict: all 5 verdict(s) are unusable "
        "(a reply that names neither CORRECT nor INCORRECT, or a request that failed); "
        "so there is no ACC%: check the judge model and the prompt"
    ) in result.stderr


def test_a_setup_without_one_usable_verdict_is_named(project: Path, server: FakeServer) -> None:
    # s2's three answers get no verdict; s1 keeps its usable ones.
    server.state.replies = {k: v for k, v in REPLIES.items() if k in (marker("paris"), marker("five"))}
    result = judge()
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "usable verdict" in line]
    expected = (
        "kag: warning: the judge gave no usable verdict for s2: 2 verdict(s), all unusable "
        "(a reply that names neither CORRECT nor INCORRECT, or a request that failed); "
        "so they have no ACC%"
    )
    assert warnings == [expected]
    # Every setup with a usable verdict (asked afresh, the cache removed): no such warning.
    shutil.rmtree(project / "results" / CACHE_FOLDER)
    server.state.replies = dict(REPLIES)
    again = judge("--format", "json")
    assert again.exit_code == 0 and "usable verdict" not in again.stderr


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "steps"),
        ("{{ 'x' * 2000000000 }}", "too large to hold"),
        ("{{ lipsum(1000000) }}", "undefined template variable 'lipsum'"),
    ],
)
def test_a_prompt_that_only_computes_is_stopped_before_any_request(
    project: Path, server: FakeServer, prompt: str, message: str
) -> None:
    (project / "work.md").write_text(prompt + "{{ QUESTION }}{{ RESPONSE }}{{ REFERENCE }}")
    result = judge("--prompt", "work.md")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("kag: error: work.md: ") and message in result.stderr
    assert result.stderr.count("\n") == 1
    assert server.chat_requests() == []


# ---------------------------------------------------------------- the judge's server, the tree, odd inputs


def test_another_url_behind_the_same_provider_asks_again(
    project: Path, server: FakeServer, monkeypatch
) -> None:
    assert judge().exit_code == 0 and len(server.chat_requests()) == 5
    with FakeServer(reply="CORRECT") as other:
        monkeypatch.setenv("FAKE_URL", other.url)  # same provider name "oa", same model
        moved = judge("--format", "json")
        assert moved.exit_code == 0, moved.stderr
        assert len(other.chat_requests()) == 5  # none of the first server's verdicts reused
        assert rows(moved.stdout)["s1"]["correct"] == 3
        other.reset()
        assert judge().exit_code == 0 and other.chat_requests() == []  # its own verdicts are cached
    # The first server's verdicts are still there for it.
    server.reset()
    monkeypatch.setenv("FAKE_URL", server.url)
    again = judge("--format", "json")
    assert again.exit_code == 0, again.stderr
    assert server.chat_requests() == []
    assert rows(again.stdout)["s1"]["correct"] == 1


@pytest.fixture
def open_project(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The project in a folder the user nobody can enter (pytest's tmp_path is root's own)."""
    top = Path(tempfile.mkdtemp(prefix="kag-judge-ro-"))
    try:
        top.chmod(0o755)
        make_tree(top / "results")
        (top / "config.toml").write_text(FAKE_CONFIG)
        monkeypatch.chdir(top)
        yield top
    finally:
        for folder in [top, *top.rglob("*")]:
            if folder.is_dir() and not folder.is_symlink():
                folder.chmod(0o755)
        shutil.rmtree(top)


def read_only(root: Path) -> None:
    for folder in [root, *root.rglob("*")]:
        if folder.is_dir():
            folder.chmod(0o555)


def test_a_read_only_tree_is_refused_before_any_request(open_project: Path, server: FakeServer) -> None:
    results = open_project / "results"
    read_only(results)
    with unprivileged():
        result = judge()
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        f"kag: error: {results}: cannot write the judge's verdicts here (Permission denied); "
        "no request was sent\n"
    )
    assert server.chat_requests() == []


def test_a_read_only_cache_folder_is_named_in_full(open_project: Path, server: FakeServer) -> None:
    results = open_project / "results"
    assert judge().exit_code == 0 and len(server.chat_requests()) == 5
    read_only(results)
    server.reset()
    with unprivileged():
        cached = judge()  # every verdict is cached: reading needs no write
        assert cached.exit_code == 0, cached.stderr
        assert server.chat_requests() == []
        more = judge("--mcq")
    assert more.exit_code == 2 and server.chat_requests() == []
    [folder] = (results / CACHE_FOLDER).iterdir()
    assert more.stderr.startswith(f"kag: error: {folder}: cannot write the judge's verdicts here")


def test_a_labelled_tree_is_refused_naming_the_value(project: Path, server: FakeServer) -> None:
    labelled = CliRunner().invoke(app, [*BASE[:-1], "run1=results"])
    assert labelled.exit_code == 2
    assert labelled.stderr == (
        "kag: error: kag stats judge reads one result tree: give -r DIR, not LABEL=DIR "
        "(-r results, not -r run1=results)\n"
    )
    missing = CliRunner().invoke(app, [*BASE[:-1], "run1=nope"])
    assert missing.exit_code == 2 and "neither 'run1=nope' nor 'nope' is a directory" in missing.stderr
    assert server.chat_requests() == []


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.mkdir(), "judge prompt is a directory"),
        (lambda p: os.mkfifo(p), "judge prompt is a FIFO, not a regular file"),
        (lambda p: p.symlink_to("/dev/zero"), "judge prompt is a character device, not a regular file"),
        (lambda p: p.write_bytes(b"\xff\xfe{{ RESPONSE }}"), "judge prompt is not UTF-8 text"),
        (lambda p: p.write_text(""), "judge prompt is empty"),
        (lambda p: p.write_text(" \n\t\n"), "judge prompt is empty"),
    ],
    ids=["directory", "fifo", "dev-zero", "not-utf8", "empty", "blank"],
)
def test_odd_prompt_files_are_refused(project: Path, server: FakeServer, make, message: str) -> None:
    make(project / "odd")
    result = judge("--prompt", "odd")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("kag: error: odd") and message in result.stderr
    assert result.stderr.count("\n") == 1
    assert server.chat_requests() == []


def test_an_alias_that_normalizes_to_nothing_is_refused(project: Path, server: FakeServer) -> None:
    data = orjson.loads((project / "datasets.json").read_bytes())
    data["geo"]["2"]["output"]["answers"].append("The")
    (project / "datasets.json").write_bytes(orjson.dumps(data))
    result = judge()
    assert result.exit_code == 2
    assert result.stderr.startswith("kag: error: datasets.json: geo/2: 'output.answers' item 3, 'The', ")
    assert server.chat_requests() == []

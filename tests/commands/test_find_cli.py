"""`kag stats find` end to end: the real CLI on result trees written by the real writer."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.results import ErrorResult, write_result
from tests.conftest import write_ok

runner = CliRunner()


def ok(path: Path, text: str) -> None:
    write_ok(path, text, seconds=2)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    ok(root / "mcq" / "0" / "run1-kag.json", "I don't know.")
    ok(root / "mcq" / "0" / "run1-native.json", "b")
    ok(root / "mcq" / "1" / "run1-kag.json", "Probably D, although the graph context does not mention it.")
    ok(root / "mcq" / "1" / "run1-native.json", "i don't KNOW")
    write_result(
        root / "mcq" / "2" / "run1-kag.json", ErrorResult("Failed during the knowledge retrieval phase")
    )
    ok(root / "mcq" / "2" / "run1-native.json", "a")
    (root / "free" / "9").mkdir(parents=True)
    (root / "free" / "9" / "run1-kag.json").write_text('{"ok": {"result": "know"}, "error": "both"}')
    ok(root / "free" / "9" / "other-kag.json", "know")  # another prefix: not counted with --prefix run1-
    return root


def invoke(*args: str, **kw: object):
    return runner.invoke(app, list(args), **kw)  # type: ignore[arg-type]


def rel(root: Path, p: str) -> str:
    return str(root / p)


# ---------------------------------------------------------------- options before and after `find`


def test_options_before_and_after_find_give_the_same_document(tree: Path) -> None:
    after = invoke("stats", "find", "(?i)know", "-r", str(tree), "--prefix", "run1-", "--format", "json")
    before = invoke("stats", "-r", str(tree), "--prefix", "run1-", "--format", "json", "find", "(?i)know")
    mixed = invoke("stats", "-r", str(tree), "find", "(?i)know", "--prefix", "run1-", "--format", "json")
    assert after.exit_code == before.exit_code == mixed.exit_code == 0, before.stderr
    assert json.loads(after.stdout) == json.loads(before.stdout) == json.loads(mixed.stdout)
    doc = json.loads(after.stdout)
    assert (doc["matches"], doc["total"]) == (2, 7)
    assert doc["paths"] == [rel(tree, "mcq/0/run1-kag.json"), rel(tree, "mcq/1/run1-native.json")]


def test_options_after_find_win(tree: Path, tmp_path: Path) -> None:
    result = invoke(
        "stats",
        "-r",
        str(tmp_path / "elsewhere"),
        "--format",
        "text",
        "find",
        "know",
        "-r",
        str(tree),
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["total"] == 8  # no prefix: other-kag.json counts too


def test_filters_before_and_after_find(tree: Path) -> None:
    before = invoke(
        "stats", "-r", str(tree), "--setup", "run1-native", "find", "(?i)know", "--format", "json"
    )
    after = invoke("stats", "find", "(?i)know", "-r", str(tree), "--setup", "run1-native", "--format", "json")
    assert json.loads(before.stdout) == json.loads(after.stdout)
    doc = json.loads(after.stdout)
    assert (doc["matches"], doc["total"]) == (1, 3)
    only_free = invoke("stats", "find", "know", "-r", str(tree), "--dataset", "fr*", "--format", "json")
    assert json.loads(only_free.stdout)["total"] == 2


def test_a_setup_filter_that_matches_nothing_is_warned_about(tree: Path) -> None:
    result = invoke("stats", "find", "know", "-r", str(tree), "--setup", "nope")
    assert result.exit_code == 1  # find's own rule: nothing matched
    assert result.stdout == ""
    assert result.stderr == (
        f"kag: warning: --setup nope matches no setup in {tree} (setups: other-kag, run1-kag, run1-native)\n"
        "No result file was searched.\n"
    )
    # given on `stats`, with the prefix: the setups are named as the filter sees them
    before = invoke("stats", "-r", str(tree), "--prefix", "run1-", "--setup", "nat", "find", "know")
    assert before.exit_code == 1
    assert before.stderr.startswith(
        f"kag: warning: --setup nat matches no setup in {tree} (setups: kag, native)\n"
    )


def test_an_unmatched_setup_next_to_a_good_one_warns_and_the_search_goes_on(tree: Path) -> None:
    filters = ("--setup", "run1-native", "--setup", "run1-kga")
    result = invoke("stats", "find", "^b$", "-r", str(tree), *filters, "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["paths"] == [rel(tree, "mcq/0/run1-native.json")]
    assert result.stderr == (
        f"kag: warning: --setup run1-kga matches no setup in {tree} (setups: other-kag, run1-kag, run1-native)\n"
    )
    good = invoke("stats", "find", "^b$", "-r", str(tree), "--setup", "run1-*", "--dataset", "mcq")
    assert good.exit_code == 0 and "matches no" not in good.stderr


def test_an_unmatched_dataset_filter_names_the_dataset_folders(tree: Path) -> None:
    result = invoke("stats", "find", "know", "-r", str(tree), "--dataset", "nope", "--setup", "nope")
    assert result.exit_code == 1
    assert result.stdout == ""
    # the --setup warning would only repeat that no dataset was selected
    assert result.stderr == (
        f"kag: warning: --dataset nope matches no dataset in {tree} (datasets: free, mcq)\n"
        "No result file was searched.\n"
    )
    within = invoke("stats", "find", "know", "-r", str(tree), "--dataset", "fr*", "--setup", "run1-native")
    assert within.exit_code == 1
    assert within.stderr.startswith(
        f"kag: warning: --setup run1-native matches no setup in {tree} with --dataset fr* "
        "(setups: other-kag, run1-kag)\n"
    )


def test_no_datasets_file_needed(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree)  # --results defaults to "."
    result = invoke("stats", "find", "^b$", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["paths"] == ["./mcq/0/run1-native.json"]


# ---------------------------------------------------------------- exit codes and messages


def test_exit_codes_match_none_invalid(tree: Path) -> None:
    assert invoke("stats", "find", "know", "-r", str(tree)).exit_code == 0
    none = invoke("stats", "find", "zebra", "-r", str(tree))
    assert none.exit_code == 1 and none.stdout == ""
    assert (
        none.stderr.splitlines()[-1]
        == "0 file(s) matched out of 8 (1 error file(s) skipped: no response to search; kag -v stats find lists them)."
    )
    bad = invoke("stats", "find", "(unclosed", "-r", str(tree))
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr == "kag: error: invalid pattern '(unclosed': missing ) at position 9\n"


def test_a_pattern_that_repeats_too_much_is_refused_before_it_is_compiled(tree: Path) -> None:
    # Spelled out, (a{1000}){1000} is a million steps: hundreds of MB to compile.
    bad = invoke("stats", "find", "(a{1000}){1000}", "-r", str(tree))
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr == (
        "kag: error: pattern '(a{1000}){1000}' repeats too much: its {n} counts spell out 1,000,000"
        " characters, more than 100,000 (use * or + or a smaller count)\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-C", "-1"], "kag: error: --context must be 0 or more (got -1)"),
        (["--max-count", "0"], "kag: error: --max-count must be 1 or more (got 0)"),
        (["--timeout", "0"], "kag: error: --timeout must be more than 0 seconds (got 0.0)"),
        (["-c", "-l"], "kag: error: --count and --files-with-matches do not go together"),
        (["--jobs", "0"], "kag: error: --jobs must be 1 or more (got 0)"),
        (
            ["--interactive", "--format", "json"],
            "kag: error: --interactive works with --format text only, without --count",
        ),
    ],
)
def test_bad_option_values(tree: Path, args: list[str], message: str) -> None:
    result = invoke("stats", "find", "know", "-r", str(tree), *args)
    assert result.exit_code == 2
    assert result.stderr.strip() == message
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_stats_format_find_cannot_render(tree: Path) -> None:
    result = invoke("stats", "--format", "markdown", "find", "know", "-r", str(tree))
    assert result.exit_code == 2
    assert (
        result.stderr.strip()
        == "kag: error: --format markdown is not available for find (text, json or jsonl)"
    )


def test_missing_results_folder(tmp_path: Path) -> None:
    result = invoke("stats", "find", "x", "-r", str(tmp_path / "nope"))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"kag: error: {tmp_path / 'nope'}: results directory not found"


# ---------------------------------------------------------------- output formats


def test_text_lines_and_summary(tree: Path) -> None:
    result = invoke("stats", "find", "(?i)know", "-r", str(tree), "--prefix", "run1-", "-C", "6")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "mcq/0/run1-kag.json:8: …don't [know].",
        "mcq/1/run1-native.json:8: …don't [KNOW]",
    ]
    err = result.stderr.splitlines()
    assert (
        err[0] == f"kag: warning: {tree / 'free/9/run1-kag.json'}: unreadable result file, skipped: "
        "expected an object with exactly one key, 'ok' or 'error'"
    )
    # files, not occurrences (mcq/0 holds one match, and so does mcq/1); the error file once
    assert err[1:] == [
        "2 file(s) matched out of 7 (1 error file(s) skipped: no response to search; kag -v stats find lists them)."
    ]
    assert "\x1b" not in result.stdout  # not a terminal: no colour


def assert_verbose_listing(result, tree: Path) -> None:  # type: ignore[no-untyped-def]
    """The -l listing of (?i)know under prefix run1-, with the skipped error file named at -v."""
    assert result.stdout.splitlines() == [
        rel(tree, "mcq/0/run1-kag.json"),
        rel(tree, "mcq/1/run1-native.json"),
    ]
    assert (
        f"kag: info: {tree / 'mcq/2/run1-kag.json'}: error result file, skipped (no response to search)"
        in result.stderr.splitlines()
    )


def test_v_after_find_is_verbosity_not_an_inverted_match(tree: Path) -> None:
    """As with the Rust tool's global flags, `-v` after `find` is verbosity: a script
    written for it keeps its meaning; inverting is `--invert-match`, long only."""
    result = invoke("stats", "find", "(?i)know", "-v", "-r", str(tree), "--prefix", "run1-", "-l")
    assert result.exit_code == 0
    assert_verbose_listing(result, tree)
    inverted = invoke(
        "stats", "find", "(?i)know", "--invert-match", "-r", str(tree), "--prefix", "run1-", "-l"
    )
    assert inverted.exit_code == 0
    assert inverted.stdout.splitlines() == [
        rel(tree, "mcq/0/run1-native.json"),
        rel(tree, "mcq/1/run1-kag.json"),
        rel(tree, "mcq/2/run1-native.json"),
    ]
    assert "kag: info:" not in inverted.stderr
    assert (
        inverted.stderr.splitlines()[-1]
        == "3 file(s) did not match out of 7 (1 error file(s) skipped: no response to search; kag -v stats find lists them)."
    )


def test_q_after_find_cancels_a_v_before_it(tree: Path) -> None:
    """-v/-q of every level add up: `kag -v stats find ... -q` is the default verbosity."""
    result = invoke("-v", "stats", "find", "(?i)know", "-r", str(tree), "--prefix", "run1-", "-l", "-q")
    assert result.exit_code == 0
    assert len(result.stdout.splitlines()) == 2
    assert "kag: info:" not in result.stderr
    assert "1 error file(s) skipped: no response to search" in result.stderr


def test_v_before_find_is_verbosity(tree: Path) -> None:
    result = invoke("stats", "-v", "find", "(?i)know", "-r", str(tree), "--prefix", "run1-", "-l")
    assert_verbose_listing(result, tree)


def test_count_per_setup(tree: Path) -> None:
    result = invoke("stats", "find", "(?i)know", "-r", str(tree), "--prefix", "run1-", "-c")
    assert result.stdout.splitlines() == ["kag:1", "native:1"]
    jsonl = invoke(
        "stats", "find", "(?i)know", "-r", str(tree), "--prefix", "run1-", "-c", "--format", "jsonl"
    )
    assert [json.loads(line) for line in jsonl.stdout.splitlines()] == [
        {"setup": "kag", "matches": 1, "total": 4},
        {"setup": "native", "matches": 1, "total": 3},
    ]


def test_jsonl_and_json_hits(tree: Path) -> None:
    result = invoke(
        "stats", "find", "don't", "-i", "-r", str(tree), "--prefix", "run1-", "--format", "jsonl", "-C", "2"
    )
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {
            "path": rel(tree, "mcq/0/run1-kag.json"),
            "dataset": "mcq",
            "question": "0",
            "setup": "kag",
            "offset": 2,
            "match": "don't",
            "context": "I don't k",
        },
        {
            "path": rel(tree, "mcq/1/run1-native.json"),
            "dataset": "mcq",
            "question": "1",
            "setup": "native",
            "offset": 2,
            "match": "don't",
            "context": "i don't K",
        },
    ]
    assert "out of" not in result.stderr  # the summary line belongs to the text format
    doc = json.loads(
        invoke(
            "stats",
            "find",
            "don't",
            "-i",
            "-r",
            str(tree),
            "--prefix",
            "run1-",
            "--format",
            "json",
            "-C",
            "2",
        ).stdout
    )
    assert doc["hits"] == [json.loads(line) for line in result.stdout.splitlines()]


def test_max_count(tree: Path) -> None:
    ok(tree / "mcq" / "3" / "run1-kag.json", "no no no no")
    result = invoke(
        "stats", "find", r"\bno\b", "-r", str(tree), "--setup", "run1-kag", "--max-count", "2", "-C", "0"
    )
    assert result.stdout.splitlines() == ["mcq/3/run1-kag.json:0: [no]…", "mcq/3/run1-kag.json:3: …[no]…"]


def test_catastrophic_pattern_is_reported_and_the_search_completes(tmp_path: Path) -> None:
    for q in range(3):
        ok(tmp_path / "d" / str(q) / "s.json", "a" * 4000 + "b")
    ok(tmp_path / "d" / "9" / "s.json", "aaa")
    result = invoke("stats", "find", "(a+)+$", "-r", str(tmp_path), "--timeout", "0.2", "--format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["timed_out"] == [str(tmp_path / "d" / str(q) / "s.json") for q in range(3)]
    assert doc["paths"] == [str(tmp_path / "d/9/s.json")] and doc["total"] == 4
    assert result.stderr.count("pattern timed out (--timeout 0.2 s of CPU), file skipped") == 3


# ---------------------------------------------------------------- --interactive


def test_interactive_without_fzf_is_a_clear_error(tree: Path, tmp_path: Path) -> None:
    result = invoke("stats", "find", "know", "-r", str(tree), "--interactive", env={"PATH": str(tmp_path)})
    assert result.exit_code == 2 and result.stdout == ""
    assert (
        result.stderr == "kag: error: --interactive needs fzf on PATH "
        "(https://github.com/junegunn/fzf, e.g. apt-get install fzf)\n"
    )


def test_interactive_pipes_path_and_line_to_fzf(tree: Path, tmp_path: Path) -> None:
    """A stand-in `fzf` records what it is given (fzf itself needs a terminal)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "fzf"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/args\ncat > {tmp_path}/stdin\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    result = invoke(
        "stats", "find", "(?i)know", "-r", str(tree), "--prefix", "run1-", "--interactive", env=env
    )
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "args").read_text().splitlines() == [
        "--delimiter",
        "\t",
        "--with-nth",
        "2..",
        "--preview",
        "cat {1}",
    ]
    assert (tmp_path / "stdin").read_text().splitlines() == [
        f"{tree / 'mcq/0/run1-kag.json'}\tmcq/0/run1-kag.json:8: I don't [know].",
        f"{tree / 'mcq/1/run1-native.json'}\tmcq/1/run1-native.json:8: i don't [KNOW]",
    ]
    assert result.stdout == ""
    assert (
        result.stderr.splitlines()[-1]
        == "2 file(s) matched out of 7 (1 error file(s) skipped: no response to search; kag -v stats find lists them)."
    )


def test_interactive_with_no_match_never_starts_fzf(tree: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fzf").write_text(f"#!/bin/sh\ntouch {tmp_path}/started\n")
    (bin_dir / "fzf").chmod(0o755)
    result = invoke("stats", "find", "zebra", "-r", str(tree), "--interactive", env={"PATH": str(bin_dir)})
    assert result.exit_code == 1 and not (tmp_path / "started").exists()


@pytest.mark.skipif(
    subprocess.run(["sh", "-c", "command -v fzf"], capture_output=True, check=False).returncode != 0,
    reason="fzf not installed",
)
def test_interactive_with_the_real_fzf(tree: Path) -> None:
    """fzf's --filter mode (given through FZF_DEFAULT_OPTS) runs without a terminal."""
    env = {**os.environ, "FZF_DEFAULT_OPTS": "--filter=KNOW"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kag",
            "stats",
            "find",
            "(?i)know",
            "-r",
            str(tree),
            "--prefix",
            "run1-",
            "--interactive",
        ],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    # fzf prints the selected line; --filter=KNOW (smart case) keeps only the upper-case one.
    assert proc.stdout.splitlines() == [
        f"{tree / 'mcq/1/run1-native.json'}\tmcq/1/run1-native.json:8: i don't [KNOW]"
    ]


# ---------------------------------------------------------------- Ctrl-C with a process pool


def _processes(*, parent: int | None = None, session: int | None = None) -> list[int]:
    """Live (not zombie) processes with that parent or in that session, read from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        state, ppid, _, sid = stat.rsplit(")", 1)[1].split()[:4]
        if state != "Z" and (int(ppid) == parent or int(sid) == session):
            found.append(int(entry))
    return found


def _children(pid: int) -> list[int]:
    return _processes(parent=pid)


def _ignores_sigint(pid: int) -> bool:
    """Whether process ``pid`` ignores SIGINT (a worker past its start-up sets it so)."""
    try:
        status = Path("/proc", str(pid), "status").read_text()
    except OSError:
        return False
    ignored = next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:"))
    return bool(int(ignored, 16) & (1 << (signal.SIGINT - 1)))


def _stuck_search(root: Path, folders: int) -> tuple[subprocess.Popen[str], list[int]]:
    """`kag stats find (a+)+$` with two workers over ``folders`` files that each take the
    pattern hours of CPU (and an hour of --timeout): once both workers are up, they are
    stuck in the pattern, and only what the test does to the process ends it. Returns the
    process (its own session) and the workers' pids, once both are past their start-up
    (they ignore SIGINT: a Ctrl-C earlier would meet a half-started worker)."""
    for q in range(folders):
        ok(root / "d" / str(q) / "s.json", "a" * 5000 + "b")
    command = ["find", "(a+)+$", "-r", str(root), "--timeout", "3600", "--jobs", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kag", "stats", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120  # a hang guard only: the workers do start
    while proc.poll() is None and time.monotonic() < deadline:
        workers = _children(proc.pid)
        if len(workers) >= 2 and all(_ignores_sigint(pid) for pid in workers):
            return proc, workers
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError(f"the workers did not start: {proc.communicate()}")


def test_ctrl_c_stops_the_pool_with_exit_130(tmp_path: Path) -> None:
    proc, _ = _stuck_search(tmp_path, 40)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
    try:
        # The workers would match for hours: only the Ctrl-C can end kag (the limit is a hang guard).
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1] == "kag: error: interrupted"
    assert "Traceback" not in err
    assert _processes(session=proc.pid) == []  # no orphaned worker keeps burning CPU


def test_reader_going_away_stops_the_pool_quietly(tmp_path: Path) -> None:
    """`kag stats find X | head -1`: exit 0 at once, no traceback, no worker left behind."""
    for q in range(300):
        ok(tmp_path / "d" / f"{q:03}" / "s.json", "know " * 50)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kag", "stats", "find", "know", "-r", str(tmp_path), "--jobs", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does after its line
    try:
        _, raw_err = proc.communicate(timeout=60)  # a hang fails the test instead of stalling it
        err = raw_err.decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert first.decode().startswith("d/000/s.json:0: [know]")
    assert proc.returncode == 0
    assert "Traceback" not in err and "Exception ignored" not in err
    assert _processes(session=proc.pid) == []


def test_a_worker_that_dies_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """A worker killed from outside (the OOM killer, say) must end the search with one
    error line and exit 2: never a hang, never a silently short count. Enough folders for
    both workers to be busy, and whichever is killed (busy or idle) must be noticed."""
    proc, workers = _stuck_search(tmp_path, 300)
    os.kill(workers[0], signal.SIGKILL)
    try:
        out, err = proc.communicate(timeout=300)  # a hang guard: the workers match for hours
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 2
    assert err.strip().splitlines()[-1] == (
        "kag: error: a search worker process died unexpectedly (out of memory?); the search stopped and its output is incomplete"
    )
    assert out == "" and "Traceback" not in err
    assert _processes(session=proc.pid) == []  # the other worker was stopped too


def test_workers_stop_when_the_parent_is_killed(tmp_path: Path) -> None:
    """SIGKILL of kag (a supervisor, the OOM killer) runs no clean-up in it: its workers
    must notice that their parent is gone (the pipe's end closes) and stop by themselves
    once their chunk is done, instead of living on as orphans."""
    for q in range(600):  # 0.005 s of pattern per file: chunks of well under a second
        ok(tmp_path / "d" / f"{q:03}" / "s.json", "a" * 5000 + "b")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kag", "stats", "find", "(a+)+$", "-r", str(tmp_path), "--timeout", "0.005"]
        + ["--jobs", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(_children(proc.pid)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(_children(proc.pid)) >= 2, "the workers did not start"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 120  # a hang guard: each worker first ends its chunk
        while _processes(session=proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes(session=proc.pid) == []
    finally:
        for pid in _processes(session=proc.pid):
            os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- hidden folders, what is counted


@pytest.fixture
def hidden_tree(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    ok(root / "ds" / "0" / "s.json", "a")
    ok(root / "ds" / "1" / "s.json", "b")
    write_result(root / "ds" / "2" / "s.json", ErrorResult("boom"))
    write_result(root / "ds" / "3" / "s.json", ErrorResult("boom"))
    # a cache, an editor's folder inside a question folder, a hidden dataset
    ok(root / ".kag-judge" / "j" / "x" / "s.json", "a")
    ok(root / "ds" / "0" / ".bak" / "s.json", "a")
    ok(root / ".old" / "0" / "s.json", "a")
    return root


def test_find_skips_hidden_folders_unless_hidden_is_given(hidden_tree: Path) -> None:
    plain = invoke("stats", "find", "^a$", "-r", str(hidden_tree), "-l")
    assert plain.exit_code == 0
    assert plain.stdout == f"{hidden_tree / 'ds/0/s.json'}\n"
    assert plain.stderr.splitlines() == [
        (
            "1 file(s) matched out of 4 (2 error file(s) skipped: no response to search; "
            "kag -v stats find lists them)."
        )
    ]
    every = invoke("stats", "find", "^a$", "-r", str(hidden_tree), "-l", "--hidden")
    assert every.stdout.splitlines() == [
        str(hidden_tree / p)
        for p in (".kag-judge/j/x/s.json", ".old/0/s.json", "ds/0/.bak/s.json", "ds/0/s.json")
    ]
    assert every.stderr.splitlines()[-1].startswith("4 file(s) matched out of 7 ")
    # a hidden search root is searched: only the folders below it are skipped
    inside = invoke("stats", "find", "^a$", "-r", str(hidden_tree / ".old"), "--format", "json")
    assert json.loads(inside.stdout)["matches"] == 1


def test_find_says_once_that_error_files_hold_no_response(hidden_tree: Path) -> None:
    for fmt in ("json", "jsonl"):
        result = invoke("stats", "find", ".", "-r", str(hidden_tree), "--format", fmt, "--jobs", "2")
        assert result.exit_code == 0
        assert result.stderr == (
            "kag: warning: 2 error file(s) skipped: no response to search; kag -v stats find lists them\n"
        )


def test_find_counts_files_not_occurrences_and_words_an_inverted_search(tmp_path: Path) -> None:
    root = tmp_path / "results"
    ok(root / "ds" / "0" / "s.json", "a a a a")  # four occurrences, one file
    ok(root / "ds" / "1" / "s.json", "b")
    assert invoke("stats", "find", "a", "-r", str(root)).stderr == "1 file(s) matched out of 2.\n"
    inverted = invoke("stats", "find", "a", "-r", str(root), "--invert-match")
    assert inverted.stderr == "1 file(s) did not match out of 2.\n"
    none = invoke("stats", "find", "a", "-r", str(root), "--setup", "nope")
    assert none.exit_code == 1 and none.stderr.endswith("No result file was searched.\n")

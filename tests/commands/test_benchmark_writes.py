"""Writing result trees safely under hostile input and hard failures: a full disk, two
writers on one tree, planted symbolic links, a dead server, names the file system cannot
hold. Each test runs `kag benchmark` (CliRunner or a real subprocess) against the loopback
server, or a writer function on real files."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kag.commands._report import write_report
from kag.errors import InputError
from kag.results import (
    MAX_RESULT_BYTES,
    TMP_SUFFIX,
    ErrorResult,
    OkResult,
    OkStats,
    TreeBusy,
    UnreadableResult,
    dump_result,
    lock_tree,
    read_result,
    read_result_nofollow,
    temporary_name,
    write_atomic,
)
from tests.bench_helpers import (
    FAKE_CONFIG,
    SECRET,
    bench_args,
    fresh,
    invoke,
    make_project,
    mcq,
    server_fixture,
    tree_files,
)
from tests.conftest import REPO
from tests.fakeserver import FakeServer

server = server_fixture("b")


@pytest.fixture(autouse=True)
def _reset(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh(server, monkeypatch, key=SECRET)


def out_files(root: Path) -> dict[str, bytes]:
    """Every regular file of the output tree and its bytes."""
    out = root / "out"
    return {str(p.relative_to(out)): p.read_bytes() for p in tree_files(out, "*") if p.is_file()}


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("kag: error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


# ---------------------------------------------------------------- a full disk


def big_questions(n: int, big: int, size: int) -> dict[str, object]:
    """``n`` small questions; question ``big`` has an input of ``size`` characters (the
    prompt, and so the result file, is that big)."""
    return {
        "mcq": {
            str(i): mcq(f"question number {i}" + (" padding" * (size // 8) if i == big else ""))
            for i in range(n)
        }
    }


def test_a_file_size_limit_mid_write_leaves_no_cut_file_and_stops_the_run(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes the kernel cut the write short at the limit (a short write), then
    # refuse the rest (EFBIG): the writer must notice, remove its temporary, stop the run.
    root = make_project(tmp_path, n=6, questions=big_questions(6, 3, 20_000))
    env = dict(os.environ, PYTHONPATH=str(REPO), KAG_WIDTH="200")
    limit = 8192

    def cap() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    argv = [sys.executable, "-m", "kag", *bench_args(root, "--setup", "s1")]
    first = subprocess.run(
        argv, cwd=root, env=env, check=False, capture_output=True, text=True, preexec_fn=cap
    )
    assert first.returncode == 2, first.stderr
    line = one_error_line(first.stderr)
    files = out_files(root)
    # Writes already under way when the big one failed may finish; the big one left nothing.
    assert "mcq/3/s1.json" not in files and all(name.endswith("/s1.json") for name in files)
    assert {"mcq/0/s1.json", "mcq/1/s1.json", "mcq/2/s1.json"} <= set(files)
    not_run = 6 - len(files)
    assert f"disk full: {not_run} task(s) not run; free space and run again with --continue" in line
    for data in files.values():
        assert isinstance(orjson.loads(data), dict)
    second = subprocess.run(
        [*argv, "--continue"], cwd=root, env=env, check=False, capture_output=True, text=True
    )
    assert second.returncode == 0, second.stderr
    assert f"{not_run} task(s) run: {not_run} ok" in second.stderr
    assert sorted(out_files(root)) == [f"mcq/{i}/s1.json" for i in range(6)]
    assert isinstance(read_result(root / "out" / "mcq" / "3" / "s1.json"), OkResult)


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "out"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount)], check=False, capture_output=True
    )
    if done.returncode != 0:
        pytest.skip("mounting a tmpfs is not permitted here")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_full_tmpfs_leaves_no_truncated_file_counted_as_written(
    tmp_path: Path, small_tmpfs: Path, server: FakeServer
) -> None:
    root = make_project(tmp_path, n=6, questions=big_questions(6, 3, 60_000))
    # Leave about 24 KB free: the small results fit, the 60 KB one cannot.
    filler = small_tmpfs / "filler.bin"
    with filler.open("wb") as handle:
        try:
            handle.write(b"x" * (200 * 1024 - 24 * 1024))
        except OSError:
            pass
    result = invoke(bench_args(root, "--setup", "s1"))
    assert result.exit_code == 2, result.stderr
    names = sorted(n for n in out_files(root) if n != "filler.bin")
    assert "mcq/3/s1.json" not in names and all(name.endswith("/s1.json") for name in names)
    assert f"disk full: {6 - len(names)} task(s) not run" in one_error_line(result.stderr)
    for name in names:
        assert isinstance(read_result(small_tmpfs / name), OkResult)  # whole files only
    filler.unlink()
    again = invoke(bench_args(root, "--setup", "s1", "--continue"))
    assert again.exit_code == 0, again.stderr
    big = read_result(small_tmpfs / "mcq" / "3" / "s1.json")
    assert isinstance(big, OkResult) and big.stats.prompt is not None and len(big.stats.prompt) > 60_000


# ---------------------------------------------------------------- one writer per tree


def test_a_second_run_on_the_same_tree_exits_2_naming_the_holder(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, n=10)
    server.hold()  # the first run's two calls stay in flight until the end of the test
    env = dict(os.environ, PYTHONPATH=str(REPO), KAG_WIDTH="200")
    first = subprocess.Popen(
        [sys.executable, "-m", "kag", *bench_args(root, "-p", "2")],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Both of its calls are in flight: it holds the lock (taken before the first call).
        assert len(server.wait_requests(2)) == 2, first.poll()
        # A call of the second run would be held too: --timeout ends it instead of a hang.
        second = invoke(bench_args(root, "--continue", "--timeout", "30"))
        assert second.exit_code == 2
        line = one_error_line(second.stderr)
        assert f"another kag benchmark (pid {first.pid}) is writing this result tree" in line
        assert second.stdout == ""
        assert len(server.chat_requests()) == 2  # only the first run's two held calls
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert first.returncode == 130
    server.release()
    third = invoke(bench_args(root, "--continue"))  # the lock went with the first run
    assert third.exit_code == 0, third.stderr
    assert not list((root / "out").rglob("*.tmp"))


def test_the_lock_can_be_taken_per_part_and_is_given_back(tmp_path: Path) -> None:
    with lock_tree(tmp_path, "1-of-2") as one:
        assert one.path.name.endswith(TMP_SUFFIX) and "1-of-2" in one.path.name
        assert one.path.read_text().strip() == str(os.getpid())
        with lock_tree(tmp_path, "2-of-2"):  # another part: no conflict
            pass
        with pytest.raises(Exception, match=f"pid {os.getpid()}"):
            lock_tree(tmp_path, "1-of-2")
    assert not one.path.exists()
    lock_tree(tmp_path, "1-of-2").release()


def test_temporaries_are_unique_and_only_a_dead_writers_are_removed(
    tmp_path: Path, server: FakeServer
) -> None:
    names = {temporary_name("s1.json") for _ in range(50)}
    assert len(names) == 50 and all(n.startswith(f"s1.json.{os.getpid()}.") for n in names)
    root = make_project(tmp_path, n=2)
    folder = root / "out" / "mcq" / "0"
    folder.mkdir(parents=True)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], check=False, capture_output=True
    )
    dead_pid = int(dead.stdout)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = folder / f"s1.json.{sleeper.pid}.0badc0de{TMP_SUFFIX}"
        gone = folder / f"s1.json.{dead_pid}.0badc0de{TMP_SUFFIX}"
        old = folder / f"s2.json{TMP_SUFFIX}"
        for path in (live, gone, old):
            path.write_bytes(b'{"ok": {"res')
        result = invoke(bench_args(root))
        assert result.exit_code == 0, result.stderr
        assert "removed 2 leftover .tmp file(s)" in result.stderr
        assert live.exists() and not gone.exists() and not old.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


# ---------------------------------------------------------------- planted links


@pytest.mark.parametrize("where", ["mcq", "mcq/1"])
def test_a_link_where_a_folder_belongs_is_exit_2_before_any_request(
    tmp_path: Path, server: FakeServer, where: str
) -> None:
    root = make_project(tmp_path, n=3)
    outside = tmp_path / "outside"
    outside.mkdir()
    link = root / "out" / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)
    result = invoke(bench_args(root))
    assert result.exit_code == 2
    line = one_error_line(result.stderr)
    assert f"{link} (a symbolic link)" in line
    assert server.chat_requests() == []
    assert list(outside.rglob("*")) == []
    dry = invoke(bench_args(root, "--dry-run"))
    assert dry.exit_code == 2 and dry.stdout == ""


def test_a_link_at_a_result_file_is_not_counted_done_and_is_replaced_not_written_through(
    tmp_path: Path, server: FakeServer
) -> None:
    root = make_project(tmp_path, n=2)
    outside = tmp_path / "victim.json"
    planted = dump_result(OkResult("a"))
    outside.write_bytes(planted)
    link = root / "out" / "mcq" / "0" / "s1.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    result = invoke(bench_args(root, "--continue"))
    assert result.exit_code == 0, result.stderr
    assert "4 task(s) run: 4 ok" in result.stderr  # the link was not a result
    assert outside.read_bytes() == planted
    assert not link.is_symlink() and isinstance(read_result(link), OkResult)


def test_a_link_planted_at_the_temporary_of_a_report_is_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    report = tmp_path / "report.html"
    (tmp_path / "report.html.tmp").symlink_to(victim)
    write_report(str(report), "<!doctype html><p>page</p>")
    assert victim.read_text() == "precious"
    assert report.read_text() == "<!doctype html><p>page</p>"


def test_details_replace_a_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    from tests.commands.test_triplets_cli import FINETUNED, GOLD
    from tests.commands.test_triplets_cli import run as triplets

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    details = tmp_path / "details.jsonl"
    details.symlink_to(victim)
    code, _, err = triplets(GOLD, FINETUNED, "--details", details)
    assert code == 0, err
    assert victim.read_text() == "precious"
    assert not details.is_symlink() and len(details.read_text().splitlines()) > 0


def test_per_query_replaces_a_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    from tests.commands.test_irt2_cli import DATASET, LINKING
    from tests.commands.test_irt2_cli import run as irt2

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    per_query = tmp_path / "per-query.jsonl"
    per_query.symlink_to(victim)
    (tmp_path / "per-query.jsonl.tmp").symlink_to(victim)
    result = irt2(
        "--dataset", DATASET, "--task", "linking", "--split", "test", *LINKING, "--per-query", per_query
    )
    assert result.exit_code == 0, result.stderr
    assert victim.read_text() == "precious"
    assert not per_query.is_symlink() and len(per_query.read_text().splitlines()) == 13


def test_write_atomic_refuses_a_link_between_root_and_file(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "d").symlink_to(outside, target_is_directory=True)
    with pytest.raises(Exception, match="a symbolic link or a file where a folder belongs"):
        write_atomic(root / "d" / "q" / "s.json", [b"{}"], root=root)
    assert list(outside.iterdir()) == []


# ---------------------------------------------------------------- ok is never lost


def test_an_ok_result_is_never_replaced_by_an_error(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, n=3)
    assert invoke(bench_args(root)).exit_code == 0
    before = out_files(root)
    server.set_faults({}, default="404")
    result = invoke(bench_args(root))
    assert out_files(root) == before  # every ok file kept, byte for byte
    assert "0 ok, 0 error(s), 6 failed and kept the previous answer" in result.stderr
    # No request got an answer: that is not a successful run.
    assert result.exit_code == 2
    assert "no task got an answer" in one_error_line(result.stderr)
    nothing = invoke(bench_args(root, "--continue"))  # nothing left to do: fine
    assert nothing.exit_code == 0, nothing.stderr


def test_an_error_still_replaces_an_error(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path, n=1)
    server.set_faults({}, default="404")
    assert invoke(bench_args(root, "--setup", "s1")).exit_code == 2
    first = read_result(root / "out" / "mcq" / "0" / "s1.json")
    server.set_faults({}, default="400")
    assert invoke(bench_args(root, "--setup", "s1")).exit_code == 2
    second = read_result(root / "out" / "mcq" / "0" / "s1.json")
    assert isinstance(first, ErrorResult) and isinstance(second, ErrorResult)
    assert "HTTP 404" in first.error and "HTTP 400" in second.error


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_an_unreachable_server_stops_the_run_and_the_rest_stays_resumable(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path, n=30)
    url = dead_url()
    monkeypatch.setenv("FAKE_URL", url.replace("http://", "http://alice:hunter2pass@"))
    monkeypatch.setenv("FAKE_KEY", "")  # URL credentials and a key together are a config error
    result = invoke(bench_args(root, "--setup", "s2", "--retries", "0"))
    assert result.exit_code == 2
    line = one_error_line(result.stderr)
    assert f"http://***@{url[len('http://') :]}: unreachable for 20 task(s) in a row" in line
    assert "30 task(s) not run" in line  # the 20 that reached no server and the 10 never started
    assert "hunter2pass" not in line and "alice" not in line
    assert len(out_files(root)) == 0  # a server outage is not a model's answer: no file
    monkeypatch.setenv("FAKE_URL", server.url)
    monkeypatch.setenv("FAKE_KEY", SECRET)
    again = invoke(bench_args(root, "--setup", "s2", "--continue"))
    assert again.exit_code == 0, again.stderr
    assert "30 task(s) run: 30 ok" in again.stderr


def test_max_connection_failures_sets_the_limit(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path, n=8)
    monkeypatch.setenv("FAKE_URL", dead_url())
    result = invoke(bench_args(root, "--setup", "s2", "--retries", "0", "--max-connection-failures", "3"))
    assert result.exit_code == 2
    assert "unreachable for 3 task(s) in a row; 8 task(s) not run" in one_error_line(result.stderr)


# ---------------------------------------------------------------- names too long


def test_names_the_file_system_cannot_hold_are_refused_before_any_request(
    tmp_path: Path, server: FakeServer
) -> None:
    questions = {"mcq": {str(i): mcq(f"q {i}") for i in range(30)}}
    long_ids = [f"{i}" + "x" * 300 for i in range(12)]
    questions["mcq"].update({qid: mcq("long") for qid in long_ids})
    root = make_project(tmp_path, questions=questions)
    result = invoke(bench_args(root))
    assert result.exit_code == 2
    line = one_error_line(result.stderr)
    assert "names this file system cannot hold" in line and "at most 255 bytes per name" in line
    assert line.count("is 301 bytes") == 10 and "and 2 more" in line  # a capped list
    assert server.chat_requests() == [] and not (root / "out").exists()
    prefix = invoke(bench_args(root, "--limit", "1", "--prefix", "p" * 250))
    assert prefix.exit_code == 2
    assert "result file name" in one_error_line(prefix.stderr)
    assert server.chat_requests() == []


# ---------------------------------------------------------------- special files at lock and result paths


def _returns_within(call: Any, fifo: Path, seconds: float = 60.0) -> Any:
    """``call()`` run in a thread; fails (and unblocks it by opening ``fifo`` for writing)
    when it waits on the FIFO instead of returning."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        thread.join(5)
        pytest.fail(f"blocked on the FIFO {fifo}")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_a_hard_link_at_the_lock_file_is_refused_and_not_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "precious.txt"
    outside.write_text("do not touch\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    lock = tree / ".kag-benchmark-lock-shard-2-of-3.tmp"
    os.link(outside, lock)
    with pytest.raises(InputError) as caught:
        lock_tree(tree, "shard-2-of-3")
    assert str(lock) in str(caught.value) and "hard links" in str(caught.value)
    assert outside.read_text() == "do not touch\n"


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_fifo_or_directory_at_the_lock_file_is_a_clear_error_naming_it(tmp_path: Path, kind: str) -> None:
    lock = tmp_path / ".kag-benchmark-lock.tmp"
    if kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    with pytest.raises(InputError) as caught:
        _returns_within(lambda: lock_tree(tmp_path), lock)
    assert str(caught.value).startswith(f"{lock}: a {'FIFO' if kind == 'fifo' else 'directory'}")


def test_a_fifo_at_a_result_file_is_unreadable_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "s1.json"
    os.mkfifo(fifo)
    with pytest.raises(UnreadableResult, match=f"^{fifo}: not a regular file"):
        _returns_within(lambda: read_result_nofollow(fifo), fifo)


def test_a_fifo_at_a_result_file_when_the_model_fails_does_not_block_the_run(
    tmp_path: Path, server: FakeServer
) -> None:
    root = make_project(tmp_path / "p", n=1)
    fifo = root / "out" / "mcq" / "0" / "s1.json"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    server.set_faults({}, default="400")
    result = _returns_within(lambda: invoke(bench_args(root, "--continue", "--setup", "s1")), fifo)
    assert "Traceback" not in result.stderr
    assert isinstance(read_result(fifo), ErrorResult)  # the FIFO was replaced, never read


def test_a_directory_at_a_result_file_names_its_path(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path / "p", n=1)
    folder = root / "out" / "mcq" / "0" / "s1.json"
    folder.mkdir(parents=True)
    result = invoke(bench_args(root, "--setup", "s1"))
    assert result.exit_code == 2
    line = one_error_line(result.stderr)
    assert str(folder) in line and "Is a directory" in line


def test_continue_reads_a_result_over_the_size_cap_as_unreadable(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path / "p", n=1)
    path = root / "out" / "mcq" / "0" / "s1.json"
    path.parent.mkdir(parents=True)
    huge = OkResult("a" * (MAX_RESULT_BYTES + 1), OkStats())
    path.write_bytes(dump_result(huge))
    result = invoke(bench_args(root, "--continue", "--setup", "s1"))
    assert result.exit_code == 0, result.stderr
    assert len(server.chat_requests()) == 1  # run again, as `kag stats` calls it unreadable
    assert read_result(path) == OkResult("b", read_result(path).stats)


def test_planning_happens_with_the_lock_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kag.generation import plan as plan_module

    root = make_project(tmp_path / "p", n=1)
    real = plan_module.plan_benchmark
    seen: list[str] = []

    def planning(*args: Any, **kwargs: Any) -> Any:
        if not args[-1].check_only:  # the plan that reads the result files
            try:
                lock_tree(root / "out").release()
                seen.append("free")
            except TreeBusy:
                seen.append("held")
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_module, "plan_benchmark", planning)
    result = invoke(bench_args(root, "--continue"))
    assert result.exit_code == 0, result.stderr
    assert seen == ["held"]


def test_two_continue_runs_at_once_send_each_task_once(tmp_path: Path, server: FakeServer) -> None:
    root = make_project(tmp_path / "p", n=6)
    server.state.latency = 0.02
    env = {**os.environ, "FAKE_URL": server.url, "FAKE_KEY": SECRET, "HF_HUB_OFFLINE": "1"}
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "kag", *bench_args(root, "--continue", "-p", "2")],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outcomes = [(run.wait(timeout=120), run.communicate()[1]) for run in runs]
    codes = sorted(code for code, _ in outcomes)
    assert codes in ([0, 0], [0, 2]), outcomes
    assert len(server.chat_requests()) == 12  # 6 questions x 2 setups, each sent once


def test_tasks_that_reached_no_server_are_not_run_and_a_server_error_is_an_error_file(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path, n=3)
    (root / "config.toml").write_text(
        FAKE_CONFIG.replace("url = \"{{ env('FAKE_URL') }}\"\n", f'url = "{dead_url()}"\n')
    )
    server.set_faults({}, default="500")
    result = invoke(bench_args(root, "--retries", "0"))
    assert result.exit_code == 2
    line = one_error_line(result.stderr)
    assert "3 task(s) not run: their request reached no server" in line and "--continue" in line
    files = out_files(root)  # s1 (OpenAI) got HTTP 500: error files; s2 (Ollama) is down: none
    assert sorted(files) == [f"mcq/{i}/s1.json" for i in range(3)]
    assert all(b"HTTP 500" in data for data in files.values())

"""The index (kag/view/index.py): a rescan, shared among worker processes or not, leaves the
rows a first build of the changed tree would make; a folder it cannot list is a warning."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

import kag.view.index as index_module
from kag.datasets import load_datasets
from kag.results import epoch_result_path, result_path, write_result
from kag.view.index import Index, Tree
from tests.result_helpers import ok_result
from tests.unprivileged import unprivileged
from tests.view.helpers import make_tree

ROWS = "SELECT * FROM files ORDER BY rel"


def _index(path: Path, datasets: Path, tree: Path) -> Index:
    return Index(path, load_datasets(datasets), [Tree("", str(tree))], "", None)


def _change(tree: Path) -> None:
    """Every kind of change a rescan must see."""
    q2 = result_path(tree, "med", "q2", "", "native")
    size, mtime = q2.stat().st_size, q2.stat().st_mtime_ns
    q2.write_text(q2.read_text().replace('"B"', '"A"'))  # rewritten in place, the same size
    assert q2.stat().st_size == size
    os.utime(q2, ns=(mtime + 10**9, mtime + 10**9))
    os.remove(result_path(tree, "med", "q4", "", "kag"))  # a file gone
    write_result(result_path(tree, "med", "q5", "", "gpt"), ok_result("A"))  # a new file
    write_result(epoch_result_path(tree, "med", "q6", "", "kag", 2), ok_result("B"))  # a new epoch
    shutil.rmtree(tree / "med" / "q7")  # a question folder gone
    write_result(result_path(tree, "med", "noanswer", "", "kag"), ok_result("A"))
    (tree / "med" / "q3" / "notes.txt").unlink()  # an ignored file gone, another new
    (tree / "med" / "stray.json").write_text("{}")


@pytest.mark.parametrize("pooled", [False, True])
def test_a_rescan_leaves_the_rows_of_a_first_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pooled: bool
) -> None:
    datasets, tree = make_tree(tmp_path)
    if pooled:  # every folder listed, and every change seen, by a worker process
        monkeypatch.setattr(index_module, "POOL_FOLDERS", 1)
        monkeypatch.setattr(index_module, "CHUNK_FOLDERS", 2)
    index = _index(tmp_path / "index.sqlite", datasets, tree)
    first = index.scan()
    again = index.scan()
    assert (again.seen, again.read, again.removed) == (first.seen, 0, 0)
    _change(tree)
    stats = index.scan()
    fresh = _index(tmp_path / "fresh.sqlite", datasets, tree)
    fresh.scan()
    assert index.db.execute(ROWS).fetchall() == fresh.db.execute(ROWS).fetchall()
    # Read again: the rewritten file, the new result files; removed: q4's, q7's two, notes.txt.
    assert (stats.read, stats.removed) == (4, 4)
    assert index.scan().read == 0


@pytest.mark.parametrize("pooled", [False, True])
def test_an_unlistable_epochs_folder_keeps_epoch_1_and_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, pooled: bool
) -> None:
    if pooled:
        monkeypatch.setattr(index_module, "POOL_FOLDERS", 1)
    top = Path(tempfile.mkdtemp(prefix="kag-view-index-"))
    try:
        top.chmod(0o777)
        datasets, tree = make_tree(top)
        epochs = tree / "med" / "q1" / "epochs"
        epochs.chmod(0)
        with unprivileged():
            index = _index(top / "index.sqlite", datasets, tree)
            first = index.scan()
            rels = [r for (r,) in index.db.execute("SELECT rel FROM files WHERE question='q1'")]
            again = index.scan()
            index.close()
        assert first.warnings == again.warnings == (f"{epochs}: cannot list the epochs folder",)
        assert sorted(rels) == ["med/q1/kag.json", "med/q1/native.json"]
        assert (again.read, again.removed) == (0, 0)
    finally:
        (tree / "med" / "q1" / "epochs").chmod(0o755)
        shutil.rmtree(top)


def test_numbers_past_64_bits_are_kept_exactly(tmp_path: Path) -> None:
    import orjson
    from typer.testing import CliRunner

    from kag.cli import app
    from kag.render.view import overview
    from tests.view.helpers import open_view

    datasets, tree = make_tree(tmp_path)
    huge = 2**64 - 1  # seconds: nanoseconds past 64 bits, which SQLite and orjson cannot hold
    result_path(tree, "med", "q1", "", "native").write_text(
        f'{{"ok": {{"result": "A", "stats": {{"time": {{"secs": {huge}, "nanos": 1}}, '
        f'"usage": {{"prompt_tokens": {huge}, "completion_tokens": 1}}}}}}}}'
    )
    view = open_view(datasets, tree, tmp_path / "index.sqlite")
    stats = CliRunner().invoke(app, ["stats", "-d", str(datasets), "-r", str(tree), "--format", "json"])
    assert stats.exit_code == 0, stats.output
    assert overview(view, None)["stats"] == orjson.loads(stats.stdout)
    detail = view.question("med", "q1")
    assert detail is not None
    native = next(s for s in detail["setups"] if s["setup"] == "native")
    assert native["prompt_tokens"] == huge and native["generation_secs"] == pytest.approx(huge)


def test_a_rescan_from_another_thread_leaves_the_rows_of_a_first_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    monkeypatch.setattr(index_module, "POOL_FOLDERS", 1)
    datasets, tree = make_tree(tmp_path)
    index = _index(tmp_path / "index.sqlite", datasets, tree)
    index.scan()
    _change(tree)
    found: list[object] = []
    thread = threading.Thread(target=lambda: found.append(index.scan()))  # as the server reloads
    thread.start()
    thread.join()
    fresh = _index(tmp_path / "fresh.sqlite", datasets, tree)
    fresh.scan()
    assert len(found) == 1 and index.db.execute(ROWS).fetchall() == fresh.db.execute(ROWS).fetchall()


def test_names_that_are_not_utf8_are_ignored_as_kag_stats_ignores_them(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kag.cli import app

    datasets, tree = make_tree(tmp_path)
    raw = os.fsencode(tree)
    (tree / "med" / "q1" / os.fsdecode(b"kag\xff.json")).write_text('{"ok": {"result": "A"}}')
    for folder in (b"med/q\xff", b"m\xffd/q1"):
        os.makedirs(os.path.join(raw, folder))
        with open(os.path.join(raw, folder, b"kag.json"), "w") as f:
            f.write('{"ok": {"result": "A"}}')
    (tree / os.fsdecode(b"top\xff.json")).write_text("{}")
    runner = CliRunner()
    result = runner.invoke(app, ["stats", "-d", str(datasets), "-r", str(tree), "--format", "json"])
    assert result.exit_code == 0, result.output
    import json

    expected = json.loads(result.stdout)["ignored_files"]
    index = _index(tmp_path / "index.sqlite", datasets, tree)
    first = index.scan()
    again = index.scan()
    assert (again.read, again.removed, again.written) == (0, 0, 0) and again.seen == first.seen
    from kag.view.query import View

    view = View(index)
    assert view.snapshot.run.ignored_files == expected == 5
    assert view.questions({})["total"] == 8
    shown = {rel for (rel,) in index.db.execute("SELECT rel FROM files WHERE kind='ignored'")}
    assert {"med/q1/kag\\xff.json", "med/q\\xff/kag.json", "m\\xffd/q1/kag.json", "top\\xff.json"} <= shown
    out = tmp_path / "site"
    base = ["view", "-d", str(datasets), "-r", str(tree), "--index", str(tmp_path / "cli.sqlite")]
    result = runner.invoke(app, [*base, "--export", str(out)])
    assert result.exit_code == 0, result.output
    assert "8 question page(s)" in result.stdout


def test_a_scan_waits_for_another_process_s_scan_of_the_same_index(tmp_path: Path) -> None:
    import threading

    datasets, tree = make_tree(tmp_path)
    path = tmp_path / "shared.sqlite"
    holder = _index(path, datasets, tree)
    holder.scan(commit=False)  # holds the index until its commit
    waiting = threading.Event()
    told: list[str] = []
    stats: list[object] = []

    def on_wait(message: str) -> None:
        told.append(message)
        waiting.set()

    def other() -> None:
        index = Index(path, load_datasets(datasets), [Tree("", str(tree))], "", None, on_wait=on_wait)
        stats.append(index.scan())

    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert waiting.wait(60)  # the other's open waits for the scan's commit
        assert told == [f"{path}: another kag view is scanning this index: waiting for it"]
        assert not stats
    finally:
        holder.commit()
        thread.join(60)
    assert len(stats) == 1 and stats[0].read == 0  # type: ignore[attr-defined]  # the rows were in place


def test_a_results_folder_whose_name_is_not_utf8_is_one_line_exit_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kag.cli import app

    datasets, tree = make_tree(tmp_path)
    odd = tmp_path / os.fsdecode(b"res\xffults")
    tree.rename(odd)
    base = ["view", "-d", str(datasets), "-r", str(odd), "--index", str(tmp_path / "i.sqlite")]
    result = CliRunner().invoke(app, [*base, "--export", str(tmp_path / "site")])
    assert result.exit_code == 2, result.output
    assert "res\\xffults: the results folder's name is not valid UTF-8" in result.stderr
    assert "Traceback" not in result.output


def test_a_first_build_leaves_no_log_and_a_later_scan_s_log_is_cut_back(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    path = tmp_path / "index.sqlite"
    index = _index(path, datasets, tree)
    assert index.scan().written > 0
    # A first build writes the index itself (no page through the log), and leaves the log on.
    assert not os.path.exists(f"{path}-wal") or os.path.getsize(f"{path}-wal") == 0
    assert not os.path.exists(f"{path}-journal")
    assert index.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    write_result(result_path(tree, "med", "q5", "", "gpt"), ok_result("A"))
    assert index.scan().written > 0
    # Every page a later scan wrote went through the log: copied into the index, it is empty.
    assert os.path.getsize(f"{path}-wal") == 0
    assert index.db.execute("SELECT count(*) FROM files").fetchone()[0] > 0
    index.close()


def test_a_file_s_path_is_kept_once_in_the_index(tmp_path: Path) -> None:
    """The rows are kept in the order of their (tree, rel) key: no lookup beside them
    repeats the paths (on small files, a quarter of the index)."""
    datasets, tree = make_tree(tmp_path)
    index = _index(tmp_path / "index.sqlite", datasets, tree)
    index.scan()
    lookups = index.db.execute("SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='files'")
    assert lookups.fetchall() == []
    plan = index.db.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM files WHERE tree=? AND rel>=? AND rel<?", ("t", "a/", "a0")
    ).fetchall()
    assert "USING PRIMARY KEY" in plan[0][-1]
    index.close()


@pytest.mark.parametrize("pooled", [False, True])
def test_a_question_folder_s_rows_are_its_own_beside_folders_named_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pooled: bool
) -> None:
    """A folder's rows are the range of paths under ``dataset/question/``: those of
    ``q1-x``, ``q1.x``, ``q10`` or ``q1 x`` (names that sort around ``q1/``) are not in it."""
    datasets, tree = make_tree(tmp_path)
    if pooled:
        monkeypatch.setattr(index_module, "POOL_FOLDERS", 1)
        monkeypatch.setattr(index_module, "CHUNK_FOLDERS", 2)
    for name in ("q1-x", "q1.x", "q10", "q1 x", "q1\u00e9"):
        shutil.copytree(tree / "med" / "q1", tree / "med" / name)
    index = _index(tmp_path / "index.sqlite", datasets, tree)
    index.scan()
    q1 = result_path(tree, "med", "q1", "", "native")
    q1.write_text(q1.read_text().replace('"A"', '"C"'))
    os.utime(q1, ns=(1, 1))
    assert index.scan().read == 1  # q1's file alone
    shutil.rmtree(tree / "med" / "q1")
    stats = index.scan()
    assert (stats.read, stats.removed) == (0, 3)  # q1's two files and its epoch 2 file
    fresh = _index(tmp_path / "fresh.sqlite", datasets, tree)
    fresh.scan()
    assert index.db.execute(ROWS).fetchall() == fresh.db.execute(ROWS).fetchall()


_KILLED_BUILD = """
import os, signal, sys
from pathlib import Path
import kag.view.index as index_module
from kag.datasets import load_datasets
from kag.view.index import Index, Tree

index_module.CHUNK_FOLDERS = 2
index = Index(Path(sys.argv[1]), load_datasets(sys.argv[2]), [Tree("", sys.argv[3])], "", None)
index.scan(lambda rows: os.kill(os.getpid(), signal.SIGKILL))
"""


@pytest.mark.parametrize("how", ["interrupted", "killed"])
def test_a_first_build_stopped_half_way_leaves_no_half_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    datasets, tree = make_tree(tmp_path)
    path = tmp_path / "index.sqlite"
    if how == "interrupted":  # Ctrl-C once the first folders' rows are written
        monkeypatch.setattr(index_module, "CHUNK_FOLDERS", 2)
        parts = []

        def stop(rows: list[tuple[object, ...]]) -> None:
            parts.append(rows)
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            _index(path, datasets, tree).scan(stop)
        assert len(parts) == 1
    else:  # the process killed once the first folders' rows are written
        script = [sys.executable, "-c", _KILLED_BUILD, str(path), str(datasets), str(tree)]
        done = subprocess.run(script, cwd=Path(__file__).resolve().parents[2], check=False)
        assert done.returncode == -signal.SIGKILL
    assert path.exists()
    index = _index(path, datasets, tree)
    assert index.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    stats = index.scan()
    fresh = _index(tmp_path / "fresh.sqlite", datasets, tree)
    clean = fresh.scan()
    # Every file read again, none taken from a half build: the rows of a build never stopped.
    assert (stats.seen, stats.read, stats.written) == (clean.seen, clean.read, clean.written)
    assert index.db.execute(ROWS).fetchall() == fresh.db.execute(ROWS).fetchall()
    assert index.tallies == fresh.tallies is not None


def test_a_first_build_goes_through_the_log_while_another_connection_has_the_index_open(
    tmp_path: Path,
) -> None:
    datasets, tree = make_tree(tmp_path)
    path = tmp_path / "index.sqlite"
    index = _index(path, datasets, tree)
    other = _index(path, datasets, tree)  # open, idle: the index is not written without its log
    index.scan()
    assert index.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert other.scan().written == 0  # it sees the rows built, read from the log
    direct = _index(tmp_path / "direct.sqlite", datasets, tree)
    direct.scan()
    assert index.db.execute(ROWS).fetchall() == direct.db.execute(ROWS).fetchall()
    assert index.tallies == direct.tallies is not None


@pytest.mark.parametrize("pooled", [False, True])
def test_a_scan_pauses_the_collector_and_leaves_it_as_it_found_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pooled: bool
) -> None:
    import gc

    datasets, tree = make_tree(tmp_path)
    if pooled:
        monkeypatch.setattr(index_module, "POOL_FOLDERS", 1)
        monkeypatch.setattr(index_module, "CHUNK_FOLDERS", 2)
    index = _index(tmp_path / "index.sqlite", datasets, tree)
    during: list[bool] = []
    assert gc.isenabled()
    assert index.scan(lambda rows: during.append(gc.isenabled())).read > 0
    assert during and not any(during)  # paused while the rows came in
    assert gc.isenabled()
    gc.disable()
    try:  # a collector the caller paused stays paused
        write_result(result_path(tree, "med", "q5", "", "gpt"), ok_result("A"))
        assert index.scan().read == 1
        assert not gc.isenabled()
    finally:
        gc.enable()

    def stop(rows: list[tuple[object, ...]]) -> None:
        raise KeyboardInterrupt

    fresh = _index(tmp_path / "fresh.sqlite", datasets, tree)
    with pytest.raises(KeyboardInterrupt):
        fresh.scan(stop)
    assert gc.isenabled()  # and one stopped half way restores it too
    index.close()
    fresh.close()


def test_the_first_folders_are_read_before_the_tree_s_top_is_listed_to_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kag.workers

    datasets, tree = make_tree(tmp_path)
    events: list[str] = []
    listed = index_module.iter_top

    def iter_top(root: str):  # type: ignore[no-untyped-def]
        for item in listed(root):
            events.append("listed")
            yield item
        events.append("end of the listing")

    monkeypatch.setattr(index_module, "iter_top", iter_top)
    monkeypatch.setattr(index_module, "POOL_FOLDERS", 2)
    monkeypatch.setattr(index_module, "CHUNK_FOLDERS", 2)
    monkeypatch.setattr(kag.workers, "default_workers", lambda: 1)  # the chunks in this process
    index = _index(tmp_path / "index.sqlite", datasets, tree)
    stats = index.scan(lambda rows: events.append("rows"))
    assert events.index("rows") < events.index("end of the listing")
    fresh = _index(tmp_path / "fresh.sqlite", datasets, tree)
    monkeypatch.setattr(index_module, "POOL_FOLDERS", 10**6)  # listed whole before any chunk
    assert fresh.scan() == stats
    assert index.db.execute(ROWS).fetchall() == fresh.db.execute(ROWS).fetchall()
    index.close()
    fresh.close()


def test_the_rows_of_trees_no_longer_given_are_dropped_and_no_other(tmp_path: Path) -> None:
    # Names that sort next to each other and one inside another's prefix.
    roots = [tmp_path / name for name in ("t", "t2", "t-1", "u")]
    trees = []
    for root in roots:
        root.mkdir()
        tree = make_tree(root)[1]
        trees.append(str(tree.resolve()))
    loaded = load_datasets(roots[0] / "datasets.json")
    path = tmp_path / "index.sqlite"
    index = Index(path, loaded, [Tree("", t) for t in reversed(trees)], "", None)
    index.scan()
    assert {t for (t,) in index.db.execute("SELECT DISTINCT tree FROM files")} == set(trees)
    index.close()
    for kept in ([trees[0], trees[3]], [trees[1]], [trees[2], trees[1]]):
        index = Index(path, loaded, [Tree("", t) for t in kept], "", None)
        index.scan()
        for table in ("files", "folders"):
            assert {t for (t,) in index.db.execute(f"SELECT DISTINCT tree FROM {table}")} <= set(kept)
        for tree in kept:
            fresh = Index(tmp_path / "fresh.sqlite", loaded, [Tree("", tree)], "", None)
            fresh.scan()
            for table in ("files", "folders"):
                query = f"SELECT * FROM {table} WHERE tree = ? ORDER BY rel"
                assert (
                    index.db.execute(query, [tree]).fetchall() == fresh.db.execute(query, [tree]).fetchall()
                )
            fresh.close()
            os.remove(tmp_path / "fresh.sqlite")
        index.close()


@pytest.mark.parametrize("suffix", ["", "-journal", "-wal", "-shm", ".lock"])
@pytest.mark.parametrize("when", ["opened", "scanned"])
def test_a_link_planted_where_the_index_keeps_a_file_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path, suffix: str, when: str
) -> None:
    # The index's own file, the journal of a first build, the log and its index, the lock: a
    # link in their place would have SQLite (or the lock) write wherever it points.
    datasets, tree = make_tree(tmp_path)
    path = tmp_path / "cache" / "index.sqlite"
    path.parent.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    index = None
    if when == "scanned":  # planted between the index's opening and its first build
        index = _index(path, datasets, tree)
        if os.path.lexists(f"{path}{suffix}"):  # the open index's file, put aside for the link
            os.unlink(f"{path}{suffix}")
    Path(f"{path}{suffix}").symlink_to(victim)
    with pytest.raises(index_module.InputError) as caught:
        if index is None:
            _index(path, datasets, tree)
        else:
            index.scan()
    assert str(caught.value) == (
        f"{path}{suffix}: a symbolic link where kag view keeps its index: kag writes through no link; remove it"
    )
    assert victim.read_bytes() == b"precious"
    assert os.path.islink(f"{path}{suffix}")


def test_the_index_is_opened_unsynced_before_it_is_switched_to_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    # Switching a new file to the write-ahead log syncs it to the disk unless told not to.
    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = connect(*args, **kwargs)
        db.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(sqlite3, "connect", traced)
    datasets, tree = make_tree(tmp_path)
    index = _index(tmp_path / "index.sqlite", datasets, tree)
    index.close()
    pragmas = [s for s in statements if s.startswith("PRAGMA")]
    assert pragmas.index("PRAGMA synchronous=OFF") < pragmas.index("PRAGMA journal_mode=WAL")


def test_a_new_index_has_pages_of_16_kib_and_an_index_of_other_pages_keeps_them(tmp_path: Path) -> None:
    import sqlite3

    datasets, tree = make_tree(tmp_path)
    new = _index(tmp_path / "new.sqlite", datasets, tree)
    new.scan()
    assert new.db.execute("PRAGMA page_size").fetchone() == (16384,)
    # An index made with SQLite's default pages (by an older kag) is scanned as it is.
    old_path = tmp_path / "old.sqlite"
    db = sqlite3.connect(old_path)
    db.execute("PRAGMA page_size=4096")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    db.commit()
    db.close()
    old = _index(old_path, datasets, tree)
    old.scan()
    assert old.db.execute("PRAGMA page_size").fetchone() == (4096,)
    assert old.db.execute(ROWS).fetchall() == new.db.execute(ROWS).fetchall()
    old.close()
    old = _index(old_path, datasets, tree)  # reopened: still its own pages
    assert old.db.execute("PRAGMA page_size").fetchone() == (4096,)
    assert old.db.execute(ROWS).fetchall() == new.db.execute(ROWS).fetchall()
    old.close()
    new.close()

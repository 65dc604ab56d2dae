"""`kag view` over HTTP: the numbers equal `kag stats` and `kag stats compare`, the grid's
filters, the question detail, the index (incremental, outside the tree), hostile paths and
content, the static export, and the command's own behaviour (first line, Ctrl-C)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.render.view import export, overview
from tests.view.helpers import HOSTILE, make_tree, open_view, serving

runner = CliRunner()


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    return make_tree(tmp_path)


def _get(url: str) -> tuple[int, dict[str, str], bytes]:
    parts = url.split("/", 3)
    conn = http.client.HTTPConnection(parts[2].split(":")[0], int(parts[2].split(":")[1]))
    conn.request("GET", "/" + parts[3])
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), body


def _stats_json(*args: str) -> dict[str, object]:
    result = runner.invoke(app, ["stats", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def test_overview_numbers_equal_kag_stats_and_compare(tree: tuple[Path, Path], tmp_path: Path) -> None:
    datasets, root = tree
    view = open_view(datasets, root, tmp_path / "index.sqlite")
    doc = overview(view, "native")
    stats = _stats_json("-d", str(datasets), "-r", str(root))
    assert (
        orjson.dumps(doc["stats"], option=orjson.OPT_INDENT_2).decode()
        == orjson.dumps(stats, option=orjson.OPT_INDENT_2).decode()
    )
    assert doc["stats"]["ignored_files"] == 1 and doc["stats"]["unreadable_files"] == 1
    assert doc["stats"]["skipped_files"] == 1
    compare = runner.invoke(
        app,
        [
            "stats",
            "-d",
            str(datasets),
            "-r",
            str(root),
            "compare",
            "--baseline",
            "native",
            "--format",
            "json",
        ],
    )
    assert compare.exit_code == 0, compare.output
    assert doc["compare"] == orjson.loads(compare.stdout)


def test_overview_equals_kag_stats_on_med_kag(med_kag: Path, tmp_path: Path) -> None:
    datasets, root = med_kag / "datasets" / "mirage.json", med_kag / "results"
    view = open_view(datasets, root, tmp_path / "index.sqlite", prefix="wekgr-")
    assert overview(view, None)["stats"] == _stats_json(
        "-d", str(datasets), "-r", str(root), "--prefix", "wekgr-"
    )


def test_grid_filters_and_paging(tree: tuple[Path, Path], tmp_path: Path) -> None:
    view = open_view(*tree, tmp_path / "index.sqlite")
    q = view.questions
    assert q({})["total"] == 8
    assert [r["question"] for r in q({"flip": ["native,kag"]})["rows"]] == ["q0", "q1", "q5"]
    assert [r["question"] for r in q({"flip": ["kag,native"]})["rows"]] == ["q2", "q7"]
    assert [r["question"] for r in q({"disagree": ["1"]})["rows"]] == ["q0", "q1", "q2", "q5", "q7"]
    assert [r["question"] for r in q({"outcome": ["err"]})["rows"]] == ["q7"]
    assert [r["question"] for r in q({"q": ["onerror"]})["rows"]] == ["q0"]
    only = q({"setup": ["kag"]})
    assert only["setups"] == ["kag"] and list(only["rows"][0]["cells"]) == ["kag"]
    assert q({"sort": ["-question"]})["rows"][0]["question"] == "q7"


def test_question_detail_reads_the_files(tree: tuple[Path, Path], tmp_path: Path) -> None:
    view = open_view(*tree, tmp_path / "index.sqlite")
    d = view.question("med", "q0")
    assert d is not None and d["gold"] == "A" and d["evidence"] == ["Vitamin C"]
    kag = next(s for s in d["setups"] if s["setup"] == "kag")
    assert kag["response"].startswith(HOSTILE) and "TREATS" in kag["retrieval"]
    native = next(s for s in view.question("med", "q1")["setups"] if s["setup"] == "native")  # type: ignore[index]
    assert native["epochs"] == [1, 2]
    assert view.question("med", "nope") is None


def test_api_and_hostile_paths(tree: tuple[Path, Path], tmp_path: Path) -> None:
    view = open_view(*tree, tmp_path / "index.sqlite")
    with serving(view) as url:
        status, headers, body = _get(url + "api/questions?flip=native,kag")
        assert status == 200 and json.loads(body)["total"] == 3
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert "unsafe-inline" not in headers["Content-Security-Policy"]
        status, _, body = _get(url + "api/question/med/q0")
        assert status == 200 and json.loads(body)["question"] == "q0"
        assert json.loads(_get(url + "api/setups")[2])["stats"]["scorable_questions"] == 8
        status, _, body = _get(url + "api/questions?q=(")
        assert status == 400 and "invalid pattern" in json.loads(body)["error"]
        for bad in (
            "q/../../etc/passwd",
            "q/%2e%2e/%2e%2e/etc/passwd",
            "q/med/..%2f..%2f..%2fetc%2fpasswd",
            "q/%2E%2E%2F%2E%2E/passwd",
            "api/question/..%2fmed/q0",
            "static/..%2f..%2fcli.py",
            "static/view.py",
            "q/med/q0/extra",
        ):
            assert _get(url + bad)[0] == 404, bad
        status, _, page = _get(url + "q/med/q0")
        assert status == 200
        text = page.decode()
        assert "<script>window.pwned" not in text and "<img src=x" not in text
        assert "&lt;img src=x onerror=" in text and 'class="cy"' in text
        # The graph's data is JSON in a data block, its markup characters escaped.
        assert '<script type="application/json" id="cy-1-data">' in text and "\\u003cscript\\u003e" in text
        scripts = (
            '<script src="/static/view.js" defer></script>',
            '<script src="/static/cytoscape.min.js" defer></script>',
        )
        assert "<script>" not in text.replace(scripts[0], "").replace(scripts[1], "")


def test_index_is_incremental_and_outside_a_read_only_tree(tree: tuple[Path, Path], tmp_path: Path) -> None:
    datasets, root = tree
    before = sorted(str(p) for p in root.rglob("*"))
    index = tmp_path / "cache" / "index.sqlite"
    view = open_view(datasets, root, index)
    assert view.index.scan().read == 0
    path = root / "med" / "q2" / "native.json"
    path.write_text('{"ok": {"result": "A"}}')
    os.remove(root / "med" / "q4" / "kag.json")
    stats = view.reload()
    assert (stats.read, stats.removed) == (1, 1)
    assert view.question("med", "q2")["setups"][1]["outcome"] == "ok"  # type: ignore[index]
    assert view.questions({"flip": ["kag,native"]})["total"] == 1
    os.remove(index)
    for p in [root, *root.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        view = open_view(datasets, root, index)
        assert view.questions({})["total"] == 8
    finally:
        for p in [root, *root.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
    assert sorted(str(p) for p in root.rglob("*")) == [
        b for b in before if "kag.json" not in b or "q4" not in b
    ]


def test_export_writes_pages_and_refuses_past_the_limit(tree: tuple[Path, Path], tmp_path: Path) -> None:
    from kag.errors import UsageError

    view = open_view(*tree, tmp_path / "index.sqlite")
    out = tmp_path / "site"
    assert export(view, out, "t", {"flip": ["native,kag"]}, 10) == 3
    assert sorted(p.name for p in (out / "q").iterdir()) == ["000001.html", "000002.html", "000003.html"]
    data = json.loads((out / "data.json").read_text())
    assert data["questions"]["total"] == 3 and "med/q1" in data["details"]
    assert "<script" not in (out / "index.html").read_text()
    with pytest.raises(UsageError, match=r"select 8 questions.*--limit 3"):
        export(view, tmp_path / "big", "t", {}, 3)


def test_an_export_into_an_earlier_one_removes_only_the_pages_it_wrote(
    tree: tuple[Path, Path], tmp_path: Path
) -> None:
    from kag.errors import UsageError

    view = open_view(*tree, tmp_path / "index.sqlite")
    out = tmp_path / "site"
    assert export(view, out, "t", {}, 10) == 8
    (out / "notes.txt").write_text("mine")
    (out / "q" / "000099.html").write_text("mine too")
    assert export(view, out, "t", {"flip": ["native,kag"]}, 10) == 3
    pages = sorted(p.name for p in (out / "q").iterdir())
    assert pages == ["000001.html", "000002.html", "000003.html", "000099.html"]
    assert (out / "notes.txt").read_text() == "mine"
    assert len(json.loads((out / "data.json").read_text())["details"]) == 3
    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("x")
    with pytest.raises(UsageError, match=rf"{other}: not empty and not an earlier export"):
        export(view, other, "t", {}, 10)
    assert os.listdir(other) == ["thesis.tex"]


def test_an_export_never_writes_through_a_link_planted_in_its_folder(
    tree: tuple[Path, Path], tmp_path: Path
) -> None:
    from kag.errors import InputError

    view = open_view(*tree, tmp_path / "index.sqlite")
    out = tmp_path / "site"
    assert export(view, out, "t", {}, 10) == 8
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    for name in ("q/000001.html", "index.html", "data.json", ".kag-view-export.json"):
        if name != ".kag-view-export.json":
            (out / name).unlink()
            (out / name).symlink_to(victim)
    assert export(view, out, "t", {}, 10) == 8
    assert victim.read_text() == "keep"
    for name in ("q/000001.html", "index.html", "data.json"):
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0
    # A link where a folder of the export belongs is refused, naming it; nothing lands there.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for page in (out / "q").iterdir():
        page.unlink()
    (out / "q").rmdir()
    (out / "q").symlink_to(elsewhere)
    with pytest.raises(InputError, match=r"site/q: a symbolic link"):
        export(view, out, "t", {}, 10)
    assert os.listdir(elsewhere) == []


def test_the_export_command_takes_the_grid_s_filters(tree: tuple[Path, Path], tmp_path: Path) -> None:
    datasets, root = tree
    view = open_view(datasets, root, tmp_path / "index.sqlite")
    base = ["view", "-d", str(datasets), "-r", str(root), "--index", str(tmp_path / "i.sqlite")]
    for flags, params in (
        (["--disagree"], {"disagree": ["1"]}),
        (["--search", "^B$", "--setup", "kag"], {"q": ["^B$"], "setup": ["kag"]}),
    ):
        out = tmp_path / "site"
        result = runner.invoke(app, [*base, "--export", str(out), *flags])
        assert result.exit_code == 0, result.output
        data = json.loads((out / "data.json").read_text())
        expected = view.questions(params)
        assert 0 < data["questions"]["total"] == expected["total"] < 8
        assert sorted(data["details"]) == sorted(f"{r['dataset']}/{r['question']}" for r in expected["rows"])


def test_command_prints_the_url_first_and_exits_0_on_ctrl_c(tree: tuple[Path, Path], tmp_path: Path) -> None:
    datasets, root = tree
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kag", "view", "-d", str(datasets), "-r", str(root), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        with urllib.request.urlopen(url + "api/setups") as r:
            assert json.loads(r.read())["stats"]["datasets"] == 1
        assert list((tmp_path / "cache" / "kag" / "view").glob("*.sqlite"))
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


COLLECTOR_PROBE = """
import gc, socketserver, sys, typer
import kag.view.snapshot as snapshot
from kag.cli import main
events = []
gc.callbacks.append(lambda phase, info: phase == "start" and events.append("collection"))
first_part = snapshot.Builder.add_part

def add_part(self, rows):
    events.append("rows")
    first_part(self, rows)

def echo(message=None, *args, **kwargs):
    events.append("address")

def serve_forever(self, poll_interval=0.5):
    print(" ".join(events))
    raise KeyboardInterrupt

snapshot.Builder.add_part = add_part
typer.echo = echo
socketserver.BaseServer.serve_forever = serve_forever
sys.argv = ["kag", *sys.argv[1:]]
main()
"""


def test_the_collector_walks_no_object_between_the_first_rows_and_the_address(
    tree: tuple[Path, Path], tmp_path: Path
) -> None:
    # It would walk every object of the first snapshot (twice: ~0.05 s at 100k files, 0.5 s
    # at a million) while nothing else runs; after the address, a page is served meanwhile.
    datasets, root = tree
    args = ["view", "-d", str(datasets), "-r", str(root), "--port", "0", "--no-open"]
    proc = subprocess.run(
        [sys.executable, "-c", COLLECTOR_PROBE, *args, "--index", str(tmp_path / "i.sqlite")],
        capture_output=True,
        text=True,
        check=False,
    )
    events = proc.stdout.split()
    assert "rows" in events and events.count("address") == 1, proc.stderr
    assert "collection" not in events[events.index("rows") : events.index("address")]


def test_command_rejects_a_missing_tree_in_one_line(tree: tuple[Path, Path], tmp_path: Path) -> None:
    datasets, _ = tree
    result = runner.invoke(
        app, ["view", "-d", str(datasets), "-r", str(tmp_path / "none"), "--index", str(tmp_path / "i")]
    )
    assert result.exit_code == 2 and "results directory not found" in result.output


def test_labelled_trees_pair_their_setups(tree: tuple[Path, Path], tmp_path: Path) -> None:
    import shutil

    from kag.datasets import load_datasets
    from kag.view.index import Index, Tree
    from kag.view.query import View

    datasets, root = tree
    other = tmp_path / "other"
    shutil.copytree(root, other)
    index = Index(
        tmp_path / "labelled.sqlite",
        load_datasets(datasets),
        [Tree("a", str(root)), Tree("b", str(other))],
        "",
        None,
    )
    index.scan()
    view = View(index)
    assert view.snapshot.setups == ("a/kag", "a/native", "b/kag", "b/native")
    assert view.questions({"flip": ["a/native,b/kag"]})["total"] == 3
    result = runner.invoke(
        app,
        ["stats", "-d", str(datasets), "-r", f"a={root}", "-r", f"b={other}", "--format", "json"],
    )
    assert overview(view, None)["stats"] == orjson.loads(result.stdout)


def test_worker_processes_index_the_same_rows(
    tree: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kag.view.index as index_module

    datasets, root = tree
    alone = open_view(datasets, root, tmp_path / "one.sqlite")
    monkeypatch.setattr(index_module, "POOL_FOLDERS", 1)
    monkeypatch.setattr(index_module, "CHUNK_FOLDERS", 2)
    pooled = open_view(datasets, root, tmp_path / "pool.sqlite")
    query = "SELECT * FROM files ORDER BY rel"
    assert pooled.index.db.execute(query).fetchall() == alone.index.db.execute(query).fetchall()
    # The tallies the workers made while reading are those made from the index rows.
    assert pooled.index.tallies is not None
    pooled.index.tallies = None
    assert pooled._build().run.tallies == pooled.snapshot.run.tallies == alone.snapshot.run.tallies
    assert len(pooled.records()) == len(alone.records()) > 0
    # A rescan that reads every file again (all of them touched) shares them out as well.
    for path in root.rglob("*.json"):
        os.utime(path, ns=(10**18, 10**18))
    assert pooled.reload().read == alone.reload().read > 0
    assert pooled.index.db.execute(query).fetchall() == alone.index.db.execute(query).fetchall()


def test_only_loopback_hosts_count_as_local() -> None:
    from kag.view.server import is_loopback, split_path

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2")
    assert split_path("/q/a%20b/c") == ["q", "a b", "c"]
    assert split_path("/q/%2e%2e/x") is None and split_path("/q/a%2fb/c") is None


def test_the_overview_shows_the_run_records(tree: tuple[Path, Path], tmp_path: Path) -> None:
    from kag.results import runs_folder

    _, root = tree
    folder = runs_folder(root)
    folder.mkdir(parents=True)
    record = {
        "started": "2026-12-01T10:00:00Z",
        "finished": None,
        "kag_version": "0.1.0",
        "setups": ["<img src=x onerror=alert(1)>"],
        "tasks": {"ok": 3, "error": 1, "kept": 0, "not_run": 2},
        "git": {"commit": "0123456789abcdef", "dirty": True},
    }
    (folder / "20261201T100000Z-abcdef.json").write_bytes(orjson.dumps(record))
    view = open_view(*tree, tmp_path / "index.sqlite")
    [row] = overview(view, None)["runs"]
    assert row["tree"] is None and row["finished"] == "not finished" and row["commit"] == "0123456789+"
    assert (row["ok"], row["error"], row["not run"]) == ("3", "1", "2")
    with serving(view) as url:
        status, _, body = _get(url)
        page = body.decode()
        assert status == 200 and "Run records (1)" in page
        assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img src=x" not in page
        status, _, api = _get(url + "api/setups")
        assert orjson.loads(api)["runs"] == [row]

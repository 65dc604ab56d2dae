"""The grid's search (kag/view/search.py) under attack: a pattern whose repetitions would
take the server's memory is refused naming why, a search stops at its deadline and when its
client leaves (saying so, and kept for no later request), and a file is read below its tree
with no link followed at any folder."""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
from pathlib import Path

import pytest

from kag.results import result_path, write_result
from tests.result_helpers import ok_result
from tests.view.helpers import make_tree, open_view, serving


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    return make_tree(tmp_path)


def _get(url: str, path: str) -> tuple[int, bytes]:
    netloc = url.split("/")[2]
    conn = http.client.HTTPConnection(*netloc.rsplit(":", 1))
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


def test_a_pattern_that_repeats_too_much_is_refused_naming_why(
    tree: tuple[Path, Path], tmp_path: Path
) -> None:
    view = open_view(*tree, tmp_path / "index.sqlite")
    with serving(view) as url:
        # 1,000,000 characters spelled out: 275 MB to compile; a{1000000000} takes 4 GB and more.
        for pattern in ("(a{1000}){1000}", "((a{100}){100}){100}", "(?:x|y){2,99999}z{2}"):
            status, body = _get(url, "/api/questions?q=" + pattern.replace("{", "%7B").replace("}", "%7D"))
            assert status == 400, pattern
            assert "repeats too much" in json.loads(body)["error"], pattern
        status, body = _get(url, "/api/questions?q=%5E%5BA-C%5D%7B1%7D%24")  # ^[A-C]{1}$
        assert status == 200 and json.loads(body)["total"] > 0


def test_the_size_a_pattern_spells_out() -> None:
    from kag.errors import UsageError
    from kag.grading.search.options import MAX_EXPANDED, expanded_size
    from kag.view.search import compile_search

    assert expanded_size(r"\d{4}-\d{2}-\d{2}") == 10
    assert expanded_size("(ab){3}c") == 7 and expanded_size("a{2,5}") == 5 and expanded_size("a{}") == 3
    assert expanded_size("[{]{3}") == 3 and expanded_size(r"\{100000000\}") == 11
    assert expanded_size("a{1000000000}") > MAX_EXPANDED
    # A count hidden in what reads as a class, inside a comment, is still counted.
    for hidden in ("(?x)# [\n(a{1000}){1000}]", "(?#[)(a{1000}){1000}"):
        with pytest.raises(UsageError, match="repeats too much"):
            compile_search(hidden)
    with pytest.raises(UsageError, match=r"1,000,000,000 characters"):
        compile_search("a{1000000000}")


def test_a_search_past_its_deadline_says_it_was_cut_and_is_not_kept(
    tree: tuple[Path, Path], tmp_path: Path
) -> None:
    view = open_view(*tree, tmp_path / "index.sqlite")
    view.search_seconds = 0  # the deadline has passed before the first file
    cut = view.questions({"q": ["A"]})
    assert cut["cut"] is not None and "stopped after 0 s with 0 of 15 files searched" in cut["cut"]
    assert cut["total"] == 0
    view.search_seconds = 10
    full = view.questions({"q": ["A"]})
    assert full["cut"] is None and full["total"] > 0
    with serving(view) as url:
        view.search_seconds = 0
        status, body = _get(url, "/questions?q=B")
        assert status == 200 and b'id="cut"' in body and b"stopped after 0 s" in body


def test_a_search_stops_when_its_client_leaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kag.view import search

    questions = {
        f"q{i:03d}": {"input": "?", "output": {"type": "MCQ", "options": {"A": "a"}, "answer": "A"}}
        for i in range(200)
    }
    datasets = tmp_path / "datasets.json"
    datasets.write_text(json.dumps({"med": questions}))
    root = tmp_path / "results"
    for q in questions:
        write_result(result_path(root, "med", q, "", "kag"), ok_result("A"))
    view = open_view(datasets, root, tmp_path / "index.sqlite")
    started, left, done = threading.Event(), threading.Event(), threading.Event()
    reads: list[str] = []
    outcome: list[search.Found] = []
    real_read, real_search = search.read_below, search.search_files

    def read_below(tree: str, rel: str) -> bytes:
        reads.append(rel)
        if len(reads) == 1:
            started.set()
            assert left.wait(60)
        return real_read(tree, rel)

    def search_files(*args: object, **kwargs: object) -> search.Found:
        try:
            found = real_search(*args, **kwargs)  # type: ignore[arg-type]
            outcome.append(found)
            return found
        finally:
            done.set()

    monkeypatch.setattr(search, "read_below", read_below)
    monkeypatch.setattr(search, "search_files", search_files)
    with serving(view) as url:
        port = int(url.split(":")[2].rstrip("/"))
        client = socket.create_connection(("127.0.0.1", port))
        client.sendall(f"GET /api/questions?q=zzz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        assert started.wait(60)
        client.close()
        left.set()
        assert done.wait(60)
    [found] = outcome
    assert found.cut == search.GONE and len(reads) < 200
    assert view.snapshot.searches == {}  # a search cut short is asked again next time


def test_a_page_never_reads_through_a_link_swapped_in_after_the_scan(
    tree: tuple[Path, Path], tmp_path: Path
) -> None:
    datasets, root = tree
    view = open_view(datasets, root, tmp_path / "index.sqlite")
    before = {s["setup"]: s["response"] for s in view.question("med", "q2")["setups"]}  # type: ignore[index]
    assert before == {"kag": "A", "native": "B"}
    secret = tmp_path / "secret"
    for setup in ("kag", "native"):
        write_result(result_path(secret, "med", "q2", "", setup), ok_result("SECRET of another folder"))
    os.rename(root / "med" / "q2", tmp_path / "moved")
    (root / "med" / "q2").symlink_to(secret / "med" / "q2")  # at the question folder
    detail = view.question("med", "q2")
    assert detail is not None
    for s in detail["setups"]:
        assert s["response"] is None and "SECRET" not in json.dumps(s)
        assert (
            s["error"] == "cannot read the file now: med/q2: a symbolic link or a file where a folder belongs"
        )
    assert view.questions({"q": ["SECRET"]})["total"] == 0
    (root / "med" / "q2").unlink()
    os.rename(root / "med", tmp_path / "med-moved")
    (root / "med").symlink_to(secret / "med")  # at the dataset folder
    assert "SECRET" not in json.dumps(view.question("med", "q2"))
    with serving(view) as url:
        status, body = _get(url, "/q/med/q2")
        assert status == 200 and b"SECRET" not in body

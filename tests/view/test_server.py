"""The server of `kag view` (kag/view/server.py) as an attacker meets it: a Host that is not
its own (DNS rebinding), a reload sent by a page of another origin (CSRF), addresses and
queries that are not UTF-8, a query parameter named like a template argument."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest

from kag.results import result_path, write_result
from tests.result_helpers import ok_result
from tests.view.helpers import make_tree, open_view, serving


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    return make_tree(tmp_path)


def _request(
    url: str, path: str, method: str = "GET", headers: dict[str, str] | None = None, host: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    netloc = url.split("/")[2]
    conn = http.client.HTTPConnection(netloc.rsplit(":", 1)[0], int(netloc.rsplit(":", 1)[1]))
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    if host is None:
        host = netloc
    if host != "":
        conn.putheader("Host", host)
    for name, value in (headers or {}).items():
        conn.putheader(name, value)
    conn.putheader("Content-Length", "0")
    conn.endheaders()
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), body


def test_a_host_that_is_not_the_server_s_own_reads_nothing(tree: tuple[Path, Path], tmp_path: Path) -> None:
    view = open_view(*tree, tmp_path / "index.sqlite")
    with serving(view) as url:
        port = url.split(":")[2].rstrip("/")
        for host in ("127.0.0.1", f"127.0.0.1:{port}", "localhost", f"LOCALHOST:{port}"):
            status, _, body = _request(url, "/api/question/med/q0", host=host)
            assert status == 200 and json.loads(body)["question"] == "q0", host
        for host in (
            "evil.example",
            f"evil.example:{port}",
            "127.0.0.1.evil.example",
            "",
            "127.0.0.2",
            "[::1]",
        ):
            for path in ("/api/question/med/q0", "/", "/q/med/q0", "/api/setups"):
                status, _, body = _request(url, path, host=host)
                assert status == 421, (host, path)
                assert b"q0" not in body and str(tree[1]).encode() not in body


def test_host_names_and_origins() -> None:
    from kag.view.server import HostCheck, host_name, same_origin

    assert host_name("[::1]:80") == ("::1", "80") and host_name("Example:8") == ("example", "8")
    assert host_name("a:b") is None and host_name("[::1]x") is None and host_name("") is None
    every = HostCheck("0.0.0.0")
    assert every.allows("192.168.1.5:8000") and every.allows("localhost") and not every.allows("evil.example")
    v6 = HostCheck("::1")
    assert v6.allows("[::1]:9") and not v6.allows("127.0.0.1")
    assert same_origin("http://127.0.0.1:9", None, "127.0.0.1:9")
    assert not same_origin("http://evil.example", "http://127.0.0.1:9/", "127.0.0.1:9")
    assert not same_origin("null", None, "127.0.0.1:9")
    assert not same_origin(None, "http://evil.example/page", "127.0.0.1:9")
    assert same_origin(None, "http://127.0.0.1:9/questions", "127.0.0.1:9") and same_origin(None, None, "x")


def test_a_reload_is_a_post_from_the_server_s_own_pages(tree: tuple[Path, Path], tmp_path: Path) -> None:
    datasets, root = tree
    view = open_view(datasets, root, tmp_path / "index.sqlite")
    write_result(result_path(root, "med", "q7", "", "gpt"), ok_result("A"))
    with serving(view) as url:
        status, headers, body = _request(url, "/api/reload")
        assert status == 405 and headers["Allow"] == "POST" and "POST" in json.loads(body)["error"]
        for refused in (
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
            {"Referer": "http://evil.example/x"},
        ):
            status, _, _ = _request(url, "/api/reload", "POST", refused)
            assert status == 403, refused
        assert "gpt" not in view.snapshot.setups  # no scan ran
        assert _request(url, "/api/questions", "POST")[0] == 405
        origin = url.rstrip("/")
        status, _, body = _request(url, "/api/reload", "POST", {"Origin": origin})
        assert status == 200 and json.loads(body)["read"] == 1
        assert "gpt" in view.snapshot.setups
        status, _, body = _request(url, "/api/reload", "POST")  # a script: no Origin, no Referer
        assert status == 200 and json.loads(body)["read"] == 0


def test_addresses_that_are_not_utf8_are_404_and_any_parameter_name_is_kept(tmp_path: Path) -> None:
    questions = {
        f"q{i:02d}": {"input": "?", "output": {"type": "MCQ", "options": {"A": "a", "B": "b"}, "answer": "A"}}
        for i in range(60)
    }
    datasets = tmp_path / "datasets.json"
    datasets.write_text(json.dumps({"med": questions}))
    root = tmp_path / "results"
    for q in questions:
        write_result(result_path(root, "med", q, "", "kag"), ok_result("A"))
    view = open_view(datasets, root, tmp_path / "index.sqlite")
    with serving(view) as url:
        for path in ("/%ff", "/static/%e9", "/q/%ff/q00", "/api/question/med/%c3"):
            assert _request(url, path)[0] == 404, path
        for path in ("/questions?kind=x", "/questions?kind=x&args=1&query=2", "/questions?self=1"):
            status, _, body = _request(url, path)
            assert status == 200 and b'id="next"' in body, path
        status, _, body = _request(url, "/api/questions?q=%ff")
        assert status == 400


def test_a_server_bound_to_a_name_answers_to_the_address_it_bound(
    tree: tuple[Path, Path], tmp_path: Path
) -> None:
    from kag.render.view import ViewApp
    from kag.view.server import Server

    view = open_view(*tree, tmp_path / "index.sqlite")
    errors: list[BaseException] = []
    server = Server(ViewApp(view, "t"), "localhost", 0, errors.append)
    server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/"
        assert _request(url, "/api/setups", host=f"127.0.0.1:{server.port}")[0] == 200
        assert _request(url, "/api/setups", host=f"localhost:{server.port}")[0] == 200
        assert _request(url, "/api/setups", host="evil.example")[0] == 421
    finally:
        server.close()
    assert not errors

"""`kag stats runs` lists the run records; `kag stats`, find and judge's listing read the
same results with or without ``.kag/runs/`` in the tree."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest

from kag.results import list_results, read_run_records, runs_folder
from tests.bench_helpers import SECRET, bench_args, fresh, invoke, make_project, server_fixture
from tests.fakeserver import FakeServer

server = server_fixture("b")


@pytest.fixture(autouse=True)
def _reset(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh(server, monkeypatch, key=SECRET)


@pytest.fixture
def ran(tmp_path: Path, server: FakeServer) -> Path:
    root = make_project(tmp_path, n=4)
    result = invoke(bench_args(root))
    assert result.exit_code == 0, result.stderr
    return root


def test_the_table_lists_each_run(ran: Path) -> None:
    out = ran / "out"
    result = invoke(["stats", "runs", "-r", str(out)])
    assert result.exit_code == 0, result.stderr
    header, row = result.stdout.splitlines()
    assert header.split() == [
        "started",
        "finished",
        "kag",
        "setups",
        "ok",
        "error",
        "kept",
        "not",
        "run",
        "commit",
    ]
    cells = row.split()
    assert cells[3:8] == ["s1,s2", "8", "0", "0", "0"]
    assert cells[0].endswith("Z") and cells[1].endswith("Z")
    # A run killed before its end: its record was written once, unfinished.
    record = orjson.loads(next(runs_folder(out).iterdir()).read_bytes())
    record["finished"] = None
    (runs_folder(out) / "29991231T235959Z-000000.json").write_bytes(orjson.dumps(record))
    lines = invoke(["stats", "runs", "-r", str(out)]).stdout.splitlines()
    assert len(lines) == 3 and "not finished" in lines[2] and "not finished" not in lines[1]


def test_json_is_the_list_of_records(ran: Path) -> None:
    out = ran / "out"
    result = invoke(["stats", "runs", "-r", str(out), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    listed = orjson.loads(result.stdout)
    records = read_run_records(out)
    assert listed == [{"file": r.name, **r.data} for r in records] and len(listed) == 1
    assert listed[0]["tasks"]["ok"] == 8 and listed[0]["finished"] is not None
    # --format before the sub-command works too.
    assert orjson.loads(invoke(["stats", "--format", "json", "runs", "-r", str(out)]).stdout) == listed


def test_unreadable_oversized_and_linked_records_are_passed_over(ran: Path, tmp_path: Path) -> None:
    folder = runs_folder(ran / "out")
    (folder / "00000000T000000Z-aaaaaa.json").write_bytes(b"{not json")
    (folder / "00000000T000000Z-bbbbbb.json").write_bytes(b"[1, 2]")
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes(orjson.dumps({"started": "x", "kag_version": "linked"}))
    os.symlink(outside, folder / "00000000T000000Z-cccccc.json")
    with (folder / "00000000T000000Z-dddddd.json").open("wb") as f:
        f.truncate(17 * 1024 * 1024)
    records = read_run_records(ran / "out")
    assert len(records) == 1 and records[0].data["kag_version"] != "linked"
    result = invoke(["stats", "runs", "-r", str(ran / "out")])
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 2


def test_a_deeply_nested_record_is_passed_over(ran: Path) -> None:
    """orjson reads 1,024 levels but writes 254: such a record (never one of kag's) would end
    `--format json` in a traceback."""
    folder = runs_folder(ran / "out")
    (folder / "00000000T000000Z-eeeeee.json").write_bytes(b'{"git": ' + b"[" * 500 + b"]" * 500 + b"}")
    result = invoke(["stats", "runs", "-r", str(ran / "out"), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert [r["file"] for r in orjson.loads(result.stdout)] == [r.name for r in read_run_records(ran / "out")]
    assert len(read_run_records(ran / "out")) == 1


@pytest.mark.parametrize("planted", [".kag", ".kag/runs"])
def test_a_link_planted_at_a_records_folder_lists_nothing(ran: Path, tmp_path: Path, planted: str) -> None:
    out = ran / "out"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "runs").mkdir(parents=True)
    for folder in (elsewhere, elsewhere / "runs"):
        (folder / "20990101T000000.000000Z-eeeeee.json").write_bytes(orjson.dumps({"kag_version": "outside"}))
    shutil.rmtree(out / planted)
    target = elsewhere if planted == ".kag" else elsewhere / "runs"
    os.symlink(target, out / planted)
    assert read_run_records(out) == []
    result = invoke(["stats", "runs", "-r", str(out), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert "outside" not in result.stdout


def test_a_fifo_under_a_records_name_is_passed_over_without_waiting(ran: Path) -> None:
    folder = runs_folder(ran / "out")
    os.mkfifo(folder / "00000000T000000Z-ffffff.json")
    records = read_run_records(ran / "out")
    assert [r.name for r in records] == [p.name for p in folder.iterdir() if p.is_file()]


def test_no_records_and_a_missing_tree(tmp_path: Path) -> None:
    tmp_path.joinpath("results").mkdir()
    result = invoke(["stats", "runs", "-r", str(tmp_path / "results")])
    assert result.exit_code == 0 and "no run records" in result.stdout
    result = invoke(["stats", "runs", "-r", str(tmp_path / "absent")])
    assert result.exit_code == 2 and "Traceback" not in result.stderr


def readers(root: Path) -> list[str]:
    out = str(root / "out")
    data = str(root / "datasets.json")
    outputs = []
    for argv in (
        ["stats", "-d", data, "-r", out, "--format", "json"],
        ["stats", "-d", data, "-r", out],
        ["stats", "find", "b", "-r", out, "--format", "json"],
        ["stats", "find", "b", "-r", out, "--hidden", "--format", "json"],
        ["stats", "find", "--files-with-matches", ".", "-r", out, "--hidden"],
    ):
        result = invoke(argv)
        assert result.exit_code == 0, (argv, result.stderr)
        outputs.append(result.stdout + result.stderr)
    return outputs


def test_stats_find_and_the_judge_listing_pass_over_the_records(ran: Path) -> None:
    out = ran / "out"
    assert read_run_records(out)
    listing = list_results(out)
    assert len(listing.files) == 8 and listing.ignored == []
    with_records = readers(ran)
    assert all(".kag" not in text for text in with_records)
    shutil.rmtree(out / ".kag")
    assert readers(ran) == with_records
    assert list_results(out).files == listing.files


def test_the_view_index_walk_passes_over_the_records(ran: Path) -> None:
    from kag.view.walk import iter_entries, iter_top, list_folder

    walked = []
    for rel, _, question, entry in iter_top(str(ran / "out")):
        folder = list_folder(entry.path, []) if question else None
        walked += [e[0] for e in iter_entries(folder, rel, "")] if folder is not None else [rel]
    assert len(walked) == 8 and not any(".kag" in rel for rel in walked)


def test_the_html_page_shows_the_run_records(ran: Path, tmp_path: Path) -> None:
    out = ran / "out"
    hostile = orjson.loads(next(runs_folder(out).iterdir()).read_bytes())
    hostile["setups"] = ["<script>window.pwned=1</script>"]
    hostile["finished"] = None
    (runs_folder(out) / "29991231T235959Z-000000.json").write_bytes(orjson.dumps(hostile))
    page = tmp_path / "page.html"
    args = ["stats", "-d", str(ran / "datasets.json"), "-r", str(out), "--format", "html", "-o", str(page)]
    result = invoke(args)
    assert result.exit_code == 0, result.stderr
    html = page.read_text()
    section = html.split("<h2>Run records</h2>", 1)[1].split("<h2>", 1)[0]
    assert "s1,s2" in section
    assert "not finished" in section
    assert "<script>window.pwned" not in html and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in section
    # Several trees: each record names its tree's label.
    both = invoke([*args[:3], "-r", f"a={out}", "-r", f"b={out}", *args[5:]])
    assert both.exit_code == 0, both.stderr
    labelled = page.read_text().split("<h2>Run records</h2>", 1)[1].split("<h2>", 1)[0]
    assert labelled.count('<td class="l">a</td>') == 2 and labelled.count('<td class="l">b</td>') == 2


def test_a_page_without_run_records_has_no_such_section(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    page = tmp_path / "page.html"
    args = ["stats", "-d", str(repo / "examples/dataset/datasets.json"), "-r", str(repo / "examples/results")]
    assert invoke([*args, "--format", "html", "-o", str(page)]).exit_code == 0
    assert "Run records" not in page.read_text()

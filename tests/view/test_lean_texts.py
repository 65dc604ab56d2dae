"""What `kag view` holds of a large tree: its datasets file read without its texts (read from
the file when a page shows them; a page says so when the file changed), and compact records
for the overview's comparisons, without the flips no page shows."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kag.view.query import View
from tests.view.helpers import make_tree, open_view, serving
from tests.view.test_view_pages import _get


def _lean_view(tmp_path: Path) -> tuple[View, Path]:
    datasets, tree = make_tree(tmp_path)
    view = open_view(datasets, tree, tmp_path / "index.sqlite")
    assert view.datasets.texts is False  # the texts are not held
    q = view.datasets.get("med", "q3")
    assert q is not None and q.input == "" and q.mcq is not None and q.mcq.options["A"] == ""
    return view, datasets


def test_the_pages_show_the_texts_read_from_the_file(tmp_path: Path) -> None:
    view, _ = _lean_view(tmp_path)
    detail = view.question("med", "q3")
    assert detail is not None
    assert detail["input"] == "Question 3? <b>bold</b>"
    assert detail["options"] == {"A": "yes", "B": "no", "C": "maybe"} and detail["gold"] == "A"
    rows = {r["question"]: r for r in view.questions({})["rows"]}
    assert rows["q3"]["input"] == "Question 3? <b>bold</b>"
    assert rows["q3"]["options"] == {"A": "yes", "B": "no", "C": "maybe"}
    with serving(view) as url:
        status, page = _get(url + "q/med/q3")
        assert status == 200 and "Question 3? &lt;b&gt;bold&lt;/b&gt;" in page and "maybe" in page
        status, grid = _get(url + "questions")
        assert status == 200 and "Question 3? &lt;b&gt;bold&lt;/b&gt;" in grid


def test_a_datasets_file_changed_under_the_view_gives_an_error_page(tmp_path: Path) -> None:
    view, datasets = _lean_view(tmp_path)
    data = json.loads(datasets.read_text())
    data["med"]["q3"]["input"] = "Another question entirely?"
    datasets.write_text(json.dumps(data))
    os.utime(datasets, ns=(1, 1))  # a different modification time, however fast the write
    with serving(view) as url:
        for path in ("q/med/q3", "questions"):
            status, page = _get(url + path)
            assert status == 409, path
            assert "The datasets file changed" in page and "changed since it was read" in page
            assert "Another question" not in page and "Question 3?" not in page
        status, body = _get(url + "api/question/med/q3")
        assert status == 409 and "changed since it was read" in json.loads(body)["error"]
        status, _ = _get(url)  # the overview reads no text: it is still there
        assert status == 200


def test_a_datasets_file_removed_under_the_view_gives_an_error_page(tmp_path: Path) -> None:
    view, datasets = _lean_view(tmp_path)
    datasets.unlink()
    with serving(view) as url:
        status, page = _get(url + "q/med/q3")
        assert status == 409 and "The datasets file changed" in page and "datasets.json" in page
        status, body = _get(url + "api/questions")
        assert status == 409 and "datasets.json" in json.loads(body)["error"]


def test_the_overview_keeps_no_flips_and_compares_compact_records(tmp_path: Path) -> None:
    from kag.grading.compare import CompactAnswer

    view, _ = _lean_view(tmp_path)
    analysis = view.analysis().wait()
    assert analysis is not None and analysis.comparisons is not None
    assert analysis.flips == ()  # no page shows them, and they would keep the records they name
    answers = view._answers()
    assert answers and all(type(a) is CompactAnswer for a in answers)
    assert [(a.dataset, a.question, a.setup) for a in answers] == sorted(
        (a.dataset, a.question, a.setup) for a in answers
    )

"""The overview's comparisons are computed once per scan and baseline in a thread of their
own: the page shows the tables before they are there, the JSON waits for them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kag.grading.compare.analysis import Analysis
from kag.render.view import ViewApp
from kag.results import result_path, write_result
from kag.view.query import View
from tests.result_helpers import ok_result
from tests.view.helpers import make_tree, open_view


@pytest.fixture
def view(tmp_path: Path) -> View:
    return open_view(*make_tree(tmp_path), tmp_path / "index.sqlite")


def _held(view: View, monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[str | None]]:
    """Hold every analysis of ``view`` until the returned event is set; the list names the
    baselines analysed."""
    release = threading.Event()
    asked: list[str | None] = []
    real = view._analyse

    def held(snap: object, baseline: str | None) -> Analysis | None:
        asked.append(baseline)
        release.wait()
        return real(snap, baseline)  # type: ignore[arg-type]

    monkeypatch.setattr(view, "_analyse", held)
    return release, asked


def test_the_first_overview_shows_the_tables_before_the_comparisons(
    view: View, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, _ = _held(view, monkeypatch)
    app = ViewApp(view, "t")
    page = app([], {}).body.decode()
    assert '<div id="setups">' in page and '<div id="accuracy-chart">' in page
    assert 'id="computing"' in page and '<table id="compare">' not in page
    release.set()
    view.analysis(None).done.wait()
    page = app([], {}).body.decode()
    assert 'id="computing"' not in page and '<table id="compare">' in page
    assert '<div id="difference-chart">' in page


def test_the_comparisons_are_computed_once_per_scan_and_baseline(
    view: View, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    release, asked = _held(view, monkeypatch)
    release.set()
    app = ViewApp(view, "t")
    for _ in range(3):
        app([], {})
        app(["api", "setups"], {})  # waits for the analysis
    app(["api", "setups"], {"baseline": ["native"]})
    assert asked == [None, "native"]
    write_result(result_path(tmp_path / "results", "med", "q5", "", "gpt"), ok_result("A"))
    view.reload()
    app(["api", "setups"], {})
    assert asked == [None, "native", None]


def test_a_failed_analysis_is_an_error_of_the_json_not_a_hang(
    view: View, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(snap: object, baseline: str | None) -> Analysis | None:
        raise RuntimeError("no analysis")

    monkeypatch.setattr(view, "_analyse", broken)
    with pytest.raises(RuntimeError, match="no analysis"):
        view.comparisons(None)

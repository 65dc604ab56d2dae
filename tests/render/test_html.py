"""The HTML report: self-contained, escaped, and readable in a real browser (headless Chromium)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from kag.datasets import load_datasets
from kag.grading.compare import AnswerSet, analyse, load_source_answers
from kag.grading.mcq.request import GradeRequest
from kag.grading.mcq.trees import one_tree
from kag.render.html import PageMeta, render_html
from kag.render.table import Table, pvalue, table_markdown, table_text
from kag.results import ErrorResult, OkResult, result_path, write_result
from tests.commands.test_compare_cli import PREFIX, build_tree
from tests.conftest import REPO

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("html")
    datasets, results = build_tree(root)
    loaded = load_source_answers(load_datasets(datasets), one_tree(results), GradeRequest(PREFIX))
    analysis = analyse(loaded, "native", n_resamples=500, seed=5)
    meta = PageMeta(datasets="datasets.json", results="results", prefix=PREFIX, version="test")
    return render_html(loaded.summary.setups, analysis.comparisons, analysis.flips, analysis.impacts, meta)


def _load(tmp_path: Path, names: tuple[str, ...]) -> AnswerSet:
    datasets, results = build_tree(tmp_path, names=names)
    return load_source_answers(load_datasets(datasets), one_tree(results), GradeRequest(PREFIX))


def _page(loaded: AnswerSet, baseline: str | None = None, **kwargs: int) -> str:
    a = analyse(loaded, baseline, n_resamples=100, seed=1)
    return render_html(loaded.summary.setups, a.comparisons, a.flips, a.impacts, **kwargs)


# ---------------------------------------------------------------- the page itself


def test_page_is_self_contained(page: str) -> None:
    lowered = page.lower()
    for forbidden in ("http://", "https://", "<script", "src=", "<link", "@import", "url("):
        assert forbidden not in lowered, forbidden
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert '<meta charset="utf-8">' in page
    assert page.count("<svg") == 3  # accuracy, differences, one impact chart


def test_page_sections_and_numbers(page: str) -> None:
    text = re.sub(r"<[^>]+>", " ", page)
    for heading in (
        "Ranking",
        "Accuracy with 95% CI",
        "Comparisons against native",
        "Retrieval impact",
        "Per-question flips",
    ):
        assert heading in text
    # the ranking: other 30/40, native 25/40, kag 17/39 in that order
    ranking = page[page.index('class="ranking"') : page.index("</table>", page.index('class="ranking"'))]
    assert [ranking.index(f">{s}<") for s in ("other", "native", "kag")] == sorted(
        ranking.index(f">{s}<") for s in ("other", "native", "kag")
    )
    assert ">75.00<" in ranking and ">62.50<" in ranking and ">43.59<" in ranking
    assert "seed 5" in text and "500 resamples" in text
    assert "helped 7 | hurt 15 | no change 17" in text


def test_page_is_deterministic(tmp_path: Path) -> None:
    loaded = _load(tmp_path, ("native", "kag"))
    assert _page(loaded) == _page(loaded)


def test_names_and_responses_are_escaped(tmp_path: Path) -> None:
    evil = "<img onerror=x>"
    data = {
        "d&1": {
            "0": {"input": "?", "output": {"type": "MCQ", "options": {"A": "a", "B": "b"}, "answer": "A"}}
        }
    }
    (tmp_path / "ds.json").write_bytes(orjson.dumps(data))
    write_result(result_path(tmp_path / "r", "d&1", "0", "", evil), OkResult("A"))
    write_result(result_path(tmp_path / "r", "d&1", "0", "", "plain"), OkResult("<script>alert(1)</script>"))
    write_result(result_path(tmp_path / "r", "d&1", "0", "", "broken"), ErrorResult("<b>boom</b>"))
    loaded = load_source_answers(load_datasets(tmp_path / "ds.json"), one_tree(tmp_path / "r"))
    out = _page(loaded, evil)
    assert "<img" not in out and "<script>" not in out and "<b>" not in out
    assert "&lt;img onerror=x&gt;" in out and "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "d&amp;1" in out and "&lt;b&gt;boom&lt;/b&gt;" in out  # the error message of an ERR flip


def test_flip_lists_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kag.render.html.OPEN_FLIPS", 10)
    out = _page(_load(tmp_path, ("native", "kag")), "native", max_flips=4)
    assert "11 more not shown" in out  # 15 flips native-only, 4 shown
    assert "<code>kag stats flips kag native</code>" in out
    assert "<details open><summary>A right, B not: 7 question(s)" in out  # short lists unfolded (<= 10)
    assert "<details><summary>B right, A not: 15 question(s)" in out


def test_empty_and_single_setup_pages(tmp_path: Path) -> None:
    assert "No graded result file." in render_html([])
    loaded = _load(tmp_path, ("kag",))
    a = analyse(loaded)
    assert a.comparisons is None and a.flips == ()
    out = render_html(loaded.summary.setups, a.comparisons, a.flips, a.impacts)
    assert ">kag<" in out and "Comparisons" not in out and "Per-question flips" not in out
    # the impact section is still there, without a native setup
    assert "No setup without retrieval to compare with" in out


# ---------------------------------------------------------------- tables and numbers


def test_table_renderers() -> None:
    table = Table(("NAME", "N"), (("a|b", "1"), ("long name", "100")), ("l", "r"))
    assert table_text(table) == "NAME         N\na|b          1\nlong name  100"
    assert table_markdown(table) == "| NAME | N |\n|---|---:|\n| a\\|b | 1 |\n| long name | 100 |"


def test_pvalue_format() -> None:
    assert [pvalue(p) for p in (None, 0.0, 1.0, 0.0072095, 0.00001234)] == [
        "-",
        "0",
        "1.0000",
        "0.0072",
        "1.2e-05",
    ]


# ---------------------------------------------------------------- in a real browser


def _chromium(*args: str, user_dir: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={user_dir}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(
    CHROMIUM is None, reason="Debian package 'chromium' is not installed (apt-get install chromium)"
)
def test_chromium_renders_the_report(page: str, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    report.write_text(page, encoding="utf-8")
    dumped = _chromium("--dump-dom", report.as_uri(), user_dir=tmp_path / "profile")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    text = " ".join(re.sub(r"<[^>]+>", " ", dom).split())
    # What the browser parsed: setup names, the hand-computed numbers, each section.
    assert "kag stats report" in text
    for expected in (
        "other",
        "native",
        "kag",
        "75.00",
        "62.50",
        "43.59",
        "-20.51",
        "0.1338",
        "0.2676",
        "no significant difference",
        "helped 7 | hurt 15 | no change 17",
        "Per-question flips",
        "I think C because the graph | says so",
    ):
        assert expected in text, expected
    assert dom.count("<svg") == 3 and dom.count("<circle") >= 3

    artifacts = REPO / "artifacts"
    artifacts.mkdir(exist_ok=True)
    shot = artifacts / "report.png"
    shot.unlink(missing_ok=True)
    taken = _chromium(
        f"--screenshot={shot}", "--window-size=1280,2000", report.as_uri(), user_dir=tmp_path / "profile2"
    )
    assert taken.returncode == 0, taken.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 2000)


# ---------------------------------------------------------------- what the page tells beside the numbers


def _small_tree(root: Path) -> tuple[Path, Path]:
    """Four questions (two setups), a question without a key (a skipped file), a free-form
    one (an ignored file), a stray file and an unreadable result file."""
    mcq = {"type": "MCQ", "options": {"A": "yes", "B": "no"}, "answer": "A"}
    data = {"d": {f"q{i}": {"input": f"question {i}", "output": mcq} for i in range(4)}}
    data["d"]["nokey"] = {"input": "?", "output": {"type": "MCQ", "options": {"A": "1", "B": "2"}}}
    data["d"]["free"] = {"input": "explain"}
    datasets = root / "datasets.json"
    datasets.write_bytes(orjson.dumps(data))
    results = root / "results"
    for i in range(4):
        write_result(result_path(results, "d", f"q{i}", "", "good"), OkResult("A"))
        write_result(result_path(results, "d", f"q{i}", "", "bad"), OkResult("A" if i == 0 else "B"))
    write_result(result_path(results, "d", "nokey", "", "good"), OkResult("A"))
    write_result(result_path(results, "d", "free", "", "good"), OkResult("because"))
    (results / "d" / "q0" / "notes.txt").write_text("not a result")
    (results / "d" / "q1" / "good.json").write_text("{not json")
    return datasets, results


def _run_page(args: list[str], out: Path) -> tuple[str, str]:
    from typer.testing import CliRunner

    from kag.cli import app

    result = CliRunner().invoke(app, [*args, "--format", "html", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    return out.read_text(encoding="utf-8"), result.stderr


def _notes(page: str) -> list[str]:
    found = re.search(r'<ul class="notes">(.*?)</ul>', page)
    assert found is not None, "the page has no notes"
    return [re.sub(r"<[^>]+>", "", li) for li in re.findall(r"<li>(.*?)</li>", found.group(1))]


def test_the_page_shows_every_note_of_the_text_report(tmp_path: Path) -> None:
    datasets, results = _small_tree(tmp_path)
    page, stderr = _run_page(["stats", "-d", str(datasets), "-r", str(results)], tmp_path / "page.html")
    # The counters of the text report's header, zeros included.
    assert (
        "Datasets: 1 | Scorable questions: 4 | Skipped files: 1 | Ignored files: 2 | Unreadable files: 1"
        in page
    )
    notes = _notes(page)
    unreadable = next(n for n in notes if "unreadable result file(s)" in n)
    assert unreadable.startswith("1 unreadable result file(s), not graded: ")
    assert str(results / "d" / "q1" / "good.json") in unreadable
    assert any(n.startswith("2 entry(ies) ignored") for n in notes)
    assert any(n.startswith("1 file(s) skipped") for n in notes)
    # The small-sample warning of stderr, word for word.
    small = next(n for n in notes if n.startswith("few graded files"))
    assert f"kag: warning: {small}" in stderr.replace("&amp;", "&")
    assert "good 3" in small and "bad 4" in small and "too uncertain to rank on" in small


def test_a_clean_page_has_no_notes(tmp_path: Path) -> None:
    mcq = {"type": "MCQ", "options": {"A": "yes", "B": "no"}, "answer": "A"}
    (tmp_path / "ds.json").write_bytes(
        orjson.dumps({"d": {str(q): {"input": "?", "output": mcq} for q in range(30)}})
    )
    for q in range(30):
        for setup, answer in (("one", "A"), ("two", "B" if q % 3 else "A")):
            write_result(result_path(tmp_path / "r", "d", str(q), "", setup), OkResult(answer))
    page, _ = _run_page(
        ["stats", "-d", str(tmp_path / "ds.json"), "-r", str(tmp_path / "r")], tmp_path / "p.html"
    )
    assert '<ul class="notes">' not in page
    assert "Skipped files: 0 | Ignored files: 0 | Unreadable files: 0" in page


def test_the_page_names_the_labelled_trees(tmp_path: Path) -> None:
    datasets, results = _small_tree(tmp_path)
    page, _ = _run_page(
        ["stats", "-d", str(datasets), "-r", f"mon={results}", "-r", f"tue={results}"], tmp_path / "p.html"
    )
    assert f"2 result trees, their setups named LABEL/setup: mon = {results}; tue = {results}" in _notes(page)
    assert ">mon/good<" in page and ">tue/bad<" in page


def test_the_compare_page_is_titled_as_a_comparison(tmp_path: Path) -> None:
    datasets, results = _small_tree(tmp_path)
    args = ["-d", str(datasets), "-r", str(results)]
    compared, _ = _run_page(["stats", "compare", *args, "--resamples", "99"], tmp_path / "c.html")
    title = "kag stats compare: setups compared on the same questions"
    assert f"<title>{title}</title>" in compared and f"<h1>{title}</h1>" in compared
    assert "kag stats report" not in compared
    stats, _ = _run_page(["stats", *args], tmp_path / "s.html")
    assert "<title>kag stats report</title>" in stats
    # The compare page carries the same notes as the stats page.
    assert _notes(compared) == _notes(stats)


def test_the_page_is_drawn_from_an_analysis_computed_before(tmp_path: Path) -> None:
    """No renderer runs a comparison: kag.render imports no function of kag.grading.compare
    (its types only), and the page shows the analysis it is handed."""
    import ast

    from kag.render.html import render_html_report

    for path in sorted((REPO / "kag" / "render").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kag.grading.compare"):
                functions = [a.name for a in node.names if not a.name[:1].isupper()]
                assert not functions, f"{path.name} imports {functions} from {node.module}"
    loaded = _load(tmp_path, ("kag", "native"))
    analysis = analyse(loaded, "native", n_resamples=100, seed=1)
    assert "<h2>Comparisons against native</h2>" in render_html_report(loaded, analysis)
    other = analyse(loaded, "kag", n_resamples=100, seed=1)
    assert "<h2>Comparisons against kag</h2>" in render_html_report(loaded, other)

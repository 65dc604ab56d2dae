"""What the pages of `kag view` compute (kag/view/query.py): the overview's epoch blocks
equal those of `kag stats --format json` on a tree of repeated samples, with and without
``--extract`` and across labelled trees; a question's page shows its epochs as k/N."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.datasets import load_datasets
from kag.render.view import overview
from kag.results import ErrorResult, epoch_result_path, result_path, write_result
from kag.view.index import Index, Tree
from kag.view.query import View
from tests.result_helpers import ok_result

runner = CliRunner()
LONG = "The answer is A, " + "because " * 40  # longer than the grid keeps of a response


def _epoch_tree(root: Path) -> tuple[Path, Path]:
    questions = {
        f"q{i}": {
            "input": f"Question {i}?",
            "output": {"type": "MCQ", "options": {"A": "yes", "B": "no"}, "answer": "A"},
        }
        for i in range(6)
    }
    questions["open"] = {"input": "Say hi", "output": {"type": "Open", "answers": ["hi"]}}
    datasets = root / "datasets.json"
    datasets.write_text(json.dumps({"med": questions, "bio": {"q0": questions["q0"]}}))
    tree = root / "results"

    def put(dataset: str, question: str, setup: str, epoch: int, answer: str | None) -> None:
        path = epoch_result_path(tree, dataset, question, "", setup, epoch)
        write_result(path, ErrorResult("down") if answer is None else ok_result(answer))

    # Four epochs of every question of "kag"; "native" has two, and one question with one.
    answers = {
        "q0": ["A", "A", "B", "A"],
        "q1": ["A", LONG + "x", LONG + "y", "A"],  # long answers that differ past their head
        "q2": [None, "A", "A", None],
        "q3": ["A" + " " * 300, "a", "B", "C"],  # a long answer that is "a" once trimmed and folded
        "q4": ["B", "B", "B", "B"],
        "q5": ["A", "B", "A", "B"],
    }
    for question, row in answers.items():
        for epoch, answer in enumerate(row, 1):
            put("med", question, "kag", epoch, answer)
        for epoch, answer in enumerate(row[:2] if question != "q5" else row[:1], 1):
            put("med", question, "native", epoch, answer)
    for epoch in (1, 2, 3):
        put("bio", "q0", "kag", epoch, "A" if epoch != 2 else "B")
        put("med", "open", "kag", epoch, "hi")
    # A gap (epoch 3 missing, epoch 4 present), an unreadable epoch, an unreadable epoch 1.
    os.remove(epoch_result_path(tree, "med", "q4", "", "kag", 3))
    epoch_result_path(tree, "med", "q5", "", "kag", 3).write_text("{broken")
    result_path(tree, "med", "q3", "", "native").write_text("{broken")
    # Not epoch folders: a name with a leading zero and one in non-ASCII digits.
    for name in ("02", "\u0662"):
        folder = tree / "med" / "q0" / "epochs" / name
        folder.mkdir()
        write_result(folder / "kag.json", ok_result("B"))
    return datasets, tree


def _view(tmp_path: Path, datasets: Path, trees: list[Tree], extract: str | None = None) -> View:
    index = Index(tmp_path / f"index-{extract}.sqlite", load_datasets(datasets), trees, "", extract)
    index.scan()
    return View(index)


def _stats(*args: str) -> dict[str, object]:
    result = runner.invoke(app, ["stats", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


@pytest.mark.parametrize("extract", [None, "letter"])
def test_the_epoch_blocks_equal_kag_stats(tmp_path: Path, extract: str | None) -> None:
    datasets, tree = _epoch_tree(tmp_path)
    view = _view(tmp_path, datasets, [Tree("", str(tree))], extract)
    more = ["--extract", extract] if extract else []
    expected = _stats("-d", str(datasets), "-r", str(tree), *more)
    got = overview(view, None)["stats"]
    assert got == expected
    kag = next(s for s in got["setups"] if s["setup"] == "kag")
    assert kag["overall"]["epochs"]["n"] == 4 and kag["overall"]["epochs"]["incomplete"] == 3
    assert kag["per_dataset"]["med"]["epochs"]["maj_at_k"] == pytest.approx(3 / 4)
    if extract:
        assert kag["overall"]["extracted"]["epochs"]["n"] == 4


def test_the_epoch_blocks_of_labelled_trees_equal_kag_stats(tmp_path: Path) -> None:
    datasets, tree = _epoch_tree(tmp_path)
    other = tmp_path / "other"
    _, other_tree = _epoch_tree(other.mkdir() or other)
    os.remove(epoch_result_path(other_tree, "med", "q0", "", "kag", 2))
    view = _view(tmp_path, datasets, [Tree("a", str(tree)), Tree("b", str(other_tree))])
    expected = _stats("-d", str(datasets), "-r", f"a={tree}", "-r", f"b={other_tree}")
    assert overview(view, None)["stats"] == expected


def test_the_epoch_blocks_follow_a_rescan(tmp_path: Path) -> None:
    datasets, tree = _epoch_tree(tmp_path)
    view = _view(tmp_path, datasets, [Tree("", str(tree))])
    write_result(epoch_result_path(tree, "med", "q4", "", "kag", 3), ok_result("A"))
    view.reload()
    assert overview(view, None)["stats"] == _stats("-d", str(datasets), "-r", str(tree))


def test_a_question_shows_its_epochs_as_k_of_n(tmp_path: Path) -> None:
    datasets, tree = _epoch_tree(tmp_path)
    view = _view(tmp_path, datasets, [Tree("", str(tree))])
    detail = view.question("med", "q0")
    assert detail is not None
    epochs = {s["setup"]: s["epochs"] for s in detail["setups"]}
    assert epochs == {"kag": [3, 4], "native": [2, 2]}
    q4 = view.question("med", "q4")
    assert q4 is not None and {s["setup"]: s["epochs"] for s in q4["setups"]}["kag"] == [0, 2]


def test_the_overview_page_shows_the_epoch_blocks(tmp_path: Path) -> None:
    from kag.render.view import ViewApp

    datasets, tree = _epoch_tree(tmp_path)
    view = _view(tmp_path, datasets, [Tree("", str(tree))], "letter")
    stats = overview(view, None)["stats"]
    kag = next(s for s in stats["setups"] if s["setup"] == "kag")
    body = ViewApp(view, "t")([], {}).body.decode()
    table = body[body.index('<div id="epochs">') : body.index('<div id="extracted-epochs">')]
    mean = kag["per_dataset"]["med"]["epochs"]["mean_accuracy"]
    assert '<td class="l">kag / med</td><td class="r">4</td>' in table
    assert f'<td class="r">{mean * 100:.2f}</td>' in table and "PASS^k%" in table
    extracted = kag["overall"]["extracted"]["epochs"]["mean_accuracy"]
    assert f'<td class="r">{extracted * 100:.2f}</td>' in body[body.index('<div id="extracted-epochs">') :]


def test_prices_give_the_cost_of_kag_stats_prices(tmp_path: Path) -> None:
    from kag.pricing import load_prices
    from kag.render.view import ViewApp
    from kag.results import Usage

    datasets, tree = _epoch_tree(tmp_path)
    for i, (model, setup) in enumerate([("gpt-x", "kag"), ("gpt-x", "native"), ("local", "native")]):
        path = result_path(tree, "med", f"q{i}", "", setup)
        write_result(path, ok_result("A", model=model, usage=Usage(1000 * (i + 1), 10)))
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."gpt-x"]\nprompt = 2.0\ncompletion = 10\n')
    index = Index(tmp_path / "index.sqlite", load_datasets(datasets), [Tree("", str(tree))], "", None)
    index.scan()
    view = View(index, prices=load_prices(prices))
    got = overview(view, None)["stats"]
    assert got == _stats("-d", str(datasets), "-r", str(tree), "--prices", str(prices))
    kag = next(s for s in got["setups"] if s["setup"] == "kag")
    assert kag["overall"]["usage"]["cost_usd"] == pytest.approx((1000 * 2 + 10 * 10) / 1e6)
    body = ViewApp(view, "t")([], {}).body.decode()
    assert '<th class="r">COST($)</th>' in body and f"{kag['overall']['usage']['cost_usd']:.4f}" in body
    plain = View(index)
    assert "COST" not in ViewApp(plain, "t")([], {}).body.decode()


def test_the_grid_s_kept_selections_follow_a_rescan(tmp_path: Path) -> None:
    from tests.view.helpers import make_tree

    datasets, tree = make_tree(tmp_path)
    view = _view(tmp_path, datasets, [Tree("", str(tree))])
    flip = {"flip": ["kag,native"]}
    before = [r["question"] for r in view.questions(flip)["rows"]]
    assert before == [r["question"] for r in view.questions({**flip, "page": ["1"]})["rows"]]
    write_result(result_path(tree, "med", "q2", "", "native"), ok_result("A"))
    view.reload()
    after = [r["question"] for r in view.questions(flip)["rows"]]
    assert "q2" in before and after == [q for q in before if q != "q2"]


@pytest.mark.parametrize("extract", [None, "letter"])
def test_the_snapshot_made_as_the_scan_reads_equals_the_one_read_back(
    tmp_path: Path, extract: str | None
) -> None:
    datasets, tree = _epoch_tree(tmp_path)
    (tree / "med" / "q0" / "notes.txt").write_text("ignored")
    index = Index(tmp_path / "index.sqlite", load_datasets(datasets), [Tree("", str(tree))], "", extract)
    scanned = View(index, scan=True)
    assert scanned.stats is not None and scanned.stats.read > 0
    index.tallies = None  # counted again from the rows read back
    read_back = View(index)
    for name in ("run", "summary", "setups", "grid", "order", "epochs"):
        assert getattr(scanned.snapshot, name) == getattr(read_back.snapshot, name), name
    assert scanned.snapshot.run.ignored_files == 1 and scanned.snapshot.epochs


def test_a_page_sees_one_snapshot_while_a_reload_rewrites_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from tests.view.helpers import make_tree, open_view, serving

    datasets, root = make_tree(tmp_path)
    view = open_view(datasets, root, tmp_path / "index.sqlite")
    os.remove(root / "med" / "q2" / "kag.json")
    write_result(result_path(root, "med", "q2", "", "native"), ok_result("A"))
    scanned, go = threading.Event(), threading.Event()
    build = view._build

    def held(*args: object) -> object:  # the reload holds here, its scan made, its snapshot not yet
        scanned.set()
        assert go.wait(60)
        return build(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(view, "_build", held)
    with serving(view) as url:
        reload = threading.Thread(target=view.reload)
        reload.start()
        try:
            assert scanned.wait(60)
            import urllib.request

            for _ in range(20):
                with urllib.request.urlopen(url + "q/med/q2") as r:  # raises on a 500
                    assert r.status == 200 and b"kag.json" in r.read()
            detail = view.question("med", "q2")
            assert detail is not None and {s["setup"] for s in detail["setups"]} == {"kag", "native"}
            kag = next(s for s in detail["setups"] if s["setup"] == "kag")
            assert kag["model"] == "m" and kag["outcome"] == "ok"
        finally:
            go.set()
            reload.join(60)
        assert not reload.is_alive()
        with urllib.request.urlopen(url + "q/med/q2") as r:
            page = r.read()
        assert r.status == 200 and b"kag.json" not in page
    native = view.question("med", "q2")["setups"]  # type: ignore[index]
    assert [(s["setup"], s["outcome"]) for s in native] == [("native", "ok")]


def test_two_views_sharing_an_index_each_show_what_it_holds_after_a_reload(tmp_path: Path) -> None:
    from tests.view.helpers import make_tree, open_view, serving

    datasets, root = make_tree(tmp_path)
    index = tmp_path / "shared.sqlite"
    first = open_view(datasets, root, index)
    second = open_view(datasets, root, index)
    os.remove(root / "med" / "q2" / "kag.json")
    write_result(result_path(root, "med", "q5", "", "native"), ok_result("B"))
    assert second.reload().changed
    stats = first.reload()  # the files were read by the other view: only the index changed
    assert stats.read == 0 and stats.changed
    assert any("another kag view changed this index" in w for w in stats.warnings)
    assert first.questions({}) == second.questions({})
    assert overview(first, None)["stats"] == overview(second, None)["stats"]
    import urllib.request

    with serving(first) as url, urllib.request.urlopen(url + "q/med/q2") as r:
        assert r.status == 200
    assert not first.reload().changed  # nothing new since


def test_the_run_records_are_read_once_per_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kag.results import runs
    from tests.view.helpers import make_tree, open_view

    datasets, root = make_tree(tmp_path)
    folder = runs.runs_folder(root)
    folder.mkdir(parents=True)
    (folder / "20261201T100000Z-abcdef.json").write_bytes(orjson.dumps({"started": "2026-12-01T10:00:00Z"}))
    view = open_view(datasets, root, tmp_path / "index.sqlite")
    calls: list[str] = []
    real = runs.read_run_records

    def counted(tree: str) -> list[runs.RunRecord]:
        calls.append(tree)
        return real(tree)

    monkeypatch.setattr(runs, "read_run_records", counted)
    for _ in range(3):
        assert len(overview(view, None)["runs"]) == 1
    assert len(calls) == 1
    write_result(result_path(root, "med", "q5", "", "gpt"), ok_result("A"))
    view.reload()
    assert len(overview(view, None)["runs"]) == 1 and len(calls) == 2


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "retrieval"
RQ_DATASETS = EXAMPLE / "datasets.json"
RQ_TREE = EXAMPLE / "results"


def test_the_grid_filters_on_retrieval_reaching_the_gold_as_kag_stats_counts_it(tmp_path: Path) -> None:
    """On examples/retrieval: each cell's ``reached`` is the file's as `kag stats` counts
    it (per setup, the cells reached are its ``retrieval_quality.reached``); the filter
    keeps the questions where a column reached (missed) the gold, and with ``outcome`` a
    column that is both."""
    view = View(
        Index(
            tmp_path / "i.sqlite", load_datasets(RQ_DATASETS), [Tree("", str(RQ_TREE.resolve()))], "", None
        ),
        scan=True,
    )
    done = runner.invoke(app, ["stats", "-d", str(RQ_DATASETS), "-r", str(RQ_TREE), "--format", "json"])
    assert done.exit_code == 0, done.output
    blocks = {s["setup"]: s["overall"]["retrieval_quality"] for s in orjson.loads(done.stdout)["setups"]}
    rows = view.questions({})["rows"]
    for setup, block in blocks.items():
        cells = [r["cells"][setup] for r in rows if r["cells"][setup] is not None]
        reached = [c["reached"] for c in cells]
        if block is None:
            assert set(reached) == {None}
            continue
        assert reached.count(True) == block["reached"]
        assert reached.count(True) + reached.count(False) == block["questions"]
        right = sum(1 for c in cells if c["reached"] is True and c["outcome"] == "ok")
        assert right == block["outcomes"]["reached_right"]

    def keys(**params: str) -> list[str]:
        return [r["question"] for r in view.questions({k: [v] for k, v in params.items()})["rows"]]

    assert keys(retrieval="reached") == ["anemia", "rickets", "scurvy"]
    assert keys(retrieval="missed") == ["rickets", "scurvy"]
    # rickets: rust-kag reached the gold and answered wrong (a reasoning miss) ...
    assert keys(retrieval="reached", outcome="wrong") == ["rickets"]
    # ... kag-graph missed it and answered wrong (a retrieval miss); no column missed and erred.
    assert keys(retrieval="missed", outcome="wrong") == ["rickets"]
    assert keys(retrieval="missed", outcome="err") == []
    assert keys(retrieval="reached", setup="kag-graph") == ["scurvy"]
    detail = view.question("vitamins", "scurvy")
    assert detail is not None
    assert {s["setup"]: s["reached"] for s in detail["setups"]} == {
        "kag-graph": True,
        "native": None,
        "rust-kag": False,
    }
    assert detail["evidence_triples"][0] == ["Scurvy", "caused by", "Vitamin C deficiency"]
    graph = next(s["graph"] for s in detail["setups"] if s["setup"] == "kag-graph")
    assert [s.id for s in graph.seeds] == ["1", "4"]  # the recorded graph, for the page to draw
    from kag.render.view import ViewApp

    answer = ViewApp(view, "t")(["api", "question", "vitamins", "scurvy"], {})
    setups = {s["setup"]: s for s in orjson.loads(answer.body)["setups"]}
    assert setups["kag-graph"]["graph"]["seeds"] == [{"id": "1", "score": 0.91}, {"id": "4", "score": 0.62}]
    assert setups["rust-kag"]["graph"] is None and setups["rust-kag"]["reached"] is False

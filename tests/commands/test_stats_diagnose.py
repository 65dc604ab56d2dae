"""The diagnostics of `kag stats` (:mod:`kag.grading.mcq.diagnose`, small samples): why
nothing or little was graded, which setups rest on few files (which `compare` then does
not take as its baseline), and hidden folders passed over without being counted, and a ``--prefix`` that is off by its
dash or missing on a prefixed tree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.grading.mcq.diagnose import prefix_hint
from kag.results import ErrorResult, OkResult, OkStats, result_path, write_result

runner = CliRunner()


def kag(*args: str):
    return runner.invoke(app, list(args))


def mcq_datasets(path: Path, questions: int, known: int | None = None) -> Path:
    """A datasets file with ``known`` (default: all) of the questions 0..questions-1 of `ds`, answer `a`."""
    entry = {"input": "?", "output": {"type": "MCQ", "options": {"a": "yes", "b": "no"}, "answer": "a"}}
    path.write_text(json.dumps({"ds": {str(q): entry for q in range(questions if known is None else known)}}))
    return path


def answer(root: Path, question: int, setup: str, text: str) -> None:
    write_result(result_path(root, "ds", str(question), "", setup), OkResult(text, OkStats()))


# ---------------------------------------------------------------- why nothing or little was graded


def test_a_prefix_that_matches_nothing_names_the_prefixes_seen(med_kag: Path) -> None:
    args = ("stats", "-d", str(med_kag / "datasets/mirage.json"), "-r", str(med_kag / "results"))
    result = kag(*args, "--prefix", "wkgr-")
    assert result.exit_code == 0
    assert result.stdout.startswith(
        "Datasets: 5 | Scorable questions: 7663 | Skipped files: 0 | Ignored files: 199\n"
    )
    assert result.stderr.splitlines() == [
        (
            f"kag: warning: no result file was graded in {med_kag / 'results'} "
            "(199 ignored, 0 unreadable; kag -v stats lists them)"
        ),
        "kag: warning: no result file starts with 'wkgr-' (--prefix); prefixes seen: 'wekgr-' (199 file(s))",
    ]
    # the right prefix: the Rust tool's header, and not a word on stderr (99 and 100 files a setup)
    right = kag(*args, "--prefix", "wekgr-")
    assert right.exit_code == 0 and right.stderr == ""
    assert right.stdout.startswith("Datasets: 5 | Scorable questions: 7663 | Skipped files: 0\n\n")


def test_a_results_root_one_level_too_high_or_too_low_says_where_the_tree_is(med_kag: Path) -> None:
    datasets = str(med_kag / "datasets/mirage.json")
    high = kag("stats", "-d", datasets, "-r", str(med_kag))
    assert high.exit_code == 0
    assert high.stderr.splitlines()[-1] == (
        "kag: warning: the result files are one level deeper (<folder>/<dataset>/<question>/); "
        f"try --results {med_kag / 'results'}"
    )
    low = kag("stats", "-d", datasets, "-r", str(med_kag / "results/pubmedqa"))
    assert low.exit_code == 0
    assert low.stderr.splitlines()[-1] == (
        f"kag: warning: the result files are one level up: {med_kag / 'results/pubmedqa'} looks like a "
        f"dataset folder; try --results {med_kag / 'results'}"
    )
    question = med_kag / "results/pubmedqa/10135926"
    lowest = kag("stats", "-d", datasets, "-r", str(question))
    assert lowest.stderr.splitlines()[-1] == (
        f"kag: warning: the result files are directly in {question}, a question folder; "
        f"try --results {med_kag / 'results'}"
    )


def test_a_datasets_file_that_knows_few_questions_says_how_many_it_misses(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for q in range(40):
        answer(root, q, "s", "a")
    datasets = mcq_datasets(tmp_path / "datasets.json", 40, known=3)
    result = kag("stats", "-d", str(datasets), "-r", str(root))
    assert result.exit_code == 0
    assert result.stdout.startswith(
        "Datasets: 1 | Scorable questions: 3 | Skipped files: 0 | Ignored files: 37\n"
    )
    assert result.stderr.splitlines()[:2] == [
        f"kag: warning: only 3 result file(s) graded in {root} (37 ignored, 0 unreadable; kag -v stats lists them)",
        f"kag: warning: 37 of 40 question folder(s) are not in {datasets}",
    ]
    # the whole datasets file: nothing to explain (40 files, more than 30)
    full = kag("stats", "-d", str(mcq_datasets(tmp_path / "all.json", 40)), "-r", str(root))
    assert full.stderr == ""
    assert full.stdout.startswith("Datasets: 1 | Scorable questions: 40 | Skipped files: 0\n\n")


def test_a_dataset_filter_with_no_folder_in_the_tree_says_so(tmp_path: Path) -> None:
    root = tmp_path / "results"
    answer(root, 0, "s", "a")
    path = mcq_datasets(tmp_path / "d.json", 1)
    doc = json.loads(path.read_text())
    path.write_text(json.dumps(doc | {"other": doc["ds"]}))
    result = kag("stats", "-d", str(path), "-r", str(root), "--dataset", "other")
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        f"kag: warning: no result file was graded in {root}",
        f"kag: warning: no <dataset>/<question>/ folder in {root} with --dataset other",
    ]


def test_the_text_header_shows_unreadable_files(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for q in range(40):
        answer(root, q, "s", "a")
    (root / "ds" / "0" / "t.json").write_text("{")
    result = kag("stats", "-d", str(mcq_datasets(tmp_path / "d.json", 40)), "-r", str(root))
    assert result.exit_code == 0
    assert result.stdout.startswith(
        "Datasets: 1 | Scorable questions: 40 | Skipped files: 0 | Unreadable files: 1\n\n"
    )
    assert result.stderr.startswith(f"kag: warning: {root / 'ds/0/t.json'}: unreadable result file")


# ---------------------------------------------------------------- setups graded on few files


@pytest.fixture
def lucky(tmp_path: Path) -> tuple[Path, Path]:
    """`big` answered 40 questions (30 right), `lucky` one (right): lucky ranks first at 100%."""
    root = tmp_path / "results"
    for q in range(40):
        answer(root, q, "big", "a" if q < 30 else "b")
    answer(root, 0, "lucky", "a")
    return mcq_datasets(tmp_path / "datasets.json", 40), root


def test_a_setup_graded_on_few_files_is_warned_about(lucky: tuple[Path, Path]) -> None:
    datasets, root = lucky
    result = kag("stats", "-d", str(datasets), "-r", str(root), "--format", "json")
    assert result.exit_code == 0
    assert [s["setup"] for s in json.loads(result.stdout)["setups"]] == ["lucky", "big"]
    assert result.stderr == (
        "kag: warning: few graded files: lucky 1 (ACC 95% CI 20.7–100.0%); an accuracy from under 30 "
        "files (or under half of the largest setup's 40) is too uncertain to rank on\n"
    )


def test_half_of_the_largest_total_is_a_small_sample_too(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for q in range(100):
        answer(root, q, "big", "a")
        if q < 40:
            answer(root, q, "part", "a")
    result = kag("stats", "-d", str(mcq_datasets(tmp_path / "d.json", 100)), "-r", str(root))
    assert result.stderr.startswith("kag: warning: few graded files: part 40 (ACC 95% CI")
    assert "big" not in result.stderr


def test_compare_takes_a_well_covered_setup_as_its_default_baseline(lucky: tuple[Path, Path]) -> None:
    datasets, root = lucky
    result = kag("stats", "compare", "-d", str(datasets), "-r", str(root), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["baseline"] == "big"
    assert "few graded files: lucky 1" in result.stderr
    named = kag(
        "stats", "compare", "-d", str(datasets), "-r", str(root), "--format", "json", "--baseline", "lucky"
    )
    assert json.loads(named.stdout)["baseline"] == "lucky"  # an explicit choice is kept


def test_the_html_report_takes_the_same_baseline(lucky: tuple[Path, Path], tmp_path: Path) -> None:
    datasets, root = lucky
    page = tmp_path / "report.html"
    result = kag("stats", "-d", str(datasets), "-r", str(root), "--format", "html", "-o", str(page))
    assert result.exit_code == 0, result.stderr
    html = page.read_text()
    assert "Baseline: big |" in html and "Baseline: lucky" not in html


# ---------------------------------------------------------------- hidden folders


@pytest.fixture
def hidden_tree(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    answer(root, 0, "s", "a")
    answer(root, 1, "s", "b")
    write_result(result_path(root, "ds", "2", "", "s"), ErrorResult("boom"))
    write_result(result_path(root, "ds", "3", "", "s"), ErrorResult("boom"))
    # a cache, an editor's folder inside a question folder, a hidden dataset
    write_result(root / ".kag-judge" / "j" / "x" / "s.json", OkResult("a", OkStats()))
    write_result(root / "ds" / "0" / ".bak" / "s.json", OkResult("a", OkStats()))
    write_result(result_path(root, ".old", "0", "", "s"), OkResult("a", OkStats()))
    return root


def test_stats_passes_over_hidden_dataset_folders_without_counting_them(
    hidden_tree: Path, tmp_path: Path
) -> None:
    datasets = str(mcq_datasets(tmp_path / "d.json", 4))
    result = kag("stats", "-d", datasets, "-r", str(hidden_tree), "--format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    # ds/0/.bak is a folder at the file level: ignored; .kag-judge and .old are not counted
    assert (doc["ignored_files"], doc["setups"][0]["overall"]["total"]) == (1, 4)


# ---------------------------------------------------------------- a --prefix off by its dash, or missing

REPO = Path(__file__).resolve().parent.parent.parent
DATASETS = str(REPO / "examples" / "dataset" / "datasets.json")


@pytest.fixture
def prefixed(tmp_path: Path) -> Path:
    """The example tree with every result file renamed ``wekgr-<setup>.json``."""
    root = tmp_path / "results"
    shutil.copytree(REPO / "examples" / "results", root)
    for path in sorted(root.rglob("*.json")):
        path.rename(path.with_name(f"wekgr-{path.name}"))
    return root


def kag_streams(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


DASH = (
    "kag: warning: every setup name starts with '-' ('-qwen35-9b-kag'…): the files are named"
    " 'wekgr-<setup>.json'; did you mean --prefix 'wekgr-'?\n"
)
NONE = (
    "kag: warning: every setup name starts with 'wekgr-': if the results were written with"
    " --prefix 'wekgr-', give it here too (the setups are then 'qwen35-9b-kag', 'qwen35-9b-native'…)\n"
)


@pytest.mark.parametrize("command", [["stats"], ["stats", "compare"], ["stats", "impact"]])
def test_a_prefix_without_its_dash_is_hinted_at(prefixed: Path, command: list[str]) -> None:
    code, out, err = kag_streams(*command, "-d", DATASETS, "-r", str(prefixed), "--prefix", "wekgr")
    assert code == 0, err
    assert DASH in err and "-qwen35-9b-kag" in out  # the report keeps the names the files give


@pytest.mark.parametrize("command", [["stats"], ["stats", "compare"]])
def test_no_prefix_on_a_prefixed_tree_is_hinted_at(prefixed: Path, command: list[str]) -> None:
    code, _, err = kag_streams(*command, "-d", DATASETS, "-r", str(prefixed))
    assert code == 0, err
    assert NONE in err


def test_the_right_prefix_gives_no_hint(prefixed: Path) -> None:
    code, _, err = kag_streams("stats", "-d", DATASETS, "-r", str(prefixed), "--prefix", "wekgr-")
    assert code == 0, err
    assert "every setup name" not in err
    code, _, err = kag_streams("stats", "-d", DATASETS, "-r", str(REPO / "examples" / "results"))
    assert code == 0 and "every setup name" not in err


@pytest.mark.parametrize(
    ("setups", "prefix", "filtered", "hint"),
    [
        (["-a", "-b"], "run", False, "did you mean --prefix 'run-'?"),
        (["_a"], "run", False, "did you mean --prefix 'run_'?"),
        (["-a", "b"], "run", False, None),  # not every setup: a name of its own
        (["-a", "-b"], "run-", False, None),  # the prefix ends in a dash already
        (["x-a", "x-b"], "", False, "every setup name starts with 'x-'"),
        (["x/x-a", "y/x-b"], "", False, "every setup name starts with 'x-'"),  # labelled trees
        (["x-a", "x-b"], "", True, None),  # --setup 'x-*' chose them
        (["x-a"], "", False, None),  # one setup: nothing to compare
        (["x-a", "y-b"], "", False, None),
        (["x-a", "x"], "", False, None),
        ([], "run", False, None),
    ],
)
def test_prefix_hint(setups: list[str], prefix: str, filtered: bool, hint: str | None) -> None:
    got = prefix_hint(setups, prefix, filtered)
    assert (got is None) if hint is None else (got is not None and hint in got)

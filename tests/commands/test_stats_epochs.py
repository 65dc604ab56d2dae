"""`kag stats` over a tree with repeated samples (epochs): the layout, the ``epochs`` blocks
(values computed by hand), and byte-identical reports of epoch 1."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.datasets import load_datasets
from kag.grading.mcq import GradeRequest, grade_tree
from kag.results import EPOCHS_FOLDER, ErrorResult, OkResult, Result, epoch_result_path, write_result

runner = CliRunner()

# Per question, the answers of setup s1 in epochs 1, 2, 3 (None: an error file; a shorter
# list: the later epochs are missing). The key is "A" everywhere.
S1: dict[tuple[str, str], list[str | None]] = {
    ("d", "q1"): ["A", " a ", "A"],  # 3/3; same vote after trim + case fold
    ("d", "q2"): ["A", "B", "B"],  # 1/3; majority B: wrong
    ("d", "q3"): ["B", "B", None],  # 0/3; consistent (all wrong)
    ("d", "q4"): ["A", "B"],  # epoch 3 missing: incomplete
    ("d", "q5"): ["A"],  # no epoch folder: incomplete
    ("d", "q6"): ["A", "B", "C"],  # 1/3; three-way tie: none wins
    ("e", "r1"): ["A", "A"],  # incomplete: dataset e has no complete question
}


def datasets_file(tmp_path: Path) -> Path:
    mcq = {"type": "MCQ", "options": {"A": "yes", "B": "no", "C": "maybe"}, "answer": "A"}
    doc = {
        "d": {f"q{i}": {"input": f"question {i}", "output": mcq} for i in range(1, 7)},
        "e": {"r1": {"input": "question r1", "output": mcq}},
    }
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(doc))
    return path


def result(answer: str | None) -> Result:
    return ErrorResult("Failed to generate a response") if answer is None else OkResult(answer)


def epoch_tree(root: Path) -> Path:
    for (dataset, question), answers in S1.items():
        for epoch, answer in enumerate(answers, start=1):
            write_result(epoch_result_path(root, dataset, question, "", "s1", epoch), result(answer))
        # s2 has epoch 1 only: its blocks carry no epochs key.
        write_result(epoch_result_path(root, dataset, question, "", "s2", 1), result("B"))
    return root


def stats_json(datasets: Path, root: Path) -> dict:
    out = runner.invoke(app, ["stats", "-d", str(datasets), "-r", str(root), "--format", "json"])
    assert out.exit_code == 0, out.stderr
    # Every tree here is small: the small-sample warning is the only line allowed.
    assert [line for line in out.stderr.splitlines() if "few graded files" not in line] == []
    return json.loads(out.stdout)


def by_setup(doc: dict) -> dict[str, dict]:
    return {s["setup"]: s for s in doc["setups"]}


def test_the_epoch_layout(tmp_path: Path) -> None:
    assert EPOCHS_FOLDER == "epochs"
    assert epoch_result_path(tmp_path, "d", "q", "p-", "s", 1) == tmp_path / "d/q/p-s.json"
    assert epoch_result_path(tmp_path, "d", "q", "p-", "s", 12) == tmp_path / "d/q/epochs/12/p-s.json"
    with pytest.raises(ValueError):
        epoch_result_path(tmp_path, "d", "q", "", "s", 0)


def test_epoch_blocks_by_hand(tmp_path: Path) -> None:
    doc = by_setup(stats_json(datasets_file(tmp_path), epoch_tree(tmp_path / "r")))
    s1 = doc["s1"]
    # Epoch 1 is the primary grade: q1 q2 q4 q5 q6 are right in epoch 1.
    assert (s1["per_dataset"]["d"]["correct"], s1["per_dataset"]["d"]["total"]) == (5, 6)
    # d at N = 3: the complete questions q1 q2 q3 q6 have per-question means 1, 1/3, 0, 1/3.
    # mean = (5/3)/4 = 5/12; deviations 7/12, -1/12, -5/12, -1/12: Σ² = 76/144;
    # stderr = sqrt(76/144 / (4·3)) = sqrt(19/432).
    block = s1["per_dataset"]["d"]["epochs"]
    assert block["n"] == 3 and block["questions"] == 4
    assert block["incomplete"] == 2  # q4 (2 epochs) and q5 (1)
    assert math.isclose(block["mean_accuracy"], 5 / 12, abs_tol=1e-15)
    assert math.isclose(block["stderr"], math.sqrt(19 / 432), abs_tol=1e-15)
    assert block["pass_at_k"] == 3 / 4  # q1 q2 q6
    assert block["maj_at_k"] == 1 / 4  # q1 only: q2's majority is B, q6 ties, q3's is B
    assert block["consistent"] == 2 / 4  # q1 all right, q3 all wrong
    # c = 3, 1, 0, 1 of 3: pass@2 = (1 + 2/3 + 0 + 2/3) / 4 = 7/12 (1 - C(2,2)/C(3,2) = 2/3)
    assert list(block["pass_at"]) == ["1", "2", "3"]
    assert math.isclose(block["pass_at"]["1"], 5 / 12, rel_tol=1e-12)
    assert math.isclose(block["pass_at"]["2"], 7 / 12, rel_tol=1e-12)
    assert block["pass_at"]["3"] == block["pass_at_k"]
    # e has no question with all 3 epochs: nothing measured at the setup's N.
    assert s1["per_dataset"]["e"]["epochs"] is None
    # Overall: the same four questions, and r1 is a third incomplete one.
    assert s1["overall"]["epochs"] == block | {"incomplete": 3}
    # s2 has no epoch file: no key, as in a tree without epochs.
    assert "epochs" not in doc["s2"]["overall"] and "epochs" not in doc["s2"]["per_dataset"]["d"]


def test_a_tree_with_epochs_reports_its_first_epoch_byte_for_byte(tmp_path: Path) -> None:
    datasets = datasets_file(tmp_path)
    full = epoch_tree(tmp_path / "full")
    first = tmp_path / "first"
    shutil.copytree(full, first)
    for folder in list(first.rglob(EPOCHS_FOLDER)):
        shutil.rmtree(folder)
    for fmt in ("text", "markdown"):
        outs = [
            runner.invoke(app, ["stats", "-d", str(datasets), "-r", str(root), "--format", fmt])
            for root in (full, first)
        ]
        assert outs[0].exit_code == outs[1].exit_code == 0
        if fmt == "markdown":
            assert outs[0].stdout == outs[1].stdout
        else:  # the same table, then the epochs section (kag's own, after the Rust tool's report)
            assert outs[0].stdout.startswith(outs[1].stdout)
            assert outs[0].stdout[len(outs[1].stdout) :].startswith("\nEpochs (strict grade)\n")
    with_epochs, without = stats_json(datasets, full), stats_json(datasets, first)
    assert with_epochs["ignored_files"] == without["ignored_files"] == 0
    for s in with_epochs["setups"]:
        for block in (s["overall"], *s["per_dataset"].values()):
            block.pop("epochs", None)
    assert with_epochs == without


def test_the_walk_passes_over_the_epoch_folder_uncounted(tmp_path: Path) -> None:
    datasets = load_datasets(datasets_file(tmp_path))
    root = epoch_tree(tmp_path / "r")
    run = grade_tree(datasets, root, workers=1)
    assert run.ignored_files == 0 and run.epochs is None
    # Only the name epochs is passed over uncounted (a *.tmp entry is a write in progress);
    # any other folder at the file level is counted as ignored.
    os.rename(root / "d/q1" / EPOCHS_FOLDER, root / "d/q1/epochs.tmp")
    assert grade_tree(datasets, root, workers=1).ignored_files == 0  # *.tmp: a write in progress
    os.rename(root / "d/q1/epochs.tmp", root / "d/q1/other")
    assert grade_tree(datasets, root, workers=1).ignored_files == 1


def test_epochs_are_the_same_in_worker_processes(tmp_path: Path) -> None:
    datasets = load_datasets(datasets_file(tmp_path))
    root = epoch_tree(tmp_path / "r")
    one = grade_tree(datasets, root, GradeRequest(measures={"epochs"}), workers=1)
    two = grade_tree(datasets, root, GradeRequest(measures={"epochs"}), workers=2)
    assert one.epochs == two.epochs
    assert one.epochs is not None and len(one.epochs[("s1", "d")]) == 5  # q5 has no epoch folder


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_links_in_the_epoch_layout_are_not_followed(tmp_path: Path) -> None:
    datasets = datasets_file(tmp_path)
    root = epoch_tree(tmp_path / "r")
    outside = tmp_path / "outside"
    outside.mkdir()
    write_result(outside / "s1.json", OkResult("A"))
    # q3's epoch 2 folder becomes a link to a folder outside the tree: q3 stops at epoch 1.
    shutil.rmtree(root / "d/q3/epochs/2")
    os.symlink(outside, root / "d/q3/epochs/2")
    # q6's epoch 3 file becomes a link to a file outside the tree: q6 stops at epoch 2.
    (root / "d/q6/epochs/3/s1.json").unlink()
    os.symlink(outside / "s1.json", root / "d/q6/epochs/3/s1.json")
    block = by_setup(stats_json(datasets, root))["s1"]["per_dataset"]["d"]["epochs"]
    # Left at N = 3: q1 (1) and q2 (1/3); mean 2/3, pass 1, maj 1/2, consistent 1/2.
    assert (block["questions"], block["incomplete"]) == (2, 4)
    assert math.isclose(block["mean_accuracy"], 2 / 3, abs_tol=1e-15)
    assert (block["pass_at_k"], block["maj_at_k"], block["consistent"]) == (1.0, 0.5, 0.5)


def test_compare_pairs_setups_on_mean_scores_over_epochs(tmp_path: Path) -> None:
    datasets = datasets_file(tmp_path)
    root = epoch_tree(tmp_path / "r")
    for dataset, question in S1:  # s3 answers A in its only epoch: mean 1 everywhere
        write_result(epoch_result_path(root, dataset, question, "", "s3", 1), OkResult("A"))
    args = ["stats", "compare", "-d", str(datasets), "-r", str(root), "--epochs", "all", "--resamples", "999"]
    out = runner.invoke(app, [*args, "--format", "json"])
    assert out.exit_code == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["baseline"] == "s3" and doc["epochs"] == {"s1": 3, "s2": 1, "s3": 1}
    assert doc["test"] == "paired bootstrap over questions"
    rows = {c["setup"]: c for c in doc["comparisons"]}
    # s1 has a mean score on q1 q2 q3 q6 only (1, 1/3, 0, 1/3): mean 5/12 against 1.
    s1 = rows["s1"]
    assert s1["paired_questions"] == 4
    assert math.isclose(s1["setup_mean"], 5 / 12) and s1["baseline_mean"] == 1.0
    assert math.isclose(s1["difference"], -7 / 12)
    assert s1["difference_ci"][0] <= s1["difference"] <= s1["difference_ci"][1]
    # s2 is wrong on all 7 questions, s3 right: every replicate is -1, none is as far from
    # the null as the estimate: p = (1 + 0) / (999 + 1).
    s2 = rows["s2"]
    assert (s2["paired_questions"], s2["difference"], s2["difference_ci"]) == (7, -1.0, [-1.0, -1.0])
    assert s2["p_value"] == 1 / 1000 and s2["verdict"] == "worse"
    # The same seed gives the same document; the text names its test.
    again = runner.invoke(app, [*args, "--format", "json"])
    assert again.stdout == out.stdout
    text = runner.invoke(app, [*args])
    assert (
        text.exit_code == 0 and "TEST: paired bootstrap over questions (McNemar does not apply" in text.stdout
    )
    gate = runner.invoke(app, [*args, "--fail-if-worse-than", "s3"])
    assert gate.exit_code == 1 and "s2: -100.00 pp of mean score on 7 questions" in gate.stderr
    bad = runner.invoke(app, [*args[:-4], "--epochs", "2"])
    assert bad.exit_code == 2 and "--epochs must be 1 or all" in bad.stderr


def test_mean_bootstrap_edge_cases() -> None:
    from kag.grading.compare.epoch_means import paired_bootstrap_mean_diff

    ci, p = paired_bootstrap_mean_diff([0.5, 1.0], [0.5, 1.0], 100, seed=3)
    assert (ci.estimate, ci.low, ci.high, p) == (0.0, 0.0, 0.0, 1.0)
    ci, p = paired_bootstrap_mean_diff([1.0, 0.0, 2 / 3], [0.0, 0.0, 0.0], 2000, seed=1)
    # Drawing the 0 three times (or the 1) has probability 1/27 > 2.5%: the ends are 0 and 1.
    assert math.isclose(ci.estimate, 5 / 9) and (ci.low, ci.high) == (0.0, 1.0)
    with pytest.raises(ValueError):
        paired_bootstrap_mean_diff([], [], 10)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_an_epochs_link_is_not_read(tmp_path: Path) -> None:
    datasets = datasets_file(tmp_path)
    root = epoch_tree(tmp_path / "r")
    for folder in list(root.rglob(EPOCHS_FOLDER)):
        shutil.move(folder, tmp_path / f"moved-{folder.parent.name}")
        os.symlink(tmp_path / f"moved-{folder.parent.name}", folder)
    doc = stats_json(datasets, root)
    # A link where the epochs folder belongs is an entry kag does not read: counted as
    # ignored (as any link among the result files), and no epochs are measured.
    assert doc["ignored_files"] == 6
    assert "epochs" not in json.dumps(doc)


def chatty_tree(tmp_path: Path) -> tuple[Path, Path]:
    """Four questions keyed B; ``chatty`` always says "The answer is B." (right only once
    extracted), ``terse`` always says "A"; both over 3 epochs."""
    mcq = {"type": "MCQ", "options": {"A": "yes", "B": "no", "C": "maybe"}, "answer": "B"}
    datasets = tmp_path / "datasets.json"
    datasets.write_text(
        json.dumps({"d": {f"q{i}": {"input": f"question {i}", "output": mcq} for i in range(4)}})
    )
    root = tmp_path / "r"
    for i in range(4):
        for epoch in (1, 2, 3):
            write_result(
                epoch_result_path(root, "d", f"q{i}", "", "chatty", epoch), OkResult("The answer is B.")
            )
            write_result(epoch_result_path(root, "d", f"q{i}", "", "terse", epoch), OkResult("A"))
    return datasets, root


def test_the_extracted_grade_reaches_the_epoch_blocks(tmp_path: Path) -> None:
    datasets, root = chatty_tree(tmp_path)
    args = ["stats", "-d", str(datasets), "-r", str(root), "--extract", "letter"]
    out = runner.invoke(app, [*args, "--format", "json"])
    assert out.exit_code == 0, out.stderr
    chatty = by_setup(json.loads(out.stdout))["chatty"]["overall"]
    assert chatty["accuracy"] == 0.0 and chatty["epochs"]["mean_accuracy"] == 0.0  # the strict grade
    extracted = chatty["extracted"]
    assert extracted["accuracy"] == 1.0  # epoch 1
    assert extracted["epochs"]["mean_accuracy"] == 1.0  # every epoch
    assert extracted["epochs"]["pass_at"] == {"1": 1.0, "2": 1.0, "3": 1.0}
    assert (extracted["epochs"]["maj_at_k"], extracted["epochs"]["consistent"]) == (1.0, 1.0)
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.stderr
    section = text.stdout[text.stdout.index("Epochs (extracted grade: letter)") :]
    chatty_row = next(line for line in section.splitlines() if line.startswith("chatty"))
    assert chatty_row.split()[1:5] == ["3", "4", "0", "100.00"]


def test_compare_over_epochs_follows_the_extracted_grade(tmp_path: Path) -> None:
    datasets, root = chatty_tree(tmp_path)
    args = [
        "stats",
        "compare",
        "-d",
        str(datasets),
        "-r",
        str(root),
        "--epochs",
        "all",
        "--baseline",
        "terse",
    ]
    args += ["--extract", "letter", "--resamples", "99", "--format", "json"]
    out = runner.invoke(app, [*args, "--grade", "extracted"])
    assert out.exit_code == 0, out.stderr
    (row,) = json.loads(out.stdout)["comparisons"]
    assert (row["setup"], row["setup_mean"], row["baseline_mean"]) == ("chatty", 1.0, 0.0)
    # The strict grade reads "The answer is B." as wrong in every epoch.
    strict = runner.invoke(app, args)
    assert strict.exit_code == 0, strict.stderr
    assert json.loads(strict.stdout)["comparisons"][0]["setup_mean"] == 0.0


def test_the_documented_epochs_section_is_this_tree_s(tmp_path: Path) -> None:
    from tests.conftest import REPO

    docs = (REPO / "docs" / "stats.md").read_text(encoding="utf-8")
    part = docs[docs.index("### The epochs section of the text report") :]
    block = part[
        part.index("```text\n") + len("```text\n") : part.index("```\n", part.index("```text\n") + 8)
    ]
    out = runner.invoke(
        app, ["stats", "-d", str(datasets_file(tmp_path)), "-r", str(epoch_tree(tmp_path / "r"))]
    )
    assert out.exit_code == 0, out.stderr
    assert out.stdout[out.stdout.index("Epochs (strict grade)") :] == block
    # The JSON example's numbers are the same setup's, rounded.
    doc = by_setup(stats_json(datasets_file(tmp_path), tmp_path / "r"))["s1"]["overall"]["epochs"]
    assert round(doc["stderr"], 4) == 0.2097 and round(doc["pass_at"]["2"], 4) == 0.5833

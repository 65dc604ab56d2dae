"""compare_setups, flips, retrieval_impact and the native-setup matching on hand-built records."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from kag.datasets import Datasets, load_datasets
from kag.grading.compare import (
    BUCKET_ORDER,
    SetupProfile,
    answer_set_from_run,
    answers_from_run,
    best_setup,
    compare_setups,
    flips,
    native_candidates,
    plan_impacts,
    question_sort_key,
    retrieval_impact,
    size_bucket,
)
from kag.grading.gates import fail_under_verdict, regression_verdict
from kag.grading.mcq import GradeRequest, GradeRun, Outcome, grade_tree, summarize
from kag.grading.record import GradedFile
from kag.results import (
    AugmentedGeneration,
    ErrorResult,
    ModelConfig,
    OkResult,
    OkStats,
    result_path,
    write_result,
)
from kag.results.codec import RetrievalSample

OK, WRONG, ERR = Outcome.OK, Outcome.WRONG, Outcome.ERR


def answers(
    setup: str, outcomes: str, dataset: str = "d", vertices: list[int | None] | None = None
) -> list[GradedFile]:
    """One answer per character: o = OK, w = WRONG, e = ERR, . = no file; question ids 0, 1, ..."""
    code = {"o": OK, "w": WRONG, "e": ERR}
    out = []
    for i, ch in enumerate(outcomes):
        if ch == ".":
            continue
        v = vertices[i] if vertices else None
        sample = RetrievalSample(0, v, 0, 0) if v is not None else None
        out.append(
            GradedFile(
                dataset, str(i), setup, code[ch], "A" if ch == "o" else "B", retrieval=sample, gold="A"
            )
        )
    return out


def test_compare_setups_counts_and_holm() -> None:
    base = answers("base", "oooooowwww")
    x = answers("x", "owowowowoo")
    y = answers("y", "oooooowww.")  # no file for q9: 9 paired
    run = compare_setups(base + x + y, "base", n_resamples=200)
    cx, cy = run.comparisons
    # x vs base: x right & base wrong on q6, q8, q9 -> 3; base right & x wrong on q1, q3, q5 -> 3
    assert (cx.setup, cx.n, cx.setup_only, cx.baseline_only) == ("x", 10, 3, 3)
    assert cx.diff == 0 and cx.test is not None and cx.test.p_value == 1.0
    assert (cy.n, cy.setup_only, cy.baseline_only, cy.diff) == (9, 0, 0, 0.0)
    assert cx.p_holm == 1.0 and cy.p_holm == 1.0  # min(1, 2 * 1.0)
    assert cx.verdict == cy.verdict == "no significant difference"
    assert run.regressions == ()
    assert regression_verdict(run) is None  # passes: nothing significant


def test_compare_setups_error_counts_as_not_correct_and_gate_fails() -> None:
    base = answers("base", "o" * 12)
    bad = answers("bad", "e" * 12)  # 12 errors where the baseline is right: b = 0, c = 12
    run = compare_setups(base + bad, "base", n_resamples=200)
    (c,) = run.comparisons
    assert (c.setup_only, c.baseline_only, c.diff) == (0, 12, -1.0)
    assert c.test is not None and c.test.p_value == 2 / 4096  # exact: 2 * 0.5^12
    assert c.verdict == "worse" and run.regressions == (c,)
    verdict = regression_verdict(run)
    assert verdict is not None
    assert verdict.startswith("1 setup(s) significantly worse than base at alpha 0.05: bad: -100.00 pp on 12")


def test_compare_setups_without_paired_questions() -> None:
    run = compare_setups(answers("base", "oo") + answers("z", "..oo"), "base", n_resamples=10)
    (c,) = run.comparisons
    assert c.n == 0 and c.diff is None and c.ci is None and c.test is None and c.p_holm is None
    assert c.verdict == "no paired questions" and not c.significant
    with pytest.raises(ValueError, match="baseline 'nope' has no graded answers"):
        compare_setups(answers("base", "o"), "nope")


def test_best_setup_ties_by_name() -> None:
    assert best_setup(answers("b", "ow") + answers("a", "wo") + answers("c", "ww")) == "a"
    with pytest.raises(ValueError):
        best_setup([])


def test_flips_both_ways_in_numeric_order() -> None:
    a = answers("a", "owoweo.", "d")
    b = answers("b", "wooowwo", "d")
    report = flips(a + b, "a", "b")
    assert report.paired == 6  # q6 has no file for a
    assert [f.question for f in report.a_only] == ["0", "5"]
    assert [f.question for f in report.b_only] == ["1", "3"]
    assert (report.both_correct, report.both_wrong) == (1, 1)  # q2 both right; q4 ERR vs WRONG
    assert report.a_only[0].a.correct and not report.a_only[0].b.correct
    assert report.a_only[0].gold == "A"


def test_question_sort_key() -> None:
    keys = [("d", "10"), ("d", "2"), ("c", "x"), ("d", "b"), ("d", "012"), ("d", "12"), ("d", "²")]
    assert sorted(keys, key=question_sort_key) == [
        ("c", "x"),
        ("d", "2"),
        ("d", "10"),
        ("d", "012"),
        ("d", "12"),
        ("d", "b"),
        ("d", "²"),  # a Unicode digit is not a number here
    ]


@pytest.mark.parametrize(
    ("vertices", "bucket"),
    [
        (None, "no retrieval stats"),
        (-1, "no retrieval stats"),
        (0, "empty"),
        (1, "1-10"),
        (10, "1-10"),
        (11, "11-100"),
        (100, "11-100"),
        (101, "101-1000"),
        (1000, "101-1000"),
        (1001, ">1000"),
        (10**9, ">1000"),
    ],
)
def test_size_buckets(vertices: int | None, bucket: str) -> None:
    sample = RetrievalSample(0, vertices, 0, 0) if vertices is not None else None
    assert size_bucket(GradedFile("d", "0", "s", OK, "A", retrieval=sample)) == bucket
    assert bucket in BUCKET_ORDER


def test_retrieval_impact_by_hand() -> None:
    native = answers("n", "ooowwwoo")
    kag = answers("k", "owowoe.o", vertices=[0, 5, 50, 500, 5000, None, None, 7])
    impact = retrieval_impact(native + kag, "k", "n")
    o = impact.overall
    # paired q0..q5, q7: helped q4 (k o, n w); hurt q1 (n o, k w), q2? k o n o -> same
    assert (o.n, o.correct, o.native_correct, o.helped, o.hurt, o.same) == (7, 4, 4, 1, 1, 5)
    assert impact.unpaired == 0
    rows = {r.label: r for r in impact.buckets}
    assert [r.label for r in impact.buckets] == [
        "empty",
        "1-10",
        "11-100",
        "101-1000",
        ">1000",
        "no retrieval stats",
    ]
    assert (rows["1-10"].n, rows["1-10"].correct, rows["1-10"].hurt, rows["1-10"].helped) == (2, 1, 1, 0)
    assert (rows[">1000"].helped, rows[">1000"].hurt) == (1, 0)
    assert rows["no retrieval stats"].n == 1 and rows["no retrieval stats"].correct == 0
    assert impact.hurt_responses == (("B", 1),)
    assert impact.test is not None and impact.test.p_value == 1.0
    alone = retrieval_impact(kag, "k")
    assert (
        alone.native is None and alone.overall.helped is None and alone.overall.n == 7 and alone.test is None
    )
    with pytest.raises(ValueError, match="'zz'"):
        retrieval_impact(kag, "zz")


def test_native_matching() -> None:
    profiles = {
        "kag": SetupProfile("kag", "m", "ollama", True),
        "n1": SetupProfile("n1", "m", "ollama", False),
        "n2": SetupProfile("n2", "m", "ollama", False),
        "other-provider": SetupProfile("other-provider", "m", "openai", False),
        "kag2": SetupProfile("kag2", "m2", "ollama", True),
        "kag3": SetupProfile("kag3", None, None, True),
    }
    assert native_candidates(profiles, "kag") == ["n1", "n2"]
    plans = {p.setup: p for p in plan_impacts(profiles)}
    assert list(plans) == ["kag", "kag2", "kag3"]
    assert plans["kag"].native == "n1" and "several setups" in (plans["kag"].note or "")
    assert plans["kag2"].native is None and "no setup without retrieval uses ollama/m2" in (
        plans["kag2"].note or ""
    )
    assert plans["kag3"].native is None and "an unknown model" in (plans["kag3"].note or "")
    forced = plan_impacts(profiles, ["kag", "n2"], native="n2")
    assert [(p.setup, p.native) for p in forced] == [("kag", "n2")]  # n2 is not its own native


KAG_CONFIG = ModelConfig("ollama", "m", 0.0, None, AugmentedGeneration("r", "neo4j"))


def _two_setup_run(tmp_path: Path, response: str) -> tuple[Datasets, GradeRun]:
    """One MCQ question (gold A) under tmp_path/ds.json; setup "kag" answers ``response`` with an
    ollama config, setup "bad" is an error result; graded with the records kept."""
    mcq = {"type": "MCQ", "options": {"A": "a", "B": "b"}, "answer": "A"}
    (tmp_path / "ds.json").write_bytes(orjson.dumps({"d": {"0": {"input": "?", "output": mcq}}}))
    write_result(
        result_path(tmp_path / "r", "d", "0", "p-", "kag"), OkResult(response, OkStats(config=KAG_CONFIG))
    )
    write_result(result_path(tmp_path / "r", "d", "0", "p-", "bad"), ErrorResult("retrieval failed"))
    datasets = load_datasets(tmp_path / "ds.json")
    run = grade_tree(datasets, tmp_path / "r", GradeRequest("p-", measures={"records"}))
    return datasets, run


def test_answers_from_run_reads_error_messages_and_configs(tmp_path: Path) -> None:
    datasets, run = _two_setup_run(tmp_path, " a ")
    loaded = answer_set_from_run(run, datasets, tmp_path / "r", "p-")
    by = {a.setup: a for a in loaded.answers}
    assert by["kag"].outcome is OK and by["kag"].response == " a " and by["kag"].gold == "A"
    assert by["bad"].outcome is ERR and by["bad"].response is None
    assert by["bad"].error == by["bad"].response_or_error == "retrieval failed"
    assert by["bad"].path == str(tmp_path / "r" / "d" / "0" / "p-bad.json")
    assert loaded.profiles["kag"] == SetupProfile("kag", "m", "ollama", True)
    assert loaded.profiles["bad"] == SetupProfile("bad", None, None, False)
    assert [s.setup for s in loaded.summary.setups] == ["kag", "bad"]
    with pytest.raises(ValueError, match="a request asking for 'records'"):
        answers_from_run(
            grade_tree(datasets, tmp_path / "r", GradeRequest("p-")), datasets, tmp_path / "r", "p-"
        )


def test_answers_come_from_the_records_without_reading_the_files_again(tmp_path: Path) -> None:
    """The error text and the config travel with the grading records: once graded, the
    tree can be gone and the answers and profiles are still whole."""
    datasets, run = _two_setup_run(tmp_path, "b")
    for path in (tmp_path / "r" / "d" / "0").iterdir():
        path.unlink()
    loaded = answer_set_from_run(run, datasets, tmp_path / "r", "p-")
    by = {a.setup: a for a in loaded.answers}
    assert by["bad"].response is None and by["bad"].error == "retrieval failed"
    assert by["kag"].config == KAG_CONFIG
    assert loaded.profiles["kag"] == SetupProfile("kag", "m", "ollama", True)


def test_both_gates_give_their_verdict_from_the_library(tmp_path: Path) -> None:
    mcq = {"type": "MCQ", "options": {"A": "a", "B": "b"}, "answer": "A"}
    (tmp_path / "ds.json").write_bytes(orjson.dumps({"d": {"0": {"input": "?", "output": mcq}}}))
    write_result(result_path(tmp_path / "r", "d", "0", "", "good"), OkResult("A"))
    write_result(result_path(tmp_path / "r", "d", "0", "", "poor"), OkResult("B"))
    summary = summarize(grade_tree(load_datasets(tmp_path / "ds.json"), tmp_path / "r"))
    assert fail_under_verdict(summary, 50) == "--fail-under 50: ACC% below 50 for poor (0.00%)"
    assert fail_under_verdict(summary, 0) is None
    empty = summarize(grade_tree(load_datasets(tmp_path / "ds.json"), tmp_path / "r", GradeRequest("none-")))
    assert fail_under_verdict(empty, 0) == "--fail-under 0: no setup was graded"

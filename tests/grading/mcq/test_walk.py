"""kag.grading.mcq.walk: grade_tree over real trees, and the grading rule and metrics it folds in."""

from __future__ import annotations

import logging
import math
import os
import pickle
import pickletools
import threading
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kag.datasets import parse_datasets
from kag.errors import InputError, UsageError
from kag.grading import mcq
from kag.grading.evidence import EvidenceRecord
from kag.grading.gates import failing_setups
from kag.grading.mcq import (
    GradedFile,
    GradeRequest,
    Metrics,
    Outcome,
    RetrievalSample,
    SetupSummary,
    Summary,
    Tally,
    eq_ignore_ascii_case,
    grade_result,
    grade_tree,
    is_correct,
    mean_duration_secs,
    rust_trim,
    summarize,
    wilson_interval,
)
from kag.grading.mcq.question_files import QuestionKind, QuestionTask
from kag.grading.mcq.rule import AnswerKey
from kag.grading.measures.retrieval_quality import RetrievalQualityCounts
from kag.grading.retrieval_quality import QualityRecord
from kag.results import (
    DatabaseStats,
    ErrorResult,
    OkResult,
    OkStats,
    Retrieval,
    Timing,
    result_path,
    write_result,
)
from kag.workers import mp_context

# ---------------------------------------------------------------- the grading rule


def test_rust_whitespace_is_python_isspace_minus_the_information_separators():
    python_space = {chr(c) for c in range(0x110000) if chr(c).isspace()}
    assert set(mcq.RUST_WHITESPACE) == python_space - {"\x1c", "\x1d", "\x1e", "\x1f"}
    assert len(mcq.RUST_WHITESPACE) == 25  # Unicode's White_Space property has 25 code points


@pytest.mark.parametrize(
    ("response", "answer", "expected"),
    [
        ("b", "b", True),
        ("B", "b", True),
        (" C\n", "c", True),
        ("\t\u00a0a\u3000\u2003", "A", True),  # Unicode White_Space is trimmed, like Rust's trim
        ("\u2028b\u2029", "b", True),
        ("\x1fb", "b", False),  # str.strip() would strip U+001F, Rust's trim does not
        ("b\x1c", "b", False),
        ("\u200bb", "b", False),  # zero-width space is not White_Space
        ("\u212a", "k", False),  # Kelvin sign: "K".lower() == "k" but it is not ASCII
        ("É", "é", False),  # only ASCII letters fold
        ("é", "é", True),
        ("ß", "SS", False),  # casefold() would say equal
        ("b.", "b", False),
        ("b b", "b", False),
        ("", "b", False),
        ("  ", "", True),
        ("opt-1", "OPT-1", True),
    ],
)
def test_is_correct_is_the_rust_rule(response: str, answer: str, expected: bool):
    assert is_correct(response, answer) is expected


@given(st.text(), st.text())
def test_eq_ignore_ascii_case_agrees_with_bytes_lower(a: str, b: str):
    # bytes.lower() folds only ASCII A-Z: an independent statement of Rust's eq_ignore_ascii_case.
    enc_a = a.encode("utf-8", "surrogatepass")
    enc_b = b.encode("utf-8", "surrogatepass")
    assert eq_ignore_ascii_case(a, b) == (enc_a.lower() == enc_b.lower())
    assert eq_ignore_ascii_case(a, a.upper()) == (
        a.encode("utf-8", "surrogatepass").lower() == a.upper().encode("utf-8", "surrogatepass").lower()
    )


@given(st.text())
def test_rust_trim_is_idempotent_and_keeps_no_white_space_at_the_ends(text: str):
    once = rust_trim(text)
    assert rust_trim(once) == once
    assert once == "" or (once[0] not in mcq.RUST_WHITESPACE and once[-1] not in mcq.RUST_WHITESPACE)
    assert once in text


def ok(response: str, **stats) -> OkResult:
    return OkResult(response, OkStats(**stats))


def grade(result, answer="b", options=("a", "b", "c", "d")) -> GradedFile:
    return grade_result(result, answer, options, dataset="ds", question="q", setup="s")


def test_error_file_is_err_without_numbers():
    g = grade(ErrorResult("Failed during the knowledge retrieval phase"))
    assert g.outcome is Outcome.ERR
    assert (g.response, g.generation_ns, g.context_length, g.retrieval) == (None, None, None, None)
    assert not g.abstained and not g.non_option


@pytest.mark.parametrize(
    ("response", "outcome", "abstained", "non_option"),
    [
        (" b ", Outcome.OK, False, False),
        ("a", Outcome.WRONG, False, False),  # a wrong option key
        ("A\n", Outcome.WRONG, False, False),  # still an option key under the trim + ASCII-case rule
        ("I don't know.", Outcome.WRONG, True, False),
        ("  i DONT know \n", Outcome.WRONG, True, False),
        ("I don't know", Outcome.WRONG, True, False),
        ("I do not know.", Outcome.WRONG, False, True),
        ("I don't know. B", Outcome.WRONG, False, True),
        ("The answer is B.", Outcome.WRONG, False, True),
        ("", Outcome.WRONG, False, True),
    ],
)
def test_wrong_answers_are_split_into_abstentions_and_non_option_answers(
    response, outcome, abstained, non_option
):
    g = grade(ok(response))
    assert (g.outcome, g.abstained, g.non_option) == (outcome, abstained, non_option)
    assert g.response == response


def test_custom_abstention_pattern():
    pattern = mcq.compile_abstention(r"^UNSURE$")
    g = grade_result(ok("UNSURE"), "b", ("a", "b"), dataset="d", question="q", setup="s", abstention=pattern)
    assert g.abstained
    with pytest.raises(UsageError, match="invalid abstention pattern"):
        mcq.compile_abstention("(")


def test_numbers_of_an_ok_file():
    prompt = "Quelle vitamine ? é\n"  # "é" is two bytes in UTF-8
    retrieval = Retrieval(
        result="(a)-[:R]->(b)",
        database=DatabaseStats("neo4j", 141, 196, 198, Timing(0, 27_146_880)),
        time=Timing(0, 159_785_044),
    )
    g = grade(ok("b", prompt=prompt, time=Timing(11, 820_792_699), retrieval=retrieval))
    assert g.outcome is Outcome.OK
    assert g.generation_ns == 11_820_792_699
    assert g.context_length == len(prompt) + 1 == 21
    assert g.retrieval == RetrievalSample(159_785_044, 141, 196, 198)


@pytest.mark.parametrize(
    "retrieval",
    [
        Retrieval(result="x"),  # no stats at all
        Retrieval(result="x", time=Timing(0, 5)),  # no database counts
        Retrieval(result="x", database=DatabaseStats("neo4j", 1, 2, 3)),  # no retriever time
        Retrieval(result="x", database=DatabaseStats("neo4j", 1, None, 3), time=Timing(0, 5)),
        Retrieval(result="x", database=DatabaseStats("neo4j", -1, 2, 3), time=Timing(0, 5)),
    ],
)
def test_partial_retrieval_stats_are_no_sample(retrieval: Retrieval):
    assert grade(ok("b", retrieval=retrieval)).retrieval is None


def test_absent_or_negative_times_are_absent():
    assert grade(ok("b")).generation_ns is None
    assert grade(ok("b", time=Timing(-1, 0))).generation_ns is None
    assert grade(ok("b", prompt="")).context_length == 0


# ---------------------------------------------------------------- metrics


def test_accuracy_precision_coverage_by_hand():
    m = Metrics(correct=8, incorrect=1, errors=1)
    assert (m.total, m.parsed) == (10, 9)
    assert m.accuracy == 0.8
    assert m.precision == 8 / 9
    assert m.coverage == 0.9


def test_metrics_without_samples_are_none():
    m = Metrics()
    assert (m.accuracy, m.precision, m.coverage, m.accuracy_ci95) == (None, None, None, None)
    assert (m.avg_generation_secs, m.avg_context_length, m.retrieval) == (None, None, None)
    assert m.total_generation_secs == 0.0
    only_errors = Metrics(errors=3)
    assert (only_errors.accuracy, only_errors.precision, only_errors.coverage) == (0.0, None, 0.0)


def test_wilson_interval_by_hand_and_against_scipy():
    # 8/10, z = 1.96: centre = (0.8 + 0.19208) / 1.38415 = 0.716697..., half = 0.2473...
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4901625, abs=1e-6)
    assert high == pytest.approx(0.9433178, abs=1e-6)
    scipy_stats = pytest.importorskip("scipy.stats")
    for k, n in [(0, 5), (1, 1), (3, 7), (52, 100), (31, 99), (999, 1000)]:
        ci = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        ours = wilson_interval(k, n)
        assert ours == pytest.approx((ci.low, ci.high), abs=1e-9)
    assert wilson_interval(0, 0) is None
    assert wilson_interval(0, 5)[0] == 0.0
    assert wilson_interval(5, 5)[1] == 1.0


@given(st.integers(min_value=1, max_value=10_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_interval_contains_the_estimate_and_stays_in_unit_interval(kn):
    k, n = kn
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0


def test_mean_duration_is_rust_div_f64_rounded_to_nanoseconds():
    # 1.5 s + 2 s + 2 s = 5.5 s; 5.5 / 3 = 1.8333333333333333 -> Duration {1 s, 833333333 ns},
    # whose as_secs_f64 is 1.0 + 0.833333333 = 1.8333333330000001 (what serde_json prints).
    total = 1_500_000_000 + 2 * 2_000_000_000
    assert mean_duration_secs(total, 3) == 1.0 + 833_333_333 / 1e9 == 1.8333333330000001
    assert mean_duration_secs(10, 3) == 3e-9  # 3.33 ns rounds to 3 ns
    assert mean_duration_secs(2, 3) == 1e-9  # 0.67 ns rounds up to 1 ns
    assert mean_duration_secs(0, 0) is None
    assert mcq.duration_secs(17_626_795_595_476) == 17626.795595476


def test_tally_adds_records():
    t = Tally()
    t.add(
        GradedFile(
            "d",
            "1",
            "s",
            Outcome.OK,
            "b",
            generation_ns=2_000_000_000,
            context_length=10,
            retrieval=RetrievalSample(100, 1, 2, 3),
        )
    )
    t.add(
        GradedFile(
            "d", "2", "s", Outcome.WRONG, "x", non_option=True, generation_ns=1_000_000_000, context_length=30
        )
    )
    t.add(GradedFile("d", "3", "s", Outcome.WRONG, "I don't know.", abstained=True))
    t.add(GradedFile("d", "4", "s", Outcome.ERR, None))
    m = t.freeze()
    assert (m.correct, m.incorrect, m.errors, m.abstentions, m.non_option_answers) == (1, 2, 1, 1, 1)
    assert m.avg_generation_secs == 1.5 and m.total_generation_secs == 3.0
    assert m.avg_context_length == 20.0
    r = m.retrieval
    assert (r.samples, r.vertices, r.avg_time_secs, r.avg_properties) == (1, 1, 1e-7, 3.0)


def _summary(*setups: tuple[str, Metrics]) -> Summary:
    return Summary(1, 1, 0, 0, 0, tuple(SetupSummary(name, m, {"d": m}) for name, m in setups))


def test_ranking_descending_accuracy_ties_by_name_none_last():
    run = mcq.GradeRun(
        tallies={
            ("zeta", "d"): Metrics(correct=1, incorrect=1),
            ("alpha", "d"): Metrics(correct=2, incorrect=2),
            ("best", "d"): Metrics(correct=3, incorrect=1),
            ("empty", "d"): Metrics(),
            ("Beta", "d"): Metrics(correct=1, incorrect=1),
        },
        datasets=1,
        scorable_questions=4,
        skipped_files=0,
        ignored_files=0,
        unreadable=(),
    )
    assert [s.setup for s in summarize(run).setups] == ["best", "Beta", "alpha", "zeta", "empty"]


def test_failing_setups_uses_the_unrounded_accuracy():
    summary = _summary(("a", Metrics(correct=7999, incorrect=2001)), ("b", Metrics(correct=9, incorrect=1)))
    assert [s.setup for s in failing_setups(summary, 80)] == ["a"]  # 79.99% prints as 79.99
    assert failing_setups(summary, 79.99) == ()
    assert failing_setups(summary, 0) == ()
    for bad in (-1, 100.5, math.nan):
        with pytest.raises(UsageError, match="between 0 and 100"):
            failing_setups(summary, bad)


# ---------------------------------------------------------------- walking a tree

DATASETS = {
    "mcq": {
        "0": {
            "input": "q0",
            "output": {"type": "MCQ", "options": {"a": "x", "b": "y", "c": "z"}, "answer": "b"},
        },
        "1": {"input": "q1", "output": {"type": "MCQ", "options": {"a": "x", "b": "y"}, "answer": "a"}},
        "2": {"input": "q2 (no answer)", "output": {"type": "MCQ", "options": {"a": "x", "b": "y"}}},
        "3": {"input": "q3 (free-form)"},
    },
    "other": {
        "9": {"input": "q9", "output": {"type": "MCQ", "options": {"A": "yes", "B": "no"}, "answer": "B"}}
    },
}


def load(tmp_path: Path):
    import orjson

    path = tmp_path / "datasets.json"
    path.write_bytes(orjson.dumps(DATASETS))
    return parse_datasets(path.read_bytes(), path)


def write(root: Path, dataset: str, question: str, setup: str, result, prefix: str = "run-") -> Path:
    path = result_path(root, dataset, question, prefix, setup)
    write_result(path, result)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    for setup, answers in {
        "kag": {"0": " B\n", "1": "I don't know.", "2": "a", "3": "free text"},
        "native": {"0": "c", "1": "a", "2": "b", "3": "more text"},
    }.items():
        for qid, response in answers.items():
            retrieval = None
            if setup == "kag":
                retrieval = Retrieval(
                    "ctx", database=DatabaseStats("neo4j", 10, 20, 30), time=Timing(0, 500_000_000)
                )
            write(
                root, "mcq", qid, setup, ok(response, prompt="p" * 10, time=Timing(2, 0), retrieval=retrieval)
            )
    write(root, "other", "9", "native", ErrorResult("timed out"))
    write(root, "other", "9", "kag", ok("b", prompt="é", time=Timing(1, 0)))
    write(root, "unknown-dataset", "5", "native", ok("a"))  # not in the datasets file: ignored
    write(root, "mcq", "77", "native", ok("a"))  # unknown question: ignored
    (root / "README.md").write_text("not a dataset")  # file at the dataset level: ignored
    (root / "mcq" / "notes.txt").write_text("x")  # file at the question level: ignored
    (root / "mcq" / "0" / "notes.txt").write_text("x")  # other name: ignored
    (root / "mcq" / "0" / "deeper").mkdir()  # folder at the file level: ignored
    write(root / "mcq" / "0" / "deeper", "x", "y", "native", ok("b"))  # deeper levels are never read
    (root / "mcq" / "0" / "run-half.json.tmp").write_bytes(b'{"ok": {"res')  # write in progress
    (root / "mcq" / "1" / "other-prefix.json").write_text("{}")  # another prefix: ignored
    return root


def test_grade_tree_counts(tmp_path: Path, tree: Path):
    run = grade_tree(load(tmp_path), tree, GradeRequest("run-"))
    assert run.datasets == 2
    assert run.scorable_questions == 3
    assert run.skipped_files == 2  # mcq/2 for both setups
    # mcq/3 x2 (free-form), unknown-dataset/5, mcq/77, README.md, mcq/notes.txt,
    # mcq/0/notes.txt, mcq/0/deeper, mcq/1/other-prefix.json
    assert run.ignored_files == 9
    assert run.unreadable == ()
    kag_mcq, native_mcq = run.tallies[("kag", "mcq")], run.tallies[("native", "mcq")]
    assert (kag_mcq.correct, kag_mcq.incorrect, kag_mcq.errors, kag_mcq.abstentions) == (1, 1, 0, 1)
    assert (native_mcq.correct, native_mcq.incorrect, native_mcq.non_option_answers) == (1, 1, 0)
    assert kag_mcq.retrieval.samples == 2 and kag_mcq.retrieval.avg_vertices == 10.0
    other_native = run.tallies[("native", "other")]
    assert (other_native.errors, other_native.total, other_native.generation_samples) == (1, 1, 0)
    other_kag = run.tallies[("kag", "other")]
    assert (other_kag.correct, other_kag.context_bytes) == (1, 2)  # "b" vs answer "B"; "é" is 2 bytes
    assert run.records is None


def test_summary_of_the_tree(tmp_path: Path, tree: Path):
    summary = summarize(grade_tree(load(tmp_path), tree, GradeRequest("run-")))
    assert [s.setup for s in summary.setups] == ["kag", "native"]  # 2/3 then 1/3
    kag = summary.setups[0]
    assert list(kag.per_dataset) == ["mcq", "other"]
    assert (kag.overall.correct, kag.overall.total) == (2, 3)
    assert kag.overall.avg_generation_secs == pytest.approx(5 / 3, abs=1e-9)
    assert kag.overall.avg_context_length == 22 / 3
    assert kag.overall.retrieval.samples == 2  # the "other" file had no retrieval


def test_a_file_loaded_without_its_texts_grades_the_same_but_not_for_extract(tmp_path: Path, tree: Path):
    from kag.datasets import load_datasets

    full = load(tmp_path)
    lean = load_datasets(tmp_path / "datasets.json", texts=False)
    assert not lean.texts
    request = GradeRequest("run-", measures=frozenset({"records"}))
    assert grade_tree(lean, tree, request) == grade_tree(full, tree, request)
    # --extract letter reads the options' texts: a lean file is refused, not graded without them.
    with pytest.raises(UsageError, match="loaded without its texts, which --extract and --judge read"):
        grade_tree(lean, tree, GradeRequest("run-", extract="letter"))
    assert grade_tree(full, tree, GradeRequest("run-", extract="letter")).extract == "letter"


def test_filters(tmp_path: Path, tree: Path):
    datasets = load(tmp_path)
    only_kag = grade_tree(datasets, tree, GradeRequest("run-", setups=["k*"]))
    assert {s for s, _ in only_kag.tallies} == {"kag"}
    assert only_kag.skipped_files == 1
    only_other = grade_tree(datasets, tree, GradeRequest("run-", dataset_globs=["oth*"]))
    assert {d for _, d in only_other.tallies} == {"other"}
    assert (only_other.datasets, only_other.scorable_questions, only_other.skipped_files) == (1, 1, 0)
    nothing = grade_tree(datasets, tree, GradeRequest("run-", setups=["KAG"]))  # globs are case-sensitive
    assert nothing.tallies == {}


def test_prefix_selects_files(tmp_path: Path, tree: Path):
    run = grade_tree(
        load(tmp_path), tree, GradeRequest("")
    )  # every *.json is a result: other-prefix.json too
    assert ("run-kag", "mcq") in run.tallies
    assert [Path(u.path).name for u in run.unreadable] == ["other-prefix.json"]  # "{}" is no result
    assert grade_tree(load(tmp_path), tree, GradeRequest("nothing-")).tallies == {}


def test_unreadable_files_are_warned_by_name_and_counted(tmp_path: Path, tree: Path, caplog):
    bad = {
        "0": b'{"ok": {"result": "b", "stats": {',  # truncated
        "1": b"",  # empty
    }
    for qid, data in bad.items():
        (tree / "mcq" / qid / "run-broken.json").write_bytes(data)
    (tree / "mcq" / "0" / "run-shape.json").write_bytes(b'{"ok": {"result": 5}}')
    (tree / "mcq" / "1" / "run-both.json").write_bytes(b'{"ok": {"result": "a"}, "error": "x"}')
    (tree / "mcq" / "1" / "run-binary.json").write_bytes(b"\xff\xfe\x00garbage")
    with caplog.at_level(logging.WARNING, logger="kag"):
        run = grade_tree(load(tmp_path), tree, GradeRequest("run-"))
    names = [Path(u.path).relative_to(tree).as_posix() for u in run.unreadable]
    assert names == [
        "mcq/0/run-broken.json",
        "mcq/0/run-shape.json",
        "mcq/1/run-binary.json",
        "mcq/1/run-both.json",
        "mcq/1/run-broken.json",
    ]
    assert run.unreadable_files == 5
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 5 and all("unreadable result file" in w for w in warned)
    assert str(tree / "mcq" / "0" / "run-shape.json") in warned[1]
    assert "'ok.result' must be a string" in warned[1]
    # the good files are still graded
    assert run.tallies[("kag", "mcq")].total == 2


def test_symlinks_are_never_followed(tmp_path: Path, tree: Path):
    outside = tmp_path / "outside.json"
    write_result(outside, ok("b"))
    os.symlink(outside, tree / "mcq" / "0" / "run-linked.json")
    os.symlink(tree / "mcq" / "0", tree / "mcq" / "linked-question")
    os.symlink(tree / "mcq", tree / "linked-dataset")
    run = grade_tree(load(tmp_path), tree, GradeRequest("run-"))
    assert ("linked", "mcq") not in run.tallies
    assert run.tallies[("kag", "mcq")].total == 2
    assert run.ignored_files == 9 + 3


def test_missing_results_directory(tmp_path: Path):
    with pytest.raises(InputError, match="results directory not found"):
        grade_tree(load(tmp_path), tmp_path / "nope")


def test_fifo_under_a_result_name_does_not_block(tmp_path: Path, tree: Path):
    os.mkfifo(tree / "mcq" / "0" / "run-fifo.json")
    run = grade_tree(load(tmp_path), tree, GradeRequest("run-"))
    assert ("fifo", "mcq") not in run.tallies  # not a regular file: ignored, never opened
    assert run.ignored_files == 10


def test_records_and_worker_count_do_not_change_the_result(tmp_path: Path, tree: Path):
    datasets = load(tmp_path)
    # enough question folders for several chunks
    for i in range(250):
        write(tree, "mcq", "1", f"s{i % 7}", ok("a" if i % 3 else "b", time=Timing(i, i * 1_000_003)))
    serial = grade_tree(datasets, tree, GradeRequest("run-", measures={"records"}), workers=1)
    parallel = grade_tree(datasets, tree, GradeRequest("run-", measures={"records"}), workers=2)
    assert serial == parallel
    keys = [(r.dataset, r.question, r.setup) for r in serial.records]
    assert keys == sorted(keys)
    assert len(serial.records) == sum(m.total for m in serial.tallies.values())
    first = next(r for r in serial.records if r.setup == "kag" and r.question == "0")
    assert (first.outcome, first.response) == (Outcome.OK, " B\n")


def test_parallel_pool_over_many_chunks(tmp_path: Path):
    import orjson

    datasets_raw = {
        "d": {
            str(i): {"input": "q", "output": {"type": "MCQ", "options": {"a": "", "b": ""}, "answer": "a"}}
            for i in range(mcq.CHUNK_QUESTIONS * 3 + 7)
        }
    }
    path = tmp_path / "ds.json"
    path.write_bytes(orjson.dumps(datasets_raw))
    datasets = parse_datasets(path.read_bytes(), path)
    root = tmp_path / "r"
    for i in range(mcq.CHUNK_QUESTIONS * 3 + 7):
        write(root, "d", str(i), "x", ok("a" if i % 4 else "b", time=Timing(1, i)), prefix="")
        if i % 50 == 0:
            write(root, "d", str(i), "y", ErrorResult("boom"), prefix="")
    serial = grade_tree(datasets, root, workers=1)
    parallel = grade_tree(datasets, root, workers=2)
    assert serial == parallel
    x = serial.tallies[("x", "d")]
    assert (x.correct, x.incorrect) == (230, 77)  # 307 files, 77 multiples of 4 answer "b"
    assert serial.tallies[("y", "d")].errors == 7


def test_stats_reads_while_a_writer_adds_files(tmp_path: Path):
    """A writer using write_result (tmp + rename) never exposes a partial file to grade_tree."""
    import orjson

    n = 400
    raw = {
        "d": {
            str(i): {"input": "q", "output": {"type": "MCQ", "options": {"a": "", "b": ""}, "answer": "a"}}
            for i in range(n)
        }
    }
    path = tmp_path / "ds.json"
    path.write_bytes(orjson.dumps(raw))
    datasets = parse_datasets(path.read_bytes(), path)
    root = tmp_path / "r"
    root.mkdir()
    big_prompt = "context line\n" * 4000  # ~50 KB: writes are not instantaneous
    done = threading.Event()

    def writer() -> None:
        try:
            for i in range(n):
                write(root, "d", str(i), "w", ok("a", prompt=big_prompt, time=Timing(0, i)), prefix="")
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    totals = []
    try:
        while not done.is_set():
            run = grade_tree(datasets, root, workers=1)
            assert run.unreadable == ()
            assert run.ignored_files == 0  # .tmp files are neither graded nor counted
            totals.append(sum(m.total for m in run.tallies.values()))
    finally:
        thread.join()
    final = grade_tree(datasets, root, workers=1)
    assert final.tallies[("w", "d")].correct == n
    assert totals == sorted(totals)  # the count only grows
    assert len(totals) >= 1


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["s1", "s2", "s3"]),
            st.integers(0, 5),
            st.one_of(st.none(), st.sampled_from(["a", "B", " b\n", "I don't know.", "zz", ""])),
            st.integers(0, 3 * 10**9),
        ),
        max_size=30,
    )
)
def test_tree_totals_match_a_direct_count(tmp_path_factory, files):
    """Hypothesis: whatever the tree, the tallies equal a direct count of the written files."""
    import orjson

    base = tmp_path_factory.mktemp("h")
    raw = {
        "d": {
            str(i): {"input": "q", "output": {"type": "MCQ", "options": {"a": "", "b": ""}, "answer": "b"}}
            for i in range(6)
        }
    }
    (base / "ds.json").write_bytes(orjson.dumps(raw))
    datasets = parse_datasets((base / "ds.json").read_bytes(), base / "ds.json")
    expected: dict[tuple[str, str], Outcome] = {}
    times: dict[tuple[str, str], int] = {}
    for setup, q, response, ns in files:
        result = ErrorResult("x") if response is None else ok(response, time=Timing(ns // 10**9, ns % 10**9))
        write(base / "r", "d", str(q), setup, result, prefix="")
        key = (setup, str(q))
        if response is None:
            expected[key] = Outcome.ERR
            times.pop(key, None)
        else:
            expected[key] = Outcome.OK if response.strip().lower() == "b" else Outcome.WRONG
            times[key] = ns
    if not files:
        (base / "r").mkdir()
    run = grade_tree(datasets, base / "r")
    for setup in ("s1", "s2", "s3"):
        m = run.tallies.get((setup, "d"), Metrics())
        mine = [o for (s, _), o in expected.items() if s == setup]
        assert (m.correct, m.incorrect, m.errors) == (
            mine.count(Outcome.OK),
            mine.count(Outcome.WRONG),
            mine.count(Outcome.ERR),
        )
        assert m.generation_ns == sum(ns for (s, _), ns in times.items() if s == setup)


# ---------------------------------------------------------------- every byte is parsed

KEY = mcq.AnswerKey("b", ("a", "b", "c"))


def _real_kag_file(med_kag: Path) -> bytes:
    return (
        med_kag / "results/pubmedqa/12377809/wekgr-qwen35-9b-ollama-neo4j-embedding-triplet-formal.json"
    ).read_bytes()


def test_every_truncation_of_a_real_file_is_unreadable(med_kag: Path):
    from kag.results import UnreadableResult, parse_grading_fields

    data = _real_kag_file(med_kag)
    pattern = mcq.compile_abstention(mcq.DEFAULT_ABSTENTION)
    for cut in [*range(200), *range(200, len(data), 97), len(data) - 2]:
        with pytest.raises(UnreadableResult, match="not valid JSON"):
            mcq.grade_fields(parse_grading_fields(data[:cut]), KEY, "d", "q", "s", pattern)


def test_a_malformed_number_deep_in_the_embedding_makes_the_file_unreadable(med_kag: Path):
    from kag.results import UnreadableResult, parse_grading_fields

    original = _real_kag_file(med_kag)
    pattern = mcq.compile_abstention(mcq.DEFAULT_ABSTENTION)
    start = original.index(b'"vec": [') + len(b'"vec": [')
    first = original[start:].split(b",")[0].strip()
    assert first.startswith(b"-0.")
    double_dot = original.replace(first, b"-0.." + first[4:], 1)
    with pytest.raises(UnreadableResult, match="not valid JSON"):
        mcq.grade_fields(parse_grading_fields(double_dot), KEY, "d", "q", "s", pattern)


def test_pool_while_another_thread_runs_uses_a_clean_start_method(tmp_path: Path, tree: Path):
    """With other threads alive the pool is not forked from this process (fork + threads can deadlock)."""
    datasets = load(tmp_path)
    alive, release = threading.Event(), threading.Event()

    def idle() -> None:
        alive.set()
        release.wait(60)

    thread = threading.Thread(target=idle)
    thread.start()
    try:
        alive.wait(60)
        assert mp_context().get_start_method() != "fork"
        parallel = grade_tree(datasets, tree, GradeRequest("run-"), workers=2)
    finally:
        release.set()
        thread.join()
    if threading.active_count() == 1:  # single-threaded again: the cheap fork start is used
        assert mp_context().get_start_method() == "fork"
    assert parallel == grade_tree(datasets, tree, GradeRequest("run-"), workers=1)


def test_what_goes_to_and_from_the_workers_is_sent_as_slots() -> None:
    """The tasks, the evidence measures' records and the blocks' counters are rebuilt from
    their slots' values (REDUCE), not given a dataclass state after (BUILD, the slow path)."""
    sent = [
        QuestionTask("p", "d", "1", QuestionKind.SCORABLE, AnswerKey("A", ("A", "B")), evidence=("x",)),
        EvidenceRecord((True, False), True),
        QualityRecord(2, 1, 1, 0, 5, 0, None, False),
        RetrievalQualityCounts(rq_questions=3, rq_entity_recall=0.5),
    ]
    data = bytes(ForkingPickler.dumps(sent))
    assert "BUILD" not in {op.name for op, _, _ in pickletools.genops(data)}
    back = pickle.loads(data)
    assert back == sent and back[0].key.folded_options == frozenset({"a", "b"})


def test_equal_evidence_records_of_a_chunk_are_one_object_whatever_the_workers(tmp_path: Path) -> None:
    """A chunk keeps one object per evidence record value (it is sent once); the run's
    records are those of every file, the same with one process or several."""
    import orjson

    entry = {
        "input": "?",
        "output": {"type": "MCQ", "options": {"A": "x", "B": "y"}, "answer": "B"},
        "evidence": ["Scurvy", "Iron"],
    }
    path = tmp_path / "datasets.json"
    path.write_bytes(orjson.dumps({"med": {str(q): entry for q in range(8)}}))
    datasets = parse_datasets(path.read_bytes(), path)
    root = tmp_path / "results"
    for q in range(8):
        text = '(1)-[name]->("Scurvy")\n' + ('(2)-[name]->("Iron")\n' if q % 2 else "")
        retrieval = Retrieval(result=text, database=DatabaseStats("neo4j", 2, 0, 2, None), time=Timing(1, 0))
        write(
            root,
            "med",
            str(q),
            "kag",
            OkResult("B" if q < 4 else "A", OkStats(retrieval=retrieval)),
            prefix="",
        )
    request = GradeRequest(measures=frozenset({"evidence"}))
    runs = [grade_tree(datasets, root, request, workers=n) for n in (1, 2)]
    assert runs[0].evidence == runs[1].evidence
    records = runs[0].evidence[("kag", "med")]
    assert [records[str(q)] for q in range(4)] == [EvidenceRecord((True, q % 2 == 1), True) for q in range(4)]
    assert records["0"] is records["2"] and records["1"] is records["3"] and records["4"] is records["6"]
    assert len({id(r) for r in records.values()}) == 4


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_while_files_are_graded_and_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    # A chunk's records hold no cycle: the cyclic collector is not run over them (it walked
    # every object kept so far again and again), and is restored once the walk is done.
    import gc

    import orjson

    from kag.grading.mcq.question_files import FileGrader

    entry = {"input": "?", "output": {"type": "MCQ", "options": {"A": "x", "B": "y"}, "answer": "B"}}
    path = tmp_path / "datasets.json"
    path.write_bytes(orjson.dumps({"med": {str(q): entry for q in range(3)}}))
    datasets = parse_datasets(path.read_bytes(), path)
    for q in range(3):
        write(tmp_path / "results", "med", str(q), "kag", OkResult("B", OkStats()), prefix="")
    seen: list[bool] = []
    grade_file = FileGrader.grade

    def graded(self: FileGrader, *args: object) -> object:
        seen.append(gc.isenabled())
        return grade_file(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(FileGrader, "grade", graded)
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        run = grade_tree(datasets, tmp_path / "results", workers=1)
        after = gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False] * 3 and run.tallies[("kag", "med")].correct == 3
    assert after is enabled
    # What the run gathered lives until its report: handed to the oldest generation, where
    # resuming the collector does not walk it at once.
    assert any(o is run.tallies for o in gc.get_objects(generation=2))

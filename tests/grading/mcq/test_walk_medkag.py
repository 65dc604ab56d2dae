"""The real med-kag tree written by the Rust tool grades as the Rust tool's rules say.

The expected numbers are computed here independently of kag: the `json` module over the
raw files, the Rust rule restated (`trim()` of Unicode White_Space, `eq_ignore_ascii_case`
on bytes), Durations summed as (secs, nanos) integers and divided the way
`Duration::div_f64` does (f64 seconds, rounded to the nanosecond with `decimal`).
"""

from __future__ import annotations

import json
import unicodedata
from collections import defaultdict
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

from typer.testing import CliRunner

from kag.cli import app
from kag.datasets import load_datasets
from kag.grading.mcq import GradeRequest, grade_tree, summarize

PREFIX = "wekgr-"
NATIVE = "qwen35-9b-ollama-native"
KAG = "qwen35-9b-ollama-neo4j-embedding-triplet-formal"

# Unicode White_Space (PropList.txt), written out rather than derived from str.isspace().
WHITE_SPACE = {*map(chr, [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                          0x2028, 0x2029, 0x202F, 0x205F, 0x3000])}  # fmt: skip


def rust_trim(s: str) -> str:
    start, end = 0, len(s)
    while start < end and s[start] in WHITE_SPACE:
        start += 1
    while end > start and s[end - 1] in WHITE_SPACE:
        end -= 1
    return s[start:end]


def rust_secs(ns: int) -> float:
    return ns // 10**9 + (ns % 10**9) / 1e9


def rust_mean_secs(total_ns: int, n: int) -> float:
    quotient = rust_secs(total_ns) / n
    rounded = int((Decimal(quotient) * 10**9).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
    return rust_secs(rounded)


def expected(med_kag: Path) -> dict[str, dict]:
    answers = json.loads((med_kag / "datasets" / "mirage.json").read_text())
    out: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    for path in sorted((med_kag / "results").glob("*/*/*")):
        dataset, question, name = path.parts[-3:]
        assert name.startswith(PREFIX) and name.endswith(".json")
        setup = name[len(PREFIX) : -len(".json")]
        raw = json.loads(path.read_text(encoding="utf-8"))
        e = out[setup]
        if "error" in raw:
            e["ERR"] += 1
            continue
        ok = raw["ok"]
        answer = answers[dataset][question]["output"]["answer"]
        same = rust_trim(ok["result"]).encode().lower() == answer.encode().lower()
        e["OK" if same else "WRONG"] += 1
        t = ok["stats"]["time"]
        e["gen_ns"] += t["secs"] * 10**9 + t["nanos"]
        e["gen_n"] += 1
        e["ctx"] += len(ok["stats"]["prompt"].encode("utf-8"))
        retrieval = ok["stats"]["retrieval"]
        if retrieval is not None:
            embedder = retrieval["stats"]["embedder"]
            db = embedder["database"]["neo4j"]
            e["ret_ns"] += embedder["time"]["secs"] * 10**9 + embedder["time"]["nanos"]
            e["vertices"] += db["vertices"]
            e["relationships"] += db["relationships"]
            e["properties"] += db["properties"]
            e["ret_n"] += 1
    return out


def test_white_space_table_is_unicode_white_space():
    # sanity of the independent table: every member is whitespace to Python too
    assert all(c.isspace() for c in WHITE_SPACE) and len(WHITE_SPACE) == 25
    assert all(unicodedata.category(c) in {"Cc", "Zs", "Zl", "Zp"} for c in WHITE_SPACE)


def test_counts_and_means_match_the_rust_rules(med_kag: Path):
    exp = expected(med_kag)
    run = grade_tree(
        load_datasets(med_kag / "datasets" / "mirage.json"), med_kag / "results", GradeRequest(PREFIX)
    )
    summary = summarize(run)
    assert run.unreadable == () and run.ignored_files == 0 and run.skipped_files == 0
    assert {s.setup for s in summary.setups} == set(exp)
    for s in summary.setups:
        e, m = exp[s.setup], s.overall
        assert (m.correct, m.incorrect, m.errors) == (e["OK"], e["WRONG"], e["ERR"])
        assert m.avg_generation_secs == rust_mean_secs(e["gen_ns"], e["gen_n"])
        assert m.total_generation_secs == rust_secs(e["gen_ns"])
        assert m.avg_context_length == e["ctx"] / e["gen_n"]
        if e["ret_n"]:
            r = m.retrieval
            assert r.samples == e["ret_n"]
            assert r.avg_time_secs == rust_mean_secs(e["ret_ns"], e["ret_n"])
            assert (r.avg_vertices, r.avg_relationships, r.avg_properties) == (
                e["vertices"] / e["ret_n"],
                e["relationships"] / e["ret_n"],
                e["properties"] / e["ret_n"],
            )
        else:
            assert m.retrieval is None


def test_headline_numbers(med_kag: Path):
    """Pinned: the first 100 pubmedqa questions (one KAG file missing upstream)."""
    run = grade_tree(
        load_datasets(med_kag / "datasets" / "mirage.json"), med_kag / "results", GradeRequest(PREFIX)
    )
    summary = summarize(run)
    assert (summary.datasets, summary.scorable_questions) == (5, 7663)
    assert [s.setup for s in summary.setups] == [NATIVE, KAG]
    native, kag = summary.setups[0].overall, summary.setups[1].overall
    assert (native.correct, native.incorrect, native.errors) == (52, 48, 0)
    assert (kag.correct, kag.incorrect, kag.errors) == (31, 68, 0)
    assert f"{native.accuracy * 100:.2f}" == "52.00"
    assert f"{kag.accuracy * 100:.2f}" == "31.31"
    assert kag.retrieval.samples == 99
    assert list(summary.setups[1].per_dataset) == ["pubmedqa"]


def test_parallel_grading_of_the_real_tree_is_identical(med_kag: Path):
    datasets = load_datasets(med_kag / "datasets" / "mirage.json")
    serial = grade_tree(datasets, med_kag / "results", GradeRequest(PREFIX, measures={"records"}), workers=1)
    parallel = grade_tree(
        datasets, med_kag / "results", GradeRequest(PREFIX, measures={"records"}), workers=2
    )
    assert serial == parallel
    assert len(serial.records) == 199


def test_cli_on_the_real_tree(med_kag: Path):
    def stats(prefix: str):  # type: ignore[no-untyped-def]
        command = [
            "stats",
            "-d",
            med_kag / "datasets/mirage.json",
            "-r",
            med_kag / "results",
            "--prefix",
            prefix,
        ]
        return CliRunner().invoke(app, [str(part) for part in command])

    result = stats(PREFIX)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Datasets: 5 | Scorable questions: 7663 | Skipped files: 0"
    assert lines[3].split()[:9] == [NATIVE, "52.00", "52.00", "100.00", "52", "48", "0", "100", "176.268"]
    assert lines[5].split()[:9] == [KAG, "31.31", "31.31", "100.00", "31", "68", "0", "99", "206.790"]
    assert result.stderr == ""
    # without the prefix nothing is a result of these setups: every name starts with "wekgr-"
    wrong = stats("x-")
    assert "No scorable results were found." in wrong.stdout


def test_fast_path_equals_the_model_on_every_real_file(med_kag: Path):
    from kag.grading import mcq
    from kag.results import parse_grading_fields, read_result

    datasets = load_datasets(med_kag / "datasets" / "mirage.json")
    pattern = mcq.compile_abstention(mcq.DEFAULT_ABSTENTION)
    files = sorted((med_kag / "results").glob("*/*/*.json"))
    assert len(files) == 199
    for path in files:
        dataset, question, name = path.parts[-3:]
        mcq_q = datasets.get(dataset, question).mcq
        args = {
            "dataset": dataset,
            "question": question,
            "setup": name[len(PREFIX) : -5],
            "abstention": pattern,
        }
        key = mcq.AnswerKey(mcq_q.answer, tuple(mcq_q.options))
        fast = mcq.grade_fields(parse_grading_fields(path.read_bytes()), key, **args)
        assert fast == mcq.grade_result(read_result(path), mcq_q.answer, tuple(mcq_q.options), **args)

"""kag.render.stats: one renderer per format, the Rust tool's text layout and JSON document."""

from __future__ import annotations

import json

import pytest

from kag.grading.mcq import Metrics, SetupSummary, Summary
from kag.render.formats import TableFormat as Format
from kag.render.stats import RENDERERS, render, render_json, render_markdown, render_text

KAG = Metrics(
    correct=8,
    incorrect=1,
    errors=1,
    abstentions=1,
    generation_ns=15_590_000_000,
    generation_samples=9,
    context_bytes=9 * 1200,
    context_samples=9,
    retrieval_ns=1_926_000_000,
    vertices=112,
    relationships=167,
    properties=371,
    retrieval_samples=9,
)
NATIVE = Metrics(
    correct=6,
    incorrect=3,
    errors=1,
    non_option_answers=2,
    generation_ns=8_262_000_000,
    generation_samples=9,
    context_bytes=4500,
    context_samples=9,
)
ONLY_ERRORS = Metrics(errors=2)


def summary(*setups: SetupSummary, **counts) -> Summary:
    base = {
        "datasets": 2,
        "scorable_questions": 10,
        "skipped_files": 0,
        "unreadable_files": 0,
        "ignored_files": 0,
    }
    base.update(counts)
    return Summary(setups=tuple(setups), **base)


SAMPLE = summary(
    SetupSummary("qwen35-9b-kag", KAG, {"mcq-form": KAG}),
    SetupSummary("qwen35-9b-native", NATIVE, {"mcq-form": NATIVE}),
    SetupSummary("broken", ONLY_ERRORS, {"mcq-form": ONLY_ERRORS}),
)


def test_every_format_has_exactly_one_renderer():
    assert set(RENDERERS) == set(Format)
    assert len(set(RENDERERS.values())) == len(Format)
    for fmt in Format:
        out = render(SAMPLE, fmt)
        assert out.endswith("\n") and "\x1b" not in out


def test_text_layout_is_the_rust_tools():
    lines = render_text(SAMPLE).splitlines()
    # name column = longest setup name (16), then "  " + right-aligned cells of widths
    # 7, 7, 8, 5, 5, 4, 3, 8, 10 and the RAG cells 8, 7, 8, 8.
    assert lines == [
        "Datasets: 2 | Scorable questions: 10 | Skipped files: 0",
        "",
        (
            "SETUP                ACC%    PREC%    COVER%     OK  WRONG   ERR  TOT    GEN(s)     CTX_LEN"
            "    RET(s)  VERTICE  RELATION  PROPERTY"
        ),
        (
            "qwen35-9b-kag       80.00    88.89     90.00      8      1     1   10     1.732    1200.000"
            "     0.214    12.44     18.56     41.22"
        ),
        (
            "  └ mcq-form        80.00    88.89     90.00      8      1     1   10     1.732    1200.000"
            "     0.214    12.44     18.56     41.22"
        ),
        "qwen35-9b-native    60.00    66.67     90.00      6      3     1   10     0.918     500.000",
        "  └ mcq-form        60.00    66.67     90.00      6      3     1   10     0.918     500.000",
        "broken               0.00        -      0.00      0      0     2    2         -           -",
        "  └ mcq-form         0.00        -      0.00      0      0     2    2         -           -",
        "",
        "ACC% = correct / scored, PREC% = correct / committed, COVER% = committed / scored",
        "GEN(s)/RET(s) = mean generation/retrieval time per question, in seconds",
        "CTX_LEN = average context length",
    ]


def test_text_without_retrieval_has_no_rag_columns_and_short_names_pad_to_five():
    lines = render_text(summary(SetupSummary("ab", NATIVE, {"d": NATIVE}))).splitlines()
    assert lines[2] == "SETUP     ACC%    PREC%    COVER%     OK  WRONG   ERR  TOT    GEN(s)     CTX_LEN"
    assert lines[3].startswith("ab       60.00")
    assert lines[4].startswith("  └ d    60.00")  # sub-row names pad to width - 4


def test_text_and_markdown_when_nothing_was_graded():
    assert (
        render_text(summary())
        == "Datasets: 2 | Scorable questions: 10 | Skipped files: 0\n\nNo scorable results were found.\n"
    )
    assert "_No scorable results were found._" in render_markdown(summary())


def test_json_document_field_for_field():
    doc = json.loads(render_json(SAMPLE))
    assert list(doc) == [
        "datasets",
        "scorable_questions",
        "skipped_files",
        "unreadable_files",
        "ignored_files",
        "setups",
    ]
    assert [s["setup"] for s in doc["setups"]] == ["qwen35-9b-kag", "qwen35-9b-native", "broken"]
    kag = doc["setups"][0]
    assert list(kag) == ["setup", "overall", "per_dataset"]
    overall = kag["overall"]
    # the seed's fields in the Rust tool's order, then the additive ones
    assert list(overall) == [
        "total", "correct", "incorrect", "errors", "parsed", "accuracy", "precision", "coverage",
        "avg_generation_secs", "total_generation_secs", "avg_context_length", "retrieval",
        "accuracy_ci95", "abstentions", "non_option_answers",
    ]  # fmt: skip
    counts = ("total", "correct", "incorrect", "errors", "parsed")
    assert tuple(overall[c] for c in counts) == (
        10, 8, 1, 1, 9,
    )  # fmt: skip
    assert overall["accuracy"] == 0.8 and overall["precision"] == 8 / 9 and overall["coverage"] == 0.9
    assert overall["total_generation_secs"] == 15.59
    # 15.59 s / 9 = Duration {1 s, 732222222 ns}; as_secs_f64 = 1.0 + 0.732222222 (Rust prints the same)
    assert overall["avg_generation_secs"] == 1.0 + 732_222_222 / 1e9 == 1.7322222219999999
    assert overall["avg_context_length"] == 1200.0
    # time_secs is Rust's as_secs_f64 of {1 s, 926000000 ns}: 1.0 + 0.926 = 1.9260000000000002
    assert overall["retrieval"] == {
        "time_secs": 1.0 + 0.926, "vertices": 112, "relationships": 167, "properties": 371, "samples": 9,
        "avg_time_secs": 0.214, "avg_vertices": 112 / 9, "avg_relationships": 167 / 9,
        "avg_properties": 371 / 9,
    }  # fmt: skip
    assert overall["accuracy_ci95"] == pytest.approx([0.4901625, 0.9433178], abs=1e-6)
    assert (overall["abstentions"], overall["non_option_answers"]) == (1, 0)
    assert kag["per_dataset"]["mcq-form"] == overall
    native = doc["setups"][1]["overall"]
    assert native["retrieval"] is None and native["non_option_answers"] == 2
    broken = doc["setups"][2]["overall"]
    assert broken["precision"] is None and broken["avg_generation_secs"] is None
    assert broken["avg_context_length"] is None and broken["total_generation_secs"] == 0.0
    assert broken["accuracy_ci95"] == [0.0, pytest.approx(0.6576, abs=1e-4)]


def test_json_is_pretty_printed_like_serde():
    text = render_json(summary())
    assert text == (
        '{\n  "datasets": 2,\n  "scorable_questions": 10,\n  "skipped_files": 0,\n'
        '  "unreadable_files": 0,\n  "ignored_files": 0,\n  "setups": []\n}\n'
    )


def test_json_block_without_samples_uses_null():
    doc = json.loads(render_json(summary(SetupSummary("x", Metrics(), {}))))
    block = doc["setups"][0]["overall"]
    assert block["accuracy"] is None and block["accuracy_ci95"] is None and block["coverage"] is None


def test_markdown_table():
    out = render_markdown(SAMPLE)
    lines = out.splitlines()
    assert lines[0] == (
        "**Datasets:** 2 · **Scorable questions:** 10 · **Skipped files:** 0 · **Unreadable files:** 0 "
        "· **Ignored files:** 0"
    )
    header = lines[2]
    assert header.startswith("| Setup | ACC% | ACC 95% CI | PREC% |") and header.endswith("| PROPERTY |")
    assert lines[3].count("|") == header.count("|")
    assert lines[4] == (
        "| **qwen35-9b-kag** | 80.00 | 49.02–94.33 | 88.89 | 90.00 | 8 | 1 | 1 | 10 | 1.732 | 1200.000 "
        "| 0.214 | 12.44 | 18.56 | 41.22 |"
    )
    assert lines[5].startswith("| └ mcq-form | 80.00 |")
    native = lines[6]
    assert native.endswith("| 0.918 | 500.000 |  |  |  |  |")  # blank RAG cells keep the column count
    assert all(line.count("|") == header.count("|") for line in lines[3:10])


def test_markdown_escapes_pipes_in_names():
    out = render_markdown(summary(SetupSummary("a|b", NATIVE, {"d|e": NATIVE})))
    assert "| **a\\|b** |" in out and "| └ d\\|e |" in out

"""kag.render.columns: the stats table declared once, drawn by every format."""

from __future__ import annotations

from typing import get_args

import pytest

from kag.grading.mcq import Metrics
from kag.render.columns import (
    OPEN_COLUMNS,
    STATS_COLUMNS,
    Block,
    Fmt,
    Shown,
    cells_for,
    columns_for,
    headers_for,
)

#: The measures whose values the stats table shows.
MEASURES = {
    "accuracy",
    "interval",
    "timing",
    "context_length",
    "extracted",
    "retrieval",
    "usage",
    "judge",
    "retrieval_quality",
}
EVERYTHING = Shown(extract="letter", retrieval=True, usage=True)

KAG = Metrics(
    correct=3,
    incorrect=1,
    generation_ns=2_000_000_000,
    generation_samples=4,
    retrieval_ns=1_000_000_000,
    vertices=10,
    relationships=6,
    properties=2,
    retrieval_samples=4,
)


def test_every_column_names_a_measure_and_a_known_format() -> None:
    assert {c.measure for c in STATS_COLUMNS} == MEASURES
    formats = set(get_args(Fmt))
    for column in STATS_COLUMNS:
        assert column.formats and column.formats <= formats, column.header
        assert set(column.headers) <= column.formats and set(column.cells) <= column.formats


@pytest.mark.parametrize("fmt", get_args(Fmt))
def test_a_format_never_shows_a_header_twice(fmt: Fmt) -> None:
    headers = headers_for(fmt, columns_for(STATS_COLUMNS, fmt, EVERYTHING))
    assert len(headers) == len(set(headers))


def test_text_columns_have_widths_and_no_interval() -> None:
    columns = columns_for(STATS_COLUMNS, "text", EVERYTHING)
    assert all(c.width > 0 for c in columns)
    assert "interval" not in {c.measure for c in columns}


def test_optional_columns_follow_what_the_run_has() -> None:
    plain = headers_for("markdown", columns_for(STATS_COLUMNS, "markdown", Shown()))
    assert plain[:2] == ("ACC%", "ACC 95% CI")
    assert not {"XACC%", "RET(s)", "PROMPT_TOK", "COST($)"} & set(plain)
    assert "COST($)" not in headers_for("markdown", columns_for(STATS_COLUMNS, "markdown", Shown(usage=True)))
    everything = headers_for("markdown", columns_for(STATS_COLUMNS, "markdown", EVERYTHING))
    assert {"XACC%", "RET(s)", "PROMPT_TOK", "COMPL_TOK"} <= set(everything)


def test_a_format_can_give_a_column_its_own_header_and_cell() -> None:
    block = Block("kag", None, KAG)
    [md] = [c for c in columns_for(STATS_COLUMNS, "markdown", Shown()) if c.measure == "interval"]
    [html] = [c for c in columns_for(STATS_COLUMNS, "html", Shown()) if c.measure == "interval"]
    assert md is html
    assert (md.header_in("markdown"), html.header_in("html")) == ("ACC 95% CI", "95% CI")
    low, high = KAG.accuracy_ci95 or (0.0, 0.0)
    assert md.cell_in("markdown")(block) == f"{100 * low:.2f}–{100 * high:.2f}"
    assert html.cell_in("html")(block) == f"[{100 * low:.1f}, {100 * high:.1f}]"


def test_a_block_without_retrieval_has_no_retrieval_cells() -> None:
    columns = columns_for(STATS_COLUMNS, "text", EVERYTHING)
    with_rag = dict(zip(headers_for("text", columns), cells_for("text", columns, Block("kag", None, KAG))))
    without = dict(
        zip(headers_for("text", columns), cells_for("text", columns, Block("n", None, Metrics(correct=1))))
    )
    assert with_rag["RET(s)"] == "0.250" and with_rag["VERTICE"] == "2.50"
    assert without["RET(s)"] is None and without["PROPERTY"] is None
    assert without["ACC%"] == "100.00" and without["GEN(s)"] == "-"


def test_the_html_ranking_shows_every_column_of_the_text_and_markdown_tables() -> None:
    html = set(headers_for("html", columns_for(STATS_COLUMNS, "html", EVERYTHING)))
    assert set(headers_for("text", columns_for(STATS_COLUMNS, "text", EVERYTHING))) <= html
    assert (
        set(headers_for("markdown", columns_for(STATS_COLUMNS, "markdown", EVERYTHING))) - {"ACC 95% CI"}
        <= html
    )


def test_the_html_ranking_draws_the_declared_columns() -> None:
    from kag.grading.mcq import SetupSummary
    from kag.render.html import summary_table

    table = summary_table([SetupSummary("kag", KAG, {"d": KAG})], Shown(extract="letter", retrieval=True))
    assert table.headers[:2] == ("#", "SETUP")
    assert table.headers[2:] == headers_for(
        "html", columns_for(STATS_COLUMNS, "html", Shown(extract="letter", retrieval=True))
    )
    row = dict(zip(table.headers, table.rows[0]))
    assert (row["GEN(s)"], row["RET(s)"], row["XACC%"]) == ("0.500", "0.250", "0.00")
    assert table.rows[1][:2] == ("", "└ d") and table.sub == (False, True)


def test_the_open_table_is_declared_like_the_stats_table() -> None:
    assert {c.measure for c in OPEN_COLUMNS} == {"open"}
    columns = columns_for(OPEN_COLUMNS, "text", Shown())
    assert headers_for("text", columns) == ("EM%", "F1%", "ERR", "TOT")
    assert headers_for("markdown", columns_for(OPEN_COLUMNS, "markdown", Shown())) == (
        "EM%",
        "F1%",
        "ERR",
        "TOT",
    )
    graded = Metrics(open_total=4, open_errors=1, open_exact=1, open_f1=2.5)
    assert cells_for("text", columns, Block("s", None, graded)) == ("25.00", "62.50", "1", "4")
    assert cells_for("text", columns, Block("s", None, KAG)) == (None, None, None, None)


def test_the_epochs_table_is_declared_like_the_stats_table() -> None:
    from kag.grading.epochs import EpochSummary
    from kag.render.columns import EPOCH_COLUMNS

    assert {"epochs", "pass_at"} <= {c.measure for c in EPOCH_COLUMNS}
    # The compatible columns first (a reducer's column added later comes after them).
    columns = columns_for(EPOCH_COLUMNS, "text", Shown())[:8]
    assert headers_for("text", columns) == ("EPOCHS", "Q", "INC", "MEAN%", "SE%", "MAJ%", "CONS%", "PASS@k%")
    assert all(c.width > 0 for c in columns[:-1]) and columns[-1].width == 0
    assert columns_for(EPOCH_COLUMNS, "markdown", Shown()) == ()
    block = EpochSummary(
        n=3,
        questions=2,
        incomplete=1,
        mean_accuracy=0.5,
        stderr=0.25,
        pass_at_k=1.0,
        maj_at_k=0.5,
        consistent=1.0,
        reduced={"pass_at": {1: 0.5, 2: 0.75, 3: 1.0}},
    )
    assert cells_for("text", columns, block) == (
        "3",
        "2",
        "1",
        "50.00",
        "25.00",
        "50.00",
        "100.00",
        "1:50.00 2:75.00 3:100.00",
    )

"""kag.render.epochs: the epochs section of the text report, drawn from the declared columns."""

from __future__ import annotations

from kag.grading.epochs import EpochOutcome, summarize_epochs
from kag.grading.mcq import Metrics, SetupSummary
from kag.grading.mcq.epoch_walk import SetupEpochs
from kag.grading.mcq.summary import Summary
from kag.render.columns import EPOCH_COLUMNS, Shown, columns_for, headers_for
from kag.render.epochs import EPOCHS_LEGEND, render_epochs_text


def _outcomes(*correct: bool) -> list[EpochOutcome]:
    return [EpochOutcome(c, "A" if c else "B") for c in correct]


def _report() -> Summary:
    block = summarize_epochs([_outcomes(True, True, False), _outcomes(False, False, False)])
    many = summarize_epochs([_outcomes(*([True] * 9 + [False]))])
    epochs = {"s": SetupEpochs(block, {"d": block, "e": None}), "long": SetupEpochs(many, {})}
    setups = (SetupSummary("s", Metrics(correct=1), {}), SetupSummary("long", Metrics(correct=1), {}))
    return Summary(1, 2, 0, 0, 0, setups, epochs=epochs)


def test_the_section_has_a_row_per_block_and_a_legend_line_per_explaining_column() -> None:
    text = render_epochs_text(_report())
    lines = text.splitlines()
    headers = headers_for("text", columns_for(EPOCH_COLUMNS, "text", Shown()))
    assert lines[0] == "Epochs (strict grade)"
    assert lines[2].split() == ["SETUP", *headers]
    assert [line.split()[0] for line in lines[3:7]] == ["s", "└", "└", "long"]
    assert lines[5].split()[2:] == ["-"] * len(headers)
    assert text.endswith(EPOCHS_LEGEND + "\n")
    assert "\nPASS@k% = unbiased pass@k (Chen et al. 2021)" in EPOCHS_LEGEND
    assert len(EPOCHS_LEGEND.splitlines()) == len([c for c in EPOCH_COLUMNS if c.legend])


def test_columns_without_a_width_line_up_and_no_line_ends_in_spaces() -> None:
    lines = render_epochs_text(_report()).splitlines()
    table = lines[2:7]
    start = table[0].index("PASS@k%")
    assert table[1][start:].startswith("1:33.33 2:")
    assert table[4][start:].startswith("1:90.00 2:100.00 4:100.00 8:100.00 10:100.00")
    assert not [line for line in lines if line != line.rstrip()]


def test_a_report_without_later_epochs_has_no_section() -> None:
    assert render_epochs_text(Summary(1, 1, 0, 0, 0, (SetupSummary("s", Metrics(correct=1), {}),))) == ""

"""Rendering an IRT2 evaluation: one renderer per output format, and the per-target file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from kag.errors import InputError
from kag.grading.irt2.model import Evaluation, SideSummary, TieMode
from kag.render.formats import Irt2Format
from kag.render.table import Align, Table, table_text
from kag.results import NoSpace, write_output
from kag.textsafe import escape_message

ROW_ORDER = (
    ("all", "micro"),
    ("all", "macro"),
    ("head", "micro"),
    ("head", "macro"),
    ("tail", "micro"),
    ("tail", "macro"),
)


def metrics_dict(evaluation: Evaluation) -> dict[str, dict[str, dict[str, float]]]:
    """``{head|tail|all: {micro|macro: {mrr, hits_at_<k>...}}}``, the reference's layout."""
    return {
        side: {"micro": averaged.micro.as_dict(), "macro": averaged.macro.as_dict()}
        for side, averaged in evaluation.metrics.items()
    }


def _side_truth(summary: SideSummary) -> dict[str, Any]:
    return {"file": summary.samples_file, "queries": summary.queries, "targets": summary.targets}


def _side_scoring(summary: SideSummary) -> dict[str, Any]:
    return {
        "file": summary.predictions_file,
        "rows": summary.rows,
        "queries_without_row": summary.queries_without_row,
        "targets_found": summary.targets_found,
        "targets_cut": summary.targets_cut,
        "tie_dependent": summary.tie_dependent,
    }


def render_json(evaluation: Evaluation) -> str:
    """Metrics under ``head``/``tail``/``all``, plus ``ground_truth`` and ``scoring`` details."""
    head, tail = evaluation.sides
    document: dict[str, Any] = metrics_dict(evaluation)
    document["ground_truth"] = {
        "dataset": evaluation.dataset,
        "path": evaluation.dataset_path,
        "task": evaluation.task.value,
        "split": evaluation.split.value,
        "mode": evaluation.mode.value,
        "samples_dropped": evaluation.samples_dropped,
        "head": _side_truth(head),
        "tail": _side_truth(tail),
    }
    document["scoring"] = {
        "max_rank": evaluation.max_rank,
        "ks": list(evaluation.ks),
        "ties": evaluation.ties.value,
        "head": _side_scoring(head),
        "tail": _side_scoring(tail),
    }
    text: str = orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()
    return text + "\n"


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> str:
    side: dict[bool, Align] = {True: "r", False: "l"}
    align = tuple(side[i in right] for i in range(len(header)))
    return table_text(Table(tuple(header), tuple(tuple(row) for row in rows), align))


def render_text(evaluation: Evaluation) -> str:
    """Metrics table (``all.micro`` first), then the ground truth and what was scored."""
    ks = evaluation.ks
    header = ["", "mrr", *(f"hits@{k}" for k in ks)]
    rows = []
    for side, average in ROW_ORDER:
        scores = getattr(evaluation.metrics[side], average)
        rows.append([f"{side}.{average}", f"{scores.mrr:.4f}", *(f"{v:.4f}" for _, v in scores.hits)])
    lines = [_table(header, rows, right=set(range(1, len(header))))]
    max_rank = "none" if evaluation.max_rank is None else str(evaluation.max_rank)
    lines += [
        "",
        (
            f"ground truth: {evaluation.dataset} ({evaluation.dataset_path}), task {evaluation.task.value},"
            f" split {evaluation.split.value}, mode {evaluation.mode.value}"
        ),
        f"scoring: max rank {max_rank}, ties {evaluation.ties.value}",
    ]
    if evaluation.samples_dropped:
        lines.append(
            f"mode original dropped {evaluation.samples_dropped} open-world samples"
            " whose vertex is in no closed-world triple"
        )
    lines.append("")
    side_header = [
        "side",
        "queries",
        "targets",
        "rows",
        "no row",
        "found",
        "cut",
        "tie-dep",
        "truth",
        "predictions",
    ]
    side_rows = [
        [
            s.side.value,
            str(s.queries),
            str(s.targets),
            str(s.rows),
            str(s.queries_without_row),
            str(s.targets_found),
            str(s.targets_cut),
            str(s.tie_dependent),
            s.samples_file,
            s.predictions_file,
        ]
        for s in evaluation.sides
    ]
    lines.append(_table(side_header, side_rows, right=set(range(1, 8))))
    tie_dependent = sum(s.tie_dependent for s in evaluation.sides)
    if tie_dependent and evaluation.ties is TieMode.FIRST:
        lines += [
            "",
            (
                f"{tie_dependent} targets have a rank that depends on the order of equal scores"
                " (see --ties optimistic/pessimistic)"
            ),
        ]
    # The file names are the user's: no control character of theirs reaches the terminal.
    return escape_message("\n".join(lines)) + "\n"


RENDERERS: dict[Irt2Format, Callable[[Evaluation], str]] = {
    Irt2Format.TEXT: render_text,
    Irt2Format.JSON: render_json,
}


def render(evaluation: Evaluation, output: Irt2Format) -> str:
    return RENDERERS[output](evaluation)


def iter_per_query_lines(evaluation: Evaluation) -> Iterator[bytes]:
    """One JSON line (bytes) per gold target, head side first, queries in (entity, relation) order.

    Keys: ``side``, ``query`` ([entity, relation]), ``target``, ``raw_rank`` (position
    in the score-sorted row, other gold targets counted), ``filtered_rank`` (other gold
    targets removed, before the max-rank cut) and ``rank`` (what the metrics use: the
    filtered rank, or 0 above ``max_rank``). 0 means the target is not in the row.
    """
    realistic = evaluation.ties is TieMode.REALISTIC  # half-integer ranks stay floats

    def as_number(values: list[float]) -> list[float] | list[int]:
        return values if realistic else [int(v) for v in values]

    for records in evaluation.records:
        side = records.side.value
        columns = zip(
            records.query_entity.tolist(),
            records.query_relation.tolist(),
            records.target.tolist(),
            as_number(records.raw.tolist()),
            as_number(records.filtered.tolist()),
            as_number(records.rank.tolist()),
        )
        for entity, relation, target, raw, filtered, rank in columns:
            yield orjson.dumps(
                {
                    "side": side,
                    "query": [entity, relation],
                    "target": target,
                    "raw_rank": raw,
                    "filtered_rank": filtered,
                    "rank": rank,
                },
                option=orjson.OPT_APPEND_NEWLINE,
            )


def _cannot_write(path: Path, exc: OSError) -> InputError:
    """The path once and the reason once (``str(exc)`` repeats both)."""
    if isinstance(exc, IsADirectoryError):
        return InputError(f"{path}: is a directory, expected a file")
    return InputError(f"{path}: cannot write: {exc.strerror or type(exc).__name__}")


def write_per_query(path: Path, evaluation: Evaluation) -> None:
    """Write the per-target JSON lines to ``path``.

    A regular file is written atomically (temp file, then rename); an existing
    non-regular file (``/dev/stdout``, a named pipe, a device) is written in place
    (:func:`kag.results.write_output`).
    """
    try:
        write_output(path, iter_per_query_lines(evaluation))
    except NoSpace as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror}") from None
    except OSError as exc:
        raise _cannot_write(path, exc) from None

"""The triplet report as data: the JSON document, the text table's rows, the details lines.

Rendering (rich) happens in the command; this module only shapes values. JSON (the report
and the details) carries figures at full precision; only the text table rounds, to 4
decimals. ``None`` (N/A) becomes JSON ``null`` and ``n/a`` in text.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from kag.errors import InputError
from kag.grading.triplets.model import (
    AXES,
    HALLUCINATION_CLASSES,
    EntryScore,
    RunSummary,
    Triplet,
    TripletReport,
)
from kag.results import NoSpace, write_output

COUNT_KEYS: tuple[str, ...] = (
    "predicted_items",
    "gold_triplets",
    "exact_hits",
    "empty_predictions",
    "unparseable",
    "malformed",
    "invalid_triplets",
    "missing_predictions",
    *HALLUCINATION_CLASSES,
)
TOP_RELATIONS = 20


def run_to_json(run: RunSummary) -> dict[str, Any]:
    return {
        "predictions": run.predictions,
        "entries": run.entries,
        "composite": run.composite,
        "axes": {name: run.axes[name] for name in AXES},
        "micro": {
            "entity": {
                "precision": run.entity.precision,
                "recall": run.entity.recall,
                "f1": run.entity.f1,
            },
            "triplet": {
                "precision": run.triplet.precision,
                "recall": run.triplet.recall,
                "f1": run.triplet.f1,
            },
        },
        "hallucination_rate": run.hallucination_rate,
        "counts": {key: run.counts[key] for key in COUNT_KEYS},
        "relation_distribution": dict(run.relation_distribution),
    }


def report_to_json(report: TripletReport) -> dict[str, Any]:
    """The ``--format json`` document: match mode, backend, gate, one run per prediction file."""
    return {
        "gold": report.gold,
        "match_mode": report.match_mode.value,
        "similarity_backend": report.similarity_backend,
        "gate": report.gate,
        "runs": [run_to_json(run) for run in report.runs],
    }


def report_json_bytes(report: TripletReport) -> bytes:
    return orjson.dumps(report_to_json(report), option=orjson.OPT_INDENT_2) + b"\n"


def _text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def report_rows(report: TripletReport) -> list[tuple[str, list[str]]]:
    """Rows ``(label, [one cell per prediction file])`` of the text report; ``("", [])`` is a break."""
    runs = report.runs
    rows: list[tuple[str, list[str]]] = [
        ("entries", [str(r.entries) for r in runs]),
        ("composite", [_text(r.composite) for r in runs]),
    ]
    rows += [(f"  {name}", [_text(r.axes[name]) for r in runs]) for name in AXES]
    rows.append(("", []))
    rows += [
        (
            "entity P / R / F1 (micro)",
            [f"{_text(r.entity.precision)} / {_text(r.entity.recall)} / {_text(r.entity.f1)}" for r in runs],
        ),
        (
            "triplet P / R / F1 (micro)",
            [
                f"{_text(r.triplet.precision)} / {_text(r.triplet.recall)} / {_text(r.triplet.f1)}"
                for r in runs
            ],
        ),
        ("hallucination rate", [_text(r.hallucination_rate) for r in runs]),
        ("", []),
    ]
    rows += [(key, [str(r.counts[key]) for r in runs]) for key in COUNT_KEYS]
    return rows


def relation_rows(report: TripletReport, top: int = TOP_RELATIONS) -> list[tuple[str, list[str]]]:
    """The predicted relation distribution, side by side: the ``top`` most frequent overall."""
    totals: dict[str, int] = {}
    for run in report.runs:
        for name, count in run.relation_distribution.items():
            totals[name] = totals.get(name, 0) + count
    names = sorted(totals, key=lambda name: (-totals[name], name))
    rows = [
        (name, [str(run.relation_distribution.get(name, 0)) for run in report.runs]) for name in names[:top]
    ]
    rest = names[top:]
    if rest:
        rows.append(
            (
                f"({len(rest)} more)",
                [str(sum(run.relation_distribution.get(name, 0) for name in rest)) for run in report.runs],
            )
        )
    return rows


def triplet_details(triplet: Triplet) -> dict[str, Any]:
    """A triplet as graded (normalized titles and relation), its original strings under ``_raw``."""
    return {
        "source": {"title": triplet.norm_source, "type": triplet.source_type},
        "target": {"title": triplet.norm_target, "type": triplet.target_type},
        "relation": triplet.norm_relation,
        "weight": triplet.weight,
        "_raw": {
            "source": {"title": triplet.source, "type": triplet.source_type},
            "target": {"title": triplet.target, "type": triplet.target_type},
            "relation": triplet.relation,
        },
    }


def entry_details(predictions: str, score: EntryScore) -> dict[str, Any]:
    """One ``--details`` line: an entry's axes; its valid predicted triplets (``item``: the
    index in the prediction list, as ``pairs[].pred``) and its gold triplets (indexed by
    ``pairs[].gold``), normalized, with the original strings under ``_raw``; pairs with
    their sims; classifications."""
    return {
        "predictions": predictions,
        "id": score.id,
        "status": score.status,
        "composite": score.composite,
        "axes": {name: score.axis(name) for name in AXES},
        "predicted_items": score.predicted_items,
        "valid": score.valid,
        "gold_triplets": score.gold_triplets,
        "entities": {
            "matches": score.entity_matches,
            "predicted": score.pred_entities,
            "gold": score.gold_entities,
        },
        "triplets": {
            "predicted": [{"item": index, **triplet_details(triplet)} for index, triplet in score.triplets],
            "gold": [triplet_details(triplet) for triplet in score.gold],
        },
        "pairs": [
            {
                "pred": pair.pred,
                "gold": pair.gold,
                "align": pair.align,
                "sim": {
                    "source": pair.source,
                    "target": pair.target,
                    "relation": pair.relation,
                },
                "accepted": pair.accepted,
                "exact": pair.exact,
            }
            for pair in score.pairs
        ],
        "unmatched": [{"pred": index, "class": kind} for index, kind in score.unmatched],
        "invalid": [{"pred": index, "reason": reason} for index, reason in score.invalid],
    }


def iter_details(report: TripletReport) -> Iterator[dict[str, Any]]:
    """Every entry of every run, in run order then gold order.

    Raises ``ValueError`` for a report graded without ``details=True``, whose scores hold
    no triplet (the lines would list none).
    """
    if not report.details:
        raise ValueError("the report was graded without details=True: its scores keep no triplet")
    return (entry_details(run.predictions, score) for run in report.runs for score in run.scores)


def write_details(path: Path, report: TripletReport) -> int:
    """Write the details as JSON Lines through :func:`kag.results.write_output` (a regular
    file atomically: an exclusive temporary, no link followed, rename; a pipe or a device in
    place); returns the number of lines.

    The report must be graded with ``details=True`` (``ValueError`` otherwise, before any
    file is written).
    """
    records = iter_details(report)
    count = 0

    def lines() -> Iterator[bytes]:
        nonlocal count
        for record in records:
            count += 1
            yield orjson.dumps(record) + b"\n"

    try:
        write_output(path, lines())
    except (OSError, NoSpace) as exc:
        raise InputError(f"{path}: cannot write the details file ({exc.strerror or exc})") from None
    return count

"""Grade MCQ result files against the datasets file, then aggregate them per setup.

Two stages, as in ir_measures: every result file first becomes a small per-file record
(:class:`~kag.grading.mcq.rule.GradedFile`, :mod:`.rule`); records are then folded into
:class:`~kag.grading.mcq.metrics.Tally` accumulators keyed by (setup, dataset)
(:mod:`.metrics`, walked by :mod:`.walk`), and :func:`~kag.grading.mcq.summary.summarize`
turns those into ranked blocks (:mod:`.summary`). The public names are re-exported here,
each imported on first use: the modules that need only the grading rule (answer extraction,
epochs) import :mod:`.rule` without pulling in the walk, which imports them.
"""

from importlib import import_module
from typing import Any

_HOMES = {
    "accuracy": "kag.grading.measures.accuracy",
    "AnswerKey": "kag.grading.mcq.rule",
    "ascii_fold": "kag.textsafe",
    "AUTO_PARALLEL_MIN_QUESTIONS": "kag.grading.mcq.walk",
    "CHUNK_QUESTIONS": "kag.grading.mcq.walk",
    "compile_abstention": "kag.grading.mcq.rule",
    "coverage": "kag.grading.measures.accuracy",
    "DEFAULT_ABSTENTION": "kag.grading.mcq.rule",
    "duration_secs": "kag.grading.measures.timing",
    "eq_ignore_ascii_case": "kag.grading.rule",
    "grade_fields": "kag.grading.mcq.rule",
    "grade_result": "kag.grading.mcq.rule",
    "grade_tree": "kag.grading.mcq.walk",
    "GradedFile": "kag.grading.record",
    "GradeRequest": "kag.grading.mcq.request",
    "GradeRun": "kag.grading.mcq.metrics",
    "is_correct": "kag.grading.rule",
    "mean": "kag.grading.measures.context_length",
    "mean_duration_secs": "kag.grading.measures.timing",
    "Metrics": "kag.grading.mcq.metrics",
    "Outcome": "kag.grading.record",
    "precision": "kag.grading.measures.accuracy",
    "rank_key": "kag.grading.mcq.summary",
    "RetrievalMetrics": "kag.grading.measures.retrieval",
    "RetrievalSample": "kag.grading.mcq.rule",
    "rust_trim": "kag.grading.rule",
    "RUST_WHITESPACE": "kag.grading.rule",
    "SetupSummary": "kag.grading.mcq.summary",
    "summarize": "kag.grading.mcq.summary",
    "Summary": "kag.grading.mcq.summary",
    "Tally": "kag.grading.mcq.metrics",
    "timing_ns": "kag.grading.mcq.rule",
    "Unreadable": "kag.grading.mcq.metrics",
    "wilson_interval": "kag.grading.measures.interval",
    "Z95": "kag.grading.measures.interval",
}

# The public names are the keys above: one list, so that a name cannot be exported here
# without a home, nor have a home without being exported.
__all__ = list(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(home), name)

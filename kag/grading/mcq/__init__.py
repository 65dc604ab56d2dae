"""Grade MCQ result files against the datasets file, then aggregate them per setup.

Two stages, as in ir_measures: every result file first becomes a small per-file record
(:class:`~kag.grading.mcq.rule.GradedFile`, :mod:`.rule`); records are then folded into
:class:`~kag.grading.mcq.metrics.Tally` accumulators keyed by (setup, dataset)
(:mod:`.metrics`, walked by :mod:`.walk`), and :func:`~kag.grading.mcq.summary.summarize`
turns those into ranked blocks (:mod:`.summary`). The public names are re-exported here.
"""

from kag.grading.mcq.metrics import (
    Z95,
    GradeRun,
    Metrics,
    RetrievalMetrics,
    Tally,
    Unreadable,
    accuracy,
    coverage,
    duration_secs,
    mean,
    mean_duration_secs,
    precision,
    wilson_interval,
)
from kag.grading.mcq.rule import (
    DEFAULT_ABSTENTION,
    RUST_WHITESPACE,
    AnswerKey,
    GradedFile,
    Outcome,
    RetrievalSample,
    ascii_fold,
    compile_abstention,
    eq_ignore_ascii_case,
    grade_bytes,
    grade_raw,
    grade_result,
    is_correct,
    rust_trim,
    timing_ns,
)
from kag.grading.mcq.summary import SetupSummary, Summary, rank_key, summarize
from kag.grading.mcq.walk import AUTO_PARALLEL_MIN_QUESTIONS, CHUNK_QUESTIONS, grade_tree

__all__ = [
    "AUTO_PARALLEL_MIN_QUESTIONS",
    "CHUNK_QUESTIONS",
    "DEFAULT_ABSTENTION",
    "RUST_WHITESPACE",
    "Z95",
    "AnswerKey",
    "GradeRun",
    "GradedFile",
    "Metrics",
    "Outcome",
    "RetrievalMetrics",
    "RetrievalSample",
    "SetupSummary",
    "Summary",
    "Tally",
    "Unreadable",
    "accuracy",
    "ascii_fold",
    "compile_abstention",
    "coverage",
    "duration_secs",
    "eq_ignore_ascii_case",
    "grade_bytes",
    "grade_raw",
    "grade_result",
    "grade_tree",
    "is_correct",
    "mean",
    "mean_duration_secs",
    "precision",
    "rank_key",
    "rust_trim",
    "summarize",
    "timing_ns",
    "wilson_interval",
]

"""Paired comparisons of setups on the questions both answered.

Per-file records first (:class:`Answer`, one per graded result file), aggregation after:

- :func:`mcnemar` - is the accuracy of two setups on the same questions different?
- :func:`paired_bootstrap_diff` - a seeded percentile CI of the accuracy difference.
- :func:`holm` - step-down adjustment of the p-values of several comparisons.
- :func:`compare_setups` - every setup against one baseline: the three above together.
- :func:`flips` - the questions one setup gets right and the other does not, both ways.
- :func:`retrieval_impact` - accuracy of a KAG setup by retrieved-subgraph size, and the
  questions retrieval helped or hurt against the same model without retrieval.

"Correct" means the outcome OK; WRONG and ERR are both "not correct", as in ACC = OK/TOT,
so a setup that errors where the other answers right loses that question.

Grading is :mod:`kag.grading.mcq`'s (the one rule of `kag stats`): :func:`load_answers`
runs :func:`kag.grading.mcq.grade_tree` with its per-file records kept and turns them
into :class:`Answer` records (:func:`answers_from_run`); the statistics below are pure
functions of those records.
"""

from kag.grading.compare.analysis import Analysis, ImpactPlan, analyse, best_setup, plan_impacts
from kag.grading.compare.flips import (
    BUCKET_ORDER,
    EMPTY,
    NO_RETRIEVAL,
    SIZE_BUCKETS,
    Flip,
    FlipReport,
    ImpactRow,
    RetrievalImpact,
    flips,
    retrieval_impact,
    size_bucket,
)
from kag.grading.compare.paired import (
    DEFAULT_ALPHA,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    EXACT_BELOW,
    BootstrapCI,
    McNemar,
    binomial_two_sided_p,
    chi2_sf_1df,
    holm,
    mcnemar,
    paired_bootstrap_diff,
)
from kag.grading.compare.records import (
    Answer,
    AnswerSet,
    SetupProfile,
    answer_set_from_run,
    answers_from_run,
    check_retrieves,
    index_answers,
    load_answers,
    native_candidates,
    paired_keys,
    question_sort_key,
    setup_configs,
    setup_profiles,
)
from kag.grading.compare.setups import Comparison, ComparisonRun, compare_setups

__all__ = [
    "BUCKET_ORDER",
    "DEFAULT_ALPHA",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "EMPTY",
    "EXACT_BELOW",
    "NO_RETRIEVAL",
    "SIZE_BUCKETS",
    "Analysis",
    "Answer",
    "AnswerSet",
    "BootstrapCI",
    "Comparison",
    "ComparisonRun",
    "Flip",
    "FlipReport",
    "ImpactPlan",
    "ImpactRow",
    "McNemar",
    "RetrievalImpact",
    "SetupProfile",
    "analyse",
    "answer_set_from_run",
    "answers_from_run",
    "best_setup",
    "binomial_two_sided_p",
    "check_retrieves",
    "chi2_sf_1df",
    "compare_setups",
    "flips",
    "holm",
    "index_answers",
    "load_answers",
    "mcnemar",
    "native_candidates",
    "paired_bootstrap_diff",
    "paired_keys",
    "plan_impacts",
    "question_sort_key",
    "retrieval_impact",
    "setup_configs",
    "setup_profiles",
    "size_bucket",
]

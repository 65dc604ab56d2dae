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

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kag.grading.mcq import Outcome, wilson_interval

if TYPE_CHECKING:
    from kag.datasets import Datasets
    from kag.grading.mcq import GradeRun, Summary
    from kag.results import ModelConfig

#: McNemar uses the exact binomial test when the discordant count b + c is below this.
EXACT_BELOW = 25
DEFAULT_ALPHA = 0.05
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class Answer:
    """One graded result file, with what the comparisons need from it.

    ``response`` is ``ok.result`` verbatim for OK/WRONG and the error message for ERR.
    ``vertices`` is the retrieved vertex count when the file has retrieval stats (the
    retriever's time and the database counts, as `kag stats` requires), else None.
    """

    dataset: str
    question: str
    setup: str
    outcome: Outcome
    response: str
    gold: str | None = None
    path: str | None = None
    vertices: int | None = None

    @property
    def correct(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def key(self) -> tuple[str, str]:
        return (self.dataset, self.question)


def index_answers(answers: Iterable[Answer]) -> dict[str, dict[tuple[str, str], Answer]]:
    """setup -> (dataset, question) -> Answer. A later duplicate replaces an earlier one."""
    by_setup: dict[str, dict[tuple[str, str], Answer]] = {}
    for answer in answers:
        by_setup.setdefault(answer.setup, {})[answer.key] = answer
    return by_setup


def question_sort_key(key: tuple[str, str]) -> tuple[str, int, int, str]:
    """Datasets by name, then numeric question ids by value (2 before 10), then the others
    by name; the id itself breaks ties ("012" vs "12")."""
    dataset, question = key
    if question.isascii() and question.isdigit():
        return (dataset, 0, int(question), question)
    return (dataset, 1, 0, question)


def paired_keys(a: dict[tuple[str, str], Answer], b: dict[tuple[str, str], Answer]) -> list[tuple[str, str]]:
    """The (dataset, question) keys both setups have a graded file for, in question order."""
    return sorted(a.keys() & b.keys(), key=question_sort_key)


# ---------------------------------------------------------------- intervals and tests


def binomial_two_sided_p(k: int, n: int) -> float:
    """Exact two-sided p of k successes in n trials under p = 1/2.

    p = min(1, 2 · Σ_{i=0}^{min(k, n-k)} C(n, i) / 2^n), computed in integers (no rounding
    until the final division). The null distribution is symmetric, so doubling the smaller
    tail equals summing every outcome at most as likely as k. n = 0 gives 1.
    """
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1))
    return min(1.0, 2 * tail / 2**n)


def chi2_sf_1df(x: float) -> float:
    """Survival function of the chi-square distribution with 1 degree of freedom.

    P(X > x) = P(|Z| > sqrt(x)) = erfc(sqrt(x / 2)) for x >= 0; 1 for x <= 0.
    """
    if x <= 0:
        return 1.0
    return math.erfc(math.sqrt(x / 2))


@dataclass(frozen=True)
class McNemar:
    """McNemar's test on the discordant pairs of a paired 2x2 table.

    ``b`` = questions only the first setup got right, ``c`` = only the second.
    ``method`` is "exact" (binomial) or "chi2-cc" (chi-square with continuity correction);
    ``statistic`` is the chi-square value for "chi2-cc" and ``min(b, c)`` for "exact".
    """

    b: int
    c: int
    statistic: float
    p_value: float
    method: Literal["exact", "chi2-cc"]

    @property
    def discordant(self) -> int:
        return self.b + self.c


def mcnemar(b: int, c: int, exact_below: int = EXACT_BELOW) -> McNemar:
    """McNemar's test of b (A right, B wrong) against c (A wrong, B right).

    Under H0 (equal accuracy) each discordant pair is a fair coin: b ~ Binomial(b + c, 1/2).

    - b + c < ``exact_below`` (25 by default, the usual textbook rule): exact two-sided
      binomial p, see :func:`binomial_two_sided_p`. b + c = 0 gives p = 1.
    - otherwise Edwards' continuity-corrected statistic
      χ² = max(0, |b - c| - 1)² / (b + c), p = P(χ²₁ > χ²) = erfc(sqrt(χ²/2)).
      The max(0, ·) only matters when b = c, where it gives p = 1 instead of letting the
      correction overshoot past zero.

    Concordant pairs (both right, both wrong) carry no information and are not inputs.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n < exact_below:
        return McNemar(b, c, float(min(b, c)), binomial_two_sided_p(b, n), "exact")
    statistic = max(0, abs(b - c) - 1) ** 2 / n
    return McNemar(b, c, statistic, chi2_sf_1df(statistic), "chi2-cc")


@dataclass(frozen=True)
class BootstrapCI:
    """Percentile interval of a paired accuracy difference and how it was drawn."""

    estimate: float
    low: float
    high: float
    confidence: float
    resamples: int
    seed: int


def paired_bootstrap_diff(
    a_correct: Sequence[bool],
    b_correct: Sequence[bool],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> BootstrapCI:
    """Paired bootstrap percentile CI of acc(A) - acc(B) over the same n questions.

    estimate = (1/n) Σ (a_i - b_i). Each resample draws n question indices with
    replacement and recomputes the mean difference; the interval is the
    ((1-confidence)/2, (1+confidence)/2) quantiles of the ``n_resamples`` replicates
    (numpy's default linear interpolation).

    The difference d_i = a_i - b_i takes only the values +1, -1, 0, so a resample's mean
    depends only on how many +1 and -1 it drew; those counts are jointly
    Multinomial(n; b/n, c/n, 1 - (b+c)/n). Drawing them directly is the same distribution
    as resampling indices, at O(resamples) instead of O(n · resamples) cost.

    Randomness: ``numpy.random.default_rng(seed)`` (PCG64), fresh per call, so a result
    depends only on (a, b, n_resamples, seed, confidence) and the numpy version.
    Edge cases: n = 0 raises ValueError; when no pair is discordant the interval is
    [0, 0]; lengths must match.
    """
    import numpy as np

    if len(a_correct) != len(b_correct):
        raise ValueError(f"paired samples differ in length: {len(a_correct)} vs {len(b_correct)}")
    n = len(a_correct)
    if n == 0:
        raise ValueError("no paired questions to resample")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    b = sum(1 for x, y in zip(a_correct, b_correct, strict=True) if x and not y)
    c = sum(1 for x, y in zip(a_correct, b_correct, strict=True) if y and not x)
    estimate = (b - c) / n
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, [b / n, c / n, (n - b - c) / n], size=n_resamples)
    diffs = (counts[:, 0] - counts[:, 1]) / n
    tail = (1 - confidence) / 2
    low, high = np.quantile(diffs, [tail, 1 - tail])
    return BootstrapCI(float(estimate), float(low), float(high), confidence, n_resamples, seed)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order.

    Sort ascending p_(1) <= ... <= p_(m); adjusted p_(i) = min(1, max_{j<=i} (m-j+1)·p_(j)).
    Rejecting where adjusted <= alpha controls the family-wise error rate at alpha.
    Ties keep their input order (the max makes the result the same either way).
    Empty input gives an empty list; m = 1 leaves the p-value unchanged.
    """
    m = len(pvalues)
    for p in pvalues:
        if not 0 <= p <= 1 or math.isnan(p):
            raise ValueError(f"p-values must be in [0, 1], got {p}")
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


# ---------------------------------------------------------------- every setup against a baseline


@dataclass(frozen=True)
class Comparison:
    """One setup against the baseline on the n questions both have a graded file for.

    ``setup_only`` (b) = questions the setup gets right and the baseline not; ``baseline_only``
    (c) the reverse. ``diff`` = acc(setup) - acc(baseline) on the paired questions, None
    when n = 0 (then there is no test: ``test``, ``ci`` and ``p_holm`` are None).
    """

    setup: str
    baseline: str
    n: int
    setup_correct: int
    baseline_correct: int
    setup_only: int
    baseline_only: int
    diff: float | None
    ci: BootstrapCI | None
    test: McNemar | None
    p_holm: float | None
    significant: bool

    @property
    def setup_accuracy(self) -> float | None:
        return self.setup_correct / self.n if self.n else None

    @property
    def baseline_accuracy(self) -> float | None:
        return self.baseline_correct / self.n if self.n else None

    @property
    def verdict(self) -> Literal["better", "worse", "no significant difference", "no paired questions"]:
        if self.n == 0 or self.diff is None:
            return "no paired questions"
        if not self.significant:
            return "no significant difference"
        return "better" if self.setup_only > self.baseline_only else "worse"


@dataclass(frozen=True)
class ComparisonRun:
    """Every compared setup against one baseline, with the settings that produced it."""

    baseline: str
    comparisons: tuple[Comparison, ...]
    alpha: float
    seed: int
    resamples: int
    confidence: float
    exact_below: int

    @property
    def regressions(self) -> tuple[Comparison, ...]:
        """Setups significantly worse than the baseline after Holm's adjustment."""
        return tuple(c for c in self.comparisons if c.verdict == "worse")


def compare_setups(
    answers: Iterable[Answer],
    baseline: str,
    setups: Sequence[str] | None = None,
    alpha: float = DEFAULT_ALPHA,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    exact_below: int = EXACT_BELOW,
) -> ComparisonRun:
    """Compare each setup (default: every setup but the baseline, by name) to the baseline.

    Per setup: paired questions = questions both have a graded file for (ERR counts as not
    correct); McNemar on the discordant counts; a paired bootstrap CI of the difference
    (each with a fresh generator seeded with ``seed``, so one comparison does not change
    when other setups join the run); then Holm over the m comparisons that have at least
    one paired question. ``significant`` = Holm-adjusted p <= alpha (and b != c, which
    the tests already imply: b = c gives p = 1).
    Raises ValueError when the baseline has no answers (the CLI names the setups).
    """
    by_setup = index_answers(answers)
    if baseline not in by_setup:
        raise ValueError(f"baseline {baseline!r} has no graded answers")
    names = [s for s in (setups if setups is not None else sorted(by_setup)) if s != baseline]
    base = by_setup[baseline]
    raw: list[tuple[str, int, int, int, int, int, BootstrapCI | None, McNemar | None]] = []
    for name in names:
        mine = by_setup.get(name, {})
        keys = paired_keys(mine, base)
        a = [mine[k].correct for k in keys]
        bb = [base[k].correct for k in keys]
        only_a = sum(1 for x, y in zip(a, bb, strict=True) if x and not y)
        only_b = sum(1 for x, y in zip(a, bb, strict=True) if y and not x)
        ci = paired_bootstrap_diff(a, bb, n_resamples, seed, confidence) if keys else None
        test = mcnemar(only_a, only_b, exact_below) if keys else None
        raw.append((name, len(keys), sum(a), sum(bb), only_a, only_b, ci, test))
    tested = [r[7].p_value for r in raw if r[7] is not None]
    adjusted = iter(holm(tested))
    comparisons = []
    for name, n, ca, cb, only_a, only_b, ci, test in raw:
        p_holm = next(adjusted) if test is not None else None
        comparisons.append(
            Comparison(
                setup=name,
                baseline=baseline,
                n=n,
                setup_correct=ca,
                baseline_correct=cb,
                setup_only=only_a,
                baseline_only=only_b,
                diff=(ca - cb) / n if n else None,
                ci=ci,
                test=test,
                p_holm=p_holm,
                significant=p_holm is not None and p_holm <= alpha and only_a != only_b,
            )
        )
    return ComparisonRun(baseline, tuple(comparisons), alpha, seed, n_resamples, confidence, exact_below)


# ---------------------------------------------------------------- flips


@dataclass(frozen=True)
class Flip:
    """A question where exactly one of the two setups is correct; both answers attached."""

    dataset: str
    question: str
    gold: str | None
    a: Answer
    b: Answer


@dataclass(frozen=True)
class FlipReport:
    """Questions A gets right and B not (``a_only``), and the reverse (``b_only``)."""

    a: str
    b: str
    paired: int
    both_correct: int
    both_wrong: int
    a_only: tuple[Flip, ...]
    b_only: tuple[Flip, ...]


def flips(answers: Iterable[Answer], a: str, b: str) -> FlipReport:
    """The per-question flips between setups ``a`` and ``b`` on their paired questions.

    A flip is a question where one setup is correct (OK) and the other is not (WRONG or
    ERR). Flips are listed by dataset name, then question id (numeric ids in numeric
    order). ``paired = both_correct + both_wrong + len(a_only) + len(b_only)``.
    Filter ``answers`` by dataset beforehand to restrict the report.
    """
    by_setup = index_answers(answers)
    mine, theirs = by_setup.get(a, {}), by_setup.get(b, {})
    keys = paired_keys(mine, theirs)
    a_only: list[Flip] = []
    b_only: list[Flip] = []
    both_correct = both_wrong = 0
    for key in keys:
        x, y = mine[key], theirs[key]
        if x.correct and y.correct:
            both_correct += 1
        elif not x.correct and not y.correct:
            both_wrong += 1
        else:
            flip = Flip(key[0], key[1], x.gold if x.gold is not None else y.gold, x, y)
            (a_only if x.correct else b_only).append(flip)
    return FlipReport(a, b, len(keys), both_correct, both_wrong, tuple(a_only), tuple(b_only))


# ---------------------------------------------------------------- retrieval impact


#: Size buckets by retrieved vertex count: (label, low, high) inclusive; None = no bound.
SIZE_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("1-10", 1, 10),
    ("11-100", 11, 100),
    ("101-1000", 101, 1000),
    (">1000", 1001, None),
)
EMPTY = "empty"
NO_RETRIEVAL = "no retrieval stats"
BUCKET_ORDER = (EMPTY, *(label for label, _, _ in SIZE_BUCKETS), NO_RETRIEVAL)


def size_bucket(answer: Answer) -> str:
    """The retrieved-subgraph size bucket of one answer, by its vertex count.

    - "empty": the retrieval returned 0 vertices;
    - "1-10", "11-100", "101-1000", ">1000": inclusive ranges of the vertex count;
    - "no retrieval stats": no vertex count (every ERR file, e.g. a failed retrieval
      phase; OK files without retrieval stats, as `kag stats` defines them).
    """
    v = answer.vertices
    if v is None or v < 0:
        return NO_RETRIEVAL
    if v == 0:
        return EMPTY
    for label, low, high in SIZE_BUCKETS:
        if v >= low and (high is None or v <= high):
            return label
    raise AssertionError("unreachable: the buckets cover every count >= 1")


@dataclass(frozen=True)
class ImpactRow:
    """One bucket (or dataset) of a retrieval-impact report.

    ``n`` answers of the KAG setup, ``correct`` of them OK. With a native setup the rows
    hold paired questions only and ``native_correct``, ``helped`` (KAG right, native not),
    ``hurt`` (native right, KAG not) and ``same`` (both right or both not) are set;
    without one they are None.
    """

    label: str
    n: int
    correct: int
    native_correct: int | None = None
    helped: int | None = None
    hurt: int | None = None
    same: int | None = None

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.n if self.n else None

    @property
    def accuracy_ci95(self) -> tuple[float, float] | None:
        return wilson_interval(self.correct, self.n)

    @property
    def native_accuracy(self) -> float | None:
        return self.native_correct / self.n if self.n and self.native_correct is not None else None


@dataclass(frozen=True)
class RetrievalImpact:
    """Where retrieval helps or hurts one KAG setup.

    ``overall`` covers every analysed answer; ``buckets`` splits them by :func:`size_bucket`
    (in :data:`BUCKET_ORDER`, empty buckets left out); ``per_dataset`` by dataset name.
    With a native setup only paired questions are analysed and ``unpaired`` counts the
    KAG answers left out; ``test`` is McNemar on helped vs hurt; ``hurt_responses`` counts
    what the KAG setup answered on the hurt questions (trimmed response, or "(error)"),
    most frequent first, ties by text, so a shift such as "answers 'maybe'" shows up.
    """

    setup: str
    native: str | None
    overall: ImpactRow
    buckets: tuple[ImpactRow, ...]
    per_dataset: tuple[ImpactRow, ...]
    unpaired: int
    test: McNemar | None
    hurt_responses: tuple[tuple[str, int], ...] = ()


def _impact_row(label: str, items: list[tuple[Answer, Answer | None]], paired: bool) -> ImpactRow:
    correct = sum(1 for k, _ in items if k.correct)
    if not paired:
        return ImpactRow(label, len(items), correct)
    native_correct = sum(1 for _, n in items if n is not None and n.correct)
    helped = sum(1 for k, n in items if n is not None and k.correct and not n.correct)
    hurt = sum(1 for k, n in items if n is not None and n.correct and not k.correct)
    return ImpactRow(label, len(items), correct, native_correct, helped, hurt, len(items) - helped - hurt)


def retrieval_impact(answers: Iterable[Answer], setup: str, native: str | None = None) -> RetrievalImpact:
    """Accuracy of ``setup`` by retrieval size bucket and, against ``native`` (the same model
    without retrieval), the helped / hurt / no-change counts overall, per bucket and per
    dataset. Without ``native`` every answer of ``setup`` is analysed and the paired
    columns are None. Raises ValueError when ``setup`` (or ``native``) has no answers.
    """
    by_setup = index_answers(answers)
    if setup not in by_setup:
        raise ValueError(f"setup {setup!r} has no graded answers")
    mine = by_setup[setup]
    if native is not None:
        if native not in by_setup:
            raise ValueError(f"setup {native!r} has no graded answers")
        theirs = by_setup[native]
        keys = paired_keys(mine, theirs)
        items: list[tuple[Answer, Answer | None]] = [(mine[k], theirs[k]) for k in keys]
        unpaired = len(mine) - len(keys)
    else:
        items = [(mine[k], None) for k in sorted(mine, key=question_sort_key)]
        unpaired = 0
    paired = native is not None
    by_bucket: dict[str, list[tuple[Answer, Answer | None]]] = {}
    by_dataset: dict[str, list[tuple[Answer, Answer | None]]] = {}
    for item in items:
        by_bucket.setdefault(size_bucket(item[0]), []).append(item)
        by_dataset.setdefault(item[0].dataset, []).append(item)
    overall = _impact_row("all", items, paired)
    hurt = Counter(
        "(error)" if k.outcome is Outcome.ERR else " ".join(k.response.split())
        for k, n in items
        if n is not None and n.correct and not k.correct
    )
    test = (
        mcnemar(overall.helped, overall.hurt)
        if paired and overall.helped is not None and overall.hurt is not None
        else None
    )
    return RetrievalImpact(
        setup=setup,
        native=native,
        overall=overall,
        buckets=tuple(_impact_row(b, by_bucket[b], paired) for b in BUCKET_ORDER if b in by_bucket),
        per_dataset=tuple(_impact_row(d, by_dataset[d], paired) for d in sorted(by_dataset)),
        unpaired=unpaired,
        test=test,
        hurt_responses=tuple(sorted(hurt.items(), key=lambda kv: (-kv[1], kv[0]))),
    )


@dataclass(frozen=True)
class SetupProfile:
    """What a setup is: its model and provider (``config`` of one of its ``ok`` files) and
    whether it retrieves (``config.augmented_generation`` set, or retrieval stats in any file)."""

    setup: str
    model: str | None
    provider: str | None
    augmented: bool


def setup_profiles(
    answers: Iterable[Answer], configs: dict[str, ModelConfig | None]
) -> dict[str, SetupProfile]:
    """One profile per setup of ``answers``; ``configs`` maps a setup to the config of one of
    its ok files (see :func:`read_setup_configs`), missing or None when it has none."""
    retrieves: dict[str, bool] = {}
    for a in answers:
        retrieves[a.setup] = retrieves.get(a.setup, False) or a.vertices is not None
    profiles = {}
    for setup, has_stats in retrieves.items():
        config = configs.get(setup)
        profiles[setup] = SetupProfile(
            setup,
            (config.model or None) if config else None,
            (config.provider or None) if config else None,
            has_stats or (config is not None and config.augmented_generation is not None),
        )
    return profiles


def read_setup_configs(answers: Iterable[Answer]) -> dict[str, ModelConfig | None]:
    """``ok.stats.config`` of the first ok file (in answer order) of each setup.

    A setup's configuration is the same in all its files (one benchmark setup); reading
    one file per setup keeps this cheap. Unreadable files and files without a config are
    passed over; a setup with no usable file maps to None.
    """
    from kag.results import OkResult, UnreadableResult, read_result

    configs: dict[str, ModelConfig | None] = {}
    for a in answers:
        if configs.get(a.setup) is not None or a.outcome is Outcome.ERR or a.path is None:
            configs.setdefault(a.setup, None)
            continue
        try:
            result = read_result(a.path)
        except UnreadableResult:
            configs.setdefault(a.setup, None)
            continue
        configs[a.setup] = result.stats.config if isinstance(result, OkResult) else None
    return configs


def native_candidates(profiles: dict[str, SetupProfile], setup: str) -> list[str]:
    """Setups without retrieval that share ``setup``'s model and provider, by name."""
    me = profiles[setup]
    if me.model is None:
        return []
    return sorted(
        p.setup
        for p in profiles.values()
        if p.setup != setup and not p.augmented and p.model == me.model and p.provider == me.provider
    )


def check_retrieves(profiles: dict[str, SetupProfile], setups: Sequence[str]) -> None:
    """Raise UsageError (exit 2) naming the setups of ``setups`` that do not retrieve.

    A setup retrieves when its profile says so (retrieval stats in any of its files, or
    ``config.augmented_generation`` in the one whose config was read); for one that does
    not there is no subgraph to bucket and nothing retrieval could have helped or hurt.
    The message lists the setups that do retrieve. Names without a profile are left to
    the caller (an unknown setup is its own error).
    """
    from kag.errors import UsageError

    plain = [s for s in setups if s in profiles and not profiles[s].augmented]
    if not plain:
        return
    retrieving = sorted(s for s, p in profiles.items() if p.augmented)
    verb = "does" if len(plain) == 1 else "do"
    raise UsageError(
        f"{', '.join(plain)} {verb} not retrieve (no retrieval stats, no config.augmented_generation): "
        f"no retrieval impact to measure; setups that retrieve: {', '.join(retrieving) or 'none'}"
    )


def gate_regressions(run: ComparisonRun) -> None:
    """Raise GateFailed (exit 1) naming each setup significantly worse than the baseline.

    "Significantly worse" = Holm-adjusted McNemar p <= alpha and the baseline wins more of
    the discordant questions. A lower accuracy that is not significant passes the gate.
    """
    from kag.errors import GateFailed

    worse = run.regressions
    if not worse:
        return
    details = "; ".join(
        f"{c.setup}: {100 * (c.diff or 0):+.2f} pp on {c.n} questions, Holm p = {c.p_holm:.3g}" for c in worse
    )
    raise GateFailed(
        f"{len(worse)} setup(s) significantly worse than {run.baseline} at alpha {run.alpha:g}: {details}"
    )


# ---------------------------------------------------------------- from the grading run to answers


@dataclass(frozen=True)
class AnswerSet:
    """The graded answers of a result tree, the `kag stats` summary of the same run, and
    each setup's profile (model, provider, whether it retrieves)."""

    answers: tuple[Answer, ...]
    summary: Summary
    profiles: dict[str, SetupProfile]

    @property
    def setups(self) -> list[str]:
        return sorted({a.setup for a in self.answers})


def answers_from_run(run: GradeRun, datasets: Datasets, root: str | Path, prefix: str = "") -> list[Answer]:
    """One :class:`Answer` per record of a ``grade_tree(..., keep_records=True)`` run.

    The gold key comes from ``datasets``, the path from the tree layout; the message of
    each ERR file is read back from the file (the records keep no error text); when that
    read fails the response is "(error)". Raises ValueError when the run kept no records.
    """
    import os

    from kag.results import RESULT_SUFFIX, ErrorResult, UnreadableResult, read_result

    if run.records is None:
        raise ValueError("the grading run kept no per-file records (grade_tree(..., keep_records=True))")
    answers = []
    top = os.fspath(root)
    for r in run.records:
        question = datasets.get(r.dataset, r.question)
        gold = question.mcq.answer if question is not None and question.mcq is not None else None
        # kag.results.result_path's layout, joined as strings: pathlib costs ~0.1 ms a file.
        path = os.path.join(top, r.dataset, r.question, f"{prefix}{r.setup}{RESULT_SUFFIX}")
        response = r.response
        if response is None:
            try:
                result = read_result(path)
                response = result.error if isinstance(result, ErrorResult) else "(error)"
            except UnreadableResult:
                response = "(error)"
        vertices = r.retrieval.vertices if r.retrieval is not None else None
        answers.append(Answer(r.dataset, r.question, r.setup, r.outcome, response, gold, path, vertices))
    return answers


def load_answers(
    datasets: Datasets,
    root: str | Path,
    prefix: str = "",
    setups: Sequence[str] = (),
    dataset_globs: Sequence[str] = (),
    workers: int | None = None,
) -> AnswerSet:
    """Grade the tree like `kag stats` (same rules, filters, warnings and summary) and
    return its answers with the profile of each setup (:func:`read_setup_configs`)."""
    from kag.grading.mcq import grade_tree

    run = grade_tree(
        datasets, root, prefix, setups=setups, dataset_globs=dataset_globs, keep_records=True, workers=workers
    )
    return answer_set_from_run(run, datasets, root, prefix)


def answer_set_from_run(run: GradeRun, datasets: Datasets, root: str | Path, prefix: str = "") -> AnswerSet:
    """:class:`AnswerSet` of a ``grade_tree(..., keep_records=True)`` run (see :func:`answers_from_run`)."""
    from kag.grading.mcq import summarize

    answers = answers_from_run(run, datasets, root, prefix)
    return AnswerSet(tuple(answers), summarize(run), setup_profiles(answers, read_setup_configs(answers)))


# ---------------------------------------------------------------- everything for one report


def best_setup(answers: Iterable[Answer]) -> str:
    """The setup with the highest accuracy (OK / graded files), ties by name; the default baseline."""
    counts: dict[str, list[int]] = {}
    for a in answers:
        c = counts.setdefault(a.setup, [0, 0])
        c[0] += a.correct
        c[1] += 1
    if not counts:
        raise ValueError("no graded answers")
    return min(counts, key=lambda s: (-counts[s][0] / counts[s][1], s))


@dataclass(frozen=True)
class ImpactPlan:
    """Which KAG setup is compared with which native one, and why (``note`` for the user)."""

    setup: str
    native: str | None
    note: str | None = None


def plan_impacts(
    profiles: dict[str, SetupProfile], setups: Sequence[str] | None = None, native: str | None = None
) -> list[ImpactPlan]:
    """Pair each KAG setup (default: every setup that retrieves) with its native setup.

    With ``native`` given it is used for all. Otherwise the native setup is the one setup
    without retrieval that has the same ``config.model`` and ``config.provider``; among
    several the first by name is used (and ``note`` says which others matched); with none,
    the impact is computed without one (``note`` says so).
    """
    chosen = list(setups) if setups is not None else sorted(s for s, p in profiles.items() if p.augmented)
    plans = []
    for setup in chosen:
        if native is not None:
            if native != setup:  # a setup is not its own native baseline
                plans.append(ImpactPlan(setup, native))
            continue
        candidates = native_candidates(profiles, setup)
        if not candidates:
            p = profiles.get(setup)
            model = f"{p.provider}/{p.model}" if p and p.model else "an unknown model"
            plans.append(
                ImpactPlan(
                    setup,
                    None,
                    f"{setup}: no setup without retrieval uses {model}; "
                    "helped/hurt not computed (give one with --native)",
                )
            )
        elif len(candidates) > 1:
            plans.append(
                ImpactPlan(
                    setup,
                    candidates[0],
                    f"{setup}: several setups without retrieval use the same "
                    f"model ({', '.join(candidates)}); using {candidates[0]} (choose with --native)",
                )
            )
        else:
            plans.append(ImpactPlan(setup, candidates[0]))
    return plans


@dataclass(frozen=True)
class Analysis:
    """Everything the HTML page shows beyond the ranking."""

    comparisons: ComparisonRun | None
    flips: tuple[FlipReport, ...]
    impacts: tuple[RetrievalImpact, ...]
    notes: tuple[str, ...]


def analyse(
    answer_set: AnswerSet,
    baseline: str | None = None,
    alpha: float = DEFAULT_ALPHA,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    native: str | None = None,
) -> Analysis:
    """Comparisons of every setup against ``baseline`` (default: :func:`best_setup`), the
    flips of each against the baseline, and the retrieval impact of each KAG setup.
    With a single setup there is nothing to compare: ``comparisons`` is None.
    """
    answers = answer_set.answers
    names = sorted({a.setup for a in answers})
    if not names:
        return Analysis(None, (), (), ())
    base = baseline if baseline is not None else best_setup(answers)
    run = compare_setups(answers, base, None, alpha, n_resamples, seed) if len(names) > 1 else None
    flip_reports = tuple(flips(answers, s, base) for s in names if s != base)
    plans = plan_impacts(answer_set.profiles, native=native)
    impacts = tuple(retrieval_impact(answers, p.setup, p.native) for p in plans)
    return Analysis(run, flip_reports, impacts, tuple(p.note for p in plans if p.note))

"""The columns of the `kag stats` tables, declared once for every format that draws them.

:data:`STATS_COLUMNS` is the table as data: each :class:`Column` names the measure whose
value it shows (``measure``), its header, how a block's value becomes a cell, the formats
that show it and when a run shows it at all (:class:`Shown`: the extracted grade, retrieval,
token usage, prices). The text table, the markdown table and the HTML ranking each take, in
the declared order, the columns of their format whose condition holds (:func:`columns_for`);
the row labels (setup, ``└ dataset``, rank) are the renderer's own. :data:`OPEN_COLUMNS` is
the open-answer table of the text and markdown reports, :data:`EPOCH_COLUMNS` the epochs
tables of the text report, declared the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from kag.grading.open_grading import open_metrics
from kag.grading.percent import pct

if TYPE_CHECKING:
    from kag.grading.epochs import EpochSummary
    from kag.grading.mcq.metrics import Metrics, RetrievalMetrics, UsageMetrics
    from kag.grading.mcq.summary import Summary
    from kag.grading.open_grading import OpenMetrics
    from kag.grading.usage import Costs

Fmt = Literal["text", "markdown", "html"]


@dataclass(frozen=True)
class Block:
    """One row's values: a setup's metrics (``dataset`` None) or those of one of its
    datasets, with the block's cost when the run was priced."""

    setup: str
    dataset: str | None
    metrics: Metrics
    cost: float | None = None


@dataclass(frozen=True)
class Shown:
    """What a run has that optional columns show: the ``--extract`` spec, some setup's
    retrieval, token usage (or prices), and the costs of its blocks when it was priced."""

    extract: str | None = None
    retrieval: bool = False
    usage: bool = False
    costs: Costs | None = None

    @classmethod
    def of(cls, summary: Summary) -> Shown:
        return cls(summary.extract, summary.any_retrieval, summary.shows_usage, summary.costs)

    @property
    def priced(self) -> bool:
        return self.costs is not None


B = TypeVar("B")

#: A cell of the stats table from a block; None when the block has no value for it (a row
#: without retrieval): the text table ends its line there, markdown and HTML leave it blank.
Cell = Callable[[Block], "str | None"]


def _always(_: Shown) -> bool:
    return True


@dataclass(frozen=True)
class Column(Generic[B]):
    """One column of a table whose rows are ``B`` values: ``header`` and ``cell`` in every
    format of ``formats`` unless ``headers``/``cells`` give a format its own; ``width`` is
    the text table's."""

    measure: str
    header: str
    cell: Callable[[B], str | None]
    formats: frozenset[Fmt]
    width: int = 0
    when: Callable[[Shown], bool] = _always
    headers: Mapping[Fmt, str] = field(default_factory=dict)
    cells: Mapping[Fmt, Callable[[B], str | None]] = field(default_factory=dict)

    def header_in(self, fmt: Fmt) -> str:
        return self.headers.get(fmt, self.header)

    def cell_in(self, fmt: Fmt) -> Callable[[B], str | None]:
        return self.cells.get(fmt, self.cell)


# ---------------------------------------------------------------- cell formatting


def secs(value: float | None) -> str:
    """Seconds with 3 decimals, or ``-``."""
    return "-" if value is None else f"{value:.3f}"


def num(value: float | None) -> str:
    """A mean with 3 decimals (CTX_LEN), or ``-``."""
    return "-" if value is None else f"{value:.3f}"


def _ci_dash(b: Block) -> str:
    ci = b.metrics.accuracy_ci95
    return "-" if ci is None else f"{pct(ci[0])}–{pct(ci[1])}"


def _ci_brackets(b: Block) -> str:
    ci = b.metrics.accuracy_ci95
    return "-" if ci is None else f"[{pct(ci[0], 1)}, {pct(ci[1], 1)}]"


def _retrieval(value: Callable[[RetrievalMetrics], str]) -> Cell:
    def cell(b: Block) -> str | None:
        r = b.metrics.retrieval
        return None if r is None else value(r)

    return cell


def _tokens(mean: Callable[[UsageMetrics], float]) -> Cell:
    def cell(b: Block) -> str:
        u = b.metrics.usage
        return "-" if u is None else f"{mean(u):.1f}"

    return cell


def _cost(b: Block) -> str:
    return "-" if b.cost is None else f"{b.cost:.4f}"


def _extracted(s: Shown) -> bool:
    return s.extract is not None


def _retrieved(s: Shown) -> bool:
    return s.retrieval


def _used(s: Shown) -> bool:
    return s.usage


def _priced(s: Shown) -> bool:
    return s.usage and s.priced


_TEXT_MD_HTML: frozenset[Fmt] = frozenset(("text", "markdown", "html"))
_MD_HTML: frozenset[Fmt] = frozenset(("markdown", "html"))
_TEXT_MD: frozenset[Fmt] = frozenset(("text", "markdown"))

#: The stats table, in its order (text: ``width`` characters, right-aligned).
STATS_COLUMNS: tuple[Column[Block], ...] = (
    Column("accuracy", "ACC%", lambda b: pct(b.metrics.accuracy), _TEXT_MD_HTML, 7),
    Column(
        "interval",
        "ACC 95% CI",
        _ci_dash,
        _MD_HTML,
        headers={"html": "95% CI"},
        cells={"html": _ci_brackets},
    ),
    Column("accuracy", "PREC%", lambda b: pct(b.metrics.precision), _TEXT_MD_HTML, 7),
    Column("accuracy", "COVER%", lambda b: pct(b.metrics.coverage), _TEXT_MD_HTML, 8),
    Column("accuracy", "OK", lambda b: str(b.metrics.correct), _TEXT_MD_HTML, 5),
    Column("accuracy", "WRONG", lambda b: str(b.metrics.incorrect), _TEXT_MD_HTML, 5),
    Column("accuracy", "ERR", lambda b: str(b.metrics.errors), _TEXT_MD_HTML, 4),
    Column("accuracy", "TOT", lambda b: str(b.metrics.total), _TEXT_MD_HTML, 3),
    Column("timing", "GEN(s)", lambda b: secs(b.metrics.avg_generation_secs), _TEXT_MD_HTML, 8),
    Column("context_length", "CTX_LEN", lambda b: num(b.metrics.avg_context_length), _TEXT_MD_HTML, 10),
    Column(
        "extracted", "XACC%", lambda b: pct(b.metrics.extracted_accuracy), _TEXT_MD_HTML, 7, when=_extracted
    ),
    Column(
        "retrieval",
        "RET(s)",
        _retrieval(lambda r: secs(r.avg_time_secs)),
        _TEXT_MD_HTML,
        8,
        when=_retrieved,
    ),
    Column(
        "retrieval",
        "VERTICE",
        _retrieval(lambda r: f"{r.avg_vertices:.2f}"),
        _TEXT_MD_HTML,
        7,
        when=_retrieved,
    ),
    Column(
        "retrieval",
        "RELATION",
        _retrieval(lambda r: f"{r.avg_relationships:.2f}"),
        _TEXT_MD_HTML,
        8,
        when=_retrieved,
    ),
    Column(
        "retrieval",
        "PROPERTY",
        _retrieval(lambda r: f"{r.avg_properties:.2f}"),
        _TEXT_MD_HTML,
        8,
        when=_retrieved,
    ),
    Column(
        "usage",
        "PROMPT_TOK",
        _tokens(lambda u: u.avg_prompt_tokens),
        _MD_HTML,
        when=_used,
    ),
    Column(
        "usage",
        "COMPL_TOK",
        _tokens(lambda u: u.avg_completion_tokens),
        _MD_HTML,
        when=_used,
    ),
    Column("usage", "COST($)", _cost, _MD_HTML, when=_priced),
)


def _open(value: Callable[[OpenMetrics], str]) -> Cell:
    def cell(b: Block) -> str | None:
        o = open_metrics(b.metrics)
        return None if o is None else value(o)

    return cell


#: The open-answer table (a block without open-question files has no row there).
OPEN_COLUMNS: tuple[Column[Block], ...] = (
    Column("open", "EM%", _open(lambda o: pct(o.exact_match)), _TEXT_MD, 7),
    Column("open", "F1%", _open(lambda o: pct(o.f1)), _TEXT_MD, 7),
    Column("open", "ERR", _open(lambda o: str(o.errors)), _TEXT_MD, 4),
    Column("open", "TOT", _open(lambda o: str(o.total)), _TEXT_MD, 4),
)


def shown_ks(n: int) -> list[int]:
    """The k whose pass@k the text shows: the powers of two below ``n``, and ``n``."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return [*ks, n]


_TEXT: frozenset[Fmt] = frozenset(("text",))

#: The epochs tables of the text report, one row per epoch block (a setup's, or one of its
#: datasets'); PASS@k% is last, left-aligned (its width varies with the number of epochs).
EPOCH_COLUMNS: tuple[Column[EpochSummary], ...] = (
    Column("epochs", "EPOCHS", lambda e: str(e.n), _TEXT, 6),
    Column("epochs", "Q", lambda e: str(e.questions), _TEXT, 4),
    Column("epochs", "INC", lambda e: str(e.incomplete), _TEXT, 4),
    Column("epochs", "MEAN%", lambda e: pct(e.mean_accuracy), _TEXT, 7),
    Column("epochs", "SE%", lambda e: pct(e.stderr), _TEXT, 6),
    Column("epochs", "MAJ%", lambda e: pct(e.maj_at_k), _TEXT, 7),
    Column("epochs", "CONS%", lambda e: pct(e.consistent), _TEXT, 7),
    Column("epochs", "PASS@k%", lambda e: " ".join(f"{k}:{pct(e.pass_at[k])}" for k in shown_ks(e.n)), _TEXT),
)


def columns_for(table: tuple[Column[B], ...], fmt: Fmt, shown: Shown) -> tuple[Column[B], ...]:
    """The columns of ``table`` that ``fmt`` draws for a run that has ``shown``, in the
    declared order."""
    return tuple(c for c in table if fmt in c.formats and c.when(shown))


def headers_for(fmt: Fmt, columns: tuple[Column[B], ...]) -> tuple[str, ...]:
    return tuple(c.header_in(fmt) for c in columns)


def cells_for(fmt: Fmt, columns: tuple[Column[B], ...], block: B) -> tuple[str | None, ...]:
    """The cells of ``block`` (None where it has no value)."""
    return tuple(c.cell_in(fmt)(block) for c in columns)

"""What a measure declares for the reports: its JSON keys, its table columns and its
reducers over the epochs of a question, as plain data that every renderer reads.

- :class:`JsonKey`: one key of a report block and how its value comes from the
  :class:`Block`; ``when`` (None: every block) says whether a block of the report has it.
- :class:`Column`: one column of a table (``table``: the stats table, the open-answer
  table, or the epochs table), its header, how a row becomes a cell, the formats that draw
  it and when a run shows it (:class:`Shown`).
- :class:`Reducer`: a value over the epochs of the questions of a block (as inspect_ai's
  epoch reducers), from each question's count of correct epochs; its key in the JSON
  ``epochs`` block and its columns in the epochs table.

Grading never imports the renderers, so the types live here and :mod:`kag.render.columns`
draws them; a cell is text already (percentages through :func:`kag.grading.percent.pct`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

from kag.grading.usage import Costs

Fmt = Literal["text", "markdown", "html"]
Table = Literal["stats", "open", "epochs"]

TEXT_MD_HTML: frozenset[Fmt] = frozenset(("text", "markdown", "html"))
MD_HTML: frozenset[Fmt] = frozenset(("markdown", "html"))
TEXT_MD: frozenset[Fmt] = frozenset(("text", "markdown"))
TEXT: frozenset[Fmt] = frozenset(("text",))


@dataclass(frozen=True)
class Block:
    """One block of a report: a setup's metrics (``dataset`` None) or those of one of its
    datasets, with the block's cost when the run was priced.

    ``metrics`` is the block's :class:`kag.grading.mcq.metrics.Metrics` and ``report`` the
    :class:`kag.grading.mcq.summary.Summary` it is part of (its epochs, evidence and
    options; None for a block outside a report, which then has only the keys every block
    has). Both are typed loosely: the measures sit below the blocks that carry them.
    """

    setup: str
    dataset: str | None
    metrics: Any
    cost: float | None = None
    report: Any = None


class RunFacts(Protocol):
    """What a report knows of its run that optional columns follow (a Summary has these)."""

    @property
    def extract(self) -> str | None: ...
    @property
    def any_retrieval(self) -> bool: ...
    @property
    def shows_usage(self) -> bool: ...
    @property
    def costs(self) -> Costs | None: ...
    @property
    def judge(self) -> object | None: ...
    @property
    def evidence(self) -> object | None: ...


@dataclass(frozen=True)
class Shown:
    """What a run has that optional columns show: the ``--extract`` spec, some setup's
    retrieval, token usage (or prices), the costs of its blocks when it was priced, the
    judge whose verdicts were read, and whether gold evidence was measured."""

    extract: str | None = None
    retrieval: bool = False
    usage: bool = False
    costs: Costs | None = None
    judge: object | None = None
    evidence: bool = False

    @classmethod
    def of(cls, run: RunFacts) -> Shown:
        return cls(
            run.extract, run.any_retrieval, run.shows_usage, run.costs, run.judge, run.evidence is not None
        )

    @property
    def priced(self) -> bool:
        return self.costs is not None


def always(_: Shown) -> bool:
    return True


B = TypeVar("B")


@dataclass(frozen=True)
class Column(Generic[B]):
    """One column of ``table`` whose rows are ``B`` values: ``header`` and ``cell`` in every
    format of ``formats`` unless ``headers``/``cells`` give a format its own; ``width`` is
    the text table's (0: as wide as its widest cell, left-aligned); ``legend``, the line
    the text report explains it with (epochs table). A cell is None when the row has no
    value for it (a row without retrieval): the text table ends its line there, markdown
    and HTML leave it blank. ``measure`` is filled in by the measure that declares it."""

    header: str
    cell: Callable[[B], str | None]
    formats: frozenset[Fmt]
    width: int = 0
    when: Callable[[Shown], bool] = always
    headers: Mapping[Fmt, str] = field(default_factory=dict)
    cells: Mapping[Fmt, Callable[[B], str | None]] = field(default_factory=dict)
    table: Table = "stats"
    legend: str = ""
    measure: str = ""

    def header_in(self, fmt: Fmt) -> str:
        return self.headers.get(fmt, self.header)

    def cell_in(self, fmt: Fmt) -> Callable[[B], str | None]:
        return self.cells.get(fmt, self.cell)


@dataclass(frozen=True)
class JsonKey:
    """One key of a report block: its value from the block, and (``when``) whether the
    block has the key at all (None: every block has it)."""

    key: str
    value: Callable[[Block], Any]
    when: Callable[[Block], bool] | None = None


#: Per question of a block, how many of its N epochs are correct; and N.
Reduce = Callable[[Sequence[int], int], Any]


@dataclass(frozen=True)
class Reducer:
    """A value of the ``epochs`` block reduced from the questions' correct-epoch counts
    (only the questions that have all N epochs): ``reduce(counts, n)``, shown under ``key``
    in the JSON (through ``to_json``) and in the epochs table by ``columns``, whose cells
    take the reduced value."""

    key: str
    reduce: Reduce
    to_json: Callable[[Any], Any] = lambda value: value
    columns: tuple[Column[Any], ...] = ()

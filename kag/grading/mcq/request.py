"""What a walk of result trees grades: :class:`GradeRequest`, one frozen value derived once
from a command's options (as ripgrep's ``hiargs``), that :func:`~kag.grading.mcq.walk.grade_tree`
and :func:`~kag.grading.mcq.trees.grade_trees` take whole instead of a flag per feature."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace

from kag.grading.mcq.rule import DEFAULT_ABSTENTION
from kag.grading.measures import optional_names
from kag.grading.verdicts import JudgeKey

#: The per-file records of the graded files (``GradeRun.records`` and ``open_records``):
#: what the ``records`` measure keeps (:mod:`kag.grading.measures.records`).
RECORDS = "records"

#: The measure of the judge's verdicts, counted when :attr:`GradeRequest.judge` names a judge.
JUDGE = "judge"


@dataclass(frozen=True)
class GradeRequest:
    """What a walk grades, the same for every tree of a report.

    - ``prefix``: the result files are ``<prefix><setup>.json``.
    - ``setups`` / ``dataset_globs``: shell globs (case-sensitive); a file must match one of
      each given list (none given: every setup, every dataset). Files filtered out are not
      counted anywhere.
    - ``abstention``: the pattern of a response that abstains
      (:func:`~kag.grading.mcq.rule.compile_abstention`).
    - ``extract``: an ``--extract`` spec (``letter`` or ``regex:PATTERN``): the extracted grade
      of every MCQ file is counted too (the ``extracted`` measure); None: not graded so.
    - ``label``: the label of the tree being graded, whose setups a report over several trees
      names ``LABEL/setup``: the ``setups`` globs then match that name, the run's setups stay
      unlabelled (:func:`~kag.grading.mcq.trees.grade_trees` sets it tree by tree).
    - ``measures``: the optional measures asked for by name
      (:func:`kag.grading.measures.optional_names`): ``records`` (one record per graded
      file), ``epochs`` (a question's ``epochs`` folder is read only then), ``evidence``
      (the retrieval text is read only then). The extracted grade is asked for by
      ``extract``, the spec it is graded with.
    - ``judge``: the judge whose cached verdicts (``kag stats judge``) are read into each
      record (:mod:`kag.grading.verdicts`), counted by the ``judge`` measure; None: none
      is read and the report has no ``judge`` key.
    - ``evidence_match`` and ``node_name``: how the retrieved graph is held against the gold
      evidence (``exact``, ``fuzzy`` or ``embedding``, the triplet grader's matching) and which
      node properties name a node read back from a result file's text, first present first.

    Raises ValueError for a name ``measures`` cannot hold, TypeError for a single string
    given as ``setups`` or ``dataset_globs`` (a sequence of globs is expected).
    """

    prefix: str = ""
    # Any sequence (any set for ``measures``), kept as a tuple (a frozenset), so that a
    # request stays frozen and hashable.
    setups: Sequence[str] = ()
    dataset_globs: Sequence[str] = ()
    abstention: str = DEFAULT_ABSTENTION
    extract: str | None = None
    label: str | None = None
    measures: AbstractSet[str] = frozenset()
    judge: JudgeKey | None = None
    evidence_match: str = "exact"
    node_name: Sequence[str] = ("name",)

    def __post_init__(self) -> None:
        for name in ("setups", "dataset_globs", "node_name"):
            globs = getattr(self, name)
            if isinstance(globs, str):
                raise TypeError(f"{name}: expected a sequence of globs, got the string {globs!r}")
            object.__setattr__(self, name, tuple(globs))
        object.__setattr__(self, "measures", frozenset(self.measures))
        optional = optional_names() - {JUDGE}
        unknown = self.measures - optional
        if unknown:
            raise ValueError(
                f"measures: {', '.join(sorted(unknown))} cannot be asked for "
                f"(one of {', '.join(sorted(optional))})"
            )

    @property
    def asked(self) -> frozenset[str]:
        """The optional measures the walk counts: those named, and the judge's when one is given."""
        return frozenset(self.measures) | ({JUDGE} if self.judge is not None else frozenset())

    @property
    def records(self) -> bool:
        """Whether each graded file's record is kept."""
        return RECORDS in self.measures

    @property
    def glob_prefix(self) -> str:
        """What precedes a setup's name when the ``setups`` globs match it (``LABEL/``)."""
        return f"{self.label}/" if self.label is not None else ""

    def asking(self, names: Iterable[str]) -> GradeRequest:
        """The same request, also asking for ``names``."""
        return replace(self, measures=frozenset(self.measures).union(names))

    def matching_evidence(self, mode: str, node_name: Sequence[str]) -> GradeRequest:
        """The same request, holding the retrieved graph against the gold evidence so."""
        return replace(self, evidence_match=mode, node_name=tuple(node_name))

    def of_tree(self, label: str) -> GradeRequest:
        """The same request for the tree labelled ``label``."""
        return replace(self, label=label)

"""The grading of one question folder's result files, shared by the walk of `kag stats`
(:mod:`.walk`) and the index of `kag view` (:mod:`kag.view.rows`): what a question folder
is to grading (:class:`QuestionTask`, made from the datasets file by :func:`question_task`)
and how one of its result files becomes a graded record (:meth:`FileGrader.grade`).

Both callers list the folder their own way (the walk streams it, the index compares it
with its stamps) and hand each result file here, so that a file is read by one reader
(:mod:`kag.results.codec`) and graded by one set of rules whichever surface shows it.
"""

from __future__ import annotations

import os
from collections import namedtuple
from collections.abc import Callable
from dataclasses import MISSING, dataclass, replace
from dataclasses import fields as record_fields
from enum import IntEnum
from pathlib import Path
from typing import NamedTuple

from kag.datasets import Question
from kag.grading.evidence import EvidenceRecord, normalized_found
from kag.grading.mcq.extracted import compile_spec, extracted_grade
from kag.grading.mcq.request import GradeRequest
from kag.grading.mcq.rule import AnswerKey, compile_abstention, fields_outcome, grade_fields
from kag.grading.measures import needs
from kag.grading.open_grading import grade_open_response
from kag.grading.record import GradedFile, Outcome, open_outcome
from kag.grading.retrieval_quality import QualityRecord, QuestionGold, gold_quality, similarity_for
from kag.grading.retrieval_text import RetrievalText
from kag.grading.triplets.similarity import Similarity
from kag.grading.verdicts import JudgeKey, VerdictCache, mcq_texts, open_texts, verdict_key_of
from kag.results.codec import GradingFields, parse_grading_fields
from kag.results.io import read_result_bytes, read_result_stamped

# An enum member read from its class costs a lookup through the enum's type (per file).
_OK = Outcome.OK

# The most distinct evidence records a grader keeps to share (a question with many evidence
# names may find any subset of them).
_ALIKE_KEPT = 1024

#: Reads a result file's bytes into its grading fields: ``(data, details, retrieval_text)``.
FieldsReader = Callable[[bytes, bool, bool], GradingFields]


class QuestionKind(IntEnum):
    SCORABLE = 0  # MCQ with an answer
    NO_ANSWER = 1  # MCQ without an answer: files count as skipped
    NOT_GRADED = 2  # free-form, or not in the datasets file: files are ignored
    OPEN = 3  # open question with accepted answers: EM and F1 (kag.grading.open_grading)


@dataclass(frozen=True, slots=True)
class QuestionTask:
    """One question folder as grading sees it: where it is, its kind and its key."""

    path: str
    dataset: str
    question: str
    kind: QuestionKind
    key: AnswerKey | None
    answers: tuple[str, ...] = ()  # the accepted answers of an OPEN question
    evidence: tuple[str, ...] = ()
    # (question text, reference) the judge is shown, when a judge's verdicts are read
    judge_texts: tuple[str, str] | None = None
    evidence_triples: tuple[tuple[str, str, str], ...] = ()


def question_task(
    question: Question | None, path: str, dataset: str, name: str, judged: bool = False
) -> QuestionTask:
    """The task of the question folder ``path`` (``dataset/name``) for ``question``, its entry
    in the datasets file (None: not in it, its files are ignored); with ``judged``, the texts
    the judge is shown."""
    if question is not None and question.open is not None:
        answers = question.open.answers
        return QuestionTask(
            path,
            dataset,
            name,
            QuestionKind.OPEN,
            None,
            answers=answers,
            evidence=question.evidence,
            evidence_triples=question.evidence_triples,
            judge_texts=open_texts(question.input, answers) if judged else None,
        )
    if question is None or question.mcq is None:
        return QuestionTask(path, dataset, name, QuestionKind.NOT_GRADED, None)
    if question.mcq.answer is None:
        return QuestionTask(path, dataset, name, QuestionKind.NO_ANSWER, None)
    answer, options = question.mcq.answer, question.mcq.options
    return QuestionTask(
        path,
        dataset,
        name,
        QuestionKind.SCORABLE,
        AnswerKey.of(answer, options),
        evidence=question.evidence,
        evidence_triples=question.evidence_triples,
        judge_texts=mcq_texts(question.input, options, answer) if judged else None,
    )


class GradedEntry(NamedTuple):
    """One result file graded: its ``record`` (None when it could not be read or parsed,
    ``failure`` then says why), its evidence record (an MCQ file of a question that lists
    evidence names, when the evidence is measured), the key ``--extract`` read, and the
    file's ``stat`` as read (None unless asked for, or when it could not be read)."""

    record: GradedFile | None
    evidence: EvidenceRecord | None = None
    extracted_answer: str | None = None
    failure: Exception | None = None
    stat: os.stat_result | None = None


def unreadable_reason(exc: Exception) -> str:
    """Why a file could not be read or parsed: the OS reason, else the message."""
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)


def _tuple_record_type() -> type:
    """:class:`GradedFile` as a named tuple: its fields in order with their defaults, and
    its properties. Made four times faster (no frozen ``__setattr__`` per field), it serves
    a caller that only reads its records, as :class:`GradedFile`'s are read."""
    declared = record_fields(GradedFile)
    defaults = [f.default for f in declared if f.default is not MISSING]
    if any(f.default_factory is not MISSING for f in declared):  # pragma: no cover - a layout error
        raise TypeError("GradedFile's fields need plain defaults to be made as a tuple")
    base = namedtuple("TupleRecord", [f.name for f in declared], defaults=defaults)  # type: ignore[misc]
    properties = {name: value for name, value in vars(GradedFile).items() if isinstance(value, property)}
    return type("TupleRecord", (base,), {"__slots__": (), "__doc__": GradedFile.__doc__, **properties})


#: A graded record read like a :class:`GradedFile` (the same fields, defaults and
#: properties) but a tuple, which :class:`FileGrader` makes for a caller that asks for it.
TupleRecord: Callable[..., GradedFile] = _tuple_record_type()


# The prepared retrieval texts a grader keeps, the last ones of the question being graded:
# setups that share a retriever are graded one after another (their files sorted by name),
# and each kept text holds two copies of a retrieval (tens of KB): keeping every text of a
# question made each next one be written to memory out of the processor's caches (~4 us a
# KAG file on the generated 100k tree, where no two setups share one).
_KEPT_TEXTS = 2


class FileGrader:
    """Grades result files as a request asks (:class:`GradeRequest`): reads each for the
    inputs its measures need (:func:`kag.grading.measures.needs`), grades it by the strict
    rule (an open question's by EM and F1), adds the extracted grade, the judge's verdict,
    the retrieval quality and the evidence record.

    ``details``: read the model's config and usage even when no measure asks for them (a
    caller that keeps every record). ``read``: the reader of a file's bytes (a faster one
    of :mod:`kag.results` that gives the same fields). ``stamped``: keep each file's
    ``stat`` as read (:attr:`GradedEntry.stat`). ``tuples``: make each record a
    :data:`TupleRecord` when it is made in one step (no ``--extract`` nor judge: those are
    added to a record by :func:`dataclasses.replace`), for a caller that only reads the
    records. Raises UsageError for an invalid abstention pattern or
    ``extract`` spec.
    """

    def __init__(
        self,
        request: GradeRequest,
        root: str,
        *,
        details: bool = False,
        read: FieldsReader | None = None,
        stamped: bool = False,
        tuples: bool = False,
    ) -> None:
        needed = needs(request.asked)
        self.request = request
        # The config only serves kept records; the retrieval text, the evidence measures.
        self.details = details or "config" in needed
        self.reads_text = "retrieval_text" in needed
        # An MCQ record carries its evidence hit when the records and the evidence are kept.
        self.hits = request.records and "evidence" in request.asked
        self.abstention = compile_abstention(request.abstention)
        self.spec = compile_spec(request.extract) if request.extract is not None else None
        self.verdicts = (
            _Verdicts(root, request.judge) if "verdict" in needed and request.judge is not None else None
        )
        self.read = read
        self.stamped = stamped
        one_step = self.spec is None and self.verdicts is None
        self.record: Callable[..., GradedFile] = TupleRecord if tuples and one_step else GradedFile
        # The question being graded: its gold evidence normalized once, and the last
        # retrieval texts prepared (up to _KEPT_TEXTS): a text that several setups retrieved
        # alike is searched once (what a search found depends on the text alone). Both made
        # anew when the next question's files come.
        self._texts_of: QuestionTask | None = None
        self._gold = QuestionGold((), ())
        self._texts: list[RetrievalText] = []
        self._similarity: Similarity | None = None  # made on first need (a model may load)
        self._name_keys = tuple(request.node_name)
        # Equal evidence records (a handful of values: which names were found, whether the
        # answer was right) are one object, which a chunk's result then sends once.
        self._alike: dict[tuple[tuple[bool, ...], bool], EvidenceRecord] = {}

    def with_text(self, task: QuestionTask) -> bool:
        """Whether the files of ``task`` are read for their retrieval text."""
        return self.reads_text and bool(task.evidence or task.evidence_triples)

    def _bytes(self, path: str, at: tuple[int, str] | None) -> tuple[bytes, os.stat_result | None]:
        name, dir_fd = (path, None) if at is None else (at[1], at[0])
        if self.stamped:
            return read_result_stamped(name, dir_fd)
        return read_result_bytes(name, dir_fd), None

    def _fields(self, data: bytes, with_text: bool) -> GradingFields:
        if self.read is not None:
            return self.read(data, self.details, with_text)
        return parse_grading_fields(data, self.details, retrieval_text=with_text)

    def grade(
        self, task: QuestionTask, path: str, setup: str, at: tuple[int, str] | None = None
    ) -> GradedEntry:
        """The file ``path`` of ``setup`` in the folder of ``task`` (a SCORABLE or OPEN one)
        graded (``at``: it is opened as (an open folder, its name there)). A file that cannot
        be read or parsed gives no record; an invalid ``--extract`` pattern's timeout is
        raised (the pattern's fault, not the file's)."""
        with_text = self.with_text(task)
        if task.kind is QuestionKind.OPEN:
            return self._grade_open(task, path, setup, with_text, at)
        st = None
        key: AnswerKey = task.key  # type: ignore[assignment]
        try:
            data, st = self._bytes(path, at)
            fields = self._fields(data, with_text)
            outcome = fields_outcome(fields, key, self.abstention)
        except Exception as exc:  # noqa: BLE001 - one bad file must never stop the walk
            return GradedEntry(None, failure=exc, stat=st)
        quality = found = hit = None
        if with_text and fields.retrieval_text is not None:  # a file without a retrieval has neither
            # Crossed with the strict grade; the text prepared once for both evidence measures.
            correct = outcome[0] is _OK
            text = self._prepared(task, fields.retrieval_text)
            quality = self._quality(fields, correct, text)
            if task.evidence:
                found = self._evidence(normalized_found(self._gold.names, text), correct)
                if self.hits:
                    hit = found.hit
        # The record made once, with what the evidence measures found.
        graded = grade_fields(
            fields,
            key,
            task.dataset,
            task.question,
            setup,
            self.abstention,
            path,
            self.record,
            outcome=outcome,
            retrieval_quality=quality,
            evidence_hit=hit,
        )
        extracted_answer = None
        if self.spec is not None:
            extracted, extracted_answer = extracted_grade(self.spec, graded.response, key)
            graded = replace(graded, extracted=extracted, extracted_key=extracted_answer)
        if self.verdicts is not None:
            graded = self.verdicts.read(graded, task)
        return GradedEntry(graded, found, extracted_answer, stat=st)

    def _prepared(self, task: QuestionTask, text: str) -> RetrievalText:
        """``text`` prepared for the searches, the one already prepared when one of the last
        :data:`_KEPT_TEXTS` texts prepared for ``task`` (the same task object) was the same.
        Texts of different lengths are never compared; equal lengths compare at C speed, no
        hash of a long text is taken."""
        if task is not self._texts_of:
            self._texts_of = task
            self._gold = QuestionGold(task.evidence, task.evidence_triples)
            self._texts = []
        kept, length = self._texts, len(text)
        for prepared in kept:
            if len(prepared.text) == length and prepared.text == text:
                return prepared
        prepared = RetrievalText(text)
        if len(kept) == _KEPT_TEXTS:
            del kept[0]
        kept.append(prepared)
        return prepared

    def _grade_open(
        self, task: QuestionTask, path: str, setup: str, with_text: bool, at: tuple[int, str] | None
    ) -> GradedEntry:
        """An open question's file graded by EM and F1 (an error file 0), with its retrieval
        quality crossed with the exact match when the evidence is read."""
        st = None
        try:
            data, st = self._bytes(path, at)
            fields = self._fields(data, with_text)
        except Exception as exc:  # noqa: BLE001 - one bad file must never stop the walk
            return GradedEntry(None, failure=exc, stat=st)
        exact, f1 = grade_open_response(fields.response, task.answers)
        quality = None
        if with_text and fields.retrieval_text is not None:  # a file without a retrieval has none
            quality = self._quality(fields, exact == 1, self._prepared(task, fields.retrieval_text))
        graded = self.record(
            task.dataset,
            task.question,
            setup,
            open_outcome(fields.response, exact),
            fields.response,
            generation_ns=fields.generation_ns,
            context_length=fields.context_length,
            retrieval=fields.retrieval,
            error=fields.error,
            config=fields.config,
            usage=fields.usage,
            exact_match=exact,
            f1=f1,
            gold=" | ".join(task.answers),
            path=path,
            retrieval_quality=quality,
        )
        if self.verdicts is not None:
            graded = self.verdicts.read(graded, task)
        return GradedEntry(graded, stat=st)

    def _quality(self, fields: GradingFields, correct: bool, text: RetrievalText) -> QualityRecord | None:
        """The file's retrieval quality against the gold evidence of the question being
        graded, crossed with ``correct`` (the strict grade, or an open question's exact
        match); None when it has no retrieval. ``text``: its retrieval text prepared
        (:meth:`_prepared`, which also takes the question's gold)."""
        similarity = self._similarity
        if similarity is None:
            similarity = self._similarity = similarity_for(self.request.evidence_match)
        r = fields.retrieval
        count = r.relationships if r is not None else None  # the file's count of rendered ones
        return gold_quality(
            self._gold, text, fields.retrieval_graph, correct, similarity, self._name_keys, count
        )

    def _evidence(self, found: tuple[bool, ...], correct: bool) -> EvidenceRecord:
        """The evidence record of a file, the one already made when an equal one was."""
        alike = self._alike
        record = alike.get((found, correct))
        if record is None:
            if len(alike) >= _ALIKE_KEPT:
                alike.clear()
            record = alike[found, correct] = EvidenceRecord(found, correct)
        return record


class _Verdicts:
    """The judge's cached verdicts of a tree, read into the records of its answers."""

    def __init__(self, root: str, judge: JudgeKey) -> None:
        self.judge = judge
        self.cache = VerdictCache(Path(root), judge.judge)

    def read(self, graded: GradedFile, task: QuestionTask) -> GradedFile:
        """``graded`` with the judge's verdict of its answer (an error file has none)."""
        if graded.response is None or task.judge_texts is None:
            return graded
        key = verdict_key_of(self.judge, *task.judge_texts, graded.response)
        verdict = self.cache.read(key)
        return graded if verdict is None else replace(graded, verdict=verdict)

"""kag/grading/mcq/question_files.py: what a question folder is to grading, and one result
file graded as both the walk of `kag stats` and kag view's index grade it."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import orjson
import pytest

from kag.datasets import parse_datasets
from kag.grading import retrieval_quality
from kag.grading.evidence import EvidenceRecord
from kag.grading.mcq import question_files
from kag.grading.mcq.metrics import Tally
from kag.grading.mcq.question_files import FileGrader, QuestionKind, question_task, unreadable_reason
from kag.grading.mcq.request import GradeRequest
from kag.grading.record import GradedFile, Outcome
from kag.grading.retrieval_text import RetrievalText
from kag.results import result_path, write_result
from kag.results.codec import GradingFields, parse_grading_fields
from kag.results.model import Timing, Usage
from kag.view.record_rows import to_row
from tests.grading.test_retrieval_text import plain_contains, plain_quality
from tests.result_helpers import neo4j_retrieval, ok_result

DATASETS = parse_datasets(
    orjson.dumps(
        {
            "med": {
                "mcq": {
                    "input": "?",
                    "output": {"type": "MCQ", "options": {"A": "x", "B": "y"}, "answer": "B"},
                },
                "nokey": {"input": "?", "output": {"type": "MCQ", "options": {"A": "x"}}},
                "open": {"input": "?", "output": {"type": "Open", "answers": ["Paris"]}},
                "free": {"input": "?"},
            }
        }
    ),
    Path("datasets.json"),
)


def test_a_question_folder_s_kind_follows_the_datasets_file() -> None:
    kinds = {
        name: question_task(DATASETS.get("med", name), f"/t/med/{name}", "med", name).kind
        for name in ("mcq", "nokey", "open", "free", "absent")
    }
    assert kinds == {
        "mcq": QuestionKind.SCORABLE,
        "nokey": QuestionKind.NO_ANSWER,
        "open": QuestionKind.OPEN,
        "free": QuestionKind.NOT_GRADED,
        "absent": QuestionKind.NOT_GRADED,
    }
    task = question_task(DATASETS.get("med", "mcq"), "/t/med/mcq", "med", "mcq", judged=True)
    assert task.key is not None and task.key.answer == "B" and task.judge_texts is not None


def test_a_file_is_graded_with_its_stat_through_the_reader_given(tmp_path: Path) -> None:
    path = result_path(tmp_path, "med", "mcq", "", "kag")
    write_result(path, ok_result("B", model="m"))
    read: list[bool] = []

    def reader(data: bytes, details: bool, text: bool) -> GradingFields:
        read.append(details)
        return parse_grading_fields(data, details, text)

    grader = FileGrader(
        GradeRequest(extract="letter"), str(tmp_path), details=True, read=reader, stamped=True
    )
    task = question_task(DATASETS.get("med", "mcq"), str(path.parent), "med", "mcq")
    got = grader.grade(task, str(path), "kag")
    assert got.record is not None and got.failure is None
    assert (got.record.outcome, got.record.extracted, got.record.extracted_key) == (
        Outcome.OK,
        Outcome.OK,
        "B",
    )
    assert got.record.config is not None and got.record.path == str(path) and got.record.gold == "B"
    assert read == [True] and got.stat is not None and got.stat.st_size == path.stat().st_size


def test_an_unreadable_file_gives_no_record_but_why(tmp_path: Path) -> None:
    folder = tmp_path / "med" / "open"
    folder.mkdir(parents=True)
    (folder / "kag.json").write_text('{"ok": 1}')
    grader = FileGrader(GradeRequest(), str(tmp_path))
    task = question_task(DATASETS.get("med", "open"), str(folder), "med", "open")
    got = grader.grade(task, str(folder / "kag.json"), "kag")
    assert got.record is None and got.failure is not None and unreadable_reason(got.failure)
    gone = grader.grade(task, str(folder / "gone.json"), "gone")
    assert gone.record is None and unreadable_reason(gone.failure) == "No such file or directory"  # type: ignore[arg-type]


def test_an_open_question_s_file_is_graded_by_exact_match(tmp_path: Path) -> None:
    path = result_path(tmp_path, "med", "open", "", "kag")
    write_result(path, ok_result("paris"))
    task = question_task(DATASETS.get("med", "open"), str(path.parent), "med", "open")
    got = FileGrader(GradeRequest(), str(tmp_path)).grade(task, str(path), "kag")
    assert got.record is not None
    assert (got.record.outcome, got.record.exact_match, got.record.gold) == (Outcome.OK, 1.0, "Paris")


def test_records_made_as_tuples_read_field_for_field_as_the_records_they_stand_for(tmp_path: Path) -> None:
    # The view's index asks for its records as tuples (cheaper to make): every field, every
    # property, the tallies and the index rows are those of the record kag stats makes.
    usage, timing = Usage(120, 3), Timing(2, 5)
    made = {
        ("mcq", "right"): ok_result("b ", model="m", tokens=9, augmented=True, usage=usage, time=timing),
        ("mcq", "abstains"): ok_result("I don't know", model="m", prompt="p\u00e9"),
        ("mcq", "other"): ok_result("Z"),
        ("open", "exact"): ok_result("paris", model="m", usage=usage),
        ("open", "near"): ok_result("Paris, France"),
    }
    paths = []
    for (question, setup), result in made.items():
        path = result_path(tmp_path, "med", question, "", setup)
        write_result(path, result)
        paths.append((question, setup, path))
    for question in ("mcq", "open"):
        path = result_path(tmp_path, "med", question, "", "failed")
        path.write_text('{"error": "the model went away"}')
        paths.append((question, "failed", path))
    plain = FileGrader(GradeRequest(), str(tmp_path), details=True, stamped=True)
    tuples = FileGrader(GradeRequest(), str(tmp_path), details=True, stamped=True, tuples=True)
    properties = [name for name, value in vars(GradedFile).items() if isinstance(value, property)]
    assert properties and len(paths) == 7
    for question, setup, path in paths:
        task = question_task(DATASETS.get("med", question), str(path.parent), "med", question)
        record = plain.grade(task, str(path), setup).record
        light = tuples.grade(task, str(path), setup).record
        assert type(record) is GradedFile and isinstance(light, tuple)
        for field in fields(GradedFile):
            assert getattr(light, field.name) == getattr(record, field.name), field.name
        for name in properties:
            assert getattr(light, name) == getattr(record, name), name
        base = ("/t", f"med/{question}/{setup}.json", "med", question, setup, 1, "graded", 1, 2)
        assert to_row(light, base) == to_row(record, base)
        tallied = Tally(), Tally()
        if task.kind is QuestionKind.OPEN:
            tallied[0].add_open_record(record)
            tallied[1].add_open_record(light)
        else:
            tallied[0].add(record)
            tallied[1].add(light)
        assert tallied[0].freeze() == tallied[1].freeze()
    # A record completed in steps (here the extracted grade) stays a GradedFile.
    stepped = FileGrader(GradeRequest(extract="letter"), str(tmp_path), tuples=True)
    task = question_task(DATASETS.get("med", "mcq"), str(paths[0][2].parent), "med", "mcq")
    assert type(stepped.grade(task, str(paths[0][2]), "right").record) is GradedFile


EVIDENCE = parse_datasets(
    orjson.dumps(
        {
            "med": {
                "q1": {
                    "input": "?",
                    "output": {"type": "MCQ", "options": {"A": "x", "B": "y"}, "answer": "B"},
                    "evidence": {
                        "entities": ["Scurvy", "Iron"],
                        "triples": [["Scurvy", "caused by", "Iron"]],
                    },
                },
                "q2": {
                    "input": "?",
                    "output": {"type": "Open", "answers": ["Paris"]},
                    "evidence": ["Scurvy"],
                },
            }
        }
    ),
    Path("datasets.json"),
)
SHARED_TEXT = '(1)-[name]->("Scurvy")\n(2)-[name]->("Iron")\n(1)-[:CAUSED_BY]->(2)\n'
OTHER_TEXT = '(1)-[name]->("Scurvy")\n(2)-[name]->("Zinc")\n(1)-[:CAUSED_BY]->(2)\n'  # same length


def test_a_retrieval_several_setups_share_is_prepared_once_and_grades_as_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(SHARED_TEXT) == len(OTHER_TEXT)
    texts = {"a": SHARED_TEXT, "b": SHARED_TEXT, "c": OTHER_TEXT, "d": SHARED_TEXT}
    answers = {"a": "B", "b": "A", "c": "B", "d": "Paris"}
    for question in ("q1", "q2"):
        for setup, text in texts.items():
            retrieval = neo4j_retrieval(text, 2, 1, 2, time=Timing(1, 0), db_time=Timing(0, 5))
            write_result(
                result_path(tmp_path, "med", question, "", setup),
                ok_result(answers[setup], retrieval=retrieval),
            )
    request = GradeRequest(measures=frozenset({"evidence", "records"}))
    prepared: list[str] = []

    class Counted(RetrievalText):
        def __init__(self, text: str) -> None:
            prepared.append(text)
            super().__init__(text)

    def graded(grader: FileGrader, question: str, setups: str) -> list[object]:
        task = question_task(EVIDENCE.get("med", question), str(tmp_path / "med" / question), "med", question)
        return [grader.grade(task, str(result_path(tmp_path, "med", question, "", s)), s)[:3] for s in setups]

    # Each file alone, by a grader of its own: what sharing must give.
    alone = {q: [graded(FileGrader(request, str(tmp_path)), q, s)[0] for s in "abcd"] for q in ("q1", "q2")}
    monkeypatch.setattr(question_files, "RetrievalText", Counted)
    grader = FileGrader(request, str(tmp_path))
    assert graded(grader, "q1", "abcd") == alone["q1"]
    assert prepared == [SHARED_TEXT, OTHER_TEXT]  # b and d reuse a's text, c is compared and differs
    assert (
        graded(grader, "q2", "abcd") == alone["q2"]
    )  # the next question starts afresh; open files share too
    assert prepared == [SHARED_TEXT, OTHER_TEXT] * 2
    # The last two texts prepared are kept: a text met again after two others is prepared again.
    third = SHARED_TEXT.replace("Iron", "Lead")
    for setup, text in {"e": SHARED_TEXT, "f": OTHER_TEXT, "g": third, "h": SHARED_TEXT}.items():
        retrieval = neo4j_retrieval(text, 2, 1, 2, time=Timing(1, 0), db_time=Timing(0, 5))
        write_result(result_path(tmp_path, "med", "q1", "", setup), ok_result("B", retrieval=retrieval))
    prepared.clear()
    graded(grader, "q1", "efgh")
    assert prepared == [SHARED_TEXT, OTHER_TEXT, third, SHARED_TEXT]
    assert alone["q1"][0][0].retrieval_quality is not None and alone["q1"][0][1].found == (True, True)


def test_records_with_their_retrieval_measures_made_as_tuples_read_as_the_records_they_stand_for(
    tmp_path: Path,
) -> None:
    # A file read for its retrieval text is made in one step too (its retrieval quality and
    # evidence hit given as it is made): as a tuple, it reads as kag stats' record does.
    for question, answer in (("q1", "B"), ("q2", "Paris")):
        retrieval = neo4j_retrieval(SHARED_TEXT, 2, 1, 2, time=Timing(1, 0), db_time=Timing(0, 5))
        write_result(
            result_path(tmp_path, "med", question, "", "kag"), ok_result(answer, retrieval=retrieval)
        )
    request = GradeRequest(measures=frozenset({"evidence", "records"}))
    plain = FileGrader(request, str(tmp_path), details=True, stamped=True)
    tuples = FileGrader(request, str(tmp_path), details=True, stamped=True, tuples=True)
    for question in ("q1", "q2"):
        task = question_task(EVIDENCE.get("med", question), str(tmp_path / "med" / question), "med", question)
        path = str(result_path(tmp_path, "med", question, "", "kag"))
        record, light = plain.grade(task, path, "kag").record, tuples.grade(task, path, "kag").record
        assert type(record) is GradedFile and isinstance(light, tuple)
        assert record is not None and record.retrieval_quality is not None
        for field in fields(GradedFile):
            assert getattr(light, field.name) == getattr(record, field.name), field.name
        base = ("/t", f"med/{question}/kag.json", "med", question, "kag", 1, "graded", 1, 2)
        assert to_row(light, base) == to_row(record, base)


# Gold names that normalize alike, to "" ("..."), with a legal suffix, with an escape and
# outside ASCII; texts where a gold triple is reachable or not, named twice, or escaped.
GOLDS = [
    (["Scurvy", "Iron"], [["Scurvy", "caused_by", "Iron"]]),
    (["IRON_deficiency", "Acme Inc."], [["Iron deficiency", "treated by", "Acme Co., Ltd."]]),
    (["...", "Scurvy"], [["...", "caused by", "Iron"]]),
    (["Café"], []),
    ([], [["Scurvy", "caused by", "Zinc"], ["Scurvy", "CAUSED_BY", "Iron"]]),
    (['Vitamin "C"'], [['Vitamin "C"', "part of", "Scurvy"]]),
]
GOLD_TEXTS = [
    SHARED_TEXT,
    OTHER_TEXT,
    '(1)-[name]->("iron deficiency")\n(2)-[name]->("ACME")\n(1)-[:TREATED_BY]->(2)\n(3)-[name]->("Café")\n',
    '(1)-[name]->("")\n(2)-[name]->("Iron")\n(1)-[:CAUSED_BY]->(2)\n(3)-[name]->("Scurvy")\n',
    '(1)-[name]->("Vitamin \\"C\\"")\n(2)-[name]->("Scurvy")\n(1)-[:PART_OF]->(2)\n',
    '(1)-[name]->("Scurvy")\n(1)-[name]->("Zinc")\n(2)-[name]->("Zinc")\n(1)-[:CAUSED_BY]->(2)\n',
]


@pytest.mark.parametrize("kept", [None, 1])
def test_a_question_s_gold_normalized_once_grades_each_file_as_the_plain_formulas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: int | None
) -> None:
    # One grader over the files of many questions in turn: each file's records are those of
    # the plain formulas, which normalize the question's gold again and read every name line.
    if kept is not None:  # the shared records forgotten at every new one
        monkeypatch.setattr(retrieval_quality, "_UNREACHED_KEPT", kept)
        monkeypatch.setattr(question_files, "_ALIKE_KEPT", kept)
    entries = {}
    for q, (entities, triples) in enumerate(GOLDS * 2):
        answer = {"type": "MCQ", "options": {"A": "x", "B": "y"}, "answer": "B"}
        entries[f"q{q}"] = {
            "input": "?",
            "output": answer,
            "evidence": {"entities": entities, "triples": triples},
        }
    datasets = parse_datasets(orjson.dumps({"med": entries}), Path("datasets.json"))
    grader = FileGrader(GradeRequest(measures=frozenset({"evidence", "records"})), str(tmp_path))
    checked = reached = 0
    for question in entries:
        task = question_task(datasets.get("med", question), str(tmp_path / "med" / question), "med", question)
        for n, text in enumerate(GOLD_TEXTS):
            for count, answer in ((2, "B"), (7, "A"), (None, "B")):
                setup = f"s{n}-{count}-{answer}"
                retrieval = neo4j_retrieval(text, 2, count, 2, time=Timing(1, 0), db_time=Timing(0, 5))
                path = result_path(tmp_path, "med", question, "", setup)
                write_result(path, ok_result(answer, retrieval=retrieval))
                got = grader.grade(task, str(path), setup)
                assert got.record is not None
                correct = answer == "B"
                plain = plain_quality(task.evidence, task.evidence_triples, text, correct, ("name",), count)
                assert got.record.retrieval_quality == plain, (question, n, count)
                found = tuple(plain_contains(text, name) for name in task.evidence)
                assert got.evidence == (EvidenceRecord(found, correct) if found else None), (question, n)
                reached += plain is not None and plain.triples_found > 0
                checked += 1
    assert checked == len(entries) * len(GOLD_TEXTS) * 3 and reached > 0

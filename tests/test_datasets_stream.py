"""kag.datasets_stream: a datasets file read without its texts (``load_datasets(path,
texts=False)``) grades as the whole file does, refuses the same files with the same
messages, and gives each question whole on demand from a file that has not changed."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

import pytest

import kag.datasets_stream
from kag.datasets import MAX_PROBLEMS, Datasets, DatasetsChanged, count_questions, load_datasets
from kag.datasets_entries import MCQ, OpenAnswer, Question
from kag.errors import InputError

PREFIX = "wekgr-"


def loaded_both(path: Path) -> tuple[Datasets, Datasets]:
    return load_datasets(path), load_datasets(path, texts=False)


def outcome(path: Path, texts: bool) -> tuple[str, object]:
    """("error", message) or ("ok", every question as grading reads it)."""
    try:
        loaded = load_datasets(path, texts=texts)
    except InputError as exc:
        return "error", str(exc)
    return "ok", {name: [lean_view(q) for q in qs.values()] for name, qs in loaded.datasets.items()}


def lean_view(q: object) -> tuple[object, ...]:
    """What grading reads of a question: all but its texts."""
    mcq = q.mcq  # type: ignore[attr-defined]
    options = None if mcq is None else (tuple(mcq.options), mcq.answer)
    return (q.dataset, q.id, options, q.open, q.evidence, q.evidence_triples, q.scorable)  # type: ignore[attr-defined]


def assert_same_outcome(path: Path) -> str:
    full, lean = outcome(path, True), outcome(path, False)
    assert lean == full
    return full[0]


# ---------------------------------------------------------------- the real Med-KAG data


def test_the_lean_load_of_the_real_file_keeps_what_grading_reads_and_drops_the_texts(med_kag: Path):
    full, lean = loaded_both(med_kag / "datasets" / "mirage.json")
    assert full.texts and not lean.texts
    assert list(lean.datasets) == list(full.datasets)
    for name, questions in full.datasets.items():
        assert list(lean.datasets[name]) == list(questions)
        assert [lean_view(q) for q in lean.datasets[name].values()] == [
            lean_view(q) for q in questions.values()
        ]
    some = lean.get("medqa", next(iter(full.datasets["medqa"])))
    assert some is not None and some.input == "" and some.mcq is not None
    assert set(some.mcq.options.values()) == {""}
    assert lean.scorable_questions == full.scorable_questions == 7663
    assert lean.has_evidence is full.has_evidence


def test_each_entry_read_back_equals_the_full_load(med_kag: Path):
    full, lean = loaded_both(med_kag / "datasets" / "mirage.json")
    for name, questions in full.datasets.items():
        for qid, question in questions.items():
            assert lean.entry(name, qid) == question
    assert lean.entry("medqa", "no such question") is None and lean.entry("nope", "1") is None
    assert full.entry("medqa", next(iter(full.datasets["medqa"]))) == full.get(
        "medqa", next(iter(full.datasets["medqa"]))
    )


def test_the_lean_load_grades_the_real_tree_as_the_full_load(med_kag: Path):
    from kag.grading.mcq import GradeRequest, grade_tree

    full, lean = loaded_both(med_kag / "datasets" / "mirage.json")
    request = GradeRequest(PREFIX, measures=frozenset({"records", "epochs"}))
    want = grade_tree(full, med_kag / "results", request, workers=1)
    got = grade_tree(lean, med_kag / "results", request, workers=1)
    assert got == want
    assert sum(t.total for t in got.tallies.values()) > 0


def test_kag_stats_json_reads_the_file_lean_and_reports_as_the_full_load(
    med_kag: Path, monkeypatch: pytest.MonkeyPatch
):
    from typer.testing import CliRunner

    import kag.datasets
    from kag.api import grade
    from kag.cli import app

    path = med_kag / "datasets" / "mirage.json"
    asked: list[bool] = []
    real = kag.datasets.load_datasets

    def spy(*args: object, texts: bool = True) -> Datasets:
        asked.append(texts)
        return real(*args, texts=texts)  # type: ignore[arg-type]

    monkeypatch.setattr(kag.datasets, "load_datasets", spy)
    args = ["stats", "-d", str(path), "-r", str(med_kag / "results"), "--prefix", PREFIX, "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert asked == [False]
    assert result.stdout == grade(real(path), med_kag / "results", prefix=PREFIX).to_json()
    result = CliRunner().invoke(app, [*args, "--extract", "letter"])  # reads the options' texts
    assert result.exit_code == 0, result.stderr
    assert asked == [False, True]


# ---------------------------------------------------------------- the same refusals


GOOD = {
    "ds": {
        "1": {"input": "q é 😀", "output": {"type": "MCQ", "options": {"a": "x", "b": "y"}, "answer": "a"}},
        "2": {"input": "open", "output": {"type": "Open", "answers": ["Paris", "City of Paris"]}},
        "3": {"input": "free"},
        "4": {"input": "ev", "output": {"type": "MCQ", "options": {"a": "x"}}, "evidence": ["aspirin"]},
    },
    "other": {},
    "más": {"1": {"input": "q", "output": {"type": "MCQ", "options": {"A": "x", "B": "y"}, "answer": "B"}}},
}

BAD_TEXTS: list[str | bytes] = [
    "",
    "   ",
    "{not json",
    '{"ds": {"1": {"input": "a"}}',
    '{"ds": {"1": {"input": "a"}}}}',
    '{"ds": {"1": {"input": "a"},}}',
    '{"ds": {"1": {"input": "a"}}} x',
    '{"ds": {"1": {"input": "a"}}}\n{"ds": {}}',
    '{"1": {"input": "a"}}\n{"2": {"input": "b"}}\n',
    '["a"]',
    '"text"',
    "3",
    "null",
    '{"1": {"input": "a"}, "2": {"input": "b"}}',
    '{\n "ds": {"1": {"input": "a"}},\n "other": {},\n "ds": {"2": {"input": "b"}}\n}',
    '{"ds": {\n "1": {"input": "a"},\n "1": {"input": "b"}\n}}',
    '{"ds": {"1": {"input": "a",\n "output": {"type": "MCQ", "options": {"a": "x",\n "a": "y"}}}}}',
    '{"ds": {"1": {"input": "\\"1\\": {"},\n "1": {"input": "b"}}}',
    '{"ds": {"1": {"input": "a", "n": NaN}}}',
    '{"ds": {"1": {"input": "a", "n": Infinity}}}',
    '{"ds": {"1": {"input": "a", "n": ' + "1" * 5000 + "}}}",
    '{"ds": {"1": {"input": "a", "n": 18446744073709551615}}}',
    '{"ds": {"\\ud800": {"input": "a"}}}',
    '{"ds": {"1": {"input": "\\udc00"}}}',
    "[" * 100_000,
    '{"ds": {"1": {"input": "a", "deep": ' + "[" * 5000 + "]" * 5000 + "}}}",
    b'{"ds": {"\xe9": {"input": "a"}}}',
    b'{"ds": {"1": {"input": "a\xff"}}}',
    b"\xef\xbb\xbf" + b'{"ds": {"1": {"input": "a"}}}',
    '{"ds": {"1": {"input": "a\tb"}}}',
    '{"ds": {"1": {"input": 3}}}',
    '{"ds": {"1": "text"}}',
    '{"ds": []}',
    '{"ds": {"1": {"input": "a"}}, "a/b": {}, "other": []}',
    '{".secret": {"1": {"input": "q"}}}',
    '{"ds": {".hidden": {"input": "q"}}}',
    '{"ds": {"": {"input": "q"}}}',
    '{"ds\\u0000": {"1": {"input": "q"}}}',
    '{"ds": {"1": {"input": "q", "output": {"type": "MCQ", "options": {" ": "x"}}}}}',
    '{"ds": {"1": {"input": "q", "output": {"type": "MCQ", "options": {"A": "x", "a": "y"}}}}}',
    '{"ds": {"1": {"input": "q", "output": {"type": "MCQ", "options": {"a": "x"}, "answer": "c"}}}}',
    '{"ds": {"1": {"input": "q", "output": {"type": "Open", "answers": []}}}}',
    '{"ds": {"1": {"input": "q", "evidence": {"names": []}}}}',
    '{"ds": {"1": {"input": "q", "output": {"type": "Other"}}}}',
]


@pytest.mark.parametrize("text", BAD_TEXTS, ids=range(len(BAD_TEXTS)))
def test_a_bad_file_is_refused_with_the_same_message_by_both_loads(tmp_path: Path, text: str | bytes):
    path = tmp_path / "datasets.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert assert_same_outcome(path) == "error"


def test_problems_are_listed_and_capped_the_same(tmp_path: Path):
    doc = {"ds": {str(i): {"input": i} for i in range(MAX_PROBLEMS + 5)}, "a/b": {}, "other": []}
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(doc))
    assert assert_same_outcome(path) == "error"
    with pytest.raises(InputError, match=r"\.\.\. and 7 more$"):
        load_datasets(path, texts=False)


@pytest.mark.parametrize("where", ["missing", "directory"])
def test_a_file_that_cannot_be_read_is_named_the_same(tmp_path: Path, where: str):
    path = tmp_path / "datasets.json"
    if where == "directory":
        path.mkdir()
    assert assert_same_outcome(path) == "error"


def test_every_cut_of_a_file_is_refused_or_read_alike(tmp_path: Path):
    """A file cut at each of its characters, with a chunk of a few bytes: the stream meets
    every end of its buffer in every place."""
    text = json.dumps(GOOD, indent=1, ensure_ascii=False).encode()
    path = tmp_path / "datasets.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kag.datasets_stream, "CHUNK_BYTES", 5)
        for cut in range(len(text) + 1):
            path.write_bytes(text[:cut])
            assert assert_same_outcome(path) == ("ok" if cut == len(text) else "error"), cut


def test_files_with_a_few_bytes_changed_are_refused_or_read_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Bytes deleted, inserted or replaced at random (a fixed seed) among JSON's own
    characters, escapes, digits and bytes that are not UTF-8."""
    import random

    monkeypatch.setattr(kag.datasets_stream, "CHUNK_BYTES", 7)
    rng = random.Random(36)
    bases = [json.dumps(GOOD).encode(), json.dumps(GOOD, indent=2, ensure_ascii=False).encode()]
    alphabet = [*b'{}[]:,"\\ uU0123456789abdDeEnNtfl\n\t', 0xC3, 0xA9, 0xFF, 0x00]
    path = tmp_path / "datasets.json"
    seen = set()
    for _ in range(400):
        data = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 3)):
            at, change = rng.randrange(len(data)), rng.random()
            if change < 1 / 3:
                del data[at]
            elif change < 2 / 3:
                data.insert(at, rng.choice(alphabet))
            else:
                data[at] = rng.choice(alphabet)
        path.write_bytes(bytes(data))
        seen.add(assert_same_outcome(path))
    assert seen == {"ok", "error"}


@pytest.mark.parametrize("chunk", [1, 3, 64, 1 << 20])
@pytest.mark.parametrize("indent", [None, 2])
def test_any_chunk_size_and_layout_read_the_same_questions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, indent: int | None
):
    monkeypatch.setattr(kag.datasets_stream, "CHUNK_BYTES", chunk)
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(GOOD, indent=indent, ensure_ascii=False), encoding="utf-8")
    assert assert_same_outcome(path) == "ok"
    full, lean = loaded_both(path)
    assert not lean.texts
    for name, questions in full.datasets.items():
        for qid, question in questions.items():
            assert lean.entry(name, qid) == question  # the spans count bytes, not characters


def test_an_entry_nested_deep_is_left_to_the_whole_file_reader(tmp_path: Path):
    """Its depth counts the levels above it in the whole file: that reader decides."""
    path = tmp_path / "datasets.json"
    path.write_text('{"ds": {"1": {"input": "q", "x": ' + "[" * 300 + "]" * 300 + "}}}")
    full, lean = loaded_both(path)
    assert lean == full and lean.texts


def test_escaped_surrogate_pairs_are_read_lean(tmp_path: Path):
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(GOOD))  # ensure_ascii: the emoji as a pair of escapes
    assert "\\ud83d\\ude00" in path.read_text()
    full, lean = loaded_both(path)
    assert not lean.texts and lean.entry("ds", "1") == full.get("ds", "1")
    assert lean.entry("ds", "1").input == "q é 😀"


@pytest.mark.parametrize(
    "text",
    [
        # Escaped surrogates make the whole-file reader run orjson over the file, which also
        # refuses a number too large for a float, wherever it is.
        '{"ds": {"1": {"input": "\\ud83d\\ude00"}, "2": {"input": "\\ud800"}}}',
        '{"ds": {"1": {"input": "a", "n": 1e400}, "2": {"input": "\\ud83d\\ude00"}}}',
        '{"ds": {"1": {"input": "\\ud83d\\ude00"}, "2": {"input": "a", "n": -1e400}}}',
        '{"\\ud83d\\ude00": {"1": {"input": "a", "n": 1e400}}}',
    ],
)
def test_what_orjson_refuses_beside_an_escaped_surrogate_is_refused_alike(tmp_path: Path, text: str):
    path = tmp_path / "datasets.json"
    path.write_text(text)
    assert assert_same_outcome(path) == "error"


def test_a_number_too_large_for_a_float_alone_is_read_alike(tmp_path: Path):
    path = tmp_path / "datasets.json"
    path.write_text('{"ds": {"1": {"input": "a", "n": 1e400}}}')
    assert assert_same_outcome(path) == "ok"
    assert not load_datasets(path, texts=False).texts


def test_a_pipe_is_read_whole(tmp_path: Path):
    import threading

    fifo = tmp_path / "datasets.fifo"
    os.mkfifo(fifo)
    text = json.dumps(GOOD).encode()
    writer = threading.Thread(target=fifo.write_bytes, args=(text,))
    writer.start()
    try:
        loaded = load_datasets(fifo, texts=False)
    finally:
        writer.join()
    assert loaded.texts and loaded.get("ds", "1").input == "q é 😀"


# ---------------------------------------------------------------- what the lean load holds


def test_lean_questions_carry_no_texts_and_share_their_option_forms(tmp_path: Path):
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(GOOD))
    lean = load_datasets(path, texts=False)
    first = lean.get("ds", "1")
    assert first is not None and first.input == "" and first.mcq is not None
    assert first.mcq.options == {"a": "", "b": ""} and first.mcq.answer == "a" and first.scorable
    assert lean.get("ds", "2").open.answers == ("Paris", "City of Paris")
    assert lean.get("ds", "3").mcq is None and lean.get("ds", "3").open is None
    assert lean.get("ds", "4").evidence == ("aspirin",) and not lean.get("ds", "4").scorable
    assert lean.has_evidence and lean.scorable_questions == 2
    full = load_datasets(path)
    for test in (
        lambda q: q.open is not None,
        lambda q: q.mcq is None,
        lambda q: bool(q.evidence),
        lambda q: True,
    ):
        assert [count_questions(qs, test) for qs in lean.datasets.values()] == [
            count_questions(qs, test) for qs in full.datasets.values()
        ]
    assert count_questions(lean.datasets["ds"], lambda q: q.mcq is None) == 2  # open, free-form
    assert "1" in lean.datasets["ds"] and "9" not in lean.datasets["ds"] and 1 not in lean.datasets["ds"]
    assert lean.get("ds", "\udcff") is None  # a folder name that is not UTF-8
    assert lean.datasets["other"] == {} and len(lean.datasets["ds"]) == 4
    again = load_datasets(path, texts=False)
    assert again.get("ds", "1").mcq is again.get("ds", "1").mcq  # one form for every question of it


def test_a_question_with_gold_evidence_is_kept_without_its_texts_and_shares_its_form(tmp_path: Path):
    mcq = {"type": "MCQ", "options": {"a": "x", "b": "y"}, "answer": "a"}
    gold = {"entities": ["Aspirin"], "triples": [["Aspirin", "treats", "Pain"]]}
    data = {
        "ds": {
            "1": {"input": "q1", "output": mcq},
            "2": {"input": "q2", "output": {**mcq, "options": {"a": "z", "b": "w"}}, "evidence": gold},
            "3": {"input": "q3", "output": {"type": "Open", "answers": ["Paris"]}, "evidence": ["Paris"]},
        }
    }
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(data))
    lean = load_datasets(path, texts=False)
    kept = lean.get("ds", "2")
    assert kept == Question(
        "ds", "2", "", MCQ({"a": "", "b": ""}, "a"), None, ("Aspirin",), (("Aspirin", "treats", "Pain"),)
    )
    assert kept.mcq is lean.get("ds", "1").mcq  # the form's one MCQ, with or without evidence
    assert lean.get("ds", "3") == Question("ds", "3", "", None, OpenAnswer(("Paris",)), ("Paris",))
    full = load_datasets(path)
    assert [lean.datasets["ds"].full_question(q) for q in "123"] == [full.get("ds", q) for q in "123"]
    assert full.get("ds", "2").input == "q2" and full.get("ds", "2").mcq.options == {"a": "z", "b": "w"}


def test_many_questions_are_all_found(tmp_path: Path):
    doc = {"ds": {f"q{i}": {"input": "q", "output": {"type": "MCQ", "options": {"a": "", "b": ""}, "answer": "ab"[i % 2]}}
                  for i in range(5000)}}  # fmt: skip
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(doc))
    lean = load_datasets(path, texts=False)
    assert list(lean.datasets["ds"]) == list(doc["ds"])
    assert all(lean.get("ds", f"q{i}").mcq.answer == "ab"[i % 2] for i in range(5000))
    assert lean.get("ds", "q5000") is None


# ---------------------------------------------------------------- a file that changed


def test_an_entry_of_a_file_changed_since_the_load_is_refused(tmp_path: Path):
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(GOOD))
    lean = load_datasets(path, texts=False)
    assert lean.entry("ds", "1").input == "q é 😀"
    path.write_text(json.dumps({"ds": {"1": {"input": "another question"}}}))
    with pytest.raises(DatasetsChanged) as info:
        lean.entry("ds", "1")
    assert str(info.value) == (
        f"{path}: the datasets file changed since it was read: run the command again to read it anew"
    )
    assert isinstance(info.value, InputError)


def test_a_change_that_keeps_the_size_and_time_is_refused_by_the_entry_check(tmp_path: Path):
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(GOOD))
    lean = load_datasets(path, texts=False)
    before = os.stat(path)
    data = path.read_bytes()
    with open(path, "r+b") as handle:  # the same inode, the same size
        handle.write(data.replace(b'"a": "x"', b'"a": "z"', 1))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(DatasetsChanged):
        lean.entry("ds", "1")
    assert lean.entry("ds", "3").input == "free"  # an entry the change left alone is still read


def test_a_file_removed_since_the_load_is_named(tmp_path: Path):
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(GOOD))
    lean = load_datasets(path, texts=False)
    path.unlink()
    with pytest.raises(InputError, match=f"^{path}: datasets file not found$"):
        lean.entry("ds", "1")


def test_the_lean_table_holds_a_few_dozen_bytes_a_question_and_never_the_file(tmp_path: Path):
    import tracemalloc

    doc = {
        f"set{d}": {
            str(10_000_000 + i): {
                "input": "a question of some length, as a real one " * 4,
                "output": {"type": "MCQ", "options": {k: f"option {k} text" for k in "abcd"}, "answer": "abcd"[i % 4]},
            }
            for i in range(2500)
        }
        for d in range(4)
    }  # fmt: skip
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(doc))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        lean = load_datasets(path, texts=False)
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        full = load_datasets(path)
        full_peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert lean.scorable_questions == full.scorable_questions == 10_000
    assert held < 40 * 10_000  # ids, hash table, form codes, entry spans
    assert peak < held + 3 * kag.datasets_stream.CHUNK_BYTES + size // 8  # a chunk or two, never the file
    assert full_peak > 2 * size  # what the whole-file reader holds


def test_a_pipe_put_in_the_files_place_is_refused_without_waiting(tmp_path: Path):
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(GOOD))
    lean = load_datasets(path, texts=False)
    path.unlink()
    os.mkfifo(path)  # no writer: a blocking open would wait for one forever
    with pytest.raises(DatasetsChanged):
        lean.entry("ds", "1")


def test_a_lean_table_pickled_to_another_process_finds_its_questions(tmp_path: Path):
    """A spawned process hashes strings with another seed: the table must not depend on it."""
    import multiprocessing

    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(GOOD))
    lean = load_datasets(path, texts=False)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        found = pool.apply(_answers_of, (lean,))
    assert found == ["a", None, None, None]


def _answers_of(loaded: Datasets) -> list[str | None]:
    return [q.mcq.answer if (q := loaded.get("ds", qid)) and q.mcq else None for qid in "1234"]


def _in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation=generation))


@pytest.mark.parametrize("texts", [False, True])
def test_a_load_hands_its_questions_to_the_collectors_oldest_generation_unwalked(tmp_path: Path, texts: bool):
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps({"ds": {"1": {"input": "q", "output": None, "evidence": ["Aspirin"]}}}))
    assert gc.isenabled() and gc.get_freeze_count() == 0
    question = load_datasets(path, texts=texts).get("ds", "1")
    assert question is not None and question.evidence == ("Aspirin",)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    # Not left young, where the next collection would walk it with every question of the file.
    assert _in_generation(question, 2) and not _in_generation(question, 0)


def test_objects_a_program_keeps_frozen_stay_frozen_through_a_load(tmp_path: Path):
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps({"ds": {"1": {"input": "q", "output": None, "evidence": ["Aspirin"]}}}))
    kept = [object()]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        question = load_datasets(path, texts=False).get("ds", "1")
        assert gc.get_freeze_count() == frozen  # nothing of the program's unfrozen
        assert _in_generation(question, 0) or _in_generation(question, 1) or _in_generation(question, 2)
        assert not _in_generation(kept, 2)
    finally:
        gc.unfreeze()

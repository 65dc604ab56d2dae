"""kag/view/record_rows.py: a graded record comes back from its index row field for field
(the texts no measure reads cut to their heads); the layout's version follows the record's
fields, so that a field added to the record reaches the index with no other edit and an
index of an older layout is rebuilt, not misread."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from kag.datasets import load_datasets
from kag.grading.record import GradedFile, Outcome
from kag.grading.retrieval_quality import QualityRecord
from kag.grading.verdicts import Verdict
from kag.results.codec import RetrievalSample
from kag.results.model import AugmentedGeneration, ModelConfig, Usage
from kag.view.index import SCHEMA_VERSION, Index, Tree
from kag.view.query import View
from kag.view.record_rows import (
    ANSWER_CHARS,
    DETAIL,
    DETAIL_FIELDS,
    ERROR_CHARS,
    RECORD_VERSION,
    VOTE,
    _as_list,
    answer_vote,
    describe,
    from_row,
    shared_json,
    to_row,
)
from tests.view.helpers import make_tree

REPO = Path(__file__).resolve().parents[2]
BASE = ("/trees/t", "med/q1/kag.json", "med", "q1", "kag", 1, "graded", 120, 7)


def _full(response: str | None = "The answer is B", **changes: object) -> GradedFile:
    """A record with every field set, nested records included."""
    record = GradedFile(
        "med",
        "q1",
        "kag",
        Outcome.WRONG,
        response,
        abstained=False,
        non_option=True,
        generation_ns=1_500_000_000,
        context_length=4096,
        retrieval=RetrievalSample(250_000_000, 12, 30, 7),
        error=None,
        config=ModelConfig("prov", "m", 0.25, 512, AugmentedGeneration("emb", "neo4j")),
        usage=Usage(1000, None),
        extracted=Outcome.OK,
        exact_match=None,
        f1=None,
        evidence_hit=True,
        gold="A",
        retrieval_quality=QualityRecord(2, 1, 1, 0, 30, 4, (1, 0), False),
        path="/trees/t/med/q1/kag.json",
        extracted_key="B",
        verdict=Verdict.INCORRECT,
    )
    return replace(record, **changes)  # type: ignore[arg-type]


def test_a_record_comes_back_from_its_row_field_for_field() -> None:
    record = _full()
    assert from_row(to_row(record, BASE, frozenset(), "10"), "kag") == record
    # Under a tree's label, the same record named as the label names its setup.
    assert from_row(to_row(record, BASE), "run1/kag") == replace(record, setup="run1/kag")


def test_an_open_question_s_record_and_an_error_file_s_come_back() -> None:
    open_record = _full(exact_match=1.0, f1=0.5, extracted=None, extracted_key=None, outcome=Outcome.OK)
    assert from_row(to_row(open_record, BASE), "kag") == open_record
    error = GradedFile("med", "q1", "kag", Outcome.ERR, None, error="gone", path="/trees/t/med/q1/kag.json")
    assert from_row(to_row(error, BASE), "kag") == error


def test_a_row_keeps_the_head_of_a_text_no_measure_reads_else_the_whole() -> None:
    long = "B because " + "x" * 1000
    record = _full(long, error=None)
    row = to_row(record, BASE)
    assert from_row(row, "kag").response == long[:ANSWER_CHARS]
    assert row[VOTE] == answer_vote(long) is not None  # maj@k still compares it whole
    row = to_row(record, BASE, frozenset({"response"}))
    assert from_row(row, "kag").response == long and row[VOTE] is None
    error = GradedFile("med", "q1", "kag", Outcome.ERR, None, error="e" * 5000, path=BASE[0] + "/" + BASE[1])
    assert from_row(to_row(error, BASE), "kag").error == "e" * ERROR_CHARS
    assert from_row(to_row(error, BASE, frozenset({"error"})), "kag") == error


def test_a_number_past_64_bits_is_kept_exactly() -> None:
    record = _full(generation_ns=2**70, usage=Usage(2**65, -(2**66)))
    row = to_row(record, BASE)
    assert row[DETAIL][:1] == b"\0"  # the standard library's JSON, behind a NUL
    assert from_row(row, "kag") == record


def test_the_detail_is_written_as_orjson_writes_each_nested_record_as_the_list_of_its_fields() -> None:
    # The nested records are flattened before orjson writes them: the bytes are those
    # orjson gives calling back for each record (the layout of every index already built).
    class Sample(RetrievalSample):  # another type than the one declared: left to the call back
        __slots__ = ()

    plain = _full(retrieval=RetrievalSample(1, 2, 3, 4), retrieval_quality=None, verdict=None)
    for record, back in (
        (_full(), _full()),
        (_full(config=ModelConfig("p", "m", 0.5)), _full(config=ModelConfig("p", "m", 0.5))),
        (replace(plain, retrieval=Sample(1, 2, 3, 4)), plain),
    ):
        detail = [getattr(record, name) for name in DETAIL_FIELDS]
        while detail[-1] is None:
            detail.pop()
        expected = orjson.dumps(detail, default=_as_list, option=orjson.OPT_PASSTHROUGH_DATACLASS)
        row = to_row(record, BASE)
        assert row[DETAIL] == expected and type(row[DETAIL]) is bytes
        assert from_row(row, "kag") == back


def _plain_detail(record: GradedFile) -> bytes:
    """A record's detail as orjson writes it calling back for each nested record (the
    standard library's JSON behind a NUL for a number past 64 bits)."""
    detail = [getattr(record, name) for name in DETAIL_FIELDS]
    while detail[-1] is None:
        detail.pop()
    try:
        return orjson.dumps(detail, default=_as_list, option=orjson.OPT_PASSTHROUGH_DATACLASS)
    except orjson.JSONEncodeError:
        return b"\0" + json.dumps(detail, default=_as_list).encode()


def test_a_config_shared_by_many_files_is_written_as_each_file_s_own_would_be() -> None:
    # The reader gives every file of a setup one config object, flattened once for them all.
    shared = ModelConfig("p", "m", 0.5, 2**70, AugmentedGeneration("r", "d"))  # past 64 bits
    other = ModelConfig("p", "m", 0.5, 7)
    for config in (shared, other, shared, other, ModelConfig("p", "m", 0.5, 7), shared):
        record = _full(config=config)
        row = to_row(record, BASE)
        assert row[DETAIL] == _plain_detail(record)
        assert from_row(row, "kag") == record
    # The memo is bounded, and a value it let go is written again, the same.
    default = shared_json(kept=2)
    configs = [
        ModelConfig("p", str(i), 0.0, 2**70 if i == 3 else i, AugmentedGeneration("r", "d")) for i in range(5)
    ]
    for config in configs + configs:
        detail = [1, config, None]
        try:
            expected = orjson.dumps(detail, default=_as_list, option=orjson.OPT_PASSTHROUGH_DATACLASS)
        except orjson.JSONEncodeError:
            with pytest.raises(orjson.JSONEncodeError):
                orjson.dumps(detail, default=default, option=orjson.OPT_PASSTHROUGH_DATACLASS)
            continue
        assert orjson.dumps(detail, default=default, option=orjson.OPT_PASSTHROUGH_DATACLASS) == expected


def test_a_row_whose_config_was_written_before_is_written_as_each_file_s_own_would_be() -> None:
    # A config met again is put in the row as the JSON written the first time, and the
    # retrieval sample as its fields, before orjson is called: the bytes are the plain call
    # back's, also when a number past 64 bits elsewhere sends the row to the standard library.
    config = ModelConfig("p", "m", 0.5, 7, AugmentedGeneration("r", "d"))
    for record in (
        _full(config=config),
        _full(config=config),  # the config met again
        _full(config=config, generation_ns=2**70),
        _full(config=config, retrieval=RetrievalSample(2**65, 1, 2, 3)),
        _full(config=config, retrieval=None, usage=None, retrieval_quality=None, verdict=None),
        _full(
            config=config,
            exact_match=None,
            gold=None,
            extracted_key=None,
            retrieval_quality=None,
            verdict=None,
        ),
    ):
        row = to_row(record, BASE)
        assert row[DETAIL] == _plain_detail(record) and type(row[DETAIL]) is bytes
        assert from_row(row, "kag") == record
    assert to_row(_full(config=config, generation_ns=2**70), BASE)[DETAIL][:1] == b"\0"


def test_the_layout_names_every_field_and_nested_type() -> None:
    layout = describe(GradedFile)
    for part in (
        "retrieval:RetrievalSample(time_ns:int,vertices:int,relationships:int,properties:int)|None",
        "augmented_generation:AugmentedGeneration(retriever:str,database:str)|None",
        "seed_ranks:tuple[int,...]|None",
        "verdict:Verdict{CORRECT,INCORRECT,UNUSABLE}|None",
    ):
        assert part in layout
    assert SCHEMA_VERSION.endswith(RECORD_VERSION)


def test_an_index_of_an_older_layout_is_rebuilt_not_misread(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    path = tmp_path / "index.sqlite"
    ds = load_datasets(datasets)
    index = Index(path, ds, [Tree("", str(tree.resolve()))], "", None)
    view = View(index, scan=True)
    records = view.records()
    files = index.db.execute("SELECT count(*) FROM files WHERE kind IN ('graded', 'open')").fetchone()[0]
    index.close()
    # As an index of the previous layout: another version, and details this one cannot read.
    db = sqlite3.connect(path)
    (fingerprint,) = db.execute("SELECT value FROM meta WHERE key='fingerprint'").fetchone()
    old = fingerprint.replace(f"v{SCHEMA_VERSION}|", "v8|")
    db.execute("UPDATE meta SET value=? WHERE key='fingerprint'", (old,))
    db.execute("UPDATE files SET detail=? WHERE detail IS NOT NULL", (b"[1,2]",))
    db.commit()
    db.close()
    index = Index(path, ds, [Tree("", str(tree.resolve()))], "", None)
    try:
        stats = index.scan()
        assert stats.read >= files > 0  # every result file read again
        assert View(index).records() == records
    finally:
        index.close()


# A field added to the record, as a user would add it to kag/grading/record.py: here a
# subclass put in its place before anything else of kag is imported.
ADDED_FIELD = """
import dataclasses, sys
import orjson
from kag.grading import record

@dataclasses.dataclass(frozen=True, slots=True)
class GradedFile(record.GradedFile):
    reviewer: str = "seen by a child"

record.GradedFile = GradedFile

from pathlib import Path
from kag.datasets import load_datasets
from kag.view.index import Index, Tree
from kag.view.query import View
from kag.view.record_rows import DETAIL_FIELDS, RECORD_VERSION

datasets, tree, path = sys.argv[1:4]
index = Index(Path(path), load_datasets(datasets), [Tree("", tree)], "", None)
view = View(index, scan=True)
again = View(index)  # the records read back from the index's rows
details = [d for (d,) in index.db.execute("SELECT detail FROM files WHERE detail IS NOT NULL")]
sys.stdout.write(orjson.dumps({
    "version": RECORD_VERSION,
    "fields": DETAIL_FIELDS,
    "records": len(again.records()),
    "reviewers": sorted({type(r).__name__ + ":" + r.reviewer for r in again.records()}),
    "stored": all(orjson.loads(d)[-1] == "seen by a child" for d in details),
}).decode())
index.close()
"""


def test_a_field_added_to_the_record_reaches_the_index_with_no_other_edit(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", ADDED_FIELD, str(datasets), str(tree.resolve()), str(tmp_path / "i.sqlite")],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = orjson.loads(done.stdout)
    assert seen["version"] != RECORD_VERSION  # an index of the shipped layout would be rebuilt
    assert seen["fields"][-1] == "reviewer"
    assert seen["records"] > 0 and seen["stored"]
    assert seen["reviewers"] == ["GradedFile:seen by a child"]

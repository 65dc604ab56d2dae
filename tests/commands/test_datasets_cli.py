"""`kag datasets import` (CSV, JSON Lines, Parquet in the MMLU, MedQA and PubMedQA layouts
Hugging Face publishes) and `kag datasets check`; each imported file is then graded."""

from __future__ import annotations

import csv
import os
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from tests.conftest import write_ok

# Rows as Hugging Face publishes them (cais/mmlu, GBaker/MedQA-USMLE-4-options, qiaojin/PubMedQA).
MMLU = [
    {
        "question": "Which bone is the longest?",
        "subject": "anatomy",
        "choices": ["Femur", "Tibia", "Humerus", "Ulna"],
        "answer": 0,
    },
    {
        "question": "Where is insulin made?",
        "subject": "anatomy",
        "choices": ["Liver", "Pancreas", "Spleen", "Kidney"],
        "answer": 1,
    },
    {"question": "How many lungs?", "subject": "anatomy", "choices": ["1", "2", "3", "4"], "answer": 1},
]
MEDQA = [
    {
        "question": "A 23-year-old presents with ...?",
        "answer": "Nitrofurantoin",
        "options": {"A": "Ampicillin", "B": "Ceftriaxone", "C": "Doxycycline", "D": "Nitrofurantoin"},
        "meta_info": "step2&3",
        "answer_idx": "D",
    },
    {
        "question": "A 3-month-old infant ...?",
        "answer": "Placing the infant in a supine position",
        "options": {
            "A": "Placing the infant in a supine position",
            "B": "Keeping the infant covered",
            "C": "Routine postnatal exam",
            "D": "Keeping the room warm",
        },
        "meta_info": "step2&3",
        "answer_idx": "A",
    },
]
PUBMEDQA = [
    {
        "pubid": 21645374,
        "question": "Do mitochondria play a role in remodelling lace plant leaves?",
        "context": {"contexts": ["..."]},
        "long_answer": "...",
        "final_decision": "yes",
    },
    {
        "pubid": 16418930,
        "question": "Is anorectal endosonography valuable in dyschesia?",
        "context": {"contexts": ["..."]},
        "long_answer": "...",
        "final_decision": "no",
    },
    {
        "pubid": 9488747,
        "question": "Does ... matter?",
        "context": {"contexts": ["..."]},
        "long_answer": "...",
        "final_decision": "maybe",
    },
]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    if path.suffix == ".jsonl":
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    elif path.suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            for r in rows:
                writer.writerow(
                    {k: orjson.dumps(v).decode() if isinstance(v, (list, dict)) else v for k, v in r.items()}
                )
    else:
        pq = pytest.importorskip("pyarrow.parquet")
        import pyarrow as pa

        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def kag(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


LAYOUTS = {
    "mmlu": (
        MMLU,
        ["--question", "question", "--options-list", "choices", "--answer", "answer", "--answer-is", "index"],
        ["A", "B", "B"],
    ),
    "medqa": (
        MEDQA,
        ["--question", "question", "--options-list", "options", "--answer", "answer_idx"],
        ["D", "A"],
    ),
    "pubmedqa": (
        PUBMEDQA,
        [
            "--id",
            "pubid",
            "--question",
            "question",
            "--choices",
            "yes,no,maybe",
            "--answer",
            "final_decision",
            "--answer-is",
            "text",
        ],
        ["A", "B", "C"],
    ),
}


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_import_each_layout_then_grade_it(tmp_path: Path, layout: str, suffix: str) -> None:
    rows, options, keys = LAYOUTS[layout]
    source = write_rows(tmp_path / f"{layout}{suffix}", rows)
    target = tmp_path / "datasets.json"
    result = kag("datasets", "import", source, "-o", target, *options)
    assert result.exit_code == 0, result.output
    assert (
        f"imported {len(rows)} question(s) ({len(rows)} multiple-choice, 0 open) into dataset '{layout}'"
        in result.stderr
    )
    doc = orjson.loads(target.read_bytes())
    questions = doc[layout]
    assert [q["output"]["answer"] for q in questions.values()] == keys
    if layout == "pubmedqa":
        assert list(questions) == ["21645374", "16418930", "9488747"]
        assert questions["16418930"]["output"]["options"] == {"A": "yes", "B": "no", "C": "maybe"}
    if layout == "medqa":
        assert questions["0"]["output"]["options"] == MEDQA[0]["options"]
    # Grade it: the first question answered right, the others wrong.
    results = tmp_path / "results"
    for n, (qid, q) in enumerate(questions.items()):
        wrong = next(k for k in q["output"]["options"] if k != q["output"]["answer"])
        write_ok(results / layout / qid / "s.json", q["output"]["answer"] if n == 0 else wrong)
    graded = kag("stats", "-d", target, "-r", results, "--format", "json")
    assert graded.exit_code == 0, graded.output
    overall = orjson.loads(graded.stdout)["setups"][0]["overall"]
    assert (overall["total"], overall["correct"]) == (len(rows), 1)


def test_import_merges_without_replacing(tmp_path: Path) -> None:
    source = write_rows(tmp_path / "mmlu.jsonl", MMLU)
    target = tmp_path / "datasets.json"
    args = [
        "--question",
        "question",
        "--options-list",
        "choices",
        "--answer",
        "answer",
        "--answer-is",
        "index",
    ]
    assert kag("datasets", "import", source, "-o", target, *args).exit_code == 0
    assert kag("datasets", "import", source, "-o", target, "--dataset", "other", *args).exit_code == 0
    before = target.read_bytes()
    clash = kag("datasets", "import", source, "-o", target, *args)
    assert clash.exit_code == 2
    assert "mmlu/0 is already in" in clash.stderr and "nothing was written" in clash.stderr
    assert target.read_bytes() == before
    assert set(orjson.loads(before)) == {"mmlu", "other"}


def test_open_questions(tmp_path: Path) -> None:
    source = write_rows(
        tmp_path / "trivia.jsonl",
        [{"q": "Capital of France?", "a": ["Paris", "paris, france"]}, {"q": "2+2?", "a": "4"}],
    )
    target = tmp_path / "d.json"
    result = kag("datasets", "import", source, "-o", target, "--question", "q", "--answers", "a")
    assert result.exit_code == 0, result.output
    doc = orjson.loads(target.read_bytes())
    assert doc["trivia"]["0"]["output"] == {"type": "Open", "answers": ["Paris", "paris, france"]}
    assert doc["trivia"]["1"]["output"] == {"type": "Open", "answers": ["4"]}


@pytest.mark.parametrize(
    "rows, options, message",
    [
        (
            MMLU,
            ["--options-list", "choices", "--answer", "answer"],
            ":1: column 'answer': '0' is not one of the option keys",
        ),
        (MMLU, ["--options-list", "choicez", "--answer", "answer"], ":1: no column 'choicez'"),
        (
            MMLU,
            ["--options-list", "choices", "--answer", "answer", "--answer-is", "text"],
            "matches no option",
        ),
        (
            [{**MMLU[0], "answer": 9}],
            ["--options-list", "choices", "--answer", "answer", "--answer-is", "index"],
            "9 is not an index of the 4 option(s)",
        ),
        (MMLU, ["--answer", "answer"], "exactly one of --options"),
        (MMLU, ["--options-list", "choices"], "--answer COL is required"),
    ],
)
def test_bad_columns_name_file_line_and_column(
    tmp_path: Path, rows: list, options: list[str], message: str
) -> None:
    source = write_rows(tmp_path / "m.jsonl", rows)
    result = kag("datasets", "import", source, "-o", tmp_path / "d.json", "--question", "question", *options)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "d.json").exists()


def test_bad_json_line_names_the_line(tmp_path: Path) -> None:
    source = tmp_path / "m.jsonl"
    source.write_text('{"question": "a", "c": ["x"], "k": 0}\n{oops\n')
    result = kag(
        "datasets",
        "import",
        source,
        "-o",
        tmp_path / "d.json",
        "--question",
        "question",
        "--options-list",
        "c",
        "--answer",
        "k",
        "--answer-is",
        "index",
    )
    assert result.exit_code == 2
    assert f"{source}:2: not valid JSON" in result.stderr


def test_a_json_line_that_is_no_object_names_the_line(tmp_path: Path) -> None:
    source = tmp_path / "m.jsonl"
    source.write_text('{"question": "a", "answers": "b"}\n\n"c"\n')
    result = kag(
        "datasets",
        "import",
        source,
        "-o",
        tmp_path / "d.json",
        "--question",
        "question",
        "--answers",
        "answers",
    )
    assert result.exit_code == 2
    assert result.stderr == f"kag: error: {source}:3: expected an object (column -> value), one per line\n"


def test_check_counts_per_dataset(tmp_path: Path) -> None:
    target = tmp_path / "d.json"
    target.write_bytes(
        orjson.dumps(
            {
                "a": {
                    "1": {"input": "?", "output": {"type": "MCQ", "options": {"A": "x"}, "answer": "A"}},
                    "2": {"input": "?", "output": {"type": "MCQ", "options": {"A": "x"}}},
                    "3": {"input": "?"},
                },
                "b": {"1": {"input": "?", "output": {"type": "Open", "answers": ["y"]}, "evidence": ["Y"]}},
            }
        )
    )
    text = kag("datasets", "check", target)
    assert text.exit_code == 0, text.output
    assert text.stdout.splitlines() == [
        "DATASET  QUESTIONS  MCQ  WITH_ANSWER  OPEN  FREE_FORM  EVIDENCE",
        "a                3    2            1     0          1         0",
        "b                1    0            0     1          0         1",
        "total            4    2            1     1          1         1",
    ]
    doc = orjson.loads(kag("datasets", "check", target, "--format", "json").stdout)
    assert doc["total"] == {
        "questions": 4,
        "mcq": 2,
        "with_answer": 1,
        "open": 1,
        "free_form": 1,
        "evidence": 1,
    }


def test_check_on_the_real_mirage_file(med_kag: Path) -> None:
    doc = orjson.loads(
        kag("datasets", "check", med_kag / "datasets" / "mirage.json", "--format", "json").stdout
    )
    assert doc["total"]["questions"] == 7663
    assert {d["dataset"] for d in doc["datasets"]} == {"medqa", "medmcqa", "pubmedqa", "bioasq", "mmlu"}


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"0": {"input": "x"}, "1": {"input": "y"}}', "'0' looks like a question, not a dataset"),
        (b'{"a": {"input": "x"}}\n{"b": {"input": "y"}}\n', "this looks like JSON Lines"),
        (b'[{"input": "x"}]', "got an array; kag datasets import converts rows"),
    ],
)
def test_a_wrongly_shaped_datasets_file_says_what_shape_was_expected(
    tmp_path: Path, content: bytes, message: str
) -> None:
    target = tmp_path / "d.json"
    target.write_bytes(content)
    result = kag("datasets", "check", target)
    assert result.exit_code == 2
    assert message in result.stderr
    assert '{"DATASET": {"QUESTION_ID"' in result.stderr or "JSON Lines" in result.stderr


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--dataset", ".hidden"], "dataset name '.hidden' starts with '.'"),
        (["--id", "qid"], ":1: question id '.q' starts with '.'"),
    ],
)
def test_hidden_names_are_refused(tmp_path: Path, extra: list[str], message: str) -> None:
    source = write_rows(tmp_path / "m.jsonl", [{"qid": ".q", "q": "?", "a": "x"}])
    result = kag(
        "datasets", "import", source, "-o", tmp_path / "d.json", "--question", "q", "--answers", "a", *extra
    )
    assert result.exit_code == 2
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "d.json").exists()


def test_an_invalid_datasets_file_is_not_merged_into(tmp_path: Path) -> None:
    target = tmp_path / "d.json"
    target.write_bytes(b'{"0": {"input": "x"}}')
    source = write_rows(tmp_path / "m.jsonl", MMLU)
    args = [
        "--question",
        "question",
        "--options-list",
        "choices",
        "--answer",
        "answer",
        "--answer-is",
        "index",
    ]
    result = kag("datasets", "import", source, "-o", target, *args)
    assert result.exit_code == 2
    assert "'0' looks like a question, not a dataset" in result.stderr
    assert target.read_bytes() == b'{"0": {"input": "x"}}'


def test_a_key_written_twice_fails_check_and_import_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    """A JSON reader keeps the second of two equal keys: the import would have written the
    file back without the first block's questions."""
    target = tmp_path / "d.json"
    text = '{\n "mmlu": {"q1": {"input": "first block"}},\n "mmlu": {"q2": {"input": "second block"}}\n}\n'
    target.write_text(text)
    check = kag("datasets", "check", target)
    assert check.exit_code == 2
    assert check.stderr.startswith(
        f"kag: error: {target}:3: dataset 'mmlu' is written twice (first at line 2)"
    )
    source = write_rows(tmp_path / "m.jsonl", MMLU)
    args = [
        "--question",
        "question",
        "--options-list",
        "choices",
        "--answer",
        "answer",
        "--answer-is",
        "index",
    ]
    result = kag("datasets", "import", source, "-o", target, "--dataset", "other", *args)
    assert result.exit_code == 2 and "written twice" in result.stderr
    assert target.read_text() == text
    # Every command reads the file the same way.
    (tmp_path / "results").mkdir()
    for command in (
        ["stats", "-r", tmp_path / "results"],
        ["view", "--export", tmp_path / "site", "-r", tmp_path / "results"],
    ):
        other = kag(*command, "-d", target)
        assert other.exit_code == 2 and f"{target}:3: dataset 'mmlu' is written twice" in other.stderr, (
            other.output
        )


MMLU_ARGS = [
    "--question",
    "question",
    "--options-list",
    "choices",
    "--answer",
    "answer",
    "--answer-is",
    "index",
]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("big.csv", "question,answers\n" + "x" * 131_073 + ",a\n", ":2: not a CSV row kag can read"),
        ("twice.csv", "question,answers,question\na,b,c\n", ":1: the header names a column twice"),
        ("wide.csv", "question,answers\na,b\nc,d,e\n", ":3: more fields than the header names"),
        (
            "latin.csv",
            "question,answers\ncaf\xe9,a\n".encode("latin-1"),
            ":2: input file is not UTF-8 text (byte 20)",
        ),
    ],
)
def test_an_unreadable_csv_is_one_line_naming_its_line(
    tmp_path: Path, name: str, content: str | bytes, message: str
) -> None:
    source = tmp_path / name
    source.write_bytes(content if isinstance(content, bytes) else content.encode())
    result = kag(
        "datasets",
        "import",
        source,
        "-o",
        tmp_path / "d.json",
        "--question",
        "question",
        "--answers",
        "answers",
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"kag: error: {source}{message}") and result.stderr.count("\n") == 1
    assert not (tmp_path / "d.json").exists()


@pytest.mark.parametrize("index", ["²", "1" * 5000, "٣"])
def test_an_index_that_is_no_ascii_number_is_named(tmp_path: Path, index: str) -> None:
    source = write_rows(tmp_path / "m.jsonl", [{**MMLU[0], "answer": index}])
    result = kag("datasets", "import", source, "-o", tmp_path / "d.json", *MMLU_ARGS)
    assert result.exit_code == 2, result.output
    assert (
        f"{source}:1: column 'answer': " in result.stderr
        and "is not an index of the 4 option(s)" in result.stderr
    )
    assert result.stderr.count("\n") == 1 and len(result.stderr) < 300


def test_an_empty_option_key_is_refused_at_its_row(tmp_path: Path) -> None:
    source = write_rows(tmp_path / "m.jsonl", [{"question": "q", "options": {"": ""}, "answer_idx": ""}])
    result = kag(
        "datasets", "import", source, "-o", tmp_path / "d.json",
        "--question", "question", "--options-list", "options", "--answer", "answer_idx",
    )  # fmt: skip
    assert result.exit_code == 2
    assert f"{source}:1: column 'options': an option key is empty" in result.stderr
    assert not (tmp_path / "d.json").exists()


def test_a_parquet_value_python_cannot_hold_names_its_row_and_column(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    source = tmp_path / "m.parquet"
    when = pa.array([0, 2**62], type=pa.timestamp("us"))
    pq.write_table(pa.table({"q": ["x", "y"], "a": ["p", "q"], "when": when}), source)
    result = kag("datasets", "import", source, "-o", tmp_path / "d.json", "--question", "q", "--answers", "a")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"kag: error: {source}: row 2: column 'when': cannot read the value")
    assert result.stderr.count("\n") == 1


def test_a_parquet_file_of_more_rows_than_an_import_takes_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row count is in the file's footer: a few kilobytes can declare millions of rows
    (20 million repeated rows fit in 147 KB) that would fill the memory."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from kag import datasets_import

    monkeypatch.setattr(datasets_import, "MAX_ROWS", 1_000)
    source = tmp_path / "m.parquet"
    same = pa.array([0] * 1_001, type=pa.int32())
    pq.write_table(pa.table({"q": pa.array(["x"]).take(same), "a": pa.array(["p"]).take(same)}), source)
    result = kag("datasets", "import", source, "-o", tmp_path / "d.json", "--question", "q", "--answers", "a")
    assert result.exit_code == 2, result.output
    assert (
        result.stderr
        == f"kag: error: {source}: 1,001 rows, more than the 1,000 one import takes; split the file\n"
    )


def test_rows_past_the_cap_are_refused_in_every_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kag import datasets_import

    monkeypatch.setattr(datasets_import, "MAX_ROWS", 2)
    source = write_rows(tmp_path / "m.jsonl", MMLU)
    result = kag("datasets", "import", source, "-o", tmp_path / "d.json", *MMLU_ARGS)
    assert result.exit_code == 2
    assert f"{source}:3: more than the 2 rows one import takes" in result.stderr
    assert not (tmp_path / "d.json").exists()


def test_an_output_that_is_no_regular_file_is_refused_without_waiting(tmp_path: Path) -> None:
    """The datasets file is read, then written back: a named pipe would wait for a writer."""
    fifo = tmp_path / "d.json"
    os.mkfifo(fifo)
    source = write_rows(tmp_path / "m.jsonl", MMLU)
    # A writer, so that a reader that does wait is given an empty file instead of hanging
    # the suite; released below by a reader of its own when the import never opened it.
    writer = threading.Thread(target=lambda: os.close(os.open(fifo, os.O_WRONLY)))
    writer.start()
    try:
        result = kag("datasets", "import", source, "-o", fifo, *MMLU_ARGS)
    finally:
        release = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer.join()
        os.close(release)
    assert result.exit_code == 2
    assert (
        result.stderr
        == f"kag: error: {fifo}: not a regular file; the datasets file is read, then written back whole\n"
    )

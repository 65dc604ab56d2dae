"""kag.datasets: loading and validating the datasets file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kag.datasets import MAX_PROBLEMS, MCQ, load_datasets, name_problem, parse_datasets
from kag.errors import InputError


def write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_example_datasets_file(repo: Path):
    ds = load_datasets(repo / "examples/dataset/datasets.json")
    assert list(ds.datasets) == ["mcq-form", "pubmedqa"]
    scurvy = ds.get("mcq-form", "0")
    assert scurvy.mcq == MCQ({"a": "Vitamin A", "b": "Vitamin C", "c": "Vitamin D", "d": "Vitamin K"}, "b")
    assert scurvy.scorable
    assert ds.get("mcq-form", "2").mcq.answer is None and not ds.get("mcq-form", "2").scorable
    assert ds.get("mcq-form", "3").mcq is None  # free-form
    assert ds.get("mcq-form", "nope") is None and ds.get("nope", "0") is None
    assert ds.scorable_questions == 4
    assert len(list(ds.iter_questions())) == 6


def test_the_real_mirage_file(med_kag: Path):
    ds = load_datasets(med_kag / "datasets" / "mirage.json")
    assert {name: len(qs) for name, qs in ds.datasets.items()} == {
        "medqa": 1273, "medmcqa": 4183, "pubmedqa": 500, "bioasq": 618, "mmlu": 1089,
    }  # fmt: skip
    assert ds.scorable_questions == 7663


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "is empty"),
        (".", "is '.'"),
        ("..", "is '..'"),
        ("a/b", "contains '/'"),
        ("a\\b", "contains '\\'"),
        ("a\0b", "contains NUL"),
        ("Ünïcode name", None),  # anything else is a valid directory name
        ("UPPER_case.1", None),
        ("...", None),
    ],
)
def test_name_problem(name: str, problem: str | None):
    assert name_problem(name) == problem


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("text", "ds/1: entry must be an object"),
        ({}, "ds/1: 'input' must be a string"),
        ({"input": 3}, "ds/1: 'input' must be a string"),
        ({"input": "q", "output": "b"}, "ds/1: 'output' must be an object"),
        (
            {"input": "q", "output": {"type": "Free"}},
            "ds/1: 'output.type' must be \"MCQ\" or \"Open\" (got 'Free')",
        ),
        (
            {"input": "q", "output": {"type": "Open"}},
            "ds/1: 'output.answers' must be a non-empty array of strings",
        ),
        (
            {"input": "q", "output": {"type": "Open", "answers": []}},
            "ds/1: 'output.answers' must be a non-empty array of strings",
        ),
        (
            {"input": "q", "output": {"type": "Open", "answers": "Paris"}},
            "ds/1: 'output.answers' must be a non-empty array of strings",
        ),
        (
            {"input": "q", "output": {"type": "Open", "answers": ["Paris", 3]}},
            "ds/1: every item of 'output.answers' must be a string",
        ),
        (
            {"input": "q", "output": {"type": "MCQ", "options": {}}},
            "ds/1: 'output.options' must be a non-empty object",
        ),
        (
            {"input": "q", "output": {"type": "MCQ", "options": ["a"]}},
            "ds/1: 'output.options' must be a non-empty object",
        ),
        (
            {"input": "q", "output": {"type": "MCQ", "options": {"a": 1}}},
            "every value of 'output.options' must be a string",
        ),
        (
            {"input": "q", "output": {"type": "MCQ", "options": {"a": "x", "b": "y"}, "answer": "c"}},
            "ds/1: 'output.answer' 'c' is not one of the option keys ['a', 'b']",
        ),
        (
            {"input": "q", "output": {"type": "MCQ", "options": {"a": "x"}, "answer": "A"}},
            "ds/1: 'output.answer' 'A' is not one of the option keys ['a']",  # keys are exact
        ),
        (
            {"input": "q", "output": {"type": "MCQ", "options": {"A": "x", "b": "y", "a": "z"}}},
            "ds/1: option keys 'A' and 'a' differ only by case",
        ),
    ],
)
def test_bad_entries_are_named(tmp_path: Path, entry: object, message: str):
    path = write(tmp_path, {"ds": {"1": entry}})
    with pytest.raises(InputError) as info:
        load_datasets(path)
    text = str(info.value)
    assert text.startswith(f"{path}: 1 problem(s) in the datasets file:")
    assert message in text


def test_all_problems_are_reported_at_once_and_capped(tmp_path: Path):
    doc = {"ds": {str(i): {"input": i} for i in range(MAX_PROBLEMS + 5)}, "a/b": {}, "other": []}
    with pytest.raises(InputError) as info:
        load_datasets(write(tmp_path, doc))
    lines = str(info.value).splitlines()
    assert lines[0].endswith(f"{MAX_PROBLEMS + 7} problem(s) in the datasets file:")
    assert len(lines) == 1 + MAX_PROBLEMS + 1
    assert lines[-1] == "  ... and 7 more"


def test_file_level_errors(tmp_path: Path):
    with pytest.raises(InputError, match="datasets file not found"):
        load_datasets(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match=f"^{bad}: not valid JSON"):
        load_datasets(bad)
    with pytest.raises(InputError, match="must be a JSON object"):
        load_datasets(write(tmp_path, ["a"]))
    with pytest.raises(InputError, match=f"^{tmp_path}: datasets file is a directory$"):
        load_datasets(tmp_path)


def test_parse_datasets_keeps_order_and_options(tmp_path: Path):
    data = (
        b'{"z": {"2": {"input": "b"}, '
        b'"1": {"input": "a", "output": {"type": "MCQ", "options": {"c": "3", "a": "1"}}}}}'
    )
    ds = parse_datasets(data, tmp_path / "x.json")
    assert list(ds.datasets["z"]) == ["2", "1"]
    assert list(ds.get("z", "1").mcq.options) == ["c", "a"]
    assert ds.scorable_questions == 0


def test_option_keys_differing_by_ascii_case_are_all_reported_within_the_cap(tmp_path: Path):
    # Only ASCII letters fold, as in grading: "É"/"é" may both be options.
    doc = {
        "ds": {
            "1": {"input": "q", "output": {"type": "MCQ", "options": {"É": "x", "é": "y"}}},
            **{
                str(i): {"input": "q", "output": {"type": "MCQ", "options": {"B": "x", "b": "y"}}}
                for i in range(2, 30)
            },
        }
    }
    with pytest.raises(InputError) as info:
        load_datasets(write(tmp_path, doc))
    lines = str(info.value).splitlines()
    assert lines[0].endswith("28 problem(s) in the datasets file:")
    assert lines[1].startswith("  ds/2: option keys 'B' and 'b' differ only by case (")
    assert "ds/1:" not in str(info.value)
    assert len(lines) == 1 + MAX_PROBLEMS + 1 and lines[-1] == "  ... and 8 more"


def test_open_answers_are_parsed_and_leave_mcq_counts_alone(tmp_path: Path):
    doc = {
        "geo": {
            "1": {
                "input": "Capital of France?",
                "output": {"type": "Open", "answers": ["Paris", "City of Paris"]},
            },
            "2": {"input": "2+2?", "output": {"type": "MCQ", "options": {"a": "4", "b": "5"}, "answer": "a"}},
            "3": {"input": "Say hi"},
        }
    }
    loaded = load_datasets(write(tmp_path, doc))
    first = loaded.get("geo", "1")
    assert first is not None and first.mcq is None
    assert first.open is not None and first.open.answers == ("Paris", "City of Paris")
    assert not first.scorable  # the strict MCQ grade does not apply to it
    second = loaded.get("geo", "2")
    assert second is not None and second.open is None and second.scorable
    assert loaded.scorable_questions == 1


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({".secret-set": {"1": {"input": "q"}}}, "dataset name '.secret-set' starts with '.'"),
        ({".kag-judge": {"1": {"input": "q"}}}, "dataset name '.kag-judge' starts with '.'"),
        ({"ds": {".hidden": {"input": "q"}}}, "ds: question id '.hidden' starts with '.'"),
    ],
)
def test_names_starting_with_a_dot_are_refused(tmp_path: Path, doc: dict, message: str):
    """A result tree's hidden folders are never graded (and .kag-judge is the judge's cache)."""
    path = write(tmp_path, doc)
    with pytest.raises(InputError) as info:
        load_datasets(path)
    text = str(info.value)
    assert text.startswith(f"{path}: 1 problem(s) in the datasets file:")
    assert message in text and "never graded" in text


def test_a_dot_inside_a_name_is_fine(tmp_path: Path):
    loaded = load_datasets(write(tmp_path, {"v1.2": {"q.1": {"input": "q"}, "x...": {"input": "q"}}}))
    assert list(loaded.datasets["v1.2"]) == ["q.1", "x..."]


def test_stats_refuses_a_hidden_dataset_name_with_exit_2(tmp_path: Path):
    from typer.testing import CliRunner

    from kag.cli import app

    path = write(tmp_path, {"ds": {"1": {"input": "q"}}, ".secret-set": {"1": {"input": "q"}}})
    (tmp_path / "results").mkdir()
    result = CliRunner().invoke(app, ["stats", "-d", str(path), "-r", str(tmp_path / "results")])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"kag: error: {path}: 1 problem(s) in the datasets file:")
    assert "dataset name '.secret-set' starts with '.'" in result.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{\n "ds": {"1": {"input": "a"}},\n "other": {},\n "ds": {"2": {"input": "b"}}\n}',
            ":4: dataset 'ds' is written twice (first at line 2)",
        ),
        (
            '{"ds": {\n "1": {"input": "a"},\n "1": {"input": "b"}\n}}',
            ":3: question id '1' of dataset 'ds' is written twice (first at line 2)",
        ),
        (
            '{"ds": {"1": {"input": "a",\n "output": {"type": "MCQ", "options": {"a": "x",\n "a": "y"}}}}}',
            ":3: key 'a' of ds/1/output/options is written twice (first at line 2)",
        ),
        # The same text inside a string is no key: only the real pair is named.
        (
            '{"ds": {"1": {"input": "\\"1\\": {"},\n "1": {"input": "b"}}}',
            ":2: question id '1' of dataset 'ds'",
        ),
    ],
)
def test_a_key_written_twice_is_refused_naming_its_line(tmp_path: Path, text: str, message: str):
    """A JSON reader keeps the last of two equal keys: the questions of the other would be
    graded as absent, and written back without them by `kag datasets import`."""
    path = tmp_path / "datasets.json"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_datasets(path)
    assert str(info.value).startswith(f"{path}{message}")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"ds": {"1": {"input": "a", "n": NaN}}}', "NaN is not a JSON number"),
        ('{"ds": {"1": {"input": "a", "n": ' + "1" * 5000 + "}}}", "out of the 64-bit range"),
        ('{"ds": {"\\ud800": {"input": "a"}}}', "surrogate"),
        ("[" * 100_000, "nested too deeply"),
        (b'{"ds": {"\xe9": {"input": "a"}}}', ":1: not valid JSON: not UTF-8 text (byte 9)"),
    ],
)
def test_json_a_file_name_could_not_hold_is_refused(tmp_path: Path, text: str | bytes, message: str):
    path = tmp_path / "datasets.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(InputError, match=f"^{path}") as info:
        load_datasets(path)
    assert message in str(info.value)


@pytest.mark.parametrize("key", ["", " "])
def test_an_empty_option_key_is_refused(tmp_path: Path, key: str):
    """An empty reply would be "extracted" as the key "" and graded correct."""
    path = write(
        tmp_path,
        {"ds": {"1": {"input": "q", "output": {"type": "MCQ", "options": {key: ""}, "answer": key}}}},
    )
    with pytest.raises(InputError) as info:
        load_datasets(path)
    assert f"ds/1: option key {key!r} is empty" in str(info.value)


def test_the_garbage_collector_is_off_while_a_file_loads_and_as_it_was_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    import kag.datasets_entries

    seen: list[bool] = []
    real = kag.datasets_entries._parse_entry

    def spy(*args: object) -> object:
        seen.append(gc.isenabled())
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(kag.datasets_entries, "_parse_entry", spy)
    good = write(
        tmp_path,
        {"d": {"1": {"input": "q", "output": {"type": "MCQ", "options": {"a": "x"}, "answer": "a"}}}},
    )
    assert gc.isenabled()
    assert load_datasets(good).get("d", "1") is not None
    assert seen == [False] and gc.isenabled()
    with pytest.raises(InputError):
        bad = tmp_path / "bad"
        bad.mkdir()
        load_datasets(write(bad, {"d": {"1": {"input": 3}}}))
    assert gc.isenabled()
    gc.disable()
    try:
        load_datasets(good)
        assert not gc.isenabled()  # a caller's choice is left alone
    finally:
        gc.enable()

"""`kag irt2` end to end on the hand-made dataset in tests/data/irt2 (see its README.md).

Expected numbers are built here from per-target ranks worked out by hand (comments say
why each rank is what it is), averaged the way the reference does: the exact mean of
the float values ``1 / rank`` (``statistics.mean``), micro over (query, target) pairs,
macro over queries. Every number below was also cross-checked, while developing,
against the reference evaluator (PyPI irt2 1.1.0, ``RankEvaluator.compute_metrics``,
with the JSON Lines file converted to its CSV format): all equal bit for bit. The
tests do not import irt2.
"""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from tests.conftest import TEST_DATA
from tests.conftest import run_irt2 as run_on

DATA = TEST_DATA / "irt2"
DATASET = DATA / "dataset"
PRED = DATA / "predictions"

Ranks = dict[tuple[int, int], list[float]]  # query -> ranks of its gold targets (0 = miss)

# Linking, test split, mode original, ties first, no cut below rank 4.
LINKING_HEAD: Ranks = {
    # row sorted: 9 (.9), 1 (.7), 8 (.6), 3 (.5), 5 (.2), 2 (.1); gold {1, 3, 5}:
    # 1 -> 1 + |{9}| = 2; 3 -> 1 + |{9, 8}| = 3 (gold 1 filtered); 5 -> 3 (gold 1, 3 filtered)
    (100, 0): [2, 3, 3],
    # 7 (.9) first; 4, 2, 6, 0 tie at .5 and keep row order: gold 2 is third
    (101, 0): [3],
    # gold {4} (vertex 8 is dropped by mode original, so 8 is a competitor): 8 (.9), 0 (.85), 4 (.8)
    (102, 1): [3],
    (103, 1): [0],  # no row for this query
    (104, 0): [0],  # gold 7 is not in the row
    (105, 1): [4],  # 3 (.9), 3 again (.8: a repeated non-gold candidate takes two places), 1 (.75), 0 (.7)
    (106, 1): [1],
}
LINKING_TAIL: Ranks = {
    (100, 0): [2],  # 2 (.9) before 3 (.1)
    (105, 0): [2, 2],  # 1 (.5), then gold 7 and 6 tie at .4; the other gold target is filtered
    (106, 0): [2],  # 4, 3, 5 all at .7: gold 3 is second in row order
}


def expected(head: Ranks, tail: Ranks, ks: tuple[int, ...] = (1, 10, 100)) -> dict:  # type: ignore[type-arg]
    def metrics(queries: list[list[float]]) -> dict:  # type: ignore[type-arg]
        def per_target(k: int | None):  # type: ignore[no-untyped-def]
            if k is None:
                return lambda r: 1 / r if r else 0.0
            return lambda r: 1.0 if 0 < r <= k else 0.0

        out: dict[str, dict[str, float]] = {"micro": {}, "macro": {}}
        for name, k in [("mrr", None), *((f"hits_at_{k}", k) for k in ks)]:
            f = per_target(k)
            pairs = [f(r) for q in queries for r in q]
            out["micro"][name] = statistics.mean(pairs) if pairs else 0.0
            means = [statistics.mean(f(r) for r in q) for q in queries]
            out["macro"][name] = statistics.mean(means) if means else 0.0
        return out

    h, t = list(head.values()), list(tail.values())
    return {"head": metrics(h), "tail": metrics(t), "all": metrics(h + t)}


def run(*args: str | Path):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["irt2", *map(str, args)])


def run_json(*args: str | Path, task: str = "linking", split: str = "test") -> dict:  # type: ignore[type-arg]
    result = run_on(*args, "--format", "json", task=task, split=split)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def metrics_of(document: dict) -> dict:  # type: ignore[type-arg]
    return {side: document[side] for side in ("head", "tail", "all")}


LINKING = ("--head", PRED / "linking-head.csv", "--tail", PRED / "linking-tail.csv")


def test_linking_original_default() -> None:
    document = run_json(*LINKING)
    assert metrics_of(document) == expected(LINKING_HEAD, LINKING_TAIL)
    # The same numbers as fractions worked out on paper (9 + 4 targets, 7 + 3 queries):
    assert document["all"]["micro"]["mrr"] == pytest.approx(61 / 156, abs=1e-15)
    assert document["all"]["macro"]["mrr"] == pytest.approx(137 / 360, abs=1e-15)
    assert document["head"]["micro"]["mrr"] == pytest.approx(37 / 108, abs=1e-15)
    assert document["head"]["macro"]["mrr"] == pytest.approx(83 / 252, abs=1e-15)
    assert document["all"]["micro"]["hits_at_1"] == 1 / 13
    assert document["all"]["micro"]["hits_at_10"] == 11 / 13
    assert document["tail"]["micro"] == {"mrr": 0.5, "hits_at_1": 0.0, "hits_at_10": 1.0, "hits_at_100": 1.0}


def test_ground_truth_and_counts_in_json() -> None:
    document = run_json(*LINKING)
    assert document["ground_truth"] == {
        "dataset": "IRT2/HAND",
        "path": str(DATASET),
        "task": "linking",
        "split": "test",
        "mode": "original",
        "samples_dropped": 3,
        "head": {"file": "open.test-tail.txt", "queries": 7, "targets": 9},
        "tail": {"file": "open.test-head.txt", "queries": 3, "targets": 4},
    }
    assert document["scoring"]["max_rank"] == 100
    assert document["scoring"]["ks"] == [1, 10, 100]
    assert document["scoring"]["ties"] == "first"
    head = document["scoring"]["head"]
    assert (head["rows"], head["queries_without_row"], head["targets_found"]) == (6, 1, 7)
    assert (head["targets_cut"], head["tie_dependent"]) == (0, 1)
    assert document["scoring"]["tail"]["tie_dependent"] == 1  # (106, 0): 4, 3, 5 tie


def test_kgc_is_linking() -> None:
    assert run_json(*LINKING, task="kgc") == run_json(*LINKING, task="linking") | {
        "ground_truth": run_json(*LINKING, task="kgc")["ground_truth"]
    }
    assert run_json(*LINKING, task="kgc")["ground_truth"]["task"] == "linking"


def test_max_rank_cuts_on_the_filtered_rank() -> None:
    # Gold 3 and 5 of (100, 0) have raw ranks 4 and 5 but filtered rank 3: kept with --max-rank 3.
    # Gold 0 of (105, 1) has filtered rank 4: cut to a miss.
    head = LINKING_HEAD | {(105, 1): [0]}
    document = run_json(*LINKING, "--max-rank", "3")
    assert metrics_of(document) == expected(head, LINKING_TAIL)
    assert document["scoring"]["head"]["targets_cut"] == 1
    assert document["scoring"]["max_rank"] == 3


def test_max_rank_none() -> None:
    document = run_json(*LINKING, "--max-rank", "none")
    assert metrics_of(document) == expected(LINKING_HEAD, LINKING_TAIL)
    assert document["scoring"]["max_rank"] is None


def test_mode_full_keeps_open_world_vertices() -> None:
    head = LINKING_HEAD | {
        (100, 1): [0],  # gold 9 only exists in full mode, and the query has no row
        (102, 1): [2, 1],  # gold {4, 8}: 8 (.9) first; 4 after 0 (.85) with 8 filtered
    }
    tail = LINKING_TAIL | {(101, 1): [0]}
    document = run_json(*LINKING, "--mode", "full")
    assert metrics_of(document) == expected(head, tail)
    assert document["ground_truth"]["samples_dropped"] == 0
    assert document["ground_truth"]["head"]["queries"] == 8


@pytest.mark.parametrize(
    ("ties", "head_rank", "tail_rank"),
    [("first", 3, 2), ("optimistic", 2, 1), ("pessimistic", 5, 3), ("realistic", 3.5, 2)],
)
def test_ties(ties: str, head_rank: float, tail_rank: float) -> None:
    # (101, 0): 7 above; 4, 6, 0 tie with gold 2 (4 before it in the row, 6 and 0 after).
    # (106, 0): 4 and 5 tie with gold 3 (4 before, 5 after).
    head = LINKING_HEAD | {(101, 0): [head_rank]}
    tail = LINKING_TAIL | {(106, 0): [tail_rank]}
    document = run_json(*LINKING, "--ties", ties, "--ks", "1,3,10")
    assert metrics_of(document) == expected(head, tail, ks=(1, 3, 10))


def test_ranking_with_jsonl_and_gzip() -> None:
    head: Ranks = {
        (3, 0): [2, 2],  # 101 (3.0), 106 (2.0), 100 (1.0): 100 has 106 filtered
        (6, 0): [1],  # 105 and 104 tie at .1; 105 is first in the row
        (7, 0): [0],  # no row
    }
    tail: Ranks = {
        (0, 1): [5],  # 104, 103, 102, 101 score 4, 3, 2, 1; gold 105 scores 0
        (1, 0): [1],
        (2, 0): [0],  # gold 101 is not in the row
        (3, 0): [2],
        (4, 1): [0],
        (5, 0): [0],
        (5, 1): [0],
        (6, 1): [0],
        (7, 0): [0],
    }
    args = ("--head", PRED / "ranking-head.jsonl", "--tail", PRED / "ranking-tail.csv.gz")
    document = run_json(*args, task="ranking")
    assert metrics_of(document) == expected(head, tail)
    assert document["all"]["micro"]["mrr"] == pytest.approx(37 / 130, abs=1e-15)
    assert document["all"]["macro"]["mrr"] == pytest.approx(4 / 15, abs=1e-15)


def test_validation_split_and_an_empty_file() -> None:
    # Head (110, 1): 5 (.6) before gold 4 (.3). The tail file is empty: every target is a miss.
    document = run_json(
        "--head", PRED / "validation-head.csv", "--tail", PRED / "empty.csv", split="validation"
    )
    assert metrics_of(document) == expected({(110, 1): [2]}, {(110, 0): [0]})
    assert document["scoring"]["tail"]["rows"] == 0
    assert document["scoring"]["tail"]["queries_without_row"] == 1


def test_both_files_empty() -> None:
    document = run_json("--head", PRED / "empty.csv", "--tail", PRED / "empty.csv")
    zero = {"mrr": 0.0, "hits_at_1": 0.0, "hits_at_10": 0.0, "hits_at_100": 0.0}
    assert metrics_of(document) == {side: {"micro": zero, "macro": zero} for side in ("head", "tail", "all")}


def test_gzip_gives_the_same_numbers(tmp_path: Path) -> None:
    packed = tmp_path / "linking-head.csv.gz"
    packed.write_bytes(gzip.compress((PRED / "linking-head.csv").read_bytes()))
    document = run_json("--head", packed, "--tail", PRED / "linking-tail.csv")
    assert metrics_of(document) == expected(LINKING_HEAD, LINKING_TAIL)


def test_default_ks_are_the_papers_hits_at_1_10_100() -> None:
    document = run_json(*LINKING)
    for side in ("all", "head", "tail"):
        for average in ("micro", "macro"):
            assert list(document[side][average]) == ["mrr", "hits_at_1", "hits_at_10", "hits_at_100"]


def test_ks_are_deduplicated_in_order() -> None:
    document = run_json(*LINKING, "--ks", "5,1,5")
    assert list(document["all"]["micro"]) == ["mrr", "hits_at_5", "hits_at_1"]
    assert document["all"]["micro"] == expected(LINKING_HEAD, LINKING_TAIL, ks=(5, 1))["all"]["micro"]


def test_ks_repeat_as_well_as_take_commas() -> None:
    repeated = run_json(*LINKING, "--ks", "5", "--ks", "1,5")
    assert list(repeated["all"]["micro"]) == ["mrr", "hits_at_5", "hits_at_1"]
    assert repeated == run_json(*LINKING, "--ks", "5,1,5")


def test_text_report() -> None:
    result = run_on(*LINKING)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["mrr", "hits@1", "hits@10", "hits@100"]
    assert lines[1].split() == [
        "all.micro", f"{61 / 156:.4f}", f"{1 / 13:.4f}", f"{11 / 13:.4f}", f"{11 / 13:.4f}",
    ]  # fmt: skip
    assert [line.split()[0] for line in lines[1:7]] == [
        "all.micro", "all.macro", "head.micro", "head.macro", "tail.micro", "tail.macro",
    ]  # fmt: skip
    text = result.stdout
    assert f"ground truth: IRT2/HAND ({DATASET}), task linking, split test, mode original" in text
    assert "scoring: max rank 100, ties first" in text
    assert "mode original dropped 3 open-world samples" in text
    head_row = next(line for line in lines if line.startswith("head "))
    assert head_row.split()[:8] == ["head", "7", "9", "6", "1", "7", "0", "1"]
    assert "2 targets have a rank that depends on the order of equal scores" in text
    assert result.stderr == ""


def test_per_query_file(tmp_path: Path) -> None:
    out = tmp_path / "per-query.jsonl"
    result = run_on(*LINKING, "--per-query", out, "--max-rank", "3")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 9 + 4
    assert records[0] == {
        "side": "head",
        "query": [100, 0],
        "target": 1,
        "raw_rank": 2,
        "filtered_rank": 2,
        "rank": 2,
    }
    assert records[2] == {
        "side": "head",
        "query": [100, 0],
        "target": 5,
        "raw_rank": 5,
        "filtered_rank": 3,
        "rank": 3,
    }
    cut = next(r for r in records if r["query"] == [105, 1])
    assert (cut["raw_rank"], cut["filtered_rank"], cut["rank"]) == (4, 4, 0)
    missing = next(r for r in records if r["query"] == [104, 0])
    assert (missing["raw_rank"], missing["filtered_rank"], missing["rank"]) == (0, 0, 0)
    assert [r["side"] for r in records].count("tail") == 4


def test_per_query_file_realistic_ranks_are_numbers(tmp_path: Path) -> None:
    out = tmp_path / "pq.jsonl"
    result = run_on(*LINKING, "--per-query", out, "--ties", "realistic")
    assert result.exit_code == 0, result.stderr
    record = next(json.loads(line) for line in out.read_text().splitlines() if '"query":[101,0]' in line)
    assert record["filtered_rank"] == 3.5


# ------------------------------------------------------------------ bad input: exit 2


def bad_file(tmp_path: Path, text: str, name: str = "head.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD = "100,0,1,0.5\n"
MALFORMED = [
    (GOOD + "101,0,2,0.5,3\n", 2, "odd number of fields (5); a row is ent,rid followed by cand,score pairs"),
    (GOOD + "101,0,2,0.5,\n", 2, "trailing comma"),
    (GOOD + "101,0\n", 2, "row without a (candidate, score) pair"),
    (GOOD + "\n101,0,2,0.5\n", 2, "blank line"),
    (
        "mid,rid,vid,score\n" + GOOD,
        1,
        "field 1: not an integer id: 'mid' (prediction files have no header line)",
    ),
    (GOOD + "101,0,2.5,0.5\n", 2, "field 3: not an integer id: '2.5'"),
    (GOOD + "101,0,2,abc\n", 2, "field 4: score is not a number: 'abc'"),
    (GOOD + "101,0,2,nan\n", 2, "field 4: score is NaN"),
    (
        GOOD + "999,0,2,0.5\n",
        2,
        "query (999, 0) is not in the ground truth of linking test head (mode original)",
    ),
    (
        GOOD + "100,1,9,0.5\n",
        2,
        "query (100, 1) is not in the ground truth of linking test head (mode original)",
    ),
    (GOOD + "101,0,2,0.5\n100,0,1,0.5\n", 3, "query (100, 0) appears twice (first on line 1)"),
    (GOOD + "101,0,2,0.5,7,0.1,2,0.3\n", 2, "gold candidate 2 appears twice in the row of query (101, 0)"),
]


@pytest.mark.parametrize(("text", "line", "message"), MALFORMED)
def test_malformed_predictions_exit_2_with_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    head = bad_file(tmp_path, text)
    result = run_on("--head", head, "--tail", PRED / "linking-tail.csv")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"kag: error: {head}:{line}: {message}\n"


def test_malformed_tail_file_is_named(tmp_path: Path) -> None:
    tail = bad_file(tmp_path, "100,0,3,0.1\n100,0,3,0.2\n", "tail.csv")
    result = run_on("--head", PRED / "linking-head.csv", "--tail", tail)
    assert result.exit_code == 2
    assert result.stderr == f"kag: error: {tail}:2: query (100, 0) appears twice (first on line 1)\n"


def test_malformed_dataset_file(tmp_path: Path) -> None:
    folder = Path(shutil.copytree(DATASET, tmp_path / "ds"))
    with (folder / "open.test-head.txt").open("a") as out:
        out.write("107|0\n")
    result = run_on(*LINKING, dataset=folder)
    assert result.exit_code == 2
    assert (
        result.stderr
        == f"kag: error: {folder}/open.test-head.txt:7: expected 3 fields separated by '|', found 2\n"
    )


def _copy_with(tmp_path: Path, name: str, content: bytes | None) -> Path:
    """A copy of the test dataset whose file ``name`` is replaced by a folder (None) or ``content``."""
    folder = Path(shutil.copytree(DATASET, tmp_path / "ds"))
    (folder / name).unlink()
    if content is None:
        (folder / name).mkdir()
    else:
        (folder / name).write_bytes(content)
    return folder


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("config.yaml", None, ": IRT2 dataset configuration is a directory"),
        ("closed.train-triples.txt", None, ": IRT2 dataset file is a directory"),
        ("open.test-head.txt", None, ": IRT2 dataset file is a directory"),
        (
            "config.yaml",
            b"create:\n  name: \xff\n",
            ":2: IRT2 dataset configuration is not UTF-8 text (byte 16)",
        ),
    ],
)
def test_dataset_file_that_cannot_be_read_is_one_clean_line(
    tmp_path: Path, name: str, content: bytes | None, reason: str
) -> None:
    folder = _copy_with(tmp_path, name, content)
    result = run_on(*LINKING, dataset=folder)
    assert result.exit_code == 2
    assert result.stdout == ""
    # the path once, the reason once: no "[Errno 21] Is a directory: '...'" repeating both
    assert result.stderr == f"kag: error: {folder / name}{reason}\n"


def test_prediction_and_per_query_paths_that_are_folders(tmp_path: Path) -> None:
    head = run_on("--head", tmp_path, *LINKING[2:])
    assert head.exit_code == 2
    assert head.stderr == f"kag: error: {tmp_path}: predictions file is a directory\n"
    per_query = run_on(*LINKING, "--per-query", tmp_path)
    assert per_query.exit_code == 2
    assert per_query.stdout == ""
    assert per_query.stderr == f"kag: error: {tmp_path}: is a directory, expected a file\n"
    nowhere = tmp_path / "no" / "such" / "folder.jsonl"
    missing = run_on(*LINKING, "--per-query", nowhere)
    assert missing.exit_code == 2
    assert missing.stderr == f"kag: error: {nowhere}: cannot write: No such file or directory\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "kgcx"], "--task must be one of linking, kgc, ranking; got 'kgcx'"),
        (["--split", "train"], "--split must be one of validation, test; got 'train'"),
        (["--mode", "half"], "--mode must be one of original, full; got 'half'"),
        (["--max-rank", "0"], "--max-rank must be a positive integer or 'none', got '0'"),
        (["--max-rank", "ten"], "--max-rank must be a positive integer or 'none', got 'ten'"),
        (["--ks", "1,0"], "--ks must be comma-separated positive integers, got '1,0'"),
        (
            ["--ties", "random"],
            "--ties must be one of first, optimistic, pessimistic, realistic; got 'random'",
        ),
        (["--format", "yaml"], "--format must be one of text, json; got 'yaml'"),
        (["--head", "/nonexistent/head.csv"], "/nonexistent/head.csv: predictions file not found"),
        (["--dataset", "/nonexistent"], "/nonexistent: not a directory (expected an IRT2 dataset folder)"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    base = {
        "--dataset": str(DATASET),
        "--task": "linking",
        "--split": "test",
        "--head": str(PRED / "linking-head.csv"),
        "--tail": str(PRED / "linking-tail.csv"),
    }
    base.update(dict(zip(args[0::2], args[1::2])))
    result = run(*[part for pair in base.items() for part in pair])
    assert result.exit_code == 2
    assert result.stderr == f"kag: error: {message}\n"
    assert result.stdout == ""


def test_missing_required_option_exits_2() -> None:
    result = run_on("--head", PRED / "empty.csv")
    assert result.exit_code == 2
    assert "--tail" in result.stderr


def test_per_query_to_a_named_pipe_is_written_in_place(tmp_path: Path) -> None:
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = run_on(*LINKING, "--per-query", fifo)
    reader.join(timeout=30)
    assert result.exit_code == 0, result.stderr
    assert len(received[0].splitlines()) == 13
    assert fifo.is_fifo()  # not replaced by a regular file

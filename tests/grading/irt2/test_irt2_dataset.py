"""IRT2 dataset folders: config, id files, ground truth per task/split/side/mode."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kag.errors import InputError
from kag.grading.irt2.io.dataset import GroundTruth, load_truth, read_config, read_id_rows
from kag.grading.irt2.model import Mode, Side, Split, Task
from tests.conftest import TEST_DATA
from tests.grading.irt2.conftest import write as write_file

DATASET = TEST_DATA / "irt2" / "dataset"


def gold(truth: GroundTruth) -> dict[tuple[int, int], list[int]]:
    return {
        (int(e), int(r)): truth.targets[truth.ptr[i] : truth.ptr[i + 1]].tolist()
        for i, (e, r) in enumerate(zip(truth.entity, truth.relation))
    }


def test_config() -> None:
    config = read_config(DATASET)
    assert (config.name, config.separator) == ("IRT2/HAND", "|")


def test_linking_original() -> None:
    # open.test-tail.txt feeds the head side: (mid, rid) -> head vids; vids 8 and 9 are in
    # no closed-world triple, so mode original drops (102,1,8), (100,1,9) and (101,1,9);
    # the repeated sample 100|0|3 counts once.
    truth = load_truth(DATASET, Task.LINKING, Split.TEST, Mode.ORIGINAL)
    assert truth.head.source.name == "open.test-tail.txt"
    assert gold(truth.head) == {
        (100, 0): [1, 3, 5],
        (101, 0): [2],
        (102, 1): [4],
        (103, 1): [6],
        (104, 0): [7],
        (105, 1): [0],
        (106, 1): [5],
    }
    assert truth.tail.source.name == "open.test-head.txt"
    assert gold(truth.tail) == {(100, 0): [3], (105, 0): [6, 7], (106, 0): [3]}
    assert truth.samples_dropped == 3
    assert (truth.head.queries, truth.head.pairs, truth.tail.queries, truth.tail.pairs) == (7, 9, 3, 4)


def test_linking_full_keeps_open_world_vertices() -> None:
    truth = load_truth(DATASET, Task.LINKING, Split.TEST, Mode.FULL)
    head, tail = gold(truth.head), gold(truth.tail)
    assert head[(102, 1)] == [4, 8]
    assert head[(100, 1)] == [9]
    assert tail[(101, 1)] == [9]
    assert truth.samples_dropped == 0
    assert (truth.head.queries, truth.head.pairs, truth.tail.queries, truth.tail.pairs) == (8, 11, 4, 5)


def test_ranking_original() -> None:
    # Ranking: head side from *-head.txt, (vid, rid) -> head mids; tail side from *-tail.txt.
    truth = load_truth(DATASET, Task.RANKING, Split.TEST, Mode.ORIGINAL)
    assert gold(truth.head) == {(3, 0): [100, 106], (6, 0): [105], (7, 0): [105]}
    assert gold(truth.tail) == {
        (0, 1): [105],
        (1, 0): [100],
        (2, 0): [101],
        (3, 0): [100],
        (4, 1): [102],
        (5, 0): [100],
        (5, 1): [106],
        (6, 1): [103],
        (7, 0): [104],
    }


def test_validation_split() -> None:
    truth = load_truth(DATASET, Task.LINKING, Split.VALIDATION, Mode.ORIGINAL)
    assert gold(truth.head) == {(110, 1): [4]}
    assert gold(truth.tail) == {(110, 0): [2]}
    assert truth.samples_dropped == 1


def test_lookup() -> None:
    truth = load_truth(DATASET, Task.LINKING, Split.TEST, Mode.ORIGINAL).head
    found = truth.lookup(np.array([100, 106, 100, 999, -5]), np.array([0, 1, 1, 0, 0]))
    assert found.tolist() == [0, 6, -1, -1, -1]


def test_lookup_with_spread_out_ids_uses_the_exact_fallback() -> None:
    big = 2**62
    truth = GroundTruth.from_pairs(Side.HEAD, [-big, big, 0], [0, 0, 2**40], [1, 2, 3])
    found = truth.lookup(np.array([big, -big, 0, 0]), np.array([0, 0, 2**40, 1]))
    assert found.tolist() == [2, 0, 1, -1]


def test_from_pairs_groups_and_drops_repeats() -> None:
    truth = GroundTruth.from_pairs(Side.TAIL, [5, 1, 5, 5, 1], [0, 2, 0, 1, 2], [9, 3, 4, 4, 3])
    assert gold(truth) == {(1, 2): [3], (5, 0): [4, 9], (5, 1): [4]}
    assert truth.ptr.tolist() == [0, 1, 3, 4]


# ----------------------------------------------------------------------- id files


def write(tmp_path: Path, text: str | bytes, name: str = "ids.txt") -> Path:
    return write_file(tmp_path, text, name)


def test_id_rows_comments_whitespace_and_escapes(tmp_path: Path) -> None:
    path = write(tmp_path, "# head|tail|rid\n 1 | 2|3\n#another comment\n4|5|6\r\n\\x37|8|9")
    assert read_id_rows(path, "|", 3).tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]


def test_id_rows_empty_file(tmp_path: Path) -> None:
    assert read_id_rows(write(tmp_path, "# only a comment\n"), "|", 3).shape == (0, 3)
    assert read_id_rows(write(tmp_path, ""), "|", 3).shape == (0, 3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1|2|3\n\n4|5|6\n", r"ids.txt:2: blank line"),
        ("1|2|3\n4|5\n", r"ids.txt:2: expected 3 fields separated by '\|', found 2"),
        ("1|2|3\n4|5|6|7\n", r"ids.txt:2: expected 3 fields separated by '\|', found 4"),
        ("mid|rid|vid\n", r"ids.txt:1: not an integer id: 'mid'"),
        ("# c\n1|2.0|3\n", r"ids.txt:2: not an integer id: '2.0'"),
        ("1|2|99999999999999999999\n", r"ids.txt:1: id 99999999999999999999 is out of the 64-bit range"),
        ("1|2|\\xZZ\n", r"ids.txt:1: cannot decode line"),
    ],
)
def test_id_rows_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_id_rows(write(tmp_path, text), "|", 3)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(*[st.integers(-(10**12), 10**12)] * 3), max_size=20),
    st.sampled_from(["{}|{}|{}", " {} | {} |{}", "+{}|{}|{}", "{}|{}|{}\r"]),
    st.booleans(),
)
def test_id_rows_fast_and_line_by_line_paths_agree(
    rows: list[tuple[int, ...]], spelling: str, comment: bool
) -> None:
    # "+1" is valid for int() but not JSON: that file takes the line-by-line path.
    import tempfile

    if spelling.startswith("+"):
        rows = [tuple(abs(v) for v in row) for row in rows]
    text = ("# header\n" if comment else "") + "".join(spelling.format(*row) + "\n" for row in rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), text)
        assert read_id_rows(path, "|", 3).tolist() == [list(row) for row in rows]


# ------------------------------------------------------------------------- config


def copy_dataset(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DATASET, tmp_path / "ds"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("create: [1, 2\n", r"config.yaml:\d+: invalid YAML"),
        ("name: x\n", r"config.yaml: missing mapping 'create'"),
        ("create:\n  separator: '|'\n", r"config.yaml: 'create.name' must be a non-empty string"),
        ("create:\n  name: X\n", r"config.yaml: 'create.separator' must be a non-empty string"),
    ],
)
def test_config_errors(tmp_path: Path, text: str, message: str) -> None:
    folder = copy_dataset(tmp_path)
    (folder / "config.yaml").write_text(text)
    with pytest.raises(InputError, match=message):
        read_config(folder)


def test_missing_folder_and_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a directory"):
        read_config(tmp_path / "nope")
    with pytest.raises(
        InputError,
        match=r"config.yaml: IRT2 dataset configuration not found \(is .* an IRT2 dataset folder\?\)$",
    ):
        read_config(tmp_path)
    folder = copy_dataset(tmp_path)
    (folder / "open.test-head.txt").unlink()
    with pytest.raises(InputError, match=r"open.test-head.txt: IRT2 dataset file not found"):
        load_truth(folder, Task.LINKING, Split.TEST, Mode.FULL)
    (folder / "closed.train-triples.txt").unlink()
    with pytest.raises(InputError, match=r"closed.train-triples.txt: IRT2 dataset file not found"):
        load_truth(folder, Task.LINKING, Split.TEST, Mode.ORIGINAL)


def test_other_separator(tmp_path: Path) -> None:
    folder = copy_dataset(tmp_path)
    (folder / "config.yaml").write_text('create:\n  name: TAB\n  separator: "\\t"\n')
    for path in folder.glob("*.txt"):
        path.write_text(path.read_text().replace("|", "\t"))
    truth = load_truth(folder, Task.LINKING, Split.TEST, Mode.ORIGINAL)
    assert gold(truth.tail) == {(100, 0): [3], (105, 0): [6, 7], (106, 0): [3]}

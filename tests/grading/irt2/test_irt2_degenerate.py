"""`kag irt2` on degenerate input: a config nested past the YAML parser, a line past the cap."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kag.errors import InputError
from kag.grading.irt2.io.files import MAX_LINE_BYTES, iter_line_blocks
from tests.conftest import TEST_DATA, run_irt2

DATA = TEST_DATA / "irt2"
DATASET = DATA / "dataset"
PRED = DATA / "predictions"


def test_a_config_nested_past_the_yaml_parser_is_exit_2_naming_the_file(tmp_path: Path) -> None:
    folder = Path(shutil.copytree(DATASET, tmp_path / "ds"))
    (folder / "config.yaml").write_text("create: " + "[" * 5000 + "]" * 5000 + "\n")
    result = run_irt2(
        "--head", PRED / "linking-head.csv", "--tail", PRED / "linking-tail.csv", dataset=folder
    )
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"kag: error: {folder / 'config.yaml'}: invalid YAML: nested too deeply\n"


def test_a_prediction_line_past_the_cap_is_exit_2_naming_file_and_line(tmp_path: Path) -> None:
    head = tmp_path / "head.csv"
    row = b"101,0," + b"2,0.5," * (MAX_LINE_BYTES // 6) + b"2,0.5\n"
    head.write_bytes(b"100,0,1,0.5\n" + row)
    result = run_irt2("--head", head, "--tail", PRED / "linking-tail.csv")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"kag: error: {head}:2: the line is longer than 64 MiB\n"


@pytest.mark.parametrize("block_bytes", [1, 3, 7, 32])
def test_lines_longer_than_a_block_are_joined_and_counted(tmp_path: Path, block_bytes: int) -> None:
    path = tmp_path / "lines.txt"
    text = b"a\n" + b"b" * 50 + b"\n\nc" * 3 + b"\n" + b"d" * 40
    path.write_bytes(text)
    blocks = list(iter_line_blocks(path, "lines file", block_bytes, max_line_bytes=50))
    assert b"".join(block for _, block in blocks) == text
    offset = 0
    for first, block in blocks:
        assert first == text[:offset].count(b"\n") + 1
        offset += len(block)
    assert all(block.endswith(b"\n") for _, block in blocks[:-1])
    with pytest.raises(InputError, match=r"lines\.txt:2: the line is longer than 49 bytes"):
        list(iter_line_blocks(path, "lines file", block_bytes, max_line_bytes=49))

"""The ``pycon`` examples of docs/python.md run as doctests, from a copy of ``examples/``."""

from __future__ import annotations

import doctest
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO

DOC = REPO / "docs" / "python.md"


def test_the_python_api_examples_print_what_the_page_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pandas")
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(
        r"^```pycon\n(.*?)^```$", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL
    )
    text = "\n".join(blocks)  # a blank line ends each block's last expected output
    parser = doctest.DocTestParser()
    test = parser.get_doctest(text, {}, "docs/python.md", str(DOC), 0)
    assert len(test.examples) >= 10  # the page's examples were found
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    output: list[str] = []
    runner.run(test, out=output.append)
    assert runner.failures == 0, "".join(output)
    assert os.getcwd() == str(tmp_path)

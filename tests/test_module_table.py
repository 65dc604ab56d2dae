"""The module table of docs/architecture.md is the one ``tests/module_table.py`` generates."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.module_table import BEGIN, DOC, END, regenerate, summary, table


def test_the_module_table_is_fresh() -> None:
    current = DOC.read_text(encoding="utf-8")
    assert regenerate(current) == current, "docs/architecture.md: the module table is stale: run make docs"


def test_a_row_is_the_first_sentence_of_the_docstring_in_markdown(tmp_path: Path) -> None:
    package = tmp_path / "kag"
    package.mkdir()
    (package / "__init__.py").write_text('"""The package. More."""\n')
    (package / "walk.py").write_text(
        '"""Walk the :class:`Tree` with ``iter_units``, a | b.\n\nThe details, not shown."""\n'
    )
    assert summary(package / "walk.py") == "Walk the `Tree` with `iter_units`, a \\| b."
    assert table(package).splitlines()[2:] == [
        "| `kag/__init__.py` | The package. |",
        "| `kag/walk.py` | Walk the `Tree` with `iter_units`, a \\| b. |",
    ]
    text = f"# Title\n\n{BEGIN}\nold rows\n{END}\nafter\n"
    assert regenerate(text, package) == f"# Title\n\n{BEGIN}\n\n{table(package)}\n{END}\nafter\n"


def test_a_module_without_a_docstring_is_named(tmp_path: Path) -> None:
    package = tmp_path / "kag"
    package.mkdir()
    (package / "bare.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="bare.py: no module docstring"):
        table(package)

"""Every command's output, in every format, is byte-identical to the stored golden.

The cases and how they run are in ``tests/golden/cases.py``; ``python tests/golden/record.py``
regenerates the goldens after an intended change.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from tests.golden.cases import CASES, GOLDEN, MED_KAG_DATASETS, Case, golden_dir, run


def describe(name: str, expected: bytes, actual: bytes) -> str:
    """A unified diff of one part (text), or the sizes and first differing byte (binary)."""
    try:
        old, new = expected.decode(), actual.decode()
    except UnicodeDecodeError:
        at = next((i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b), None)
        return f"{name}: {len(expected)} bytes expected, {len(actual)} got, first difference at byte {at}"
    diff = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"golden/{name}", f"actual/{name}", n=2
    )
    text = "".join(line if line.endswith("\n") else line + "\n\\ no newline at end\n" for line in diff)
    return text[:6000] + ("\n... (diff cut)" if len(text) > 6000 else "")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_golden(case: Case, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if case.med_kag and not MED_KAG_DATASETS.is_file():
        # The cases name the data by its path beside the checkout, as the goldens show it.
        pytest.skip("../shared/data/med-kag is not present")
    stored = golden_dir(case)
    assert stored.is_dir(), f"no golden for {case.name}: run python tests/golden/record.py {case.name}"
    expected = {
        p.relative_to(stored).as_posix(): p.read_bytes() for p in sorted(stored.rglob("*")) if p.is_file()
    }
    out = tmp_path / "out"
    out.mkdir()
    actual = run(case, out).parts()
    problems = [
        describe(name, expected.get(name, b"<absent>"), actual.get(name, b"<absent>"))
        for name in sorted(expected.keys() | actual.keys())
        if expected.get(name) != actual.get(name)
    ]
    assert not problems, f"{case.name}: `kag {' '.join(case.args)}` differs from its golden\n" + "\n".join(
        problems
    )


def test_every_stored_golden_has_a_case() -> None:
    """A golden left behind by a renamed or removed case would silently stop being checked."""
    names = {c.name for c in CASES}
    stored = {p.name for p in GOLDEN.iterdir() if p.is_dir() and (p / "exit_code").is_file()}
    assert stored - names == set(), "goldens without a case (delete them or restore the case)"
    assert len(names) == len(CASES), "two cases share a name"

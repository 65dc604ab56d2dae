"""Every command's output, in every format, is the stored golden: byte for byte, except that
floats agree within a relative 1e-9 (``tests/golden/compare.py``: embedding similarities differ
in the last digit from one CPU to another).

The cases and how they run are in ``tests/golden/cases.py``; ``python tests/golden/record.py``
regenerates the goldens after an intended change.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from tests.golden.cases import CASES, GOLDEN, MED_KAG_DATASETS, Case, golden_dir, run
from tests.golden.compare import same_output, split


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
        if name not in expected or name not in actual or not same_output(expected[name], actual[name])
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


EMBEDDING_JSON = b'{"id":"q4","composite":0.8902659302284242,"sim":[0.40280082563659786,1.0],"n":3}\n'


@pytest.mark.parametrize(
    ("actual", "same"),
    [
        # every float moved in its last digit (another CPU's BLAS): the same output
        (b'{"id":"q4","composite":0.890265930228424,"sim":[0.4028008256365978,1.0],"n":3}\n', True),
        (
            b'{"id":"q4","composite":0.8902659302284243,"sim":[0.40280082563659791,0.9999999999999999],"n":3}\n',
            True,
        ),
        # a float moved in its 6th significant digit: a change
        (b'{"id":"q4","composite":0.8902669302284242,"sim":[0.40280082563659786,1.0],"n":3}\n', False),
        (b'{"id":"q4","composite":0.8902659302284242,"sim":[0.40280182563659786,1.0],"n":3}\n', False),
        # anything that is not a float compares byte for byte
        (b'{"id":"q5","composite":0.8902659302284242,"sim":[0.40280082563659786,1.0],"n":3}\n', False),
        (b'{"id":"q4","composite":0.8902659302284242,"sim":[0.40280082563659786,1.0],"n":4}\n', False),
        (b'{"id":"q4", "composite":0.8902659302284242,"sim":[0.40280082563659786,1.0],"n":3}\n', False),
        (b'{"id":"q4","composite":0.8902659302284242,"sim":[0.40280082563659786,1.0],"n":3}', False),
        (b'{"id":"q4","composite":0.8902659302284242,"sim":[0.40280082563659786],"n":3}\n', False),
        (b'{"id":"q4","composite":"0.8902659302284242","sim":[0.40280082563659786,1.0],"n":3}\n', False),
    ],
)
def test_the_golden_comparison_tolerates_only_float_rounding(actual: bytes, same: bool) -> None:
    assert same_output(EMBEDDING_JSON, actual) is same


def test_the_golden_comparison_cuts_floats_off_words_and_versions() -> None:
    assert split(b"qwen35-9b v1.2.3 x0.5 took 0.25 s, 1e-05") == [
        b"qwen35-9b v1.2.3 x0.5 took ",
        b"0.25",
        b" s, ",
        b"1e-05",
        b"",
    ]
    # an integer is text: a count that changed is a change, even by one
    assert not same_output(b"entries 1000000000\n", b"entries 1000000001\n")
    # a version string is text too
    assert not same_output(b"kag 0.1.0\n", b"kag 0.1.1\n")


def test_the_embedding_golden_survives_another_cpus_last_digits() -> None:
    """Every float of the stored embedding details moved by one ulp still matches; by 1e-6, not."""
    import math

    stored = (GOLDEN / "ex-triplets-embedding" / "files" / "d.jsonl").read_bytes()
    pieces = split(stored)
    assert len(pieces) > 100  # the file holds floats to move

    def moved(by: float | None) -> bytes:
        out = pieces.copy()
        for i in range(1, len(out), 2):
            value = float(out[i])
            value = math.nextafter(value, math.inf) if by is None else value * (1 + by)
            out[i] = repr(value).encode()
        return b"".join(out)

    assert moved(None) != stored and same_output(stored, moved(None))
    assert not same_output(stored, moved(1e-6))

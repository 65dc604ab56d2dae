"""Every example shown in README.md and docs/*.md is what kag prints.

A fenced block whose info string is ``console`` is a terminal session: a line starting
with ``$ `` is a command (a trailing backslash continues it), and the lines after it, up
to the next command, are what it prints, standard error merged into standard output as a
terminal shows them; ``cd DIR`` (printing nothing) changes the folder of the commands after it. A line that is exactly ``…`` stands for any number of lines. Each
block runs in a fresh folder holding a copy of ``examples/`` (so commands that write
files leave the checkout alone), with ``shared/`` beside it when the real Med-KAG data is
present (``KAG_TEST_DATA`` or ``../shared``); blocks that use that data skip without it.

A block whose output cannot be reproduced (a real model's reply, a timing) is preceded by
an HTML comment ``<!-- docs-test: skip REASON -->`` and only its commands' syntax is
left to the reader; the reason is shown in the test report.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, med_kag_root
from tests.golden.compare import same_output

DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*(.*?)\s*-->")
ELLIPSIS = "…"


@dataclass(frozen=True)
class Step:
    command: str
    expected: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    steps: tuple[Step, ...]
    skip: str | None

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def parse_blocks(path: Path) -> list[Block]:
    """The ``console`` blocks of one markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        start = i + 1
        skip = None
        for back in range(max(0, i - 3), i):
            found = SKIP.search(lines[back])
            if found:
                skip = found.group(1) or "marked as not reproducible"
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        i += 1
        blocks.append(Block(path, start, tuple(_steps(body)), skip))
    return blocks


def _steps(body: list[str]) -> list[Step]:
    steps: list[Step] = []
    command: list[str] = []
    expected: list[str] = []
    continuing = False
    for line in body:
        if continuing:
            command.append(line)
            continuing = line.endswith("\\")
            continue
        if line.startswith("$ "):
            if command:
                steps.append(Step("\n".join(command), tuple(expected)))
            command, expected = [line[2:]], []
            continuing = line.endswith("\\")
        else:
            expected.append(line)
    if command:
        steps.append(Step("\n".join(command), tuple(expected)))
    return steps


def matches(expected: tuple[str, ...], actual: list[str]) -> bool:
    """``expected`` equals ``actual`` line for line (floats up to their last digits), a lone
    ``…`` line matching any run."""

    def go(e: int, a: int) -> bool:
        if e == len(expected):
            return a == len(actual)
        if expected[e] == ELLIPSIS:
            return any(go(e + 1, k) for k in range(a, len(actual) + 1))
        if a >= len(actual):
            return False
        # Floats within a relative 1e-9, the rest exact (as the goldens: tests/golden/compare.py).
        same = expected[e] == actual[a] or same_output(expected[e].encode(), actual[a].encode())
        return same and go(e + 1, a + 1)

    return go(0, 0)


ALL = [block for doc in DOCS for block in parse_blocks(doc)]


def test_the_docs_hold_examples() -> None:
    assert ALL, "no console example found in README.md or docs/"


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_example_prints_what_the_docs_show(block: Block, tmp_path: Path) -> None:
    if block.skip is not None:
        pytest.skip(f"{block.id}: {block.skip}")
    uses_shared = any("shared/" in s.command for s in block.steps)
    shared = med_kag_root()
    if uses_shared and shared is None:
        pytest.skip("the real Med-KAG data is not present (set KAG_TEST_DATA or clone beside shared/)")
    work = tmp_path / "work"
    shutil.copytree(REPO / "examples", work / "examples", symlinks=True)
    if shared is not None:
        (tmp_path / "shared" / "data").mkdir(parents=True)
        (tmp_path / "shared" / "data" / "med-kag").symlink_to(shared)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "NO_COLOR": "1",
        "TERM": "dumb",
        "KAG_WIDTH": "120",
        "COLUMNS": "120",
        "LC_ALL": "C.UTF-8",
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("FORCE_COLOR", None)
    cwd = work
    for step in block.steps:
        if re.fullmatch(r"cd [\w./-]+", step.command) and not step.expected:
            cwd = (cwd / step.command[3:].strip()).resolve()  # a terminal's cd: for the steps after it
            assert cwd.is_relative_to(work), f"{block.id}: cd leaves the example folder"
            continue
        done = subprocess.run(
            ["bash", "-c", f'kag() {{ {sys.executable} -m kag "$@"; }}\n{step.command}'],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
            check=False,
        )
        actual = [line.rstrip() for line in done.stdout.splitlines()]
        expected = tuple(line.rstrip() for line in step.expected)
        while expected and not expected[-1]:
            expected = expected[:-1]
        while actual and not actual[-1]:
            actual.pop()
        assert matches(expected, actual), (
            f"{block.id}: `$ {step.command}` printed:\n"
            + "\n".join(actual)
            + "\n--- the docs show:\n"
            + "\n".join(expected)
        )


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        (("a", "b"), ["a", "b"], True),
        (("a", "…", "d"), ["a", "b", "c", "d"], True),
        (("a", "…"), ["a"], True),
        (("a", "…", "d"), ["a", "b", "c"], False),
        (("a",), ["a", "b"], False),
        # a library-computed float that moved in its last digit on another CPU
        (('"sim": 0.8902659302284242,',), ['"sim": 0.890265930228424,'], True),
        (('"sim": 0.8902659302284242,',), ['"sim": 0.8902669302284242,'], False),
    ],
)
def test_an_ellipsis_line_stands_for_any_run(expected: tuple[str, ...], actual: list[str], ok: bool) -> None:
    assert matches(expected, actual) is ok


LINK = re.compile(r"\]\(([^)\s]+)\)")
INTERNAL = re.compile(r"\b(the spec|specification|the issue|seed README|the seed|the brief)\b", re.IGNORECASE)


def broken_links(docs: list[Path]) -> list[str]:
    """Relative markdown links (anchor dropped) of ``docs`` that point at no file."""
    broken: list[str] = []
    for doc in docs:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue
                if not (doc.parent / target.split("#", 1)[0]).exists():
                    broken.append(f"{doc.name}:{number}: {target}")
    return broken


def test_every_relative_link_points_at_a_file() -> None:
    broken = broken_links(DOCS)
    assert not broken, "links to missing files:\n" + "\n".join(broken)


def test_the_link_check_sees_a_missing_page(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text("# there\n")
    page = tmp_path / "page.md"
    page.write_text("[a](docs/nothere.md#x) [b](https://example.org) [c](#here) [d](docs/there.md#y)\n")
    assert broken_links([page]) == ["page.md:1: docs/nothere.md#x"]


def test_the_readme_is_short_and_the_pages_speak_to_users() -> None:
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 400
    found = [
        f"{doc.relative_to(REPO)}:{number}: {line.strip()}"
        for doc in DOCS
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        if INTERNAL.search(line)
    ]
    assert not found, "pages that talk about internal documents:\n" + "\n".join(found)

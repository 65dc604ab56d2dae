"""What kag loads to start: the CLI and `kag stats find` leave the heavy packages alone.

Each check runs in a fresh interpreter, so that what another test imported does not count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import write_ok

REPO = Path(__file__).resolve().parent.parent

# Packages no start-up needs: pydantic (typer's value conversion, see
# kag/commands/_values.py), numpy, jinja2, HTTP clients, and the grading of other commands.
HEAVY = (
    "pydantic",
    "numpy",
    "jinja2",
    "aiohttp",
    "httpx",
    "kag.grading.mcq",
    "kag.grading.compare",
    "kag.view",
)

PROBE = """
import json, sys
from kag.cli import app
heavy, args = json.loads(sys.argv[1]), json.loads(sys.argv[2])
if args:
    try:
        app(args, prog_name="kag")
    except SystemExit:
        pass
found = {h for h in heavy for m in sys.modules if m == h or m.startswith(h + ".")}
print(json.dumps(sorted(found)), file=sys.stderr)
"""


def loaded(*args: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    # Without the variables that make a pipe a terminal (see kag/commands/find.py, _color).
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(heavy), json.dumps(list(args))],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    return json.loads(proc.stderr.strip().splitlines()[-1])


def test_importing_the_cli_loads_nothing_heavy() -> None:
    assert loaded() == []


def test_find_help_loads_nothing_heavy() -> None:
    assert loaded("stats", "find", "--help") == []


def test_a_search_loads_nothing_heavy(tmp_path: Path) -> None:
    root = tmp_path / "results"
    write_ok(root / "mcq" / "0" / "s-kag.json", "B")
    write_ok(root / "mcq" / "1" / "s-kag.json", "A")
    args = [
        "stats",
        "find",
        "-r",
        str(root),
        "--format",
        "json",
        "-C",
        "5",
        "--timeout",
        "2.5",
        "--setup",
        "s*",
        "B|C",
    ]
    # Piped output is not coloured, so not even rich is needed.
    assert loaded(*args, heavy=(*HEAVY, "rich")) == []


def test_the_probe_sees_a_heavy_import(tmp_path: Path) -> None:
    # `kag stats` grades with kag.grading.mcq: the probe reports what a command loads.
    assert "kag.grading.mcq" in loaded("stats", "-r", str(tmp_path), "-d", str(tmp_path / "none.json"))


def test_the_view_converts_its_bounded_options_without_pydantic(tmp_path: Path) -> None:
    # --port, --judge-repeats and --judge-temperature have bounds: a value within them is
    # converted without typer's adapter, whose import would delay the index's build.
    from tests.view.helpers import make_tree

    datasets, tree = make_tree(tmp_path)
    args = ["view", "-d", str(datasets), "-r", str(tree), "--index", str(tmp_path / "i.sqlite")]
    args += ["--export", str(tmp_path / "site"), "--port", "8765", "--judge-temperature", "0.5"]
    assert loaded(*args, heavy=("pydantic",)) == []
    assert (tmp_path / "site" / "index.html").is_file()


VIEW_PROBE = """
import json, sys
import kag.view.snapshot as snapshot
from kag.cli import app
heavy, args = json.loads(sys.argv[1]), json.loads(sys.argv[2])
seen = []
first_part = snapshot.Builder.add_part

def add_part(self, rows):
    if not seen:
        seen.append(sorted({h for h in heavy for m in sys.modules if m == h or m.startswith(h + ".")}))
    first_part(self, rows)

snapshot.Builder.add_part = add_part
try:
    app(args, prog_name="kag")
except SystemExit:
    pass
found = {h for h in heavy for m in sys.modules if m == h or m.startswith(h + ".")}
print(json.dumps([seen[0], sorted(found)]), file=sys.stderr)
"""


def test_the_view_imports_its_pages_modules_once_the_first_rows_are_in(tmp_path: Path) -> None:
    # Before: the index's workers start (a fork copies what is loaded) and would wait for
    # these; after the last row, nothing would run beside them. In between: while they read.
    from tests.view.helpers import make_tree

    datasets, tree = make_tree(tmp_path)
    args = ["view", "-d", str(datasets), "-r", str(tree), "--index", str(tmp_path / "i.sqlite")]
    args += ["--export", str(tmp_path / "site")]
    pages = ["jinja2", "kag.render.view", "kag.grading.compare", "kag.view.search", "http.server", "pydantic"]
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, "-c", VIEW_PROBE, json.dumps(pages), json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    before, after = json.loads(proc.stderr.strip().splitlines()[-1])
    assert before == []
    assert set(after) == set(pages) - {"pydantic"}

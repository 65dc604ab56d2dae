"""The module table of ``docs/architecture.md``, generated from the module docstrings.

    python tests/module_table.py           # rewrite the table (``make docs``)
    python tests/module_table.py --check   # exit 1 when the table is stale

One row per module of ``kag``: its path and the first sentence of its docstring, so the
map is as true as the docstrings are and a new module adds its own row.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KAG = ROOT / "kag"
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- generated from the module docstrings by `make docs`: do not edit by hand -->"
END = "<!-- end of the generated module table -->"

# Sphinx roles (:class:`X`) and double backquotes (``x``) of the docstrings, as markdown code.
_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``")
# A sentence ends at . ! or ? before a space, except after an abbreviation ("et al.", "e.g.").
_SENTENCE_END = re.compile(r"(?<!\bal\.)(?<!\be\.g\.)(?<!\bi\.e\.)(?<=[.!?])\s")


def summary(path: Path) -> str:
    """The first sentence of the first paragraph of the docstring of ``path``, on one line,
    in markdown; ValueError naming the file when it has no docstring."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not doc:
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        raise ValueError(f"{shown}: no module docstring (say what the module holds)")
    paragraph = " ".join(doc.split("\n\n")[0].split())
    sentence = _SENTENCE_END.split(paragraph, maxsplit=1)[0]
    sentence = _LITERAL.sub(r"`\1`", _ROLE.sub(r"`\1`", sentence))
    return sentence.replace("|", "\\|")


def table(kag: Path = KAG) -> str:
    """The markdown table of every module under ``kag``, by path."""
    rows = ["| module | what it holds |", "|---|---|"]
    for path in sorted(kag.rglob("*.py"), key=lambda p: p.relative_to(kag.parent).parts):
        rows.append(f"| `{path.relative_to(kag.parent).as_posix()}` | {summary(path)} |")
    return "\n".join(rows) + "\n"


def regenerate(text: str, kag: Path = KAG) -> str:
    """``text`` with the part between the markers replaced by a fresh table; ValueError when
    the markers are missing."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{DOC.relative_to(ROOT)}: the markers of the module table are missing")
    return text[: start + len(BEGIN)] + "\n\n" + table(kag) + "\n" + text[end:]


def main(argv: list[str]) -> int:
    current = DOC.read_text(encoding="utf-8")
    fresh = regenerate(current)
    if "--check" in argv:
        if fresh != current:
            print(f"{DOC.relative_to(ROOT)}: the module table is stale: run make docs", file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        DOC.write_text(fresh, encoding="utf-8")
        print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

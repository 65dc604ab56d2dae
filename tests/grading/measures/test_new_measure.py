"""A measure is one module: registered before the report is built, it is counted per file,
merged across setups' datasets, and shown in the JSON block, the stats table, the HTML page,
``kag.grade`` and the viewer (its overview, ``/api/setups`` and its static export), with no line added to the blocks, the walk or the renderers. Two such
modules: one with counters (the easy case), one that reads the whole response and keeps a
state that does not add up (the median response length: a list of lengths, merged by
concatenation, finished as the median).

They run in a child interpreter so that the registry of this test session stays as shipped."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[3]
DATASETS = REPO / "examples" / "dataset" / "datasets.json"
RESULTS = REPO / "examples" / "results"

# The module a user would add as kag/grading/measures/reply_length.py, registered by hand.
MODULE = """
from kag.grading.measures.declarations import TEXT_MD_HTML, Column, JsonKey
from kag.grading.measures.registry import Measure, register


class ReplyLengthCounts:
    reply_chars: int = 0
    replies: int = 0


def add(counts, graded):
    if graded.response is not None:
        counts.reply_chars += len(graded.response)
        counts.replies += 1


def _mean(block):
    m = block.metrics
    return m.reply_chars / m.replies if m.replies else None


register(
    Measure(
        "reply_length",
        ReplyLengthCounts,
        add,
        needs=frozenset({"response"}),
        json=(JsonKey("avg_reply_chars", _mean),),
        columns=(Column("REPLY", lambda b: "-" if _mean(b) is None else f"{_mean(b):.1f}", TEXT_MD_HTML, 7),),
    )
)

from kag.cli import main
import sys
sys.argv = ["kag", *sys.argv[1:]]
main()
"""


def _kag_with_the_measure(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", MODULE, "stats", "-d", str(DATASETS), "-r", str(RESULTS), *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _replies(results: Path = RESULTS) -> dict[tuple[str, str], list[int]]:
    """The reply lengths of the graded files of the example tree (or of ``results``: those of
    a question with an MCQ answer in the datasets file), per (setup, dataset), read with the
    json module."""
    datasets = json.loads(DATASETS.read_text(encoding="utf-8"))
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(results.glob("*/*/*.json")):
        dataset, question = path.parts[-3], path.parts[-2]
        output = datasets.get(dataset, {}).get(question, {}).get("output", {})
        data = json.loads(path.read_text(encoding="utf-8"))
        if output.get("type") == "MCQ" and output.get("answer") and "ok" in data:
            found.setdefault((path.stem, dataset), []).append(len(data["ok"]["result"]))
    return found


def test_a_new_counting_measure_is_in_every_json_block_and_after_the_known_keys() -> None:
    doc = orjson.loads(_kag_with_the_measure("--format", "json"))
    replies = _replies()
    assert doc["setups"], "the example tree has setups"
    for setup in doc["setups"]:
        name = setup["setup"]
        overall = [n for (s, _), ns in replies.items() if s == name for n in ns]
        assert list(setup["overall"])[-1] == "avg_reply_chars"
        assert abs(setup["overall"]["avg_reply_chars"] - sum(overall) / len(overall)) < 1e-9
        for dataset, block in setup["per_dataset"].items():
            lengths = replies.get((name, dataset), [])
            expected = sum(lengths) / len(lengths) if lengths else None
            assert block["avg_reply_chars"] == expected or abs(block["avg_reply_chars"] - expected) < 1e-9


def test_a_new_measure_s_column_ends_the_stats_table() -> None:
    header = next(line for line in _kag_with_the_measure().splitlines() if "ACC%" in line)
    assert header.split()[-1] == "REPLY"


def test_the_shipped_report_has_no_such_key() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kag", "stats", "-d", str(DATASETS), "-r", str(RESULTS), "--format", "json"],
        check=False,
        capture_output=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0 and b"avg_reply_chars" not in done.stdout


# The module a user would add as kag/grading/measures/response_length.py: it reads the whole
# response and keeps every length, a state that does not add up; the block's value is the median.
MEDIAN_MODULE = """
import statistics

from kag.grading.measures.declarations import TEXT_MD_HTML, Column, JsonKey
from kag.grading.measures.registry import Measure, register


def add(lengths, graded):
    if graded.response is not None:
        lengths.append(len(graded.response))


def merge(into, other):
    into.extend(other)
    return into


def _cell(block):
    median = block.metrics.median_response_chars
    return "-" if median is None else f"{median:.1f}"


register(
    Measure(
        "response_length",
        list,
        add,
        merge=merge,
        finish=lambda lengths: statistics.median(lengths) if lengths else None,
        needs=frozenset({"response"}),
        values={"median_response_chars": lambda median: median},
        json=(JsonKey("median_response_chars", lambda b: b.metrics.median_response_chars),),
        columns=(Column("MED_CHARS", _cell, TEXT_MD_HTML, 10),),
    )
)
"""

RUN_CLI = """
import sys
from kag.cli import main
sys.argv = ["kag", *sys.argv[1:]]
main()
"""

RUN_API = """
import sys
import kag
sys.stdout.write(kag.grade(sys.argv[1], sys.argv[2]).to_json())
"""


def _child(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _medians(results: Path = RESULTS) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """The median reply length of each setup and of each (setup, dataset), computed from the
    files read with the json module."""
    replies = _replies(results)
    overall = {
        setup: statistics.median([n for (s, _), ns in replies.items() if s == setup for n in ns])
        for setup in {s for s, _ in replies}
    }
    return overall, {key: statistics.median(lengths) for key, lengths in replies.items()}


def test_a_measure_that_reads_the_response_and_keeps_a_median_is_in_every_surface(tmp_path: Path) -> None:
    overall, per_dataset = _medians()
    base = ["stats", "-d", str(DATASETS), "-r", str(RESULTS)]
    doc = orjson.loads(_child(MEDIAN_MODULE + RUN_CLI, *base, "--format", "json"))
    assert {s["setup"] for s in doc["setups"]} == set(overall)
    for setup in doc["setups"]:
        name = setup["setup"]
        assert list(setup["overall"])[-1] == "median_response_chars"
        assert setup["overall"]["median_response_chars"] == overall[name]
        for dataset, block in setup["per_dataset"].items():
            assert block["median_response_chars"] == per_dataset.get((name, dataset))
    # kag.grade gives the same document.
    assert orjson.loads(_child(MEDIAN_MODULE + RUN_API, str(DATASETS), str(RESULTS))) == doc
    # The HTML page: its column ends the ranking table, each setup's row ends with its median.
    page = tmp_path / "page.html"
    assert _child(MEDIAN_MODULE + RUN_CLI, *base, "--format", "html", "-o", str(page)) == ""
    html = page.read_text(encoding="utf-8")
    assert '<th class="r">MED_CHARS</th></tr>' in html
    for name, median in overall.items():
        row = html.split(f'<td class="l">{name}</td>')[1].split("</tr>")[0]
        assert row.endswith(f'<td class="r">{median:.1f}</td>'), name
    # The text table too, and the shipped registry knows nothing of it.
    header = next(line for line in _child(MEDIAN_MODULE + RUN_CLI, *base).splitlines() if "ACC%" in line)
    assert header.split()[-1] == "MED_CHARS"
    assert b"median_response_chars" not in _child(RUN_CLI, *base, "--format", "json").encode()


# The viewer of a tree, in the child: /api/setups and the overview page served by a scan
# that reads every file, then the overview of the same index read back from its rows alone.
RUN_VIEW = """
import sys
import urllib.request
from pathlib import Path

import orjson

from kag.datasets import load_datasets
from kag.render.view import ViewApp
from kag.render.view_overview import overview
from kag.view.index import Index, Tree
from kag.view.query import View
from kag.view.server import Server

datasets, tree, path = sys.argv[1:4]
trees = [Tree("", tree)]
index = Index(Path(path), load_datasets(datasets), trees, "", None)
view = View(index, scan=True)
server = Server(ViewApp(view, "t"), "127.0.0.1", 0, lambda exc: print(repr(exc), file=sys.stderr))
server.start()
with urllib.request.urlopen(server.url + "api/setups") as reply:
    api = orjson.loads(reply.read())
view.analysis(None).done.wait()
with urllib.request.urlopen(server.url) as reply:
    page = reply.read().decode()
server.close()
index.close()
again = Index(Path(path), load_datasets(datasets), trees, "", None)
rows = overview(View(again), None)  # no scan: the tallies are counted from the index's rows
again.close()
sys.stdout.write(orjson.dumps({"api": api, "page": page, "rows": rows}).decode())
"""


def _long_replies(root: Path) -> Path:
    """A copy of the example tree whose responses are longer than the head a row keeps of a
    response no measure reads (so that a median of heads would differ)."""
    tree = root / "results"
    for i, path in enumerate(sorted(RESULTS.glob("*/*/*.json"))):
        data = json.loads(path.read_text(encoding="utf-8"))
        if "ok" in data:
            data["ok"]["result"] += " " + "w" * (250 + 37 * i)
        out = tree / path.relative_to(RESULTS)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data), encoding="utf-8")
    return tree


def _ranking_cells(page: str, name: str) -> str:
    return page.split(f'<td class="l">{name}</td>')[1].split("</tr>")[0]


def test_the_median_of_whole_responses_is_in_the_viewer_its_api_and_its_export(tmp_path: Path) -> None:
    tree = _long_replies(tmp_path)
    overall, per_dataset = _medians(tree)
    assert min(overall.values()) > 200  # longer than a row's head of a response
    stats = orjson.loads(
        _child(MEDIAN_MODULE + RUN_CLI, "stats", "-d", str(DATASETS), "-r", str(tree), "--format", "json")
    )
    for setup in stats["setups"]:
        assert setup["overall"]["median_response_chars"] == overall[setup["setup"]]
    index = tmp_path / "index.sqlite"
    seen = orjson.loads(_child(MEDIAN_MODULE + RUN_VIEW, str(DATASETS), str(tree.resolve()), str(index)))
    # /api/setups and the overview counted again from the index's rows equal kag stats.
    assert seen["api"]["stats"] == stats
    assert seen["rows"]["stats"] == stats
    for setup in seen["rows"]["stats"]["setups"]:
        for dataset, block in setup["per_dataset"].items():
            assert block["median_response_chars"] == per_dataset.get((setup["setup"], dataset))
    # The overview page: the column ends each setup's row.
    assert '<th class="r">MED_CHARS</th>' in seen["page"]
    for name, median in overall.items():
        assert _ranking_cells(seen["page"], name).endswith(f'<td class="r">{median:.1f}</td>'), name
    # The static export, from the same index (a rescan that reads nothing: its rows).
    out = tmp_path / "export"
    base = ["view", "-d", str(DATASETS), "-r", str(tree), "--index", str(index), "--export", str(out)]
    _child(MEDIAN_MODULE + RUN_CLI, *base)
    data = orjson.loads((out / "data.json").read_bytes())
    assert data["setups"]["stats"] == stats
    html = (out / "index.html").read_text(encoding="utf-8")
    for name, median in overall.items():
        assert _ranking_cells(html, name).endswith(f'<td class="r">{median:.1f}</td>'), name

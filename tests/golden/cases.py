"""The golden cases: every command, in every output format, on the bundled examples and on
the real Med-KAG tree, run the way a user runs them (``python -m kag`` from the repo root,
relative paths, no terminal, no colour, a fixed width).

``tests/golden/record.py`` writes what each case prints to ``tests/golden/<case>/``;
``tests/test_golden.py`` runs them again and compares byte for byte. A case's files
(``-o``, ``--details``, ``--per-query``, a database) are written to a fresh folder whose
path is replaced by ``<OUT>`` wherever it shows; ``<REPO>`` and ``<SHARED>`` stand for the
absolute repository and shared-data paths, should one ever be printed. Nothing else is
normalized except what a case names in ``normalize`` (only the wall-clock timings of
``kag graph import``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
SHARED = REPO.parent / "shared"
GOLDEN = REPO / "tests" / "golden"
MED_KAG_DATASETS = SHARED / "data" / "med-kag" / "datasets" / "mirage.json"

# Paths as a user in the repo root types them.
D = "examples/dataset/datasets.json"
R = "examples/results"
MD = "../shared/data/med-kag/datasets/mirage.json"
MR = "../shared/data/med-kag/results"
EX = ["-d", D, "-r", R]
MK = ["-d", MD, "-r", MR, "--prefix", "wekgr-"]
NATIVE = "qwen35-9b-ollama-native"
KAG = "qwen35-9b-ollama-neo4j-embedding-triplet-formal"
TRIPLETS = [
    "examples/triplets/gold.jsonl",
    "examples/triplets/finetuned.jsonl",
    "examples/triplets/base.json",
]
IRT2 = [
    "--dataset",
    "examples/irt2/dataset",
    "--head",
    "examples/irt2/head.csv",
    "--tail",
    "examples/irt2/tail.csv",
]
GI = "tests/golden/inputs/irt2"
IRT2_RANKING = [
    *("--dataset", f"{GI}/dataset", "--task", "ranking"),
    *("--head", f"{GI}/predictions/ranking-head.jsonl", "--tail", f"{GI}/predictions/ranking-tail.csv.gz"),
]
IRT2_LINKING_T = [
    *("--dataset", f"{GI}/dataset", "--task", "linking", "--split", "test"),
    *("--head", f"{GI}/predictions/linking-head.csv", "--tail", f"{GI}/predictions/linking-tail.csv"),
]
BENCH = ["-c", "examples/benchmark/config.toml", "-b", "examples/benchmark/benchmark.toml", "-d", D]
GRAPH = ["-c", "config.toml", "-b", "benchmark.toml", "-d", "datasets.json"]
# A small subset of examples/graph (38 nodes, 29 relationships): embedding all 541 nodes
# would make this one case cost more than all the others together.
GG = "../../tests/golden/inputs/graph"
GRAPH_IMPORT = ["--database", "medgraph", "--nodes", f"{GG}/nodes.csv", "--nodes", f"{GG}/drugs.csv"]
# `kag graph import` reports how long it took.
IMPORT_TIMES = (r"(?m)^time +read [0-9.]+ s, embed [0-9.]+ s, write [0-9.]+ s$", "time           <TIMES>")

WIDTH = "120"


@dataclass(frozen=True)
class Case:
    """One command line. ``{out}`` in ``args``/``env`` is the case's output folder;
    ``files`` are the files it writes there that are compared too; ``touch`` are files
    created there (empty) before the run."""

    name: str
    args: tuple[str, ...]
    cwd: str = "."
    med_kag: bool = False
    files: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    touch: tuple[str, ...] = ()
    normalize: tuple[tuple[str, str], ...] = ()


CASES: list[Case] = []


def case(name: str, *args: str, **kw: object) -> None:
    med = bool(kw.get("med_kag", False))
    CASES.append(Case(("medkag-" if med else "ex-") + name, tuple(args), **kw))  # type: ignore[arg-type]


# --- kag stats --------------------------------------------------------------------------
for fmt in ("text", "json", "markdown"):
    case(f"stats-{fmt}", "stats", *EX, "--format", fmt)
    case(f"stats-{fmt}", "stats", *MK, "--format", fmt, med_kag=True)
    case(
        f"stats-{fmt}-setup-dataset",
        "stats",
        *EX,
        "--format",
        fmt,
        "--setup",
        "qwen*",
        "--dataset",
        "mcq-form",
    )
case("stats-html", "stats", *EX, "--format", "html", "-o", "{out}/report.html", files=("report.html",))
case(
    "stats-html",
    "stats",
    *MK,
    "--format",
    "html",
    "-o",
    "{out}/report.html",
    files=("report.html",),
    med_kag=True,
)
case("stats-text-output", "stats", *EX, "-o", "{out}/report.txt", files=("report.txt",))
case(
    "stats-json-output",
    "stats",
    *MK,
    "--format",
    "json",
    "-o",
    "{out}/r.json",
    files=("r.json",),
    med_kag=True,
)
# Retrieval quality against gold evidence (docs/retrieval.md works the blocks out by hand).
RQ = ["-d", "examples/retrieval/datasets.json", "-r", "examples/retrieval/results"]
case("stats-retrieval-json", "stats", *RQ, "--format", "json")
for fmt in ("text", "json", "markdown"):
    case(f"compare-retrieval-{fmt}", "stats", "compare", *RQ, "--baseline", "rust-kag", "--format", fmt)
    case(
        f"impact-retrieval-{fmt}",
        "stats",
        "impact",
        *RQ,
        "kag-graph",
        "rust-kag",
        "--native",
        "native",
        "--format",
        fmt,
    )
case(
    "compare-retrieval-html",
    "stats",
    "compare",
    *RQ,
    "--baseline",
    "rust-kag",
    "--format",
    "html",
    "-o",
    "{out}/compare.html",
    files=("compare.html",),
)
case("stats-setup-two", "stats", *EX, "--setup", "smollm2-*", "--setup", "*-kag")
case("stats-dataset", "stats", *EX, "--dataset", "pubmed*")
# Two labelled trees (the same tree twice: a reproducibility check that finds no difference).
TREES = ["-d", D, "-r", f"run1={R}", "-r", f"run2={R}"]
case("stats-trees", "stats", *TREES, "--setup", "run1/*", "--setup", "run2/*-kag")
case(
    "compare-trees",
    "stats",
    "compare",
    *TREES,
    "--setup",
    "*/qwen35-9b-*",
    "--baseline",
    "run1/qwen35-9b-kag",
)
case("stats-setup", "stats", *MK, "--setup", "*native", med_kag=True)
case("stats-dataset-json", "stats", *MK, "--dataset", "pubmedqa", "--format", "json", med_kag=True)
case("stats-setup-nomatch", "stats", *EX, "--setup", "nope*")
case("stats-dataset-nomatch", "stats", *MK, "--dataset", "medqa", med_kag=True)
case("stats-fail-under", "stats", *EX, "--fail-under", "50")
case("stats-fail-under-pass", "stats", *EX, "--fail-under", "0", "--format", "json")
case("stats-fail-under", "stats", *MK, "--fail-under", "40", med_kag=True)
case("stats-fail-if-worse", "stats", *MK, "--fail-if-worse-than", NATIVE, med_kag=True)
case("stats-fail-if-worse", "stats", *EX, "--fail-if-worse-than", "qwen35-9b-native")
case("stats-verbose", "stats", "-v", *EX)
case("stats-vv", "-vv", "stats", *EX, "--format", "json")
case("stats-no-datasets", "stats", "-r", R)
case("stats-bad-results", "stats", "-d", D, "-r", "examples/nonexistent")

# --- kag stats find ---------------------------------------------------------------------
for fmt in ("text", "json", "jsonl"):
    case(f"find-{fmt}", "stats", "find", "(?i)know|answer is", "-r", R, "--format", fmt)
    case(f"find-{fmt}", "stats", "find", "B|C", "-r", MR, "--prefix", "wekgr-",
         "--format", fmt, med_kag=True)  # fmt: skip
case("find-literal", "stats", "find", "know", "-r", R)
case("find-count", "stats", "find", "^[a-d]$", "-i", "--invert-match", "-c", "-r", R)
case("find-files", "stats", "find", "(?i)know|answer is", "-l", "-r", R)
case("find-ignore-case", "stats", "find", "KNOW", "-i", "-r", R, "--format", "json")
case("find-options-before", "stats", "-r", R, "--format", "json", "find", "(?i)i don't know")
case("find-setup-dataset", "stats", "find", ".", "-r", R, "--setup", "qwen*", "--dataset", "mcq-form", "-c")
case("find-context-max-count", "stats", "find", "[a-z]", "-r", R, "-C", "5", "--max-count", "2")
case("find-nomatch", "stats", "find", "zebra", "-r", R)
case("find-bad-regex", "stats", "find", "(", "-r", R)
case("find-setup-nomatch", "stats", "find", "x", "-r", R, "--setup", "nope")
case("find-literal", "stats", "find", "C", "-r", MR, "--prefix", "wekgr-", "-c", med_kag=True)
case("find-nomatch", "stats", "find", "know", "-r", MR, "--prefix", "wekgr-", med_kag=True)
case("find-count", "stats", "find", "^a$", "-i", "-c", "-r", MR, "--prefix", "wekgr-", med_kag=True)
case("find-files", "stats", "find", "(?i)b", "-l", "-r", MR, "--prefix", "wekgr-", med_kag=True)
case("find-invert-count", "stats", "find", "^[ab]$", "-i", "--invert-match", "-c", "-r", MR, "--prefix", "wekgr-",
     med_kag=True)  # fmt: skip
case("find-jobs", "stats", "find", "C", "-r", MR, "--prefix", "wekgr-", "--jobs", "2", "--format", "jsonl",
     med_kag=True)  # fmt: skip
case("find-setup", "stats", "--setup", "*formal", "find", "B", "-r", MR, "--prefix", "wekgr-", "-l",
     med_kag=True)  # fmt: skip

# --- kag stats compare / flips / impact -------------------------------------------------
for fmt in ("text", "json", "markdown"):
    case(f"compare-{fmt}", "stats", "compare", *EX, "--format", fmt)
    case(f"compare-{fmt}", "stats", "compare", *MK, "--format", fmt, med_kag=True)
    case(f"flips-{fmt}", "stats", "flips", *EX, "qwen35-9b-kag", "smollm2-135m-native", "--format", fmt)
    case(f"flips-{fmt}", "stats", "flips", *MK, KAG, NATIVE, "--format", fmt, med_kag=True)
    case(f"impact-{fmt}", "stats", "impact", *EX, "--format", fmt)
    case(f"impact-{fmt}", "stats", "impact", *MK, "--format", fmt, med_kag=True)
case(
    "compare-html",
    "stats",
    "compare",
    *EX,
    "--format",
    "html",
    "-o",
    "{out}/report.html",
    files=("report.html",),
)
case("compare-html", "stats", "compare", *MK, "--format", "html", "-o", "{out}/report.html", "--max-flips", "3",
     files=("report.html",), med_kag=True)  # fmt: skip
case("compare-baseline", "stats", "compare", *MK, "--baseline", NATIVE, med_kag=True)
case("compare-fail-if-worse", "stats", "compare", *MK, "--fail-if-worse-than", NATIVE, "--format", "json",
     med_kag=True)  # fmt: skip
case("compare-seed-resamples", "stats", "compare", *EX, "--seed", "7", "--resamples", "500", "--alpha", "0.1",
     "--format", "json")  # fmt: skip
case("compare-options-before", "stats", *EX, "--setup", "qwen*", "compare", "--format", "markdown")
case("compare-output", "stats", "compare", *EX, "-o", "{out}/c.txt", files=("c.txt",))
case("compare-native-html", "stats", "compare", *EX, "--native", "qwen35-9b-native", "--format", "html",
     "-o", "{out}/r.html", files=("r.html",))  # fmt: skip
case("compare-bad-baseline", "stats", "compare", *EX, "--baseline", "nope")
case("flips-max-chars", "stats", "flips", *MK, KAG, NATIVE, "--max-chars", "0", med_kag=True)
case("flips-dataset", "stats", "flips", *EX, "qwen35-9b-kag", "qwen35-9b-native", "--dataset", "pubmedqa")
case("flips-json-output", "stats", "flips", *EX, "qwen35-9b-kag", "qwen35-9b-native", "--format", "json",
     "-o", "{out}/f.json", files=("f.json",))  # fmt: skip
case("flips-unknown", "stats", "flips", *EX, "qwen35-9b-kag", "nope")
case("impact-setup-native", "stats", "impact", *MK, KAG, "--native", NATIVE, "--format", "json", med_kag=True)
case("impact-setup-native", "stats", "impact", *EX, "qwen35-9b-kag", "--native", "qwen35-9b-native")
case("impact-output", "stats", "impact", *EX, "--format", "markdown", "-o", "{out}/i.md", files=("i.md",))

# --- kag triplets -----------------------------------------------------------------------
for fmt in ("text", "json"):
    case(f"triplets-{fmt}", "triplets", *TRIPLETS, "--format", fmt)
    case(f"triplets-fuzzy-{fmt}", "triplets", *TRIPLETS, "--match", "fuzzy", "--format", fmt)
case("triplets-details", "triplets", *TRIPLETS, "--details", "{out}/details.jsonl", files=("details.jsonl",))
case(
    "triplets-fuzzy-gate",
    "triplets",
    *TRIPLETS,
    "--match",
    "fuzzy",
    "--fuzzy-gate",
    "0.9",
    "--format",
    "json",
)
case("triplets-embedding", "triplets", *TRIPLETS, "--match", "embedding", "--details", "{out}/d.jsonl",
     files=("d.jsonl",))  # fmt: skip
case("triplets-embedding-missing-model", "triplets", *TRIPLETS[:2], "--match", "embedding",
     "--embedding-model", "/nonexistent", "--format", "json")  # fmt: skip
case("triplets-missing-gold", "triplets", "examples/triplets/nope.jsonl", TRIPLETS[1])

# --- kag irt2 ---------------------------------------------------------------------------
for fmt in ("text", "json"):
    case(f"irt2-linking-{fmt}", "irt2", *IRT2, "--task", "linking", "--split", "test", "--format", fmt)
    case(f"irt2-ranking-{fmt}", "irt2", *IRT2_RANKING, "--split", "test", "--format", fmt)
case("irt2-per-query", "irt2", *IRT2, "--task", "kgc", "--split", "test", "--per-query", "{out}/q.jsonl",
     files=("q.jsonl",))  # fmt: skip
case("irt2-ranking-per-query", "irt2", *IRT2_RANKING, "--split", "test", "--per-query", "{out}/q.jsonl",
     "--format", "json", files=("q.jsonl",))  # fmt: skip
case("irt2-full-realistic", "irt2", *IRT2_LINKING_T, "--mode", "full", "--ties", "realistic", "--ks", "1,3,5")
case("irt2-optimistic-maxrank", "irt2", *IRT2_LINKING_T, "--ties", "optimistic", "--max-rank", "3",
     "--format", "json")  # fmt: skip
case("irt2-pessimistic-none", "irt2", *IRT2_LINKING_T, "--ties", "pessimistic", "--max-rank", "none")
case("irt2-validation", "irt2", "--dataset", f"{GI}/dataset", "--task", "linking", "--split", "validation",
     "--head", f"{GI}/predictions/validation-head.csv", "--tail", f"{GI}/predictions/empty.csv")  # fmt: skip
case("irt2-wrong-task", "irt2", *IRT2, "--task", "ranking", "--split", "test")

# --- kag benchmark --dry-run, kag graph import ------------------------------------------
case("benchmark-dry-run", "benchmark", "--dry-run", *BENCH, "-o", "{out}/results")
case("benchmark-dry-run-existing", "benchmark", "--dry-run", *BENCH, "-o", R, "--continue")
case("benchmark-dry-run-filters", "benchmark", "--dry-run", *BENCH, "-o", "{out}/results", "--setup",
     "smollm2-135m-native", "--dataset", "mcq-form", "--limit", "2")  # fmt: skip
case("benchmark-dry-run-skip-prefix", "benchmark", "--dry-run", *BENCH, "-o", R, "--skip", "smollm2-135m-terse",
     "--prefix", "x-", "--retry-errors")  # fmt: skip
case("benchmark-dry-run-graph", "benchmark", "--dry-run", *GRAPH, "-o", "{out}/results", cwd="examples/graph",
     env=(("KAG_GRAPH_DB", "{out}/medgraph.lbug"),), touch=("medgraph.lbug",))  # fmt: skip
case("benchmark-dry-run-graph-no-db", "benchmark", "--dry-run", *GRAPH, "-o", "{out}/results", cwd="examples/graph",
     env=(("KAG_GRAPH_DB", "{out}/missing.lbug"),))  # fmt: skip
case("benchmark-dry-run", "benchmark", "--dry-run", "-c", "../shared/data/med-kag/configs/config.toml",
     "-b", "../shared/data/med-kag/configs/benchmark.toml", "-d", MD, "-o", MR, "--prefix", "wekgr-",
     "--continue", med_kag=True)  # fmt: skip
case("graph-import", "graph", "import", "-c", "config.toml", *GRAPH_IMPORT, "--relationships",
     f"{GG}/relationships.csv", cwd="examples/graph", env=(("KAG_GRAPH_DB", "{out}/medgraph.lbug"),),
     normalize=(IMPORT_TIMES,))  # fmt: skip
case("graph-import-unknown-node", "graph", "import", "-c", "config.toml", *GRAPH_IMPORT, "--relationships",
     "relationships.csv", cwd="examples/graph", env=(("KAG_GRAPH_DB", "{out}/medgraph.lbug"),))  # fmt: skip

# --- help of every command (option names, defaults and wording are output too) ----------
for command in ((), ("stats",), ("stats", "find"), ("stats", "compare"), ("stats", "flips"), ("stats", "impact"), ("stats", "judge"),
                ("triplets",), ("irt2",), ("benchmark",), ("generation",), ("graph",), ("graph", "import")):  # fmt: skip
    case("help-" + ("-".join(command) or "kag"), *command, "--help")
case("version", "--version")


def env_for(case: Case, out: Path) -> dict[str, str]:
    """The environment of a run: the user's minus anything that changes how kag prints."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KAG_", "FORCE_COLOR", "CLICOLOR", "COLUMNS", "LINES", "PY_COLORS", "TERM"))
    }
    env.update(
        PYTHONPATH=str(REPO),
        KAG_WIDTH=WIDTH,
        COLUMNS=WIDTH,
        NO_COLOR="1",
        TERM="dumb",
        HF_HUB_OFFLINE="1",
        LC_ALL="C.UTF-8",
        LANG="C.UTF-8",
    )
    for key, value in case.env:
        env[key] = value.replace("{out}", str(out))
    return env


@dataclass
class Outcome:
    stdout: bytes
    stderr: bytes
    exit_code: int
    files: dict[str, bytes] = field(default_factory=dict)

    def parts(self) -> dict[str, bytes]:
        """Everything compared, by the file name it is stored under."""
        parts = {"stdout": self.stdout, "stderr": self.stderr, "exit_code": f"{self.exit_code}\n".encode()}
        parts.update({f"files/{name}": data for name, data in self.files.items()})
        return parts


def normalize(case: Case, data: bytes, out: Path) -> bytes:
    for path, placeholder in ((out, "<OUT>"), (REPO, "<REPO>"), (SHARED.resolve(), "<SHARED>")):
        data = data.replace(str(path).encode(), placeholder.encode())
    for pattern, replacement in case.normalize:
        data = re.sub(pattern.encode(), replacement.encode(), data)
    return data


def run(case: Case, out: Path) -> Outcome:
    """Run ``python -m kag`` for ``case`` with ``out`` as its (empty) output folder."""
    for name in case.touch:
        (out / name).touch()
    args = [a.replace("{out}", str(out)) for a in case.args]
    proc = subprocess.run(
        [sys.executable, "-m", "kag", *args],
        cwd=REPO / case.cwd,
        env=env_for(case, out),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=300,
        check=False,
    )
    files = {}
    for name in case.files:
        path = out / name
        files[name] = normalize(case, path.read_bytes(), out) if path.exists() else b"<missing>"
    return Outcome(
        normalize(case, proc.stdout, out), normalize(case, proc.stderr, out), proc.returncode, files
    )


def golden_dir(case: Case) -> Path:
    return GOLDEN / case.name


assert len({c.name for c in CASES}) == len(CASES), "duplicate golden case names"

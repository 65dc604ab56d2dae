"""Generate a realistic Rust-format result tree for the stats/find benchmarks.

    python benchmarks/make_tree.py OUT_DIR [--setups 10] [--questions 10000] [--seed 0]

Writes ``OUT_DIR/datasets.json`` and ``OUT_DIR/results/<dataset>/<question>/<setup>.json``
(no prefix). Half the setups are native (about 1 KB files, like the real med-kag tree),
half are KAG setups with a rendered subgraph and a 768-d query embedding, as the Rust tool
writes them. The subgraph is shaped like the real med-kag KAG files' ``retrieval.result``
(relationship lines, some with a property map, and node property lines with quoted names
and identifiers; a long-tailed line count with a median near the real 340 lines, about
16 KB) and is repeated in the prompt, so a KAG file is about 53 KB (median; the real
median is 59 KB). The default tree (10 x 10,000) takes about 3.3 GB on disk. About 2% of files are `error` files; responses are mostly an option key, some are
sentences or "I don't know." (for `find`).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import orjson

from kag.results import (
    AugmentedGeneration,
    DatabaseStats,
    ErrorResult,
    ModelConfig,
    OkResult,
    OkStats,
    Result,
    Retrieval,
    Timing,
    dump_result,
)

DATASETS = ["medqa", "medmcqa", "pubmedqa", "bioasq", "mmlu"]
WORDS = [
    "patient",
    "acute",
    "chronic",
    "therapy",
    "serum",
    "lipase",
    "amylase",
    "biomarker",
    "pancreatitis",
    "protein",
    "gene",
    "receptor",
    "inhibitor",
    "dose",
    "clinical",
    "trial",
    "cohort",
    "risk",
    "mortality",
    "infection",
    "vitamin",
    "deficiency",
    "syndrome",
    "cell",
    "tissue",
    "blood",
    "pressure",
    "kidney",
    "liver",
    "heart",
    "lung",
    "brain",
    "tumor",
    "cancer",
]
SENTENCES = [
    "I don't know.",
    "The answer is B because the serum lipase is more specific.",
    "Based on the context, the most likely answer is c.",
    "Answer: a",
    "Probably D, although the graph context does not mention it.",
]


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


# Bumped whenever the generated files change, so a tree made by an older version is rebuilt.
TREE_VERSION = "2"
RELATIONS = ["MAPPED_TO", "NARROWER_THAN", "HAS_DESCRIPTOR", "REFERENCE_OF", "HAS_PHARMACOLOGICAL_ACTION"]
REL_PROPERTIES = [
    ("HAS_CONCEPT", "{ isPreferred: false }"),
    ("HAS_CONCEPT", "{ isPreferred: true }"),
    ("SYNONYM_OF", '{ relationshipLabel: "has_permuted_term" }'),
    ("SYNONYM_OF", '{ relationshipLabel: "permuted_term_of" }'),
]
NODE_PROPERTIES = [
    "sourceIdentifier",
    "sourceAssertedDescriptorIdentifier",
    "sourceAssertedConceptIdentifier",
]


def subgraph(rng: random.Random, median: int = 340) -> str:
    """A subgraph rendered as formal triplets, the way the real med-kag KAG files carry it:
    ``(id)-[:TYPE]->(id)``, ``(id)-[:TYPE { key: value }]->(id)`` and node properties
    ``(id)-[name]->("Acute Pancreatitis")``, ``(id)-[ui]->("C0021925")``. Line count:
    log-normal, median ``median`` (340 by default), clipped to ``median``/7..``median``*9
    (the real ones: median 343, 54..5174)."""
    low, high = max(1, median * 50 // 340), median * 3000 // 340
    count = int(min(high, max(low, rng.lognormvariate(math.log(median), 0.7))))
    hub = rng.randint(10**6, 10**8)
    out: list[str] = []
    while len(out) < count:
        node = rng.randint(10**6, 2 * 10**8)
        roll = rng.random()
        if roll < 0.45:
            out.append(f"({hub})-[:{rng.choice(RELATIONS)}]->({node})")
            out.append(f'({node})-[ui]->("C{rng.randint(0, 9_999_999):07d}")')
        elif roll < 0.8:
            kind, props = rng.choice(REL_PROPERTIES)
            out.append(f"({hub})-[:{kind} {props}]->({node})")
            out.append(f'({node})-[name]->("{words(rng, rng.randint(1, 3)).title()}")')
        elif roll < 0.95:
            out.append(f"({node})-[:{rng.choice(RELATIONS)}]->({hub})")
            out.append(f'({node})-[{rng.choice(NODE_PROPERTIES)}]->("D{rng.randint(0, 999_999):06d}")')
            out.append(f'({node})-[source]->("MSH")')
        else:
            hub = node  # the next neighbourhood
            out.append(f'({hub})-[name]->("{words(rng, 2).title()}")')
    return "\n".join(out[:count])


def make_tree(
    out: Path, setups: int, questions: int, seed: int = 0, graph_lines: int = 340, dims: int = 768
) -> Path:
    """Write the tree; ``graph_lines`` (median subgraph lines) and ``dims`` (embedding size)
    shrink the KAG files for a small-file tree."""
    rng = random.Random(seed)
    results = out / "results"
    per_dataset = questions // len(DATASETS)
    datasets: dict[str, dict[str, dict[str, Any]]] = {}
    keys = ["a", "b", "c", "d"]
    for name in DATASETS:
        entries: dict[str, dict[str, Any]] = {}
        for q in range(per_dataset):
            qid = str(10_000_000 + q)
            entries[qid] = {
                "input": words(rng, 25) + "?",
                "output": {
                    "type": "MCQ",
                    "options": {k: words(rng, 3) for k in keys},
                    "answer": rng.choice(keys),
                },
            }
        datasets[name] = entries
    out.mkdir(parents=True, exist_ok=True)
    (out / "datasets.json").write_bytes(orjson.dumps(datasets))
    vec = [round(rng.uniform(-0.1, 0.1), 8) for _ in range(dims)]
    for s in range(setups):
        kag = s % 2 == 1
        setup = f"model{s // 2}-{'kag' if kag else 'native'}"
        for name, entries in datasets.items():
            for qid, entry in entries.items():
                path = results / name / qid / f"{setup}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                roll = rng.random()
                result: Result
                if roll < 0.02:
                    result = ErrorResult(
                        f"Failed during the generation phase: timed out after {rng.randint(60, 300)}s"
                    )
                else:
                    answer = rng.choice(keys) if roll < 0.9 else rng.choice(SENTENCES)
                    retrieval = None
                    prompt = "Answer the question:\n\n" + entry["input"] + "\n\nChoices:\n" + words(rng, 40)
                    if kag:
                        text = subgraph(rng, graph_lines)
                        lines = text.count("\n") + 1
                        retrieval = Retrieval(
                            result=text,
                            document=entry["input"],
                            vector=vec,
                            database=DatabaseStats(
                                "neo4j", lines, lines + 10, lines // 3, Timing(0, rng.randint(10**7, 10**9))
                            ),
                            time=Timing(1, rng.randint(0, 10**9 - 1)),
                        )
                        prompt += "\n\nGraph Context:\n" + text
                    result = OkResult(
                        answer,
                        OkStats(
                            prompt=prompt,
                            retrieval=retrieval,
                            config=ModelConfig(
                                "ollama",
                                "qwen3.5:9b",
                                0.0,
                                10000,
                                AugmentedGeneration("kg-embedding", "neo4j") if kag else None,
                            ),
                            time=Timing(rng.randint(0, 300), rng.randint(0, 10**9 - 1)),
                        ),
                    )
                with open(path, "wb") as handle:
                    handle.write(dump_result(result))
    return out


# ---------------------------------------------------------------- the shared tree


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock_owner(lock: Path) -> int | None:
    try:
        return int((lock / "pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _newest_mtime(tree: Path) -> float:
    """mtime of the most recently changed question folder (cheap: one dataset level)."""
    newest = tree.stat().st_mtime if tree.exists() else 0.0
    results = tree / "results"
    if results.is_dir():
        for dataset in results.iterdir():
            newest = max(newest, dataset.stat().st_mtime)
    return newest


def ensure_tree(
    tree: Path, setups: int = 10, questions: int = 10_000, graph_lines: int = 340, dims: int = 768
) -> Path:
    """Return ``tree`` once ``tree/.complete`` exists, generating it if nobody else is
    (``graph_lines``, ``dims``: as make_tree)."""
    complete = tree / ".complete"
    lock = tree.with_name(tree.name + ".lock")
    tree.parent.mkdir(parents=True, exist_ok=True)
    shape = "" if (graph_lines, dims) == (340, 768) else f", {graph_lines}-line graphs, {dims}-d vectors"
    stamp = f"version {TREE_VERSION}: {setups} setups x {questions} questions{shape}\n"
    if complete.exists() and complete.read_text() != stamp:
        print(f"bench: {tree} was made by another generator version; rebuilding it", file=sys.stderr)
        complete.unlink()
        shutil.rmtree(tree / "results", ignore_errors=True)
    announced = False
    while not complete.exists():
        try:
            lock.mkdir()
        except FileExistsError:
            owner = _lock_owner(lock)
            if owner is not None and not _pid_alive(owner):
                print(f"bench: removing stale lock of dead pid {owner}", file=sys.stderr)
                shutil.rmtree(lock, ignore_errors=True)
                continue
            if not announced:
                print(f"bench: waiting for another process generating {tree}", file=sys.stderr)
                announced = True
            time.sleep(5)
            continue
        try:
            (lock / "pid").write_text(str(os.getpid()))
            if tree.exists() and time.time() - _newest_mtime(tree) < 60:
                # Someone is writing without the lock; let them finish first.
                shutil.rmtree(lock, ignore_errors=True)
                time.sleep(30)
                continue
            print(f"bench: generating {tree} ({setups} setups x {questions} questions)...", file=sys.stderr)
            started = time.perf_counter()
            make_tree(tree, setups, questions, graph_lines=graph_lines, dims=dims)
            complete.write_text(stamp)
            print(f"bench: generated in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        finally:
            shutil.rmtree(lock, ignore_errors=True)
    return tree


def compile_kag() -> None:
    """Compile kag's modules to bytecode before timing the command: an editable install
    does not, and where PYTHONDONTWRITEBYTECODE is set every start would compile them
    again (about 0.1 s), which no installed copy pays (``make install`` compiles too)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "kag")], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--setups", type=int, default=10)
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    make_tree(args.out, args.setups, args.questions, args.seed)
    count = sum(len(files) for _, _, files in os.walk(args.out / "results"))
    print(f"wrote {count} result files under {args.out / 'results'}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""A small result tree for the `kag view` tests: two setups, a flip each way, a hostile
response, an error file, an unreadable file, an ignored file and a later epoch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kag.datasets import load_datasets
from kag.results import ErrorResult, Timing, epoch_result_path, result_path, write_result
from kag.view.index import Index, Tree
from kag.view.query import View
from kag.view.server import Server
from tests.result_helpers import neo4j_retrieval, ok_result

HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=1</script> javascript:alert(1) \x07'
SUBGRAPH = (
    '(1)-[:TREATS]->(2)\n(1)-[name]->("Vitamin C")\n(2)-[name]->("Scurvy")\n'
    '(2)-[:CAUSED_BY]->(3)\n(3)-[name]->("<script>window.pwned=1</script>")\n'
)


def make_tree(root: Path) -> tuple[Path, Path]:
    """(datasets file, result tree) under ``root``."""
    questions = {}
    for i in range(8):
        questions[f"q{i}"] = {
            "input": f"Question {i}? <b>bold</b>" if i else HOSTILE,
            "output": {"type": "MCQ", "options": {"A": "yes", "B": "no", "C": "maybe"}, "answer": "A"},
        }
    questions["q0"]["evidence"] = ["Vitamin C"]
    questions["noanswer"] = {"input": "x", "output": {"type": "MCQ", "options": {"A": "a"}}}
    datasets = root / "datasets.json"
    datasets.write_text(json.dumps({"med": questions}))
    tree = root / "results"
    answers = {
        "native": ["A", "A", "B", "A", "C", "A", "B", None],
        "kag": ["A", "B", "A", "A", "C", "B", "B", "A"],
    }
    for setup, row in answers.items():
        for i, answer in enumerate(row):
            path = result_path(tree, "med", f"q{i}", "", setup)
            if answer is None:
                write_result(path, ErrorResult("the server went away"))
                continue
            if setup == "kag":
                result = ok_result(
                    HOSTILE + "\n" + answer if i == 0 else answer,
                    model="m",
                    augmented=True,
                    prompt="the prompt " * 10,
                    time=Timing(1, 500),
                    retrieval=neo4j_retrieval(SUBGRAPH, 3, 2, 3, time=Timing(0, 250_000_000)),
                )
            else:
                result = ok_result(answer, model="m", prompt="p", time=Timing(2, 0))
            write_result(path, result)
    write_result(epoch_result_path(tree, "med", "q1", "", "native", 2), ok_result("B"))
    write_result(result_path(tree, "med", "noanswer", "", "native"), ok_result("A"))
    (tree / "med" / "q3" / "broken.json").write_text("{not json")
    (tree / "med" / "q3" / "notes.txt").write_text("hello")
    return datasets, tree


JUDGE = ("oa", "judge-model")


def write_verdicts(datasets: Path, tree: Path) -> Path:
    """Cache a verdict for every answer of the tree the way `kag stats judge --mcq` does
    (its own items, keys and cache), the one of q0 with a hostile reason; returns the
    configuration file naming the judge's server."""
    from kag.generation.config import load_config
    from kag.grading.judge import Judge, Verdict, VerdictCache, collect_items, judge_endpoint, verdict_key
    from kag.grading.judge_prompt import load_judge_prompt

    config = tree.parent / "config.toml"
    config.write_text('[providers.oa]\ntype = "OpenAI"\nurl = "http://127.0.0.1:9/v1"\nkey = ""\n')
    judge = Judge(*JUDGE)
    endpoint = judge_endpoint(load_config(config), judge)
    prompt = load_judge_prompt(None).sha256
    cache = VerdictCache(tree, judge)
    for item in collect_items(load_datasets(datasets), tree, with_mcq=True).items:
        verdict = Verdict.CORRECT if item.exact else Verdict.INCORRECT
        reply = f"{verdict.value}: {item.setup} said {item.response.strip()[:20]}"
        if item.question == "q0":
            reply = HOSTILE + "\n" + verdict.value
        cache.write(verdict_key(judge, prompt, item, endpoint), verdict, reply)
    return config


def open_view(datasets: Path, tree: Path, index: Path, prefix: str = "", config: Path | None = None) -> View:
    """The view of ``tree``; with ``config``, showing the verdicts of :data:`JUDGE` (its
    records carrying them, as `kag view --judge-provider --judge-model` makes them)."""
    verdicts = None
    if config is not None:
        from kag.view.verdicts import VerdictReader

        verdicts = VerdictReader(*JUDGE, config, None)
    judge = verdicts.key if verdicts is not None else None
    # As `kag view` reads it: without its texts (read when a page shows them), but for a judge.
    loaded = load_datasets(datasets, texts=config is not None)
    idx = Index(index, loaded, [Tree("", str(tree.resolve()))], prefix, None, judge=judge)
    return View(idx, verdicts, scan=True)


@contextmanager
def serving(view: View, title: str = "test") -> Iterator[str]:
    from kag.render.view import ViewApp

    errors: list[BaseException] = []
    server = Server(ViewApp(view, title), "127.0.0.1", 0, errors.append)
    server.start()
    try:
        yield server.url
    finally:
        server.close()
        assert not errors, errors

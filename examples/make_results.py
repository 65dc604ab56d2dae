"""Rebuild ``examples/results/``: a small result tree in the Rust tool's format.

    python examples/make_results.py

Three setups answer every question of ``examples/dataset/datasets.json`` (file names
without a prefix, as ``kag benchmark`` writes them without ``--prefix``):

- ``qwen35-9b-kag``: retrieval from a Neo4j graph (``ok.stats.retrieval`` filled in);
  answers " C\\n" (correct after trimming and ignoring case) and "I don't know." (an
  abstention).
- ``qwen35-9b-native``: a WRONG option answer, a non-option answer ("The answer is A.")
  and an ``{"error": ...}`` file.
- ``smollm2-135m-native``: ties with the KAG setup on accuracy (ranked by name).

``mcq-form/2`` is an MCQ without an answer (its files count as skipped) and ``mcq-form/3``
is free-form (its files are ignored). Everything is deterministic: rerunning rewrites the
same bytes.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

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
    result_path,
    write_result,
)

RULES = (
    "Follow these strict rules:\n"
    "1. Your final output must be EXACTLY AND EXCLUSIVELY the single key corresponding to the correct "
    "choice (e.g., 'a', 'b', 'c'). Do not include any explanations, reasoning, punctuation, "
    "or additional text.\n"
    "2. If you do not have the information needed to answer the question, reply exactly with: 'I don't know.'"
)

# setup -> (dataset, question) -> response text, or ("error", message)
ANSWERS: dict[str, dict[tuple[str, str], str | tuple[str, str]]] = {
    "qwen35-9b-kag": {
        ("mcq-form", "0"): "b",
        ("mcq-form", "1"): " C\n",
        ("mcq-form", "2"): "a",
        ("mcq-form", "3"): "Plants turn light, water and CO2 into sugar and oxygen.",
        ("pubmedqa", "12377809"): "A",
        ("pubmedqa", "15943725"): "I don't know.",
    },
    "qwen35-9b-native": {
        ("mcq-form", "0"): "b",
        ("mcq-form", "1"): "a",
        ("mcq-form", "2"): "a",
        ("mcq-form", "3"): "Photosynthesis converts light energy into chemical energy.",
        ("pubmedqa", "12377809"): "The answer is A.",
        ("pubmedqa", "15943725"): (
            "error",
            "Failed during the generation phase: request timed out after 300s",
        ),
    },
    "smollm2-135m-native": {
        ("mcq-form", "0"): "d",
        ("mcq-form", "1"): "c",
        ("mcq-form", "2"): "b",
        ("mcq-form", "3"): "Light makes plants grow.",
        ("pubmedqa", "12377809"): "a",
        ("pubmedqa", "15943725"): "B",
    },
}
MODELS = {
    "qwen35-9b-kag": "qwen3.5:9b",
    "qwen35-9b-native": "qwen3.5:9b",
    "smollm2-135m-native": "smollm2:135m",
}

# Retrieved subgraphs of the KAG setup: (vertices, relationships, properties, rendered lines).
SUBGRAPHS = {
    "0": (
        12,
        18,
        41,
        ["(Scurvy)-[:CAUSED_BY]->(Vitamin C deficiency)", "(Ascorbic Acid)-[:IS_A]->(Vitamin C)"],
    ),
    "1": (
        9,
        11,
        30,
        ["(Insulin)-[:SECRETED_BY]->(Pancreatic beta cell)", "(Pancreatic beta cell)-[:PART_OF]->(Pancreas)"],
    ),
    "2": (
        15,
        22,
        48,
        [
            "(Hydrochlorothiazide)-[:IS_A]->(Thiazide diuretic)",
            "(Thiazide diuretic)-[:TREATS]->(Hypertension)",
        ],
    ),
    "3": (4, 3, 9, ["(Photosynthesis)-[:OCCURS_IN]->(Chloroplast)"]),
    "12377809": (
        21,
        30,
        52,
        ["(Endosonography)-[:IS_A]->(Diagnostic imaging)", "(Dyschezia)-[:IS_A]->(Defecation disorder)"],
    ),
    "15943725": (0, 0, 0, []),
}


def prompt(question: dict, context: str | None) -> str:
    head = (
        "Based on the following graph context, answer the question:\n\n"
        if context is not None
        else "Based on your internal medical knowledge, answer the question:\n\n"
    )
    text = head + question["input"]
    output = question.get("output")
    if output is not None:
        choices = "\n".join(f"{k}: {v}" for k, v in output["options"].items())
        text += "\n\nChoices:\n" + choices + "\n\n" + RULES
    if context is not None:
        text += "\n\nGraph Context:\n" + context
    return text


def build(setup: str, dataset: str, qid: str, question: dict, step: int) -> Result:
    answer = ANSWERS[setup][(dataset, qid)]
    if isinstance(answer, tuple):
        return ErrorResult(answer[1])
    kag = setup.endswith("-kag")
    retrieval = None
    context = None
    if kag:
        vertices, relationships, properties, lines = SUBGRAPHS[qid]
        context = "\n".join(lines)
        retrieval = Retrieval(
            result=context,
            retriever="embedder",
            document=question["input"],
            vector=[round(0.01 * ((step * 7 + i * 3) % 19 - 9), 4) for i in range(8)],
            database=DatabaseStats(
                "neo4j", vertices, relationships, properties, Timing(0, 20_000_000 + step * 1_000_000)
            ),
            time=Timing(0, 150_000_000 + step * 10_000_000),
        )
    return OkResult(
        answer,
        OkStats(
            prompt=prompt(question, context),
            retrieval=retrieval,
            config=ModelConfig(
                provider="ollama",
                model=MODELS[setup],
                temperature=0.0,
                tokens=10000,
                augmented_generation=AugmentedGeneration("neo4j-embedding", "neo4j") if kag else None,
            ),
            time=Timing(1 + step % 4 + (6 if kag else 0), 125_000_000 * (step % 8)),
        ),
    )


def main() -> None:
    datasets = orjson.loads((HERE / "dataset" / "datasets.json").read_bytes())
    out = HERE / "results"
    if out.exists():
        shutil.rmtree(out)
    count = 0
    for setup in ANSWERS:
        step = 0
        for dataset, questions in datasets.items():
            for qid, question in questions.items():
                write_result(
                    result_path(out, dataset, qid, "", setup), build(setup, dataset, qid, question, step)
                )
                step += 1
                count += 1
    print(f"wrote {count} result files under {out}", file=sys.stderr)


if __name__ == "__main__":
    main()

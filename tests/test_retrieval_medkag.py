"""The figures docs/retrieval.md states about the Med-KAG tree's retrieved text (the console
block beside them is run by tests/test_docs.py): how many nodes the FormalTriplet text of
the KAG setup's files gives back, how many have a name, and where the older evidence
block's names-in-text finds the gold "no"."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kag.results.graph_text import graph_from_formal_text
from tests.conftest import REPO

KAG_SETUP = "wekgr-qwen35-9b-ollama-neo4j-embedding-triplet-formal.json"
DOC = (REPO / "docs" / "retrieval.md").read_text()


def _texts(med_kag: Path) -> dict[str, str]:
    return {
        path.parent.name: json.loads(path.read_text())["ok"]["stats"]["retrieval"]["result"]
        for path in sorted((med_kag / "results" / "pubmedqa").glob(f"*/{KAG_SETUP}"))
    }


def test_the_readback_figures_are_what_the_docs_say(med_kag: Path) -> None:
    texts = _texts(med_kag)
    graphs = [graph_from_formal_text(t) for t in texts.values()]
    with_values = [graph_from_formal_text(t, ("name", "value")) for t in texts.values()]
    nodes = sum(len(g.nodes) for g in graphs)
    named = sum(1 for g in graphs for n in g.nodes if n.name)
    named_or_valued = sum(1 for g in with_values for n in g.nodes if n.name)
    assert (len(texts), nodes, named, named_or_valued) == (99, 46_034, 1_698, 3_863)
    stated = f"gives back {nodes:,} nodes (a node\n  counted once per file it is in), {named:,} of them with a `name`"
    assert stated in DOC
    assert f"print a `value` instead ({named_or_valued:,} named)" in DOC
    # No retrieved node is named as a PubMedQA answer is: "yes", "no" or "maybe".
    verdicts = {"yes", "no", "maybe"}
    assert not any(n.name and n.name.strip().lower() in verdicts for g in with_values for n in g.nodes)


def test_no_occurs_in_prose_only(med_kag: Path) -> None:
    mirage = json.loads((med_kag / "datasets" / "mirage.json").read_text())["pubmedqa"]
    texts = _texts(med_kag)
    hits = []
    for question, text in texts.items():
        options = mirage[question]["output"]["options"]
        gold = options[mirage[question]["output"]["answer"]]
        if re.search(rf"(?i)\b{re.escape(gold)}\b", text):
            hits.append((question, gold))
    assert len(hits) == 4 and {g for _, g in hits} == {"no"}
    assert "counts 4 questions as hits" in DOC
    assert "but no gestational use of warfarin" in texts["10973547"] and ("10973547", "no") in hits

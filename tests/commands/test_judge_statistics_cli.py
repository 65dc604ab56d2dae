"""`kag stats judge` with human labels, several judges, repeats and pairwise verdicts, against a
judge scripted with known biases on the loopback fake server (tests/judge_bias.py): the
reports show the kappa the script's disagreement with the labels makes, the unusable count,
and the position bias."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import orjson
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from sklearn.metrics import cohen_kappa_score
from typer.testing import CliRunner

from kag.cli import app
from tests.bench_helpers import FAKE_CONFIG, fresh, server_fixture
from tests.conftest import REPO
from tests.fakeserver import FakeServer
from tests.judge_bias import (
    DISAGREE,
    GARBAGE,
    SETUPS,
    N,
    label,
    make_bias_tree,
    pairwise_replies,
    response,
    sample,
    verdict_replies,
    write_labels,
)

server = server_fixture("I cannot tell.")


@pytest.fixture(autouse=True)
def _reset(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh(server, monkeypatch, key="sk-test")
    server.state.replies = {**verdict_replies(), **pairwise_replies()}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_bias_tree(tmp_path / "results")
    (tmp_path / "config.toml").write_text(FAKE_CONFIG)
    monkeypatch.chdir(tmp_path)
    return tmp_path


BASE = ["stats", "judge", "-c", "config.toml", "-d", "datasets.json", "-r", "results"]


def run(*extra: str) -> object:
    return CliRunner().invoke(app, [*BASE, *extra])


def said(setup: str, i: int) -> bool:
    """What the scripted judge says of a usable answer."""
    return label(setup, i) != ((setup, i) in DISAGREE)


def expected_kappa(setups: tuple[str, ...], answers: set[tuple[str, int]]) -> float:
    usable = sorted(a for a in answers if a[0] in setups and a not in GARBAGE)
    return float(cohen_kappa_score([label(*a) for a in usable], [said(*a) for a in usable]))


def test_labels_give_the_kappa_of_the_scripted_disagreement(project: Path, server: FakeServer) -> None:
    everything = {(s, i) for s in SETUPS for i in range(N)}
    write_labels(project / "labels.csv", sorted(everything))
    result = run("-p", "oa", "-m", "judge-m", "--labels", "labels.csv", "--format", "json")
    assert result.exit_code == 0, result.stderr
    report = orjson.loads(result.stdout)
    setups = {row["setup"]: row for row in report["setups"]}
    for name in SETUPS:
        row = setups[name]
        assert row["unusable"] == 4  # one answer in ten is garbage: no verdict, not wrong
        usable = [(name, i) for i in range(N) if (name, i) not in GARBAGE]
        assert row["accuracy"] == pytest.approx(sum(said(*a) for a in usable) / len(usable))
        labels = row["labels"]
        assert labels["n"] == len(usable)
        assert labels["kappa"] == pytest.approx(expected_kappa((name,), everything), abs=1e-9)
        disagreements = sum(1 for a in usable if a in DISAGREE)
        assert labels["agreement"] == pytest.approx(1 - disagreements / len(usable))
        low, high = labels["kappa_ci95"]
        assert low <= labels["kappa"] <= high
        (tp, fn), (fp, tn) = labels["confusion"]
        assert tp + fn + fp + tn == len(usable) and fn + fp == disagreements
        assert row["corrected_accuracy"] is None  # every answer labelled: nothing to correct
    overall = report["overall"]
    assert overall["unusable"] == 8
    assert overall["labels"]["kappa"] == pytest.approx(expected_kappa(SETUPS, everything), abs=1e-9)
    # The exact match misses a's paraphrases the labels call right: the judge beats it.
    assert overall["exact_match_labels"]["kappa"] < overall["labels"]["kappa"]
    assert setups["a"]["judges_alpha"] is None and setups["a"]["judges_kappa"] == []  # one judge

    text = run("-p", "oa", "-m", "judge-m", "--labels", "labels.csv")
    assert text.exit_code == 0, text.stderr
    assert "Against the human labels" in text.stdout and f"{overall['labels']['kappa']:.3f}" in text.stdout


def test_the_corrected_accuracy_equals_ppi_py(project: Path) -> None:
    labelled = {(s, i) for s in SETUPS for i in range(N) if i % 2 == 0}
    write_labels(project / "labels.jsonl", sorted(labelled))
    result = run("-p", "oa", "-m", "judge-m", "--labels", "labels.jsonl", "--format", "json")
    assert result.exit_code == 0, result.stderr
    setups = {row["setup"]: row for row in orjson.loads(result.stdout)["setups"]}
    for name in SETUPS:
        usable = [(name, i) for i in range(N) if (name, i) not in GARBAGE]
        y = np.array([label(*a) for a in usable if a in labelled], dtype=float)
        yhat = np.array([said(*a) for a in usable if a in labelled], dtype=float)
        unlabelled = np.array([said(*a) for a in usable if a not in labelled], dtype=float)
        corrected = setups[name]["corrected_accuracy"]
        assert corrected["estimate"] == pytest.approx(
            float(np.squeeze(ppi_mean_pointestimate(y, yhat, unlabelled, lam=1))), abs=1e-9
        )
        low, high = ppi_mean_ci(y, yhat, unlabelled, alpha=0.05, lam=1)
        assert corrected["ci95"] == pytest.approx([float(np.squeeze(low)), float(np.squeeze(high))], abs=1e-9)
        assert setups[name]["labels"]["n"] == len(y)


def test_pairwise_shows_the_position_bias(project: Path, server: FakeServer) -> None:
    result = run("-p", "oa", "-m", "judge-m", "--pairwise", "a", "b", "--format", "json")
    assert result.exit_code == 0, result.stderr
    pairwise = orjson.loads(result.stdout)["pairwise"]
    assert (pairwise["a"], pairwise["b"], pairwise["questions"]) == ("a", "b", N)
    by = {c["criterion"]: c for c in pairwise["criteria"]}
    assert list(by) == ["comprehensiveness", "diversity", "empowerment", "directness"]
    garbage = sum(1 for i in range(N) if i % 10 == 7)
    for name in ("comprehensiveness", "diversity", "empowerment"):
        c = by[name]
        # Always the first answer shown: it flips with the order, so every usable pair is a tie.
        assert (c["wins"], c["ties"], c["losses"], c["unusable"]) == (0, N - garbage, 0, garbage)
        assert c["position_consistency"] == 0.0 and c["first_position_rate"] == 1.0
        assert c["win_rate"] == 0.5 and c["p_value"] is None
    d = by["directness"]
    assert (d["wins"], d["ties"], d["losses"], d["unusable"]) == (N - garbage, 0, 0, garbage)
    assert d["position_consistency"] == 1.0 and d["first_position_rate"] == 0.5
    assert d["p_value"] == pytest.approx(2 * 0.5 ** (N - garbage)) and d["p_holm"] == pytest.approx(
        d["p_value"]
    )
    assert len(server.chat_requests()) == N * 4 * 2  # both orders of every question and criterion

    server.reset()
    again = run("-p", "oa", "-m", "judge-m", "--pairwise", "a", "b")
    assert again.exit_code == 0, again.stderr
    assert server.chat_requests() == []  # every pairwise verdict came from the cache
    assert "comprehensiveness" in again.stdout and "FIRST%" in again.stdout


def test_a_failed_pairwise_request_is_unusable_not_cached_and_asked_again(
    project: Path, server: FakeServer
) -> None:
    server.set_faults({"Criterion: directness": ["500"]})
    pairwise = ("-p", "oa", "-m", "judge-m", "--pairwise", "a", "b", "--criteria", "directness,diversity")
    result = run(*pairwise, "--retries", "0", "--format", "json")
    assert result.exit_code == 0, result.stderr
    by = {c["criterion"]: c for c in orjson.loads(result.stdout)["pairwise"]["criteria"]}
    assert by["directness"]["unusable"] == N and by["directness"]["wins"] + by["directness"]["ties"] == 0
    assert by["diversity"]["unusable"] == sum(1 for i in range(N) if i % 10 == 7)
    assert f"{4 * N} request(s) sent, {2 * N} failed" in result.stderr
    server.reset()
    server.set_faults({})
    again = run(*pairwise, "--format", "json")
    assert again.exit_code == 0, again.stderr
    sent = server.chat_requests()
    assert len(sent) == 2 * N and all("Criterion: directness" in r.prompt for r in sent)
    assert f"{2 * N} verdict(s) from the cache, {2 * N} request(s) sent, 0 failed" in again.stderr


def test_several_judges_and_repeats(project: Path, server: FakeServer) -> None:
    result = run("-p", "oa", "-m", "judge-m", "-m", "judge-n", "--repeats", "2", "--format", "json")
    assert result.exit_code == 0, result.stderr
    report = orjson.loads(result.stdout)
    assert [j["model"] for j in report["judges"]] == ["judge-m", "judge-n"] and report["repeats"] == 2
    # Two judges, two repeats, 80 answers: 320 requests, each cached on its own.
    assert len(server.chat_requests()) == 2 * 2 * 2 * N
    # Both judges read the same script: they agree completely.
    assert report["overall"]["judges_kappa"][0]["kappa"] == pytest.approx(1.0)
    assert report["overall"]["judges_alpha"] == pytest.approx(1.0)
    assert {c["rate"] for c in report["self_consistency"]} == {1.0}
    server.reset()
    again = run("-p", "oa", "-m", "judge-m", "-m", "judge-n", "--repeats", "2", "--format", "json")
    assert again.exit_code == 0 and server.chat_requests() == [] and again.stdout == result.stdout


@pytest.mark.parametrize("fmt", ["markdown", "html", "junit"])
def test_every_format_shows_the_kappa(project: Path, fmt: str) -> None:
    write_labels(project / "labels.csv", sorted({(s, i) for s in SETUPS for i in range(N)}))
    report = orjson.loads(
        run("-p", "oa", "-m", "judge-m", "--labels", "labels.csv", "--format", "json").stdout
    )
    kappa = report["overall"]["labels"]["kappa"]
    result = run("-p", "oa", "-m", "judge-m", "--labels", "labels.csv", "--format", fmt)
    assert result.exit_code == 0, result.stderr
    if fmt == "junit":
        root = ET.fromstring(result.stdout)
        suites = {s.get("name"): s for s in root.iter("testsuite")}
        a = {p.get("name"): p.get("value") for p in suites["judge/a"].iter("property")}
        assert float(a["labels.kappa"]) == pytest.approx(report["setups"][0]["labels"]["kappa"])
        assert suites["judge/a"].get("skipped") == "4"
    else:
        assert f"{kappa:.3f}" in result.stdout and "Against the human labels" in result.stdout


def test_a_judge_that_answered_as_a_setup_is_warned(project: Path) -> None:
    from kag.results import ModelConfig, OkResult, OkStats, result_path, write_result

    stats = OkStats(config=ModelConfig("oa", "judge-m", 0.0))
    write_result(result_path(project / "results", "qa", "0", "", "a"), OkResult(response("a", 0), stats))
    result = run("-p", "oa", "-m", "judge-m")
    assert result.exit_code == 0, result.stderr
    assert "judge oa/judge-m is also the model of setup a (oa/judge-m)" in result.stderr


def test_the_docs_examples_are_this_output(project: Path) -> None:
    write_labels(project / "labels.csv", sample(0.5), ("r1", "r2"))
    labelled = run("-p", "oa", "-m", "judge-m", "--labels", "labels.csv")
    assert labelled.exit_code == 0, labelled.stderr
    print(labelled.stdout)
    for page in (REPO / "README.md", REPO / "docs" / "judge.md"):
        assert labelled.stdout in page.read_text(), page
    pairwise = run("-p", "oa", "-m", "judge-m", "--pairwise", "a", "b")
    assert pairwise.exit_code == 0, pairwise.stderr
    print(pairwise.stdout)
    assert pairwise.stdout in (REPO / "docs" / "judge.md").read_text()


def test_usage_and_input_errors_name_what_to_fix(project: Path, server: FakeServer) -> None:
    two = run("-p", "oa", "-m", "judge-m", "-m", "judge-n", "--pairwise", "a", "b")
    assert two.exit_code == 2 and "--pairwise takes one judge" in two.stderr
    criteria = run("-p", "oa", "-m", "judge-m", "--criteria", "directness")
    assert criteria.exit_code == 2 and "--criteria goes with --pairwise A B" in criteria.stderr
    unknown = run("-p", "oa", "-m", "judge-m", "--pairwise", "a", "b", "--criteria", "speed")
    assert unknown.exit_code == 2 and "unknown criterion 'speed'" in unknown.stderr
    nobody = run("-p", "oa", "-m", "judge-m", "--pairwise", "a", "zz")
    assert nobody.exit_code == 2 and "no question answered by both 'a' and 'zz'" in nobody.stderr
    counts = run("-p", "oa", "-p", "ol", "-m", "x", "-m", "y", "-m", "z")
    assert counts.exit_code == 2 and "2 -p and 3 -m" in counts.stderr
    (project / "bad.csv").write_text("dataset,question,setup,label\nqa,1,a,perhaps\n")
    bad = run("-p", "oa", "-m", "judge-m", "--labels", "bad.csv")
    assert bad.exit_code == 2 and "bad.csv:2: key 'label' is 'perhaps'" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert server.chat_requests() == []  # every error came before any request


def test_labels_of_no_judged_answer_are_counted_in_a_warning(project: Path) -> None:
    path = write_labels(project / "labels.jsonl", [("a", 1), ("a", 2)])
    with path.open("a") as handle:
        handle.write('{"dataset": "qa", "question": "999", "setup": "a", "label": "correct"}\n')
    result = run("-p", "oa", "-m", "judge-m", "--labels", "labels.jsonl", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert "labels.jsonl: 1 label(s) of no judged answer: left out" in result.stderr
    assert orjson.loads(result.stdout)["unmatched_labels"] == 1


def test_a_custom_pairwise_prompt_is_sandboxed_and_may_name_any_criterion(
    project: Path, server: FakeServer
) -> None:
    (project / "pair.md").write_text(
        "{{ CRITERION }}|{{ DEFINITION }}|{{ ANSWER_1 }}|{{ ANSWER_2 }}|{{ 7 * 7 }}\n"
    )
    result = run(
        "-p", "oa", "-m", "judge-m", "--pairwise", "a", "b", "--criteria", "speed", "--prompt", "pair.md"
    )
    assert result.exit_code == 0, result.stderr
    prompts = [r.prompt for r in server.chat_requests()]
    assert len(prompts) == 2 * N and all(p is not None and p.startswith("speed||") for p in prompts)
    (project / "evil.md").write_text("{{ ''.__class__ }} {{ ANSWER_1 }}")
    evil = run("-p", "oa", "-m", "judge-m", "--pairwise", "a", "b", "--prompt", "evil.md")
    assert evil.exit_code == 2 and "Traceback" not in evil.stderr
    wrong = run("-p", "oa", "-m", "judge-m", "--pairwise", "a", "b", "--prompt", "pair.md", "--criteria", "x")
    assert wrong.exit_code == 0
    (project / "verdict.md").write_text("{{ RESPONSE }}")
    verdict_vars = run("-p", "oa", "-m", "judge-m", "--pairwise", "a", "b", "--prompt", "verdict.md")
    assert verdict_vars.exit_code == 2 and "RESPONSE" in verdict_vars.stderr


def test_without_labels_every_figure_built_on_them_is_null(project: Path) -> None:
    result = run("-p", "oa", "-m", "judge-m", "--format", "json")
    assert result.exit_code == 0, result.stderr
    report = orjson.loads(result.stdout)
    for entry in [*report["setups"], report["overall"]]:
        assert entry["labels"] is None and entry["exact_match_labels"] is None
        assert entry["corrected_accuracy"] is None and entry["labelled_accuracy"] is None
        assert entry["judges_alpha"] is None and entry["annotators_alpha"] is None
        low, high = entry["accuracy_ci95"]
        assert low < entry["accuracy"] < high
    assert report["unmatched_labels"] is None and report["self_consistency"][0]["rate"] is None

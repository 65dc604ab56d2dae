"""The judge's cached verdicts on a question's page (kag/view/verdicts.py): found under the
keys `kag stats judge` computes, for that judge, server and prompt only; escaped; read
without writing to the tree or following a link."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.render.view import ViewApp
from kag.view.verdicts import VerdictReader
from tests.view.helpers import HOSTILE, JUDGE, make_tree, open_view, write_verdicts

runner = CliRunner()


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in sorted(root.rglob("*"))
    }


def _verdicts(view: object, question: str) -> dict[str, object]:
    detail = view.question("med", question)  # type: ignore[attr-defined]
    assert detail is not None
    return {s["setup"]: s["judge"] for s in detail["setups"]}


def test_each_answer_shows_the_judge_s_cached_verdict_and_reason(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    config = write_verdicts(datasets, tree)
    before = _listing(tree)
    view = open_view(datasets, tree, tmp_path / "index.sqlite", config=config)
    q2 = _verdicts(view, "q2")  # native answered B (wrong), kag A (right)
    assert q2 == {
        "kag": {"judge": "oa/judge-model", "verdict": "CORRECT", "reason": "CORRECT: kag said A"},
        "native": {"judge": "oa/judge-model", "verdict": "INCORRECT", "reason": "INCORRECT: native said B"},
    }
    assert _verdicts(view, "q7")["native"] is None  # an error file is not judged
    body = ViewApp(view, "t")(["q", "med", "q0"], {}).body.decode()
    assert 'class="badge verdict correct">CORRECT<' in body
    assert "<script>window.pwned" not in body and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in body
    api = orjson.loads(ViewApp(view, "t")(["api", "question", "med", "q0"], {}).body)
    assert {s["judge"]["reason"] for s in api["setups"]} == {HOSTILE + "\nCORRECT", HOSTILE + "\nINCORRECT"}
    assert _listing(tree) == before  # nothing written, nothing touched


@pytest.mark.parametrize("other", ["model", "prompt", "server"])
def test_another_judge_prompt_or_server_has_no_verdict(tmp_path: Path, other: str) -> None:
    datasets, tree = make_tree(tmp_path)
    config = write_verdicts(datasets, tree)
    provider, model, prompt = *JUDGE, None
    if other == "model":
        model = "another-model"
    elif other == "prompt":
        prompt = tmp_path / "prompt.txt"
        prompt.write_text(
            "Is {{ RESPONSE }} the answer {{ REFERENCE }} to {{ QUESTION }}? CORRECT or INCORRECT"
        )
    else:
        config.write_text(config.read_text().replace("127.0.0.1:9", "127.0.0.1:10"))
    view = open_view(datasets, tree, tmp_path / "index.sqlite")
    view.verdicts = VerdictReader(provider, model, config, prompt)
    assert set(_verdicts(view, "q2").values()) == {None}


def _answers_by_file(datasets: Path, tree: Path, config: Path) -> dict[Path, list[tuple[str, str]]]:
    """Each verdict file and the answers (question, setup) it holds the verdict of: the same
    response to the same question is judged once, whatever the setup."""
    from kag.datasets import load_datasets
    from kag.generation.config import load_config
    from kag.grading.judge import Judge, VerdictCache, collect_items, judge_endpoint, verdict_key
    from kag.grading.judge_prompt import load_judge_prompt

    judge = Judge(*JUDGE)
    endpoint, prompt = judge_endpoint(load_config(config), judge), load_judge_prompt(None).sha256
    out: dict[Path, list[tuple[str, str]]] = {}
    for item in collect_items(load_datasets(datasets), tree, with_mcq=True).items:
        path = VerdictCache(tree, judge).path(verdict_key(judge, prompt, item, endpoint))
        out.setdefault(path, []).append((item.question, item.setup))
    return out


def test_a_planted_link_fifo_or_broken_file_shows_no_verdict(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    config = write_verdicts(datasets, tree)
    view = open_view(datasets, tree, tmp_path / "index.sqlite", config=config)
    single = sorted(
        (answers[0], path)
        for path, answers in _answers_by_file(datasets, tree, config).items()
        if len(answers) == 1
    )
    (broken, broken_path), (fifo, fifo_path), (other, other_path), (odd, odd_path) = single[:4]
    broken_path.write_text("{not json")
    fifo_path.unlink()
    os.mkfifo(fifo_path)  # read without waiting for a writer
    other_path.write_text('{"verdict": "MAYBE", "reply": "x"}')
    odd_path.write_text('{"verdict": "CORRECT", "reply": 7}')
    for question, setup in (broken, fifo, other):
        assert _verdicts(view, question)[setup] is None
    assert _verdicts(view, odd[0])[odd[1]] == {"judge": "oa/judge-model", "verdict": "CORRECT", "reason": ""}
    assert _verdicts(view, "q2")["kag"] is not None
    folder = broken_path.parent
    elsewhere = tmp_path / "elsewhere"
    folder.rename(elsewhere)
    folder.symlink_to(elsewhere, target_is_directory=True)
    assert _verdicts(view, "q2") == {"kag": None, "native": None}


def test_the_command_names_the_judge_with_both_options(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    config = write_verdicts(datasets, tree)
    base = ["view", "-d", str(datasets), "-r", str(tree), "--index", str(tmp_path / "i.sqlite")]
    alone = runner.invoke(app, [*base, "--judge-model", "m", "--export", str(tmp_path / "e")])
    assert alone.exit_code == 2 and "--judge-provider and --judge-model" in alone.output
    unknown = runner.invoke(
        app,
        [
            *base,
            "-c",
            str(config),
            "--judge-provider",
            "nope",
            "--judge-model",
            "m",
            "--export",
            str(tmp_path / "e"),
        ],
    )
    assert unknown.exit_code == 2 and "'nope' is missing from the configuration" in unknown.output
    out = tmp_path / "site"
    done = runner.invoke(
        app,
        [
            *base,
            "-c",
            str(config),
            "--judge-provider",
            JUDGE[0],
            "--judge-model",
            JUDGE[1],
            "--export",
            str(out),
            "--flip",
            "kag,native",
        ],
    )
    assert done.exit_code == 0, done.output
    data = orjson.loads((out / "data.json").read_bytes())
    assert data["details"]["med/q2"]["setups"][0]["judge"]["verdict"] == "CORRECT"


def _plant(
    datasets: Path, tree: Path, config: Path, model: str, repeat: int = 0, temperature: float = 0.0
) -> None:
    """Cache the verdicts of judge oa/``model`` with `kag stats judge`'s own keys: INCORRECT for
    every answer but q3's, none for q4's, a hostile reason for q0's."""
    from kag.datasets import load_datasets
    from kag.generation.config import load_config
    from kag.grading.judge import Judge, Verdict, VerdictCache, collect_items, judge_endpoint, verdict_key
    from kag.grading.judge_prompt import load_judge_prompt

    judge = Judge(JUDGE[0], model)
    endpoint, prompt = judge_endpoint(load_config(config), judge), load_judge_prompt(None).sha256
    for item in collect_items(load_datasets(datasets), tree, with_mcq=True).items:
        if item.question == "q4":
            continue
        verdict = Verdict.CORRECT if item.question == "q3" else Verdict.INCORRECT
        reply = HOSTILE if item.question == "q0" else f"{verdict.value} by {model}"
        key = verdict_key(judge, prompt, item, endpoint, repeat, temperature)
        VerdictCache(tree, judge).write(key, verdict, reply)


def test_several_judges_their_majority_and_a_missing_verdict(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    config = write_verdicts(datasets, tree)
    _plant(datasets, tree, config, "second")
    _plant(datasets, tree, config, "third")
    from kag.grading.judge import Judge

    view = open_view(datasets, tree, tmp_path / "index.sqlite")
    view.verdicts = VerdictReader(*JUDGE, config, None, others=[Judge("oa", "second"), Judge("oa", "third")])
    detail = view.question("med", "q2")
    assert detail is not None
    kag = next(s for s in detail["setups"] if s["setup"] == "kag")  # kag said A: right
    assert kag["judge"] == {"judge": "oa/judge-model", "verdict": "CORRECT", "reason": "CORRECT: kag said A"}
    assert kag["judges"] == [
        {"judge": "oa/judge-model", "verdict": "CORRECT", "reason": "CORRECT: kag said A"},
        {"judge": "oa/second", "verdict": "INCORRECT", "reason": "INCORRECT by second"},
        {"judge": "oa/third", "verdict": "INCORRECT", "reason": "INCORRECT by third"},
    ]
    assert kag["majority"] == "INCORRECT"
    q4 = view.question("med", "q4")
    assert q4 is not None
    native = next(s for s in q4["setups"] if s["setup"] == "native")
    assert [j["verdict"] for j in native["judges"]] == ["INCORRECT", None, None]  # native said C
    assert native["majority"] == "INCORRECT"
    app_ = ViewApp(view, "t")
    page = app_(["q", "med", "q4"], {}).body.decode()
    assert 'class="badge verdict none">none<' in page and "Judges' majority" in page
    hostile = app_(["q", "med", "q0"], {}).body.decode()
    assert "<script>window.pwned" not in hostile and "<img src=x" not in hostile
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in hostile and "INCORRECT by" not in hostile
    api = orjson.loads(app_(["api", "question", "med", "q2"], {}).body)
    assert {s["setup"]: s["majority"] for s in api["setups"]} == {"kag": "INCORRECT", "native": "INCORRECT"}


def test_repeats_and_temperature_are_read_under_their_own_keys(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    config = write_verdicts(datasets, tree)
    _plant(datasets, tree, config, JUDGE[1], repeat=1, temperature=0.5)  # INCORRECT but q3
    _plant(datasets, tree, config, JUDGE[1], repeat=2, temperature=0.5)
    view = open_view(datasets, tree, tmp_path / "index.sqlite")
    view.verdicts = VerdictReader(*JUDGE, config, None, repeats=3, temperature=0.5)
    kag = next(s for s in view.question("med", "q0")["setups"] if s["setup"] == "kag")  # type: ignore[index]
    # repeat 0 at temperature 0.5 was never asked: two repeats of three, both INCORRECT
    assert kag["judges"] == [
        {
            "judge": "oa/judge-model",
            "verdict": "INCORRECT",
            "reason": HOSTILE,
            "repeats": [None, "INCORRECT", "INCORRECT"],
        }
    ]
    view.verdicts = VerdictReader(*JUDGE, config, None, repeats=2)
    kag = next(s for s in view.question("med", "q2")["setups"] if s["setup"] == "kag")  # type: ignore[index]
    assert kag["judges"][0]["repeats"] == ["CORRECT", None]  # temperature 0: another key


def _labels(tmp_path: Path) -> Path:
    path = tmp_path / "labels.csv"
    path.write_text(
        "dataset,question,setup,label,annotator\n"
        "med,q2,kag,correct,ann\n"
        "med,q2,kag,incorrect,bob\n"
        "med,q2,native,incorrect,ann\n"
        "med,q2,native,incorrect,bob\n"
        "med,q0,kag,correct,<b>eve</b>\n"
    )
    return path


def test_the_human_labels_beside_the_verdicts(tmp_path: Path) -> None:
    from kag.datasets import load_datasets
    from kag.grading.judge_labels import read_labels
    from kag.view.index import Index, Tree
    from kag.view.query import View

    datasets, tree = make_tree(tmp_path)
    config = write_verdicts(datasets, tree)
    idx = Index(tmp_path / "i.sqlite", load_datasets(datasets), [Tree("", str(tree.resolve()))], "", None)
    view = View(idx, VerdictReader(*JUDGE, config, None), scan=True, labels=read_labels(_labels(tmp_path)))
    setups = {s["setup"]: s for s in view.question("med", "q2")["setups"]}  # type: ignore[index]
    assert setups["kag"]["label"] == "tie"
    assert setups["kag"]["annotators"] == [
        {"annotator": "ann", "label": "correct"},
        {"annotator": "bob", "label": "incorrect"},
    ]
    assert setups["native"]["label"] == "incorrect"
    q5 = view.question("med", "q5")
    assert q5 is not None and {s["label"] for s in q5["setups"]} == {None}
    page = ViewApp(view, "t")(["q", "med", "q0"], {}).body.decode()
    assert 'class="badge label correct">correct<' in page
    assert "&lt;b&gt;eve&lt;/b&gt;: correct" in page and "<b>eve" not in page
    api = orjson.loads(ViewApp(view, "t")(["api", "question", "med", "q2"], {}).body)
    assert {s["setup"]: s["label"] for s in api["setups"]} == {"kag": "tie", "native": "incorrect"}


def test_the_command_takes_several_judges_and_labels(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    config = write_verdicts(datasets, tree)
    _plant(datasets, tree, config, "second")
    base = [
        "view",
        "-d",
        str(datasets),
        "-r",
        str(tree),
        "--index",
        str(tmp_path / "i.sqlite"),
        "-c",
        str(config),
    ]
    judges = ["--judge-provider", JUDGE[0], "--judge-model", JUDGE[1], "--judge-model", "second"]
    out = tmp_path / "site"
    done = runner.invoke(app, [*base, *judges, "--labels", str(_labels(tmp_path)), "--export", str(out)])
    assert done.exit_code == 0, done.output
    q2 = {
        s["setup"]: s for s in orjson.loads((out / "data.json").read_bytes())["details"]["med/q2"]["setups"]
    }
    assert [j["judge"] for j in q2["kag"]["judges"]] == ["oa/judge-model", "oa/second"]
    assert q2["kag"]["majority"] == "UNUSABLE" and q2["native"]["label"] == "incorrect"
    bad = tmp_path / "bad.csv"
    bad.write_text("dataset,question,setup,label\nmed,q2,kag,maybe\n")
    failed = runner.invoke(app, [*base, "--labels", str(bad), "--export", str(tmp_path / "e")])
    assert failed.exit_code == 2 and f"{bad}:2: key 'label'" in failed.output
    assert "Traceback" not in failed.output
    mismatched = runner.invoke(
        app,
        [
            *base,
            "--judge-provider",
            "oa",
            "--judge-provider",
            "ob",
            *judges[2:],
            "--judge-model",
            "x",
            "--export",
            str(tmp_path / "e"),
        ],
    )
    assert mismatched.exit_code == 2 and "2 --judge-provider and 3 --judge-model" in mismatched.output


def _stats_judged(datasets: Path, tree: Path, config: Path) -> dict[str, object]:
    """`kag stats --judge oa/judge-model --format json` of the tree."""
    args = ["stats", "-d", str(datasets), "-r", str(tree), "--format", "json"]
    result = runner.invoke(app, [*args, "--judge", "/".join(JUDGE), "--config", str(config)])
    assert result.exit_code == 0, result.output
    doc: dict[str, object] = orjson.loads(result.stdout)
    return doc


def _overview(view: object) -> dict[str, object]:
    from kag.render.stats import summary_to_json

    return summary_to_json(view.snapshot.summary)  # type: ignore[attr-defined]


def _judged(doc: dict[str, object]) -> int:
    return sum(s["overall"]["judge"]["judged"] for s in doc["setups"])  # type: ignore[attr-defined]


def test_verdicts_cached_after_the_first_build_are_counted_after_a_rescan(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    config = write_verdicts(datasets, tree)
    folder = next((tree / ".kag-judge").iterdir())
    aside = tmp_path / "aside"
    aside.mkdir()
    for path in sorted(folder.iterdir())[::2]:  # half the verdicts are not cached yet
        path.rename(aside / path.name)
    index = tmp_path / "index.sqlite"
    view = open_view(datasets, tree, index, config=config)
    first = _overview(view)
    assert first == _stats_judged(datasets, tree, config) and _judged(first) > 0
    assert not view.reload().changed  # nothing cached since: nothing read, nothing rebuilt
    for path in aside.iterdir():  # `kag stats judge` caches the others; no result file changes
        path.rename(folder / path.name)
    stats = view.reload()
    assert stats.changed and stats.read == 0
    second = _overview(view)
    assert second == _stats_judged(datasets, tree, config) and _judged(second) > _judged(first)
    # A `kag view` started again on the same index counts what was cached while none ran.
    shutil.rmtree(tree / ".kag-judge")
    again = open_view(datasets, tree, index, config=config)
    assert again.stats is not None and again.stats.read == 0 and again.stats.changed
    assert _overview(again) == _stats_judged(datasets, tree, config) and _judged(_overview(again)) == 0


def test_a_planted_link_for_the_cache_is_refused_as_kag_stats_refuses_it(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    config = write_verdicts(datasets, tree)
    (tree / ".kag-judge").rename(tmp_path / "elsewhere")
    (tree / ".kag-judge").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    args = ["-c", str(config), "--judge-provider", JUDGE[0], "--judge-model", JUDGE[1]]
    base = ["view", "-d", str(datasets), "-r", str(tree), "--index", str(tmp_path / "i.sqlite")]
    refused = runner.invoke(app, [*base, *args, "--export", str(tmp_path / "site")])
    assert refused.exit_code == 2 and "symbolic link" in refused.stderr
    assert refused.exception is None or isinstance(refused.exception, SystemExit)

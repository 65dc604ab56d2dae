"""The judge's library: verdict parsing, prompt templates, what is judged, the cache (keys,
files inside the tree only, links refused) and the per-setup aggregation."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from kag.datasets import load_datasets
from kag.errors import ConfigError, InputError
from kag.generation.config import Config, load_config
from kag.grading.judge import (
    CACHE_FOLDER,
    Judge,
    JudgedItem,
    JudgeItem,
    Kind,
    Verdict,
    VerdictCache,
    collect_items,
    judge_endpoint,
    judge_folder,
    parse_verdict,
    render_judge_prompt,
    summarize_verdicts,
    verdict_key,
)
from kag.grading.judge_prompt import DEFAULT_PROMPT, compile_judge_prompt, load_judge_prompt, sha256_text
from kag.results import LinkInTree
from tests.judge_helpers import make_tree

C, I, U = Verdict.CORRECT, Verdict.INCORRECT, Verdict.UNUSABLE


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("CORRECT", C),
        ("INCORRECT", I),
        ("INCORRECT.", I),  # "INCORRECT" contains "CORRECT": never read as it
        ("The response is INCORRECT because it names Lyon.", I),
        ("**CORRECT**", C),
        ("Verdict: CORRECT\n", C),
        ("INCORRECT, not CORRECT", I),  # the first whole word wins
        ("NOT CORRECT", C),  # ... even after a negation: the prompt asks for one word
        ("<think>Is it CORRECT? No.</think>\nINCORRECT", I),  # reasoning is not the verdict
        ("<think>INCORRECT or CORRECT, let me think", U),  # reasoning cut off: no verdict
        ("<thinking>CORRECT?</thinking> INCORRECT", I),  # thinking and reasoning blocks too
        ("<reasoning>CORRECT</reasoning>", U),
        ("<think" * 20_000 + " CORRECT", C),  # not tags (read in linear time)
        ("Correct", U),  # case-sensitive
        ("correct", U),
        ("CORRECTLY answered", U),  # not a whole word
        ("XINCORRECT", U),
        ("CORRECT_ANSWER", U),
        ("", U),
        ("Maybe.", U),
        ("É CORRECT", C),
    ],
)
def test_parse_verdict(reply: str, verdict: Verdict) -> None:
    assert parse_verdict(reply) is verdict


def item(**changes: object) -> JudgeItem:
    base = JudgeItem("geo", "1", "s1", Kind.OPEN, "Capital of France?", "Paris", "paris", True)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_default_prompt_renders_the_three_variables() -> None:
    prompt = compile_judge_prompt(DEFAULT_PROMPT, "built-in")
    text = render_judge_prompt(prompt, item())
    assert "Question:\nCapital of France?\n" in text and "Response to grade:\nparis\n" in text
    assert "Paris" in text and text.rstrip().endswith("CORRECT or INCORRECT.")
    assert prompt.sha256 == sha256_text(DEFAULT_PROMPT)


def test_a_prompt_with_other_variables_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        compile_judge_prompt("{{ INPUT }} {{ RESPONSE }}", "judge.md")
    assert str(info.value) == (
        "judge.md: undefined template variable 'INPUT'"
        " (a judge prompt may use QUESTION, REFERENCE and RESPONSE)"
    )


def test_a_prompt_reaching_for_internals_is_refused() -> None:
    with pytest.raises(ConfigError, match="Python internals"):
        compile_judge_prompt("{{ RESPONSE.__class__.__mro__ }}", "judge.md")


def test_template_braces_in_a_response_are_not_run() -> None:
    prompt = compile_judge_prompt("<{{ RESPONSE }}>", "judge.md")
    assert render_judge_prompt(prompt, item(response="{{ 7*7 }}")) == "<{{ 7*7 }}>"


def test_the_key_depends_on_judge_prompt_question_reference_and_response_only() -> None:
    judge = Judge("oa", "m")
    key = verdict_key(judge, "p", item())
    assert len(key) == 64 and int(key, 16) >= 0
    different = [
        verdict_key(Judge("ob", "m"), "p", item()),
        verdict_key(Judge("oa", "m2"), "p", item()),
        verdict_key(judge, "q", item()),
        verdict_key(judge, "p", item(question_text="Capital of Italy?")),
        verdict_key(judge, "p", item(reference="Rome")),
        verdict_key(judge, "p", item(response="Paris")),
    ]
    assert len({key, *different}) == 7
    # The same answer to the same question by another setup is judged once.
    assert verdict_key(judge, "p", item(setup="s2", path="elsewhere")) == key


def test_the_key_depends_on_the_judge_endpoint() -> None:
    judge = Judge("oa", "m")
    here = verdict_key(judge, "p", item(), ("OpenAI", "http://127.0.0.1:8000/v1"))
    there = verdict_key(judge, "p", item(), ("OpenAI", "http://127.0.0.1:8001/v1"))
    assert len({here, there, verdict_key(judge, "p", item())}) == 3


def config_with(tmp_path: Path, provider: str) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(f"[providers.oa]\n{provider}\n")
    return load_config(path)


@pytest.mark.parametrize(
    ("provider", "endpoint"),
    [
        ('type = "OpenAI"\nurl = "http://h:1/v1"\nkey = ""', ("OpenAI", "http://h:1/v1")),
        ('type = "OpenAI"\nurl = "http://H:1/v1/"\nkey = ""', ("OpenAI", "http://h:1/v1")),
        ('type = "Ollama"\nurl = "http://user:secret@h:1"', ("Ollama", "http://h:1")),  # no credential
        ('type = "Ollama"\nurl = ["http://b:1", "http://a:1"]', ("Ollama", "http://a:1", "http://b:1")),
        ('type = "Ollama"\nurl = ["http://a:1", "http://b:1"]', ("Ollama", "http://a:1", "http://b:1")),
        ('type = "Ollama"\nurl = "http://[::1]:1"', ("Ollama", "http://[::1]:1")),
        ('type = "FastEmbed"', ()),
    ],
)
def test_judge_endpoint_is_the_type_and_the_sorted_urls_without_credentials(
    tmp_path: Path, provider: str, endpoint: tuple[str, ...]
) -> None:
    assert judge_endpoint(config_with(tmp_path, provider), Judge("oa", "m")) == endpoint


def test_judge_folder_is_one_safe_name_per_pair() -> None:
    name = judge_folder(Judge("oa", "org/model:7b"))
    assert "/" not in name and name.startswith("oa-org_model_7b-")
    assert judge_folder(Judge("oa", "a/b")) != judge_folder(Judge("oa", "a_b"))
    assert judge_folder(Judge("oa", "..")) not in (".", "..")


def test_cache_round_trip_stays_inside_the_tree(tmp_path: Path) -> None:
    root = tmp_path / "results"
    root.mkdir()
    cache = VerdictCache(root, Judge("oa", "org/m"))
    key = verdict_key(cache.judge, "p", item())
    assert cache.read(key) is None
    cache.write(key, Verdict.INCORRECT, "INCORRECT: it says Lyon")
    assert cache.read(key) is Verdict.INCORRECT
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written == [root / CACHE_FOLDER / judge_folder(cache.judge) / f"{key}.verdict"]


def test_an_unreadable_cache_entry_is_asked_again(tmp_path: Path) -> None:
    cache = VerdictCache(tmp_path, Judge("oa", "m"))
    key = verdict_key(cache.judge, "p", item())
    cache.write(key, Verdict.CORRECT, "CORRECT")
    cache.path(key).write_text("{not json")
    assert cache.read(key) is None


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_fifo_or_directory_at_a_verdict_file_is_named_without_waiting(tmp_path: Path, kind: str) -> None:
    cache = VerdictCache(tmp_path, Judge("oa", "m"))
    key = verdict_key(cache.judge, "p", item())
    cache.write(key, Verdict.CORRECT, "CORRECT")
    path = cache.path(key)
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
        # A writer that never writes: an open that waited for one would return, then block in read.
        keep = os.open(path, os.O_RDWR)
    else:
        path.mkdir()
    try:
        with pytest.raises(InputError) as caught:
            cache.read(key)
    finally:
        if kind == "fifo":
            os.close(keep)
    assert str(caught.value).startswith(f"{path}: not a regular file")


def test_a_link_planted_at_the_cache_folder_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "results", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / CACHE_FOLDER)
    cache = VerdictCache(root, Judge("oa", "m"))
    key = verdict_key(cache.judge, "p", item())
    with pytest.raises(LinkInTree, match="symbolic link"):
        cache.check()
    with pytest.raises(LinkInTree):
        cache.write(key, Verdict.CORRECT, "CORRECT")
    with pytest.raises(LinkInTree):
        cache.read(key)
    assert list(outside.iterdir()) == []


def test_a_link_planted_at_the_judge_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = VerdictCache(tmp_path / "results", Judge("oa", "m"))
    (tmp_path / "results" / CACHE_FOLDER).mkdir(parents=True)
    os.symlink(outside, tmp_path / "results" / CACHE_FOLDER / judge_folder(cache.judge))
    with pytest.raises(LinkInTree):
        cache.check()
    with pytest.raises(LinkInTree):
        cache.write(verdict_key(cache.judge, "p", item()), Verdict.CORRECT, "CORRECT")
    assert list(outside.iterdir()) == []


def test_collect_items_open_answers_then_mcq_with_the_flag(tmp_path: Path) -> None:
    datasets = load_datasets(make_tree(tmp_path / "results"))
    found = collect_items(datasets, tmp_path / "results")
    got = {(i.setup, i.dataset, i.question): (i.kind, i.response, i.exact) for i in found.items}
    assert got == {
        ("s1", "geo", "1"): (Kind.OPEN, "paris", True),
        ("s1", "geo", "2"): (Kind.OPEN, "five", False),
        ("s1", "geo", "3"): (Kind.OPEN, "the blue whale.", True),
        ("s2", "geo", "1"): (Kind.OPEN, "Lyon", False),
        ("s2", "geo", "2"): (Kind.OPEN, "four", True),
    }  # s2's geo/3 is an error file; MCQs only with the flag; mc/2 is free-form
    assert found.setups_in_tree == ("s1", "s2") and found.unreadable == ()
    first = next(i for i in found.items if i.response == "paris")
    assert first.reference == "Paris\nCity of Paris" and first.question_text == "Capital of France?"
    with_mcq = collect_items(datasets, tmp_path / "results", with_mcq=True, setups=("s2",))
    mcq = [i for i in with_mcq.items if i.kind is Kind.MCQ]
    assert [(i.setup, i.response, i.exact) for i in mcq] == [("s2", "The answer is a", False)]
    assert mcq[0].question_text == "Is water wet?\n\na: yes\nb: no" and mcq[0].reference == "a: yes"
    assert {i.setup for i in with_mcq.items} == {"s2"}


def test_unreadable_files_are_listed_not_judged(tmp_path: Path) -> None:
    datasets = load_datasets(make_tree(tmp_path / "results"))
    (tmp_path / "results" / "geo" / "1" / "s1.json").write_text("{broken")
    found = collect_items(datasets, tmp_path / "results")
    assert len(found.items) == 4 and len(found.unreadable) == 1 and "s1.json" in found.unreadable[0]


def test_summarize_verdicts_hand_computed() -> None:
    judged = [
        JudgedItem(item(setup="b", exact=True), C, cached=False),  # agrees
        JudgedItem(item(setup="b", exact=False), C, cached=True),  # disagrees
        JudgedItem(item(setup="b", exact=False), I, cached=False),  # agrees
        JudgedItem(item(setup="b", exact=True), U, cached=False),  # not usable: no agreement either way
        JudgedItem(item(setup="a", exact=True), U, cached=False, failure="HTTP 500"),
    ]
    b, a = summarize_verdicts(judged)[1], summarize_verdicts(judged)[0]
    assert (b.setup, b.judged, b.correct, b.incorrect, b.unusable) == ("b", 4, 2, 1, 1)
    # An unusable verdict is no verdict: accuracy = correct / (correct + incorrect).
    assert b.accuracy == pytest.approx(2 / 3) and b.agreement_with_exact_match == pytest.approx(2 / 3)
    assert (a.setup, a.judged, a.unusable, a.accuracy, a.agreement_with_exact_match) == (
        "a",
        1,
        1,
        None,
        None,
    )
    assert summarize_verdicts([]) == ()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, ": judge prompt not found"),
        (lambda p: p.mkdir(), ": judge prompt is a directory"),
        (lambda p: p.write_bytes(b"QUESTION \xff"), ":1: judge prompt is not UTF-8 text (byte 9)"),
    ],
)
def test_a_prompt_file_that_cannot_be_read_names_the_file(tmp_path: Path, make, message: str) -> None:
    path = tmp_path / "judge.md"
    make(path)
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}{re.escape(message)}$"):
        load_judge_prompt(path)


def test_a_repeat_or_a_temperature_is_cached_apart_and_the_first_ask_keeps_its_key() -> None:
    judge, it = Judge("p", "m"), item()
    first = verdict_key(judge, "sha", it, ("OpenAI", "http://h"))
    assert verdict_key(judge, "sha", it, ("OpenAI", "http://h"), 0, 0.0) == first
    again = {
        verdict_key(judge, "sha", it, ("OpenAI", "http://h"), r, t)
        for r, t in [(1, 0.0), (2, 0.0), (0, 0.7), (1, 0.7)]
    }
    assert len(again) == 4 and first not in again

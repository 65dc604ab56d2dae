"""The runner against the misbehaving loopback server: planning (--continue, errors,
stale, leftovers, filters), faults and retries, stop requests, fatal writes, KAG wiring,
secrets."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from kag.datasets import Datasets, load_datasets
from kag.errors import ConfigError, UsageError
from kag.generation.config import Benchmark, Config, load_benchmark, load_config
from kag.generation.generator import Generator, RunOptions, TaskOutcome, generate_once
from kag.generation.plan import FileState, Plan, PlanOptions, plan_benchmark, remove_leftovers
from kag.generation.retry import RetryPolicy
from kag.generation.runner import Summary, run_benchmark, run_plan
from kag.generation.secrets import Redactor
from kag.results import (
    DatabaseStats,
    ErrorResult,
    OkResult,
    Retrieval,
    Timing,
    dump_result,
    read_result,
    result_path,
    write_result,
)
from kag.retrieval import factory as retrieval_factory
from kag.retrieval.base import RETRIEVAL_FAILED, RetrievalError, RetrievalFailed
from tests.bench_helpers import fresh, mcq, server_fixture
from tests.fakeserver import FakeServer, fake_embedding

SECRET = "sk-planted-secret-9876"


server = server_fixture("b")


@pytest.fixture(autouse=True)
def _reset(server: FakeServer) -> None:
    fresh(server)


def make_files(
    tmp_path: Path, server: FakeServer, questions: dict[str, Any], setups: str | None = None
) -> tuple[Config, Benchmark, Datasets]:
    (tmp_path / "config.toml").write_text(
        f"[providers.oa]\ntype = 'OpenAI'\nurl = '{server.url}/v1'\nkey = '{SECRET}'\n"
        f"[providers.ol]\ntype = 'Ollama'\nurl = '{server.url}'\n"
    )
    (tmp_path / "prompt.md").write_text("Q: {{INPUT}}\n{{ CHOICE }}\n")
    (tmp_path / "bench.toml").write_text(
        setups
        or (
            "[s1]\nprovider = 'oa'\nmodel = 'm1'\ntemperature = 0.0\n"
            "system_prompt = '''{{ file('prompt.md') }}'''\n"
            "[s2]\nprovider = 'ol'\nmodel = 'm2'\ntemperature = 0.0\ntokens = 64\n"
            "system_prompt = '''{{ file('prompt.md') }}'''\n"
        )
    )
    (tmp_path / "datasets.json").write_bytes(orjson.dumps(questions))
    cfg = load_config(tmp_path / "config.toml")
    return cfg, load_benchmark(tmp_path / "bench.toml", cfg), load_datasets(tmp_path / "datasets.json")


def run(plan: Plan, cfg: Config, **options: Any) -> Summary:
    defaults: dict[str, Any] = {"parallel": 4, "timeout": 5.0, "retry": RetryPolicy(retries=2, backoff=0.0)}
    defaults.update(options)
    return run_benchmark(plan, cfg, RunOptions(**defaults), handle_sigint=False)


def tree(root: Path) -> dict[str, Any]:
    """Every file below root: result files parsed (raises on any unreadable one)."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            found[str(path.relative_to(root))] = read_result(path)
    return found


# ---------------------------------------------------------------- planning


def test_plan_states_under_continue(tmp_path: Path, server: FakeServer) -> None:
    questions = {"d": {f"q{i}": mcq(f"question {i}") for i in range(1, 7)}}
    cfg, bench, data = make_files(tmp_path, server, questions)
    out = tmp_path / "out"
    fresh = plan_benchmark(cfg, bench, data, PlanOptions(out))
    assert len(fresh.tasks) == 12 and fresh.total == 12
    fp = {t.label: t.fingerprint for t in fresh.tasks}
    ok = OkResult("a")

    def put(q: str, result: Any = None, raw: bytes | None = None) -> None:
        path = result_path(out, "d", q, "", "s1")
        if raw is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(raw)
        else:
            write_result(path, result)

    from dataclasses import replace

    put("q1", replace(ok, stats=replace(ok.stats, fingerprint=fp["d/q1 [s1]"])))
    put("q2", replace(ok, stats=replace(ok.stats, fingerprint="0" * 64)))  # stale
    put("q3", ErrorResult("boom"))
    put("q4", raw=b"{broken")
    put("q5", raw=b"")
    put("q6", ok)  # a Rust-tool file: no fingerprint, counts as done
    leftover = result_path(out, "d", "q1", "", "s2").with_suffix(".json.tmp")
    leftover.parent.mkdir(parents=True, exist_ok=True)
    leftover.write_bytes(b'{"ok": {"res')

    plan = plan_benchmark(cfg, bench, data, PlanOptions(out, resume=True))
    states = {t.label: t.state for t in plan.tasks}
    assert states == {
        "d/q4 [s1]": FileState.UNREADABLE,
        "d/q5 [s1]": FileState.MISSING,
        **{f"d/q{i} [s2]": FileState.MISSING for i in range(1, 7)},
    }
    assert (plan.skipped, plan.stale_kept, plan.stale) == (4, 1, 1)
    s1 = plan.rows[0]
    assert (s1.setup, s1.tasks, s1.ok, s1.errors, s1.stale, s1.unreadable, s1.missing, s1.to_run) == (
        "s1",
        6,
        2,
        1,
        1,
        1,
        1,
        2,
    )
    assert plan.leftovers == (leftover,)

    retry = plan_benchmark(cfg, bench, data, PlanOptions(out, resume=True, retry_errors=True))
    assert {t.label for t in retry.tasks} - set(states) == {"d/q3 [s1]"}
    stale = plan_benchmark(cfg, bench, data, PlanOptions(out, resume=True, rerun_stale=True))
    assert {t.label for t in stale.tasks} - set(states) == {"d/q2 [s1]"}
    again = plan_benchmark(cfg, bench, data, PlanOptions(out))  # no --continue: everything runs
    assert len(again.tasks) == 12 and {t.state for t in again.tasks} == {FileState.EXISTS, FileState.MISSING}

    assert remove_leftovers(plan) == 1 and not leftover.exists()


def test_plan_filters_and_order(tmp_path: Path, server: FakeServer) -> None:
    questions = {"d1": {"1": mcq("a"), "2": mcq("b"), "3": mcq("c")}, "d2": {"1": mcq("x")}}
    setups = (
        "[s1]\nprovider = 'oa'\nmodel = 'm'\ntemperature = 0\n"
        "[s2]\nprovider = 'oa'\nmodel = 'm'\ntemperature = 0\ndatasets = ['d2', 'gone']\n"
        "[s3]\nprovider = 'oa'\nmodel = 'm'\ntemperature = 0\n"
    )
    cfg, bench, data = make_files(tmp_path, server, questions, setups)
    out = tmp_path / "o"
    labels = [t.label for t in plan_benchmark(cfg, bench, data, PlanOptions(out, limit=2)).tasks]
    assert labels == [
        "d1/1 [s1]",
        "d1/1 [s3]",
        "d1/2 [s1]",
        "d1/2 [s3]",
        "d2/1 [s1]",
        "d2/1 [s2]",
        "d2/1 [s3]",
    ]
    labels = [
        t.label
        for t in plan_benchmark(cfg, bench, data, PlanOptions(out, setups=("s2", "s3"), skip=("s3",))).tasks
    ]
    assert labels == ["d2/1 [s2]"]
    labels = [
        t.label
        for t in plan_benchmark(cfg, bench, data, PlanOptions(out, datasets=("d1",), skip=("s1",))).tasks
    ]
    assert labels == ["d1/1 [s3]", "d1/2 [s3]", "d1/3 [s3]"]
    plan = plan_benchmark(cfg, bench, data, PlanOptions(out, prefix="run1-", setups=("s2",)))
    assert plan.tasks[0].path == out / "d2" / "1" / "run1-s2.json"
    for options, message in (
        (PlanOptions(out, setups=("nope",)), r"--setup: unknown setup 'nope' \(known: s1, s2, s3\)"),
        (PlanOptions(out, skip=("s9",)), r"--skip: unknown setup 's9'"),
        (PlanOptions(out, datasets=("../d1",)), r"--dataset: dataset name '../d1' contains '/'"),
        (PlanOptions(out, prefix="a/b-"), r"--prefix: 'a/b-' contains '/'"),
    ):
        with pytest.raises(UsageError, match=message):
            plan_benchmark(cfg, bench, data, options)


def test_undefined_choice_for_a_free_form_question_stops_before_any_request(
    tmp_path: Path, server: FakeServer
) -> None:
    cfg, bench, data = make_files(tmp_path, server, {"d": {"1": mcq("a"), "free": {"input": "Explain."}}})
    with pytest.raises(
        ConfigError,
        match=r"bench.toml: \[s1\] system_prompt: 'CHOICE' is undefined "
        r"\(for the free-form question d/free\)",
    ):
        plan_benchmark(cfg, bench, data, PlanOptions(tmp_path / "o"))
    assert server.requests == []


# ---------------------------------------------------------------- faults and retries


FAULTS = {
    "F500": (["500", "500", "ok"], True, 3),
    "F429": (["429:0.05", "ok"], True, 2),
    "FHANG": (["hang", "ok"], True, 2),
    "FTRUNC": (["truncate", "ok"], True, 2),
    "FJSON": (["badjson", "ok"], True, 2),
    "FRESET": (["reset", "ok"], True, 2),
    "FDEAD": (["503"], False, 3),
    "F404": (["404"], False, 1),
}


def test_faults_are_retried_exhausted_tasks_become_errors_nothing_is_lost(
    tmp_path: Path, server: FakeServer
) -> None:
    questions = {"d": {name.lower(): mcq(f"question {name}") for name in FAULTS}}
    questions["d"].update({f"plain{i}": mcq(f"plain {i}") for i in range(4)})
    cfg, bench, data = make_files(tmp_path, server, questions)
    server.set_faults({name: behaviours for name, (behaviours, _, _) in FAULTS.items()})
    plan = plan_benchmark(cfg, bench, data, PlanOptions(tmp_path / "out"))
    outcomes: list[TaskOutcome] = []

    class Collect:
        def task_done(self, outcome: TaskOutcome) -> None:
            outcomes.append(outcome)

        def retrying(self, notice: Any) -> None:
            pass

    summary = run_benchmark(
        plan,
        cfg,
        RunOptions(parallel=4, timeout=10.0, retry=RetryPolicy(retries=2, backoff=0.0)),  # cuts FHANG
        Collect(),
        handle_sigint=False,
    )
    assert (summary.planned, summary.ok, summary.errors, summary.not_run) == (24, 20, 4, 0)
    assert len(outcomes) == 24
    files = tree(tmp_path / "out")
    assert len(files) == 24  # every task has its file, nothing partial, no .tmp
    per_prompt = Counter((r.model, r.prompt.split("\n")[0]) for r in server.chat_requests())
    for name, (_, recovers, attempts) in FAULTS.items():
        for setup, model in (("s1", "m1"), ("s2", "m2")):
            result = files[f"d/{name.lower()}/{setup}.json"]
            assert per_prompt[(model, f"Q: question {name}")] == attempts, (name, setup)
            if recovers:
                assert isinstance(result, OkResult) and result.result == "b"
                assert result.stats.attempts == attempts
            else:
                assert isinstance(result, ErrorResult)
                assert result.error.startswith("Failed to generate a response from the model: HTTP ")
                assert result.error.endswith(f"(after {attempts} attempt(s))")
    for i in range(4):
        assert per_prompt[("m1", f"Q: plain {i}")] == 1


def test_ok_result_fields(tmp_path: Path, server: FakeServer) -> None:
    cfg, bench, data = make_files(tmp_path, server, {"d": {"1": mcq("Is it?")}})
    plan = plan_benchmark(cfg, bench, data, PlanOptions(tmp_path / "out"))
    assert run(plan, cfg).ok == 2
    result = read_result(tmp_path / "out" / "d" / "1" / "s2.json")
    assert isinstance(result, OkResult)
    stats = result.stats
    assert stats.prompt == "Q: Is it?\na: yes\nb: no"
    assert stats.config is not None
    assert (
        stats.config.provider,
        stats.config.model,
        stats.config.tokens,
        stats.config.augmented_generation,
    ) == ("ol", "m2", 64, None)
    assert stats.usage is not None and stats.usage.completion_tokens == 1
    assert stats.attempts == 1 and stats.kag_version is not None
    assert stats.fingerprint == plan.tasks[1].fingerprint
    assert stats.time is not None and stats.generation_time is not None
    assert stats.generation_time.seconds <= stats.time.seconds
    raw = orjson.loads((tmp_path / "out" / "d" / "1" / "s2.json").read_bytes())
    assert list(raw["ok"]["stats"])[:4] == ["prompt", "retrieval", "config", "time"]  # the Rust layout first


# ---------------------------------------------------------------- stopping and crashing


def test_stop_request_cancels_cleanly_and_continue_finishes(tmp_path: Path, server: FakeServer) -> None:
    cfg, bench, data = make_files(tmp_path, server, {"d": {str(i): mcq(f"q{i}") for i in range(10)}})
    server.state.latency = 0.2
    out = tmp_path / "out"
    plan = plan_benchmark(cfg, bench, data, PlanOptions(out))

    async def go() -> Summary:
        stop = asyncio.Event()

        class StopAfterThree:
            count = 0

            def task_done(self, outcome: TaskOutcome) -> None:
                self.count += 1
                if self.count == 3:
                    stop.set()

            def retrying(self, notice: Any) -> None:
                pass

        generator = Generator(cfg, RunOptions(parallel=2, timeout=5.0))
        try:
            return await run_plan(plan, generator, StopAfterThree(), stop)
        finally:
            await generator.aclose()

    summary = asyncio.run(go())
    assert summary.interrupted and 3 <= summary.done < 20
    assert summary.not_run == 20 - summary.done
    files = tree(out)
    assert len(files) == summary.done
    assert not list(out.rglob("*.tmp"))
    resumed = plan_benchmark(cfg, bench, data, PlanOptions(out, resume=True))
    assert len(resumed.tasks) == 20 - summary.done
    server.state.latency = 0.0
    server.reset()
    assert run(resumed, cfg).ok == len(resumed.tasks)
    assert len(server.chat_requests()) == len(resumed.tasks)
    assert len(tree(out)) == 20


def test_unwritable_result_stops_the_run(tmp_path: Path, server: FakeServer) -> None:
    cfg, bench, data = make_files(tmp_path, server, {"d": {str(i): mcq(f"q{i}") for i in range(20)}})
    out = tmp_path / "out"
    out.mkdir()
    plan = plan_benchmark(cfg, bench, data, PlanOptions(out))
    # Planted after the plan's checks: the writer itself refuses to go through it.
    (out / "d").write_text("a file where the dataset folder should be")
    summary = run(plan, cfg, parallel=1)
    assert summary.fatal is not None and summary.fatal.startswith(str(out / "d"))
    assert "where a folder belongs" in summary.fatal
    # Stopped at the first failed write. Writes run in threads behind the requests: the one
    # worker may have sent as many more requests as there are write slots, never more.
    from kag.generation.runner import WRITER_THREADS

    assert summary.done == 0 and summary.not_run == 40
    assert len(server.chat_requests()) <= 1 + 2 * 1 + WRITER_THREADS < 40


# ---------------------------------------------------------------- secrets


def test_a_key_quoted_back_by_the_server_is_redacted(tmp_path: Path, server: FakeServer) -> None:
    cfg, bench, data = make_files(tmp_path, server, {"d": {"1": mcq("KEYCHECK")}})
    server.set_faults({"KEYCHECK": ["echo401"]})
    run(plan_benchmark(cfg, bench, data, PlanOptions(tmp_path / "out", setups=("s1",))), cfg)
    assert server.chat_requests()[0].authorization == f"Bearer {SECRET}"  # the key was sent...
    result = read_result(tmp_path / "out" / "d" / "1" / "s1.json")
    assert isinstance(result, ErrorResult)
    assert "Incorrect API key provided: ***" in result.error  # ...and never written
    assert SECRET not in (tmp_path / "out" / "d" / "1" / "s1.json").read_text()


def test_redactor() -> None:
    redact = Redactor(("longer-secret", "pw1"))
    assert redact("pw1 and longer-secret!") == "*** and ***!"
    cfg = Config(Path("c"), {}, secrets=frozenset({"ab", "abc", "abcdef"}))
    assert Redactor.of(cfg.secrets).secrets == ("abcdef", "abc")  # too short to redact: "ab"


# ---------------------------------------------------------------- KAG wiring (retrieval stubbed)


class StubRetriever:
    def __init__(self, name: str, database: str, embed: Any, log: list[str]) -> None:
        self.name, self.database, self.embed, self.log = name, database, embed, log

    async def retrieve(self, text: str) -> Retrieval:
        if "BOOM" in text:
            raise RuntimeError("graph unreachable")
        if "WORDED" in text:  # a failure the retriever words itself, database named
            raise RetrievalFailed(f"{RETRIEVAL_FAILED} 'other': index missing")
        if "PLAIN" in text:
            raise RetrievalError(f"{RETRIEVAL_FAILED} 'other': not the retriever's wording")
        vectors = await self.embed("emb", [text])
        result = "" if "EMPTY" in text else f"(x)-[:about]->({text})"
        return Retrieval(
            result=result,
            retriever="embedder",
            document=text,
            vector=vectors[0],
            database=DatabaseStats("ladybug", 2, 1, 3, Timing(0, 5)),
            time=Timing(0, 9),
        )

    async def aclose(self) -> None:
        self.log.append("closed")


@pytest.fixture
def stub_factory(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    log: list[str] = []

    class Factory:
        @staticmethod
        def validate_retrieval(*args: Any) -> None:
            log.append("validated")

        @staticmethod
        def open_retriever(
            retriever: str, database: str, retrievers: Any, databases: Any, embed: Any
        ) -> StubRetriever:
            log.append(f"open {retriever} {database}")
            return StubRetriever(retriever, database, embed, log)

    monkeypatch.setattr(retrieval_factory, "validate_retrieval", Factory.validate_retrieval)
    monkeypatch.setattr(retrieval_factory, "open_retriever", Factory.open_retriever)
    return log


def test_kag_setup_retrieves_embeds_through_its_provider_and_renders(
    tmp_path: Path, server: FakeServer, stub_factory: list[str]
) -> None:
    setups = (
        "[kag]\nprovider = 'oa'\nmodel = 'm1'\ntemperature = 0\n"
        "system_prompt = '''{% raw %}{{INPUT}} | {{ RETRIEVAL | default('<empty>') }}{% endraw %}'''\n"
        "augmented_generation = {retriever = 'r', database = 'g'}\n"
    )
    questions = {
        "d": {
            "1": {"input": "alpha"},
            "2": {"input": "EMPTY beta"},
            "3": {"input": "BOOM"},
            "4": {"input": "WORDED"},
            "5": {"input": "PLAIN"},
        }
    }
    cfg, bench, data = make_files(tmp_path, server, questions, setups)
    (tmp_path / "config.toml").write_text(
        (tmp_path / "config.toml").read_text()
        + "[databases.g]\ntype = 'Ladybug'\npath = 'x'\n"
        + "[retrievers.r]\ntype = 'Embedder'\nprovider = 'ol'\nmodel = 'emb'\n"
    )
    cfg = load_config(tmp_path / "config.toml")
    bench = load_benchmark(tmp_path / "bench.toml", cfg)
    summary = run(plan_benchmark(cfg, bench, data, PlanOptions(tmp_path / "out")), cfg)
    assert (summary.ok, summary.errors) == (2, 3)
    assert stub_factory.count("open r g") == 1 and stub_factory[-1] == "closed"  # one retriever per run
    files = tree(tmp_path / "out")
    first = files["d/1/kag.json"]
    assert isinstance(first, OkResult)
    assert first.stats.prompt == "alpha | (x)-[:about]->(alpha)"
    assert first.stats.retrieval is not None and first.stats.retrieval.vector == fake_embedding("alpha")
    assert first.stats.config is not None and first.stats.config.augmented_generation is not None
    assert first.stats.config.augmented_generation.database == "g"
    second = files["d/2/kag.json"]
    assert isinstance(second, OkResult) and second.stats.prompt == "EMPTY beta | <empty>"
    third = files["d/3/kag.json"]
    assert third == ErrorResult(
        "Failed during the knowledge retrieval phase (KAG) on database 'g': RuntimeError: graph unreachable"
    )
    # The failure's type, not its text, says whether the retriever worded it already.
    assert files["d/4/kag.json"] == ErrorResult(
        "Failed during the knowledge retrieval phase (KAG) on database 'other': index missing"
    )
    assert files["d/5/kag.json"] == ErrorResult(
        "Failed during the knowledge retrieval phase (KAG) on database 'g': "
        "Failed during the knowledge retrieval phase (KAG) on database 'other': not the retriever's wording"
    )
    embeds = [r for r in server.requests if r.path == "/api/embed"]
    assert sorted(tuple(r.texts or ()) for r in embeds) == [("EMPTY beta",), ("alpha",)]
    # The retrieval block round-trips through the one result model.
    assert read_result(tmp_path / "out" / "d" / "1" / "kag.json") == first
    assert dump_result(first) == (tmp_path / "out" / "d" / "1" / "kag.json").read_bytes()


def test_kag_template_that_needs_retrieval_errors_only_when_retrieval_is_empty(
    tmp_path: Path, server: FakeServer, stub_factory: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    setups = (
        "[kag]\nprovider = 'oa'\nmodel = 'm1'\ntemperature = 0\n"
        "system_prompt = '''{% raw %}{{INPUT}} {{ RETRIEVAL }}{% endraw %}'''\n"
        "augmented_generation = {retriever = 'r', database = 'g'}\n"
    )
    cfg, bench, data = make_files(
        tmp_path, server, {"d": {"1": {"input": "a"}, "2": {"input": "EMPTY"}}}, setups
    )
    with (tmp_path / "config.toml").open("a") as handle:
        handle.write("[retrievers.r]\ntype = 'Embedder'\nprovider = 'ol'\nmodel = 'emb'\n")
    cfg = load_config(tmp_path / "config.toml")
    plan = plan_benchmark(cfg, bench, data, PlanOptions(tmp_path / "out"))
    assert any(
        "when retrieval returns nothing the prompt cannot render" in r.getMessage() for r in caplog.records
    )
    run(plan, cfg)
    files = tree(tmp_path / "out")
    assert isinstance(files["d/1/kag.json"], OkResult)
    assert files["d/2/kag.json"] == ErrorResult(
        f"Failed to render the prompt template: {tmp_path / 'bench.toml'}: [kag] system_prompt:"
        " 'RETRIEVAL' is undefined"
    )


# ---------------------------------------------------------------- one generation


def test_generate_once(tmp_path: Path, server: FakeServer) -> None:
    setups = "[plain]\nprovider = 'ol'\nmodel = 'm2'\ntemperature = 0.3\n"
    cfg, bench, _ = make_files(tmp_path, server, {"d": {"1": mcq("x")}}, setups)
    result, attempts = generate_once(cfg, bench.setups["plain"], "Why {{ not a template }}?", RunOptions())
    assert isinstance(result, OkResult) and result.result == "b" and attempts == 1
    assert result.stats.prompt == "Why {{ not a template }}?"
    from kag.datasets import Question
    from kag.generation.fingerprint import task_fingerprint

    expected = task_fingerprint(bench.setups["plain"], Question("", "", "Why {{ not a template }}?", None))
    assert result.stats.fingerprint == expected
    assert server.chat_requests()[0].body["options"] == {"temperature": 0.3}  # type: ignore[index]


def test_written_result_files_are_atomic(tmp_path: Path, server: FakeServer) -> None:
    """Belt and braces: a run never leaves anything but whole result files."""
    cfg, bench, data = make_files(tmp_path, server, {"d": {str(i): mcq(f"q{i}") for i in range(5)}})
    run(plan_benchmark(cfg, bench, data, PlanOptions(tmp_path / "out")), cfg)
    names = sorted(os.path.basename(p) for p in map(str, (tmp_path / "out").rglob("*")) if os.path.isfile(p))
    assert names == ["s1.json"] * 5 + ["s2.json"] * 5

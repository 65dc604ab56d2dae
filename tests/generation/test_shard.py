"""--shard K/N: parsing, and a hash-based assignment that is disjoint, complete, balanced
and the same in every process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import chi2

from kag.cli import app
from kag.errors import UsageError
from kag.generation.shard import (
    MAX_SHARDS,
    Shard,
    check_other_slicings,
    parse_shard,
    shard_from_environment,
    shard_number,
)
from kag.results.io import TreeBusy, lock_tree
from tests.conftest import REPO

names = st.text(min_size=0, max_size=12)
tasks = st.lists(st.tuples(names, names, names), min_size=1, max_size=60, unique=True)


@pytest.mark.parametrize(
    ("text", "index", "count"), [("1/1", 1, 1), ("2/8", 2, 8), ("8/8", 8, 8), (" 3 / 10 ", 3, 10)]
)
def test_parse_shard_accepts_k_of_n(text: str, index: int, count: int) -> None:
    shard = parse_shard(text)
    assert (shard.index, shard.count) == (index, count)
    assert str(shard) == f"{index}/{count}"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("0/4", "K must be between 1 and N"),
        ("5/4", "K must be between 1 and N"),
        ("1/0", "N must be at least 1"),
        ("0/0", "N must be at least 1"),
        ("2", "expected K/N"),
        ("a/b", "expected K/N"),
        ("-1/4", "expected K/N"),
        ("1/4/2", "expected K/N"),
        ("", "expected K/N"),
        ("١/٢", "expected K/N"),  # other scripts' digits are not K/N
    ],
)
def test_parse_shard_rejects_with_the_option_named(text: str, fragment: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_shard(text)
    message = str(caught.value)
    assert message.startswith("--shard: ")
    assert fragment in message
    assert repr(text) in message


def test_parse_shard_names_the_option_it_is_given() -> None:
    with pytest.raises(UsageError, match=r"^--slice: "):
        parse_shard("9/3", option="--slice")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("1/" + "9" * 5000, f"N must be at most {MAX_SHARDS}"),
        ("9" * 5000 + "/3", "K must be between 1 and N"),
        (f"1/{MAX_SHARDS + 1}", f"N must be at most {MAX_SHARDS}"),
        ("1/" + "9" * 5000 + "x", "expected K/N"),
    ],
)
def test_parse_shard_refuses_huge_numbers_in_one_short_line(text: str, fragment: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_shard(text)
    message = str(caught.value)
    assert message.startswith("--shard: ") and fragment in message
    assert len(message) < 200
    assert f"({len(text)} characters)" in message if len(text) > 40 else repr(text) in message


def test_parse_shard_reads_leading_zeros_of_any_length() -> None:
    assert parse_shard("0" * 5000 + "2/" + "0" * 5000 + "3") == Shard(2, 3)
    assert parse_shard(f"{MAX_SHARDS}/{MAX_SHARDS}") == Shard(MAX_SHARDS, MAX_SHARDS)


def test_benchmark_refuses_a_huge_shard_count_with_exit_2(tmp_path) -> None:
    from typer.testing import CliRunner

    for name in ("config.toml", "bench.toml", "datasets.json"):
        (tmp_path / name).write_text("")
    args = ["benchmark", "-c", str(tmp_path / "config.toml"), "-b", str(tmp_path / "bench.toml")]
    args += ["-d", str(tmp_path / "datasets.json"), "-o", str(tmp_path / "out")]
    result = CliRunner().invoke(app, [*args, "--shard", "1/" + "7" * 5000])
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.startswith("kag: error: --shard: N must be at most")
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_shard_rejects_k_outside_one_to_n() -> None:
    with pytest.raises(ValueError, match="between 1 and N"):
        Shard(0, 3)
    with pytest.raises(ValueError, match="at least 1"):
        shard_number("d", "q", "s", 0)


@given(tasks, st.integers(min_value=1, max_value=12))
def test_shards_are_disjoint_and_cover_every_task(items: list[tuple[str, str, str]], count: int) -> None:
    shards = [Shard(k, count) for k in range(1, count + 1)]
    for task in items:
        holders = [shard for shard in shards if shard.contains(*task)]
        assert len(holders) == 1, (task, holders)
        assert holders[0].index == shard_number(*task, count)
    union = {task for shard in shards for task in items if shard.contains(*task)}
    assert union == set(items)


@given(tasks, st.integers(min_value=1, max_value=12), st.randoms(use_true_random=False))
def test_shard_of_a_task_ignores_order_and_the_rest_of_the_list(
    items: list[tuple[str, str, str]], count: int, rng: object
) -> None:
    """What --limit or --continue change is the list around a task: its shard stays."""
    before = {task: shard_number(*task, count) for task in items}
    shuffled = list(items)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    kept = shuffled[: len(shuffled) // 2 + 1]
    assert {task: shard_number(*task, count) for task in kept} == {task: before[task] for task in kept}


def test_names_are_hashed_with_their_boundaries() -> None:
    """("ab", "c") and ("a", "bc") are different tasks; across 64 shard counts they must
    not always agree (a concatenation without lengths would make them agree everywhere)."""
    a = [shard_number("ab", "c", "s", n) for n in range(2, 66)]
    b = [shard_number("a", "bc", "s", n) for n in range(2, 66)]
    assert a != b


@pytest.mark.parametrize("count", [2, 3, 7, 16, 64])
def test_ten_thousand_tasks_are_balanced(count: int) -> None:
    """The counts per shard pass a chi-square test of uniformity at p = 1e-6 (a hash that
    favoured a shard, or a modulo of a few bits, fails it)."""
    counts = Counter(
        shard_number(f"dataset{d}", str(q), f"setup-{s}", count)
        for d in range(4)
        for q in range(500)
        for s in range(5)
    )
    total = sum(counts.values())
    assert total == 10_000
    assert set(counts) == set(range(1, count + 1))
    expected = total / count
    statistic = sum((counts[k] - expected) ** 2 / expected for k in range(1, count + 1))
    assert statistic < chi2.isf(1e-6, count - 1), (statistic, counts)


_CHILD = """
import json, sys
from kag.generation.shard import shard_number
items = json.loads(sys.stdin.read())
print(json.dumps([shard_number(d, q, s, n) for d, q, s, n in items]))
"""


def test_assignment_is_the_same_in_processes_with_other_hash_seeds() -> None:
    items = [(f"ds{i % 3}", f"q-{i}", ["baseline", "kag", "ünïcode ✓"][i % 3], 2 + i % 9) for i in range(300)]
    here = [shard_number(d, q, s, n) for d, q, s, n in items]
    # Python's own str hash differs between these seeds: a shard from hash() would move.
    seeds = ["0", "1", "4242"]
    for seed in seeds:
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        child = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=json.dumps(items),
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        assert json.loads(child.stdout) == here, seed
    probes = [
        subprocess.run(
            [sys.executable, "-c", "print(hash('kag'))"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        ).stdout
        for seed in seeds
    ]
    assert len(set(probes)) == len(seeds)  # the seeds really changed str hashing


def test_assignment_is_pinned_across_versions() -> None:
    """Machines of one job array may run different kag builds: the assignment is a format,
    so these values (BLAKE2b-64, person b"kag-shard-v1", length-prefixed UTF-8) must not
    change."""
    import hashlib

    def reference(dataset: str, question: str, setup: str, count: int) -> int:
        h = hashlib.blake2b(digest_size=8, person=b"kag-shard-v1")
        for name in (dataset, question, setup):
            raw = name.encode()
            h.update(len(raw).to_bytes(8, "big") + raw)
        return 1 + int.from_bytes(h.digest(), "big") % count

    for count in (2, 3, 4, 7, 100):
        for task in [("mirage", str(q), "baseline") for q in range(50)] + [("medqa", "é", ""), ("", "", "")]:
            assert shard_number(*task, count) == reference(*task, count)


# ---------------------------------------------------------------- --shard auto


def slurm(
    task: int, first: int, last: int, count: int | None = None, step: int | None = None
) -> dict[str, str]:
    """The variables Slurm sets in an array task (``--array=first-last``)."""
    env = {
        "SLURM_JOB_ID": "1234",
        "SLURM_ARRAY_JOB_ID": "1230",
        "SLURM_ARRAY_TASK_ID": str(task),
        "SLURM_ARRAY_TASK_MIN": str(first),
        "SLURM_ARRAY_TASK_MAX": str(last),
        "SLURM_ARRAY_TASK_COUNT": str(last - first + 1 if count is None else count),
    }
    if step is not None:
        env["SLURM_ARRAY_TASK_STEP"] = str(step)
    return env


@pytest.mark.parametrize(
    ("env", "shard", "source"),
    [
        (slurm(1, 1, 4), Shard(1, 4), "Slurm array task 1 of 1-4"),
        (slurm(4, 1, 4, step=1), Shard(4, 4), "Slurm array task 4 of 1-4"),
        (slurm(0, 0, 3), Shard(1, 4), "Slurm array task 0 of 0-3"),  # ids from 0
        (slurm(3, 0, 3), Shard(4, 4), "Slurm array task 3 of 0-3"),
        (
            {"JOB_COMPLETION_INDEX": "0", "JOB_COMPLETIONS": "8"},
            Shard(1, 8),
            "Kubernetes indexed Job, index 0 of 8",
        ),
        (
            {"JOB_COMPLETION_INDEX": "7", "JOB_COMPLETIONS": "8"},
            Shard(8, 8),
            "Kubernetes indexed Job, index 7 of 8",
        ),
        # A Slurm array task inside a pod: the array is what splits the work.
        (
            {**slurm(2, 1, 2), "JOB_COMPLETION_INDEX": "0", "JOB_COMPLETIONS": "5"},
            Shard(2, 2),
            "Slurm array task 2 of 1-2",
        ),
    ],
)
def test_shard_auto_reads_the_schedulers_task(env: dict[str, str], shard: Shard, source: str) -> None:
    assert shard_from_environment(env) == (shard, source)


def test_every_task_of_an_array_takes_its_own_shard() -> None:
    for first in (0, 1):
        shards = [shard_from_environment(slurm(t, first, first + 7))[0] for t in range(first, first + 8)]
        assert shards == [Shard(k, 8) for k in range(1, 9)]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {},
            (
                "--shard auto: no scheduler's task found (SLURM_ARRAY_TASK_ID of a Slurm job array,"
                " JOB_COMPLETION_INDEX of a Kubernetes indexed Job); or give --shard K/N"
            ),
        ),
        (
            {"SLURM_JOB_ID": "12"},
            (
                "--shard auto: this Slurm job is not an array task (SLURM_ARRAY_TASK_ID is not set);"
                " submit it with sbatch --array=1-N, or give --shard K/N"
            ),
        ),
        (
            slurm(3, 3, 3),  # `sbatch --array=3`: one task of an array submitted again on its own
            (
                "--shard auto: the Slurm array starts at id 3, not at 0 or 1: a part of an array"
                " submitted on its own cannot tell its slices; submit the whole array again (--continue"
                " skips what is done), requeue the task (scontrol requeue), or give --shard K/N"
            ),
        ),
        (
            slurm(1, 1, 1),  # `sbatch --array=1`: would be the whole run, not slice 1
            (
                "--shard auto: the Slurm array has a single task (id 1), which would be the whole run,"
                " not one slice of it; submit the whole array again (--continue skips what is done),"
                " requeue the task (scontrol requeue), or give --shard K/N"
            ),
        ),
        (
            slurm(3, 1, 7, count=4, step=2),  # --array=1-7:2
            (
                "--shard auto: the Slurm array (ids 1-7:2, 4 task(s)) is not a range of consecutive"
                " ids; submit it with --array=1-N, or give --shard K/N"
            ),
        ),
        (
            slurm(5, 1, 9, count=3),  # --array=1,5,9
            (
                "--shard auto: the Slurm array (ids 1-9, 3 task(s)) is not a range of consecutive"
                " ids; submit it with --array=1-N, or give --shard K/N"
            ),
        ),
        (
            {k: v for k, v in slurm(1, 1, 4).items() if k != "SLURM_ARRAY_TASK_COUNT"},
            "--shard auto: SLURM_ARRAY_TASK_COUNT is not set; or give --shard K/N",
        ),
        (
            {**slurm(1, 1, 4), "SLURM_ARRAY_TASK_ID": "x\n1"},
            "--shard auto: SLURM_ARRAY_TASK_ID is not a whole number (got 'x\\n1'); or give --shard K/N",
        ),
        (
            {**slurm(1, 1, 4), "SLURM_ARRAY_TASK_COUNT": "9" * 5000},
            (
                "--shard auto: SLURM_ARRAY_TASK_COUNT is past 1000000 (got"
                f" {'9' * 40!r}... (5000 characters)); or give --shard K/N"
            ),
        ),
        (
            {"JOB_COMPLETION_INDEX": "2"},
            (
                "--shard auto: JOB_COMPLETION_INDEX is set (a Kubernetes indexed Job) but"
                " JOB_COMPLETIONS is not: set it to the Job's completions in the pod's env, or give --shard K/N"
            ),
        ),
        (
            {"JOB_COMPLETION_INDEX": "8", "JOB_COMPLETIONS": "8"},
            (
                "--shard auto: JOB_COMPLETION_INDEX 8 is not below JOB_COMPLETIONS 8 (the index counts"
                " from 0); or give --shard K/N"
            ),
        ),
        (
            {"JOB_COMPLETION_INDEX": "-1", "JOB_COMPLETIONS": "8"},
            "--shard auto: JOB_COMPLETION_INDEX is not a whole number (got '-1'); or give --shard K/N",
        ),
    ],
)
def test_shard_auto_says_what_it_looked_for(env: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        shard_from_environment(env)
    assert str(caught.value) == message


def _project(tmp_path, url: str) -> list[str]:
    (tmp_path / "config.toml").write_text(f'[providers.oa]\ntype = "OpenAI"\nkey = ""\nurl = "{url}/v1"\n')
    (tmp_path / "bench.toml").write_text('[s1]\nprovider = "oa"\nmodel = "m1"\ntemperature = 0.0\n')
    questions = {
        str(i): {"input": f"q{i}", "output": {"type": "MCQ", "options": {"a": "y"}, "answer": "a"}}
        for i in range(12)
    }
    (tmp_path / "datasets.json").write_text(json.dumps({"d": questions}))
    return ["benchmark", "-c", str(tmp_path / "config.toml"), "-b", str(tmp_path / "bench.toml")] + [
        "-d",
        str(tmp_path / "datasets.json"),
        "-o",
        str(tmp_path / "out"),
        "--backoff",
        "0",
    ]


def test_benchmark_shard_auto_outside_a_scheduler_is_one_line_exit_2(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    for name in [k for k in os.environ if k.startswith(("SLURM_", "JOB_COMPLETION"))]:
        monkeypatch.delenv(name)
    result = CliRunner().invoke(app, [*_project(tmp_path, "http://127.0.0.1:9"), "--shard", "auto"])
    assert result.exit_code == 2
    assert result.stderr == (
        "kag: error: --shard auto: no scheduler's task found (SLURM_ARRAY_TASK_ID of a Slurm job"
        " array, JOB_COMPLETION_INDEX of a Kubernetes indexed Job); or give --shard K/N\n"
    )
    assert not (tmp_path / "out").exists()


def test_benchmark_shard_auto_runs_the_array_tasks_slice_and_records_it(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from tests.fakeserver import FakeServer

    for name, value in slurm(1, 0, 3).items():  # --array=0-3: task 1 is shard 2/4
        monkeypatch.setenv(name, value)
    with FakeServer(reply="a") as server:
        args = _project(tmp_path, server.url)
        dry = CliRunner().invoke(app, [*args, "--shard", "2/4", "--dry-run"])
        result = CliRunner().invoke(app, [*args, "--shard", " auto "])
        asked = sorted(re.findall(r"\bq[0-9]+\b", r.prompt or "")[0] for r in server.chat_requests())
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("kag: benchmark: --shard auto: shard 2/4 (Slurm array task 1 of 0-3)\n")
    mine = sorted(f"q{i}" for i in range(12) if shard_number("d", str(i), "s1", 4) == 2)
    assert mine and asked == mine
    assert dry.stdout.splitlines()[-1].startswith(f"{len(mine)} task(s) to run")
    (record,) = (tmp_path / "out" / ".kag" / "runs").glob("*.json")
    assert json.loads(record.read_text())["shard"] == "2/4"


# ---------------------------------------------------------------- runs cut into other slices


@pytest.mark.parametrize(
    ("held", "mine", "other", "this"),
    [
        ("shard-1-of-4", Shard(1, 2), "--shard 1/4", "--shard 1/2"),
        ("shard-3-of-4", None, "--shard 3/4", "no --shard"),
        (None, Shard(2, 4), "no --shard", "--shard 2/4"),
    ],
)
def test_a_run_cut_into_other_slices_is_refused_while_the_other_writes(
    tmp_path, held: str | None, mine: Shard | None, other: str, this: str
) -> None:
    lock = lock_tree(tmp_path, held)
    try:
        with pytest.raises(TreeBusy) as caught:
            check_other_slicings(tmp_path, mine)
    finally:
        lock.release()
    assert str(caught.value) == (
        f"{tmp_path}: another kag benchmark (pid {os.getpid()}) is writing this result tree with"
        f" {other}; with {this} some tasks would run twice: wait for it to end, or give every run"
        f" the same N (lock file {lock.path})"
    )
    check_other_slicings(tmp_path, mine)  # once it has ended


def test_shards_of_one_n_and_leftover_lock_files_share_the_tree(tmp_path) -> None:
    # Killed runs leave their lock files but no lock.
    (tmp_path / ".kag-benchmark-lock-shard-1-of-8.tmp").write_text("999999\n")
    (tmp_path / ".kag-benchmark-lock.tmp").write_text("999999\n")
    # A link named like a lock file is not followed to the held lock it points at.
    other = tmp_path / "other"
    other.mkdir()
    with lock_tree(other, "shard-1-of-3") as far:
        (tmp_path / far.path.name).symlink_to(far.path)
        with lock_tree(tmp_path, "shard-1-of-4"), lock_tree(tmp_path, "shard-2-of-4"):
            for shard in (Shard(1, 4), Shard(3, 4)):
                check_other_slicings(tmp_path, shard)


def test_benchmark_refuses_another_n_beside_a_running_shard(tmp_path) -> None:
    from typer.testing import CliRunner

    from tests.fakeserver import FakeServer

    with FakeServer(reply="a") as server:
        args = _project(tmp_path, server.url)
        (tmp_path / "out").mkdir()
        with lock_tree(tmp_path / "out", "shard-2-of-3") as held:
            result = CliRunner().invoke(app, [*args, "--shard", "1/2"])
            beside = CliRunner().invoke(app, [*args, "--shard", "1/3"])
        asked = len(server.chat_requests())
    assert result.exit_code == 2
    assert result.stderr == (
        f"kag: error: {tmp_path / 'out'}: another kag benchmark (pid {os.getpid()}) is writing this"
        " result tree with --shard 2/3; with --shard 1/2 some tasks would run twice: wait for it to"
        f" end, or give every run the same N (lock file {held.path})\n"
    )
    assert beside.exit_code == 0, beside.stderr  # a shard of the same N runs beside it
    mine = [i for i in range(12) if shard_number("d", str(i), "s1", 3) == 1]
    assert asked == len(mine) > 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".kag", "d"]  # no lock left

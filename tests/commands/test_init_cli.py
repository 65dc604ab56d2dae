"""`kag init`: a starter project that `kag benchmark` runs at once (here against a loopback
OpenAI-compatible and Ollama server), never replacing a file, never writing what a
hostile --url or --model would smuggle into a template."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.starter import FILES
from tests.conftest import REPO
from tests.fakeserver import FakeServer


def kag(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("provider", ["ollama", "openai", "llama-cpp"])
def test_init_then_dry_run_works_at_once(
    tmp_path: Path, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "run"
    result = kag("init", folder, "--provider", provider)
    assert result.exit_code == 0, result.output
    assert [line for line in result.stdout.splitlines() if line.startswith("wrote")] == [
        f"wrote {folder / f}" for f in FILES
    ]
    assert f"cd {folder}" in result.stdout
    assert "kag benchmark -d datasets.json -b benchmark.toml -o results --dry-run" in result.stdout
    monkeypatch.chdir(folder)
    dry = kag("benchmark", "-d", "datasets.json", "-b", "benchmark.toml", "-o", "results", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "5 task(s) to run" in dry.output
    check = kag("datasets", "check", "datasets.json", "--format", "json")
    assert orjson.loads(check.stdout)["total"]["with_answer"] == 5


@pytest.mark.parametrize("provider, path", [("llama-cpp", "/v1/chat/completions"), ("ollama", "/api/chat")])
def test_init_then_benchmark_runs_against_the_server(
    tmp_path: Path, provider: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeServer(reply="C") as server:
        url = f"{server.url}/v1" if provider == "llama-cpp" else server.url
        folder = tmp_path / "run"
        assert kag("init", folder, "--provider", provider, "--url", url, "--model", "tiny:1b").exit_code == 0
        monkeypatch.chdir(folder)
        run = kag("benchmark", "-d", "datasets.json", "-b", "benchmark.toml", "-o", "results")
        assert run.exit_code == 0, run.output
        seen = [r for r in server.requests if r.path == path]
        assert len(seen) == 5
        assert all(r.model == "tiny:1b" for r in seen)
        # The starter setup caps the reply: OpenAI max_tokens, Ollama options.num_predict.
        caps = [
            r.body["max_tokens"] if provider == "llama-cpp" else r.body["options"]["num_predict"]
            for r in seen
            if r.body
        ]
        assert caps == [16] * 5
    graded = kag("stats", "-d", "datasets.json", "-r", "results", "--format", "json")
    assert graded.exit_code == 0, graded.output
    overall = orjson.loads(graded.stdout)["setups"][0]
    assert overall["setup"] == "tiny-1b-native"
    assert (overall["overall"]["total"], overall["overall"]["correct"]) == (5, 2)  # C is right twice


def test_init_never_replaces_a_file(tmp_path: Path) -> None:
    (tmp_path / "benchmark.toml").write_text("mine")
    result = kag("init", tmp_path)
    assert result.exit_code == 2
    assert f"{tmp_path / 'benchmark.toml'}: already exists" in result.stderr
    assert (tmp_path / "benchmark.toml").read_text() == "mine"
    assert not (tmp_path / "config.toml").exists()  # checked before anything is written


def test_init_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "run"
    folder.mkdir()
    os.symlink(outside, folder / "prompts")
    result = kag("init", folder)
    assert result.exit_code == 2
    assert "prompts" in result.stderr
    assert list(outside.iterdir()) == []
    dangling = tmp_path / "run2"
    dangling.mkdir()
    os.symlink(outside / "config.toml", dangling / "config.toml")
    assert kag("init", dangling).exit_code == 2
    assert not (outside / "config.toml").exists()


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--url", "http://x/{{ cycler.__init__ }}", "--url must be a plain"),
        ("--url", 'http://h/v1"\nkey = "x', "--url must be a plain"),
        ("--url", "http://user:secret@h/v1", "credentials in the URL"),
        ("--url", "file:///etc/passwd", "--url must be a plain"),
        ("--model", 'm"\n[evil]', "--model must be a model name"),
        ("--model", "{% raw %}", "--model must be a model name"),
        ("--provider", "vllm", "--provider must be one of ollama, openai, llama-cpp"),
    ],
)
def test_hostile_values_are_refused_before_anything_is_written(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    result = kag("init", tmp_path / "run", option, value)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "secret" not in result.output
    assert not (tmp_path / "run").exists()


def test_openai_key_comes_from_the_environment(tmp_path: Path) -> None:
    assert kag("init", tmp_path, "--provider", "openai").exit_code == 0
    config = (tmp_path / "config.toml").read_text()
    assert "key = \"{{ env('OPENAI_API_KEY') }}\"" in config
    assert "https://api.openai.com/v1" in config


def test_a_refused_init_leaves_nothing_and_a_rerun_works(tmp_path: Path) -> None:
    """A file where the prompts folder belongs is found after two files were written: they
    are removed again, and once the file is gone the same command works."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "prompts").write_text("mine")
    result = kag("init", folder)
    assert result.exit_code == 2
    assert result.stderr == f"kag: error: {folder / 'prompts'}: not a folder (a link or a file is there)\n"
    assert sorted(p.name for p in folder.iterdir()) == ["prompts"]
    (folder / "prompts").unlink()
    again = kag("init", folder)
    assert again.exit_code == 0, again.output
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == sorted(FILES)


def test_a_full_disk_leaves_no_cut_file_and_names_the_file(tmp_path: Path) -> None:
    """The kernel cuts config.toml short at the file size limit (as a full disk does), then
    refuses the rest: the error names the file, and no file nor the new folder is left."""
    folder = tmp_path / "new" / "run"

    def cap() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    done = subprocess.run(
        [sys.executable, "-m", "kag", "init", str(folder)],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=cap,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"kag: error: {folder / 'config.toml'}: cannot write: File too large\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["-dash", "--", "a b", "-"])
def test_the_cd_line_works_for_any_folder_name(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = kag("init", "--", name)
    assert result.exit_code == 0, result.output
    cd = next(line.strip() for line in result.stdout.splitlines() if line.strip().startswith("cd "))
    # The printed command, run by a shell, lands in the folder.
    where = subprocess.run(["sh", "-c", f"{cd} && pwd -P"], capture_output=True, text=True, check=True)
    assert where.stdout.strip() == str((tmp_path / name).resolve())


def test_a_second_setup_in_the_starters_style_trips_no_prefix_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`local-native` and `local-terse` share their first word: without --prefix, kag stats
    and compare would take it for a prefix the files were written with. The tree's run
    records say the runs were given none: no warning. A tree without records still warns,
    and so does one whose records show a run given --prefix."""
    import shutil

    from kag.results import runs_folder

    folder = tmp_path / "run"
    with FakeServer(reply="C") as server:
        assert kag("init", folder, "--provider", "llama-cpp", "--url", f"{server.url}/v1").exit_code == 0
        monkeypatch.chdir(folder)
        bench = Path("benchmark.toml")
        bench.write_text(
            bench.read_text() + "\n" + bench.read_text().split("\n\n", 1)[1].replace("native", "terse")
        )
        # As a user runs it: the record keeps this process's command line.
        for out, extra in (("results", []), ("other", ["--prefix", "x-"])):
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "kag",
                    "benchmark",
                    "-d",
                    "datasets.json",
                    "-b",
                    "benchmark.toml",
                    "-o",
                    out,
                    *extra,
                ],
                env=dict(os.environ, PYTHONPATH=str(REPO)),
                capture_output=True,
                text=True,
                check=False,
            )
            assert run.returncode == 0, run.stderr
    for command in (["stats"], ["stats", "compare"]):
        graded = kag(*command, "-d", "datasets.json", "-r", "results")
        assert graded.exit_code == 0, graded.output
        assert "local-native" in graded.stdout and "local-terse" in graded.stdout
        assert "every setup name starts with" not in graded.stderr
    # The runs given --prefix x- into `other`, read as a run given none would be: the hint.
    shutil.copytree(runs_folder("other"), runs_folder("results"), dirs_exist_ok=True)
    assert (
        "every setup name starts with 'local-'" in kag("stats", "-d", "datasets.json", "-r", "results").stderr
    )
    shutil.rmtree(Path("results") / ".kag")
    assert (
        "every setup name starts with 'local-'" in kag("stats", "-d", "datasets.json", "-r", "results").stderr
    )

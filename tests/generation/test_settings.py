"""Generation settings per setup (seed, top_p, stop, system, passthrough tables...): how the
benchmark file gives them, the refusal of unknown keys, and their part in the fingerprint."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kag.datasets import MCQ, Question
from kag.errors import ConfigError
from kag.generation.config import GenerationSettings, Setup, load_benchmark, load_config
from kag.generation.fingerprint import task_fingerprint
from kag.generation.templates import compile_template

PROVIDERS = """
[providers.local]
type = "Ollama"

[providers.remote]
type = "OpenAI"
url = "http://127.0.0.1:9/v1/"
key = ""
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def cfg_path(tmp_path: Path) -> Path:
    return write(tmp_path / "config.toml", PROVIDERS)


def bench(tmp_path: Path, text: str) -> Path:
    return write(tmp_path / "bench.toml", text)


HEAD = "provider = 'local'\nmodel = 'm'\ntemperature = 0\n"


@pytest.mark.parametrize(
    ("text", "line", "key", "hint"),
    [
        (
            f"[a]\n{HEAD}\n[s]\nprovider = 'local'\nmodel = 'm'\ntemperture = 0.5\n",
            9,
            "temperture",
            "'temperature'",
        ),
        (f"[s]\n{HEAD}token = 5\n", 5, "token", "'tokens'"),
        (f"[s]\n{HEAD}  'top-p' = 0.9\n", 5, "top-p", "'top_p'"),
        (
            f"[s]\n{HEAD}augmented_generation = {{ retriever = 'r', databse = 'd' }}\n",
            5,
            "databse",
            "'database'",
        ),
    ],
)
def test_an_unknown_setup_key_names_file_line_key_and_the_nearest_one(
    tmp_path: Path, cfg_path: Path, text: str, line: int, key: str, hint: str
) -> None:
    path = bench(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_benchmark(path, load_config(cfg_path))
    message = str(caught.value)
    assert message.startswith(f"{path}: line {line}: ")
    assert f"unknown key {key!r} (did you mean {hint}?)" in message


def test_an_unknown_key_far_from_any_lists_the_known_ones(tmp_path: Path, cfg_path: Path) -> None:
    path = bench(tmp_path, f"[s]\n{HEAD}zzz = 1\n")
    with pytest.raises(
        ConfigError, match=rf"^{path}: line 5: \[s\]: unknown key 'zzz' \(known keys: provider, "
    ):
        load_benchmark(path, load_config(cfg_path))


def test_an_unknown_provider_key_names_file_line_key_and_the_nearest_one(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.toml",
        "[providers.a]\ntype = 'Ollama'\n\n[providers.b]\ntype = 'OpenAI'\nkey = ''\nurls = 'http://h'\n",
    )
    expected = rf"^{path}: line 7: providers.b: unknown key 'urls' \(did you mean 'url'\?\)$"
    with pytest.raises(ConfigError, match=expected):
        load_config(path)


def test_the_cli_refuses_an_unknown_key_with_exit_2(tmp_path: Path, cfg_path: Path) -> None:
    from typer.testing import CliRunner

    from kag.cli import app

    path = bench(tmp_path, f"[s]\n{HEAD}temprature = 1\n")
    data = write(tmp_path / "datasets.json", '{"d": {"1": {"input": "q", "answer": ["a"]}}}')
    result = CliRunner().invoke(
        app, ["benchmark", "-c", str(cfg_path), "-b", str(path), "-d", str(data), "--dry-run"]
    )
    assert result.exit_code == 2
    assert f"{path}: line 5: [s]: unknown key 'temprature' (did you mean 'temperature'?)" in result.output
    assert "Traceback" not in result.output


RUST_CONFIG = """[providers.o]
type = 'Ollama'
url = 'http://h:1'
[providers.p]
type = 'OpenAI'
url = 'http://h:2/v1'
key = 'k'
[providers.f]
type = 'FastEmbed'
model = 'e'
[retrievers.r]
type = 'Embedder'
provider = 'f'
model = 'e'
[retrievers.r.extra.d]
type = 'Neo4j'
index = 'i'
[databases.d]
type = 'Neo4j'
password = 'pw'
"""

RUST_BENCH = """[s]
provider = 'o'
model = 'm'
temperature = 0.0
tokens = 100
system_prompt = '''{% raw %}{{INPUT}} {{RETRIEVAL}}{% endraw %}'''
datasets = ['x']
augmented_generation = { retriever = 'r', database = 'd' }
"""


def test_every_rust_tool_key_is_accepted(tmp_path: Path) -> None:
    # The keys of the Rust tool's Provider, BenchmarkEntry and Generation structs.
    cfg = load_config(write(tmp_path / "config.toml", RUST_CONFIG))
    setup = load_benchmark(bench(tmp_path, RUST_BENCH), cfg).setups["s"]
    assert setup.tokens == 100 and setup.augmented_generation is not None and not setup.settings


def test_the_real_rust_benchmark_file_has_no_settings(
    tmp_path: Path, med_kag: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(med_kag / "prompts", tmp_path / "examples" / "prompt")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEO4J_URI", "bolt://127.0.0.1:9")
    monkeypatch.setenv("NEO4J_PASSWORD", "pw")
    cfg = load_config(med_kag / "configs" / "config.toml")
    setups = load_benchmark(med_kag / "configs" / "benchmark.toml", cfg).setups
    assert setups and all(not s.settings for s in setups.values())


def test_generation_settings_are_read(tmp_path: Path, cfg_path: Path) -> None:
    path = bench(
        tmp_path,
        f"[o]\n{HEAD}seed = 7\ntop_p = 0.5\ntop_k = 3\nstop = 'END'\nmax_tokens = 9\npresence_penalty = 0.1\n"
        "frequency_penalty = -0.2\nsystem = 'Be brief.'\noptions = { num_gpu = 1 }\n"
        "[r]\nprovider = 'remote'\nmodel = 'm'\ntemperature = 0\nstop = ['a', 'b']\n"
        "extra_body = { chat_template_kwargs = { enable_thinking = false } }\n",
    )
    setups = load_benchmark(path, load_config(cfg_path)).setups
    assert setups["o"].settings.to_json() == {
        "seed": 7,
        "top_p": 0.5,
        "top_k": 3,
        "stop": ["END"],
        "max_tokens": 9,
        "presence_penalty": 0.1,
        "frequency_penalty": -0.2,
        "system": "Be brief.",
        "passthrough": {"num_gpu": 1},
    }
    assert setups["r"].settings.stop == ("a", "b")
    assert setups["r"].settings.passthrough == {"chat_template_kwargs": {"enable_thinking": False}}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "provider = 'local'\nextra_body = {}",
            r"'extra_body' does not apply to an Ollama provider .*use 'options'",
        ),
        (
            "provider = 'remote'\noptions = {}",
            r"'options' does not apply to an OpenAI-compatible .*'extra_body'",
        ),
        ("provider = 'remote'\nextra_body = { model = 'x' }", r"'extra_body' may not set 'model'"),
        ("provider = 'remote'\ntokens = 5\nmax_tokens = 5", r"'tokens' and 'max_tokens' are both max_tokens"),
        ("provider = 'local'\ntop_p = 2", r"'top_p' must be a finite number between 0 and 1"),
        ("provider = 'local'\ntop_k = 0", r"'top_k' must be a positive integer"),
        ("provider = 'local'\nseed = 1.5", r"'seed' must be an integer"),
        ("provider = 'local'\nstop = []", r"'stop' must be a non-empty string or an array"),
        ("provider = 'local'\nsystem = 3", r"'system' must be a string"),
        ("provider = 'local'\noptions = 3", r"'options' must be a table"),
    ],
)
def test_bad_generation_settings(tmp_path: Path, cfg_path: Path, extra: str, expected: str) -> None:
    path = bench(tmp_path, f"[s]\nmodel = 'm'\ntemperature = 0\n{extra}\n")
    with pytest.raises(ConfigError, match=rf"^{path}: \[s\]: {expected}"):
        load_benchmark(path, load_config(cfg_path))


# ---------------------------------------------------------------- fingerprints


def _setup(**changes: Any) -> Setup:
    base: dict[str, Any] = {
        "name": "s",
        "provider": "p",
        "model": "m",
        "temperature": 0.0,
        "tokens": None,
        "template": compile_template("{{INPUT}}", "t"),
    }
    return Setup(**(base | changes))


QUESTION = Question("d", "1", "Q?", MCQ({"a": "x", "b": "y"}, "a"))


def test_a_setup_without_settings_keeps_the_fingerprint_older_versions_wrote() -> None:
    # The value the fingerprint of this setup had before generation settings existed.
    old = "a23370b3207668d446fbe2104f9d2ba47e5453a01dff9889592345df2d6b4eab"
    assert task_fingerprint(_setup(), QUESTION) == old
    assert task_fingerprint(_setup(settings=GenerationSettings(passthrough={})), QUESTION) == old


@pytest.mark.parametrize(
    "settings",
    [
        GenerationSettings(seed=1),
        GenerationSettings(top_p=0.9),
        GenerationSettings(top_k=5),
        GenerationSettings(stop=("x",)),
        GenerationSettings(max_tokens=5),
        GenerationSettings(presence_penalty=0.5),
        GenerationSettings(frequency_penalty=0.5),
        GenerationSettings(system="s"),
        GenerationSettings(passthrough={"think": False}),
    ],
)
def test_every_generation_setting_changes_the_fingerprint(settings: GenerationSettings) -> None:
    assert task_fingerprint(_setup(settings=settings), QUESTION) != task_fingerprint(_setup(), QUESTION)

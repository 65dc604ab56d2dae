"""Configuration and benchmark files: Jinja rendering, TOML, validation, prompt templates,
fingerprints. Real files from the Rust tool's users where they exist (med-kag)."""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from kag.datasets import MCQ, Question
from kag.errors import ConfigError
from kag.generation.config import (
    FastEmbedProvider,
    OllamaProvider,
    OpenAIProvider,
    Setup,
    generation_setup,
    load_benchmark,
    load_config,
    parse_toml,
)
from kag.generation.config_file import render_file
from kag.generation.fingerprint import task_fingerprint
from kag.generation.templates import (
    DEFAULT_TEMPLATE,
    PromptRenderError,
    compile_template,
    format_choices,
    prompt_variables,
)
from kag.retrieval import factory as retrieval_factory

PROVIDERS = """
[providers.local]
type = "Ollama"

[providers.remote]
type = "OpenAI"
url = "http://127.0.0.1:9/v1/"
key = "{{ env('KAG_TEST_KEY') }}"

[providers.embedder]
type = "FastEmbed"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def cfg_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KAG_TEST_KEY", "sk-planted-secret-4242")
    return write(tmp_path / "config.toml", PROVIDERS)


def toml_1_1() -> bool:
    try:
        import tomli
    except ImportError:
        return False
    return tuple(int(p) for p in tomli.__version__.split(".")[:2]) >= (2, 4)  # type: ignore[attr-defined]


# ---------------------------------------------------------------- the real med-kag files


def test_real_rust_config_loads(med_kag: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not toml_1_1():
        pytest.skip("the real config uses TOML 1.1 inline tables: needs tomli >= 2.4")
    monkeypatch.setenv("NEO4J_PASSWORD", "hunter2-neo")
    monkeypatch.setenv("NEO4J_URI", "bolt://db:7687")
    cfg = load_config(med_kag / "configs" / "config.toml")
    assert cfg.providers == {"ollama": OllamaProvider("ollama", "http://localhost:11434")}
    assert cfg.databases["neo4j"] == {"type": "Neo4j", "uri": "bolt://db:7687", "password": "hunter2-neo"}
    retriever = cfg.retrievers["neo4j-embedding-triplet-formal"]
    assert retriever["top_k"] == 3
    assert retriever["extra"]["neo4j"]["translation"]["property_filters"]["MeSH:MeSHConcept"] == ["name"]
    assert "hunter2-neo" in cfg.secrets
    assert "hunter2-neo" not in repr(cfg)


def _rust_result(med_kag: Path, setup: str) -> dict[str, Any]:
    data = (med_kag / "results" / "pubmedqa" / "10135926" / f"wekgr-{setup}.json").read_bytes()
    return orjson.loads(data)["ok"]


def test_real_templates_reproduce_the_rust_tools_prompts(
    med_kag: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Render the real benchmark file (file() relative to the working directory, as its
    users ran it), then the real templates for a real question: byte for byte the prompt
    the Rust tool stored, with and without retrieval."""
    if not toml_1_1():
        pytest.skip("the real benchmark file uses TOML 1.1 inline tables: needs tomli >= 2.4")
    for name in ("prompt_mcq.md", "pmu_prompt_mcq.md"):
        shutil.copy(
            med_kag / "prompts" / name, write(tmp_path / "examples" / "prompt" / name, "").parent / name
        )
    monkeypatch.chdir(tmp_path)
    bench_path = med_kag / "configs" / "benchmark.toml"
    text = render_file(bench_path, "benchmark file")
    tables = parse_toml(text, bench_path, rendered=True)
    entry = orjson.loads((med_kag / "datasets" / "mirage.json").read_bytes())["pubmedqa"]["10135926"]
    choices = format_choices(entry["output"]["options"])
    assert choices == "A: yes\nB: no\nC: maybe"

    native = tables["qwen35-9b-ollama-native"]
    template = compile_template(native["system_prompt"], "native")
    assert (
        template.render(prompt_variables(entry["input"], choices))
        == _rust_result(med_kag, "qwen35-9b-ollama-native")["stats"]["prompt"]
    )

    kag = tables["qwen35-9b-ollama-neo4j-embedding-triplet-formal"]
    assert kag["augmented_generation"] == {"retriever": "neo4j-embedding-triplet-formal", "database": "neo4j"}
    stored = _rust_result(med_kag, "qwen35-9b-ollama-neo4j-embedding-triplet-formal")["stats"]
    template = compile_template(kag["system_prompt"], "kag")
    rendered = template.render(prompt_variables(entry["input"], choices, stored["retrieval"]["result"]))
    assert rendered == stored["prompt"]
    # An empty retrieval leaves RETRIEVAL undefined: the template's default shows.
    assert "Graph Context:\n<empty>\n" in template.render(prompt_variables(entry["input"], choices, ""))


def test_the_examples_load_and_render(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's example files: two setups on the local server; the templates serve MCQ
    and free-form questions alike."""
    monkeypatch.setenv("KAG_LLAMA_URL", "http://127.0.0.1:9999/v1")
    monkeypatch.chdir(repo)
    cfg = load_config("examples/benchmark/config.toml")
    assert cfg.providers["local"] == OpenAIProvider("local", "", "http://127.0.0.1:9999/v1")
    setups = load_benchmark("examples/benchmark/benchmark.toml", cfg).setups
    assert list(setups) == ["smollm2-135m-native", "smollm2-135m-terse"]
    assert setups["smollm2-135m-terse"].datasets == ("mcq-form",)
    native = setups["smollm2-135m-native"].template
    assert native is not None
    assert native.render(prompt_variables("Q?", "a: x\nb: y")) == (
        "Answer the following question.\n\nQ?\n\nChoices:\na: x\nb: y\n\n"
        "Reply with the key of the correct choice only (e.g. 'a'), or 'I don't know.'"
    )
    assert native.render(prompt_variables("Explain.")) == "Answer the following question.\n\nExplain."
    kag = compile_template((repo / "examples/benchmark/prompts/kag.md").read_text(), "kag.md")
    assert kag.render(prompt_variables("Q?")).endswith("Graph context:\n<empty>")


# ---------------------------------------------------------------- rendering: file(), env()


def test_file_is_read_from_the_working_directory_then_next_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "conf"
    write(conf / "p.md", "next to the file")
    write(tmp_path / "work" / "p.md", "in the working directory")
    path = write(conf / "b.toml", "a = '''{{ file('p.md') }}'''\n")
    monkeypatch.chdir(tmp_path / "work")
    assert "in the working directory" in render_file(path)
    (tmp_path / "work" / "p.md").unlink()
    assert "next to the file" in render_file(path)


def test_missing_file_names_both_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "c" / "b.toml", "a = '''{{ file('nope.md') }}'''\n")
    with pytest.raises(ConfigError) as info:
        render_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: file('nope.md'): not found")
    assert str(tmp_path / "c" / "nope.md") in message


def test_an_included_file_that_is_not_utf8_names_both_files(tmp_path: Path) -> None:
    part = write(tmp_path / "p.md", "")
    part.write_bytes(b"one\ncaf\xe9\n")
    path = write(tmp_path / "b.toml", "a = '''{{ file('p.md') }}'''\n")
    with pytest.raises(ConfigError) as info:
        render_file(path)
    assert str(info.value) == f"{path}: {part}:2: included file is not UTF-8 text (byte 7)"


def test_env_is_empty_when_unset_and_jinja_expressions_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KAG_UNSET_VAR", raising=False)
    monkeypatch.setenv("KAG_SET_VAR", "v1")
    path = write(
        tmp_path / "c.toml",
        "a = \"{{ env('KAG_UNSET_VAR') }}\"\nb = \"{{ env('KAG_UNSET_VAR') or 'dflt' }}\"\n"
        "c = \"{{ env('KAG_SET_VAR') }}\"\n",
    )
    assert parse_toml(render_file(path), path, True) == {"a": "", "b": "dflt", "c": "v1"}


def test_inline_prompt_variable_in_a_toml_file_explains_raw(tmp_path: Path) -> None:
    path = write(tmp_path / "b.toml", "[s]\nsystem_prompt = '''Q: {{INPUT}}'''\n")
    with pytest.raises(ConfigError, match=r"'INPUT' is undefined.*\{% raw %\}"):
        render_file(path)


def test_raw_block_keeps_an_inline_prompt(tmp_path: Path, cfg_path: Path) -> None:
    bench = write(
        tmp_path / "b.toml",
        "[s]\nprovider = 'local'\nmodel = 'm'\ntemperature = 0\n"
        "system_prompt = '''{% raw %}Q: {{INPUT}}{% endraw %}'''\n",
    )
    setup = load_benchmark(bench, load_config(cfg_path)).setups["s"]
    assert setup.template is not None and setup.template.render({"INPUT": "why?"}) == "Q: why?"


def test_template_syntax_error_in_the_file_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", "a = 1\nb = \"{{ env('X' }}\"\n")
    with pytest.raises(ConfigError, match=rf"^{path}: line 2: template syntax error"):
        render_file(path)


# ---------------------------------------------------------------- configuration file


def test_config_providers_are_typed_with_defaults(cfg_path: Path) -> None:
    cfg = load_config(cfg_path)
    assert cfg.providers["local"] == OllamaProvider("local", "http://localhost:11434")
    remote = cfg.providers["remote"]
    assert isinstance(remote, OpenAIProvider)
    assert remote.url == "http://127.0.0.1:9/v1" and remote.key == "sk-planted-secret-4242"
    assert cfg.providers["embedder"] == FastEmbedProvider("embedder", None)
    assert cfg.secrets == frozenset({"sk-planted-secret-4242"})
    assert "sk-planted-secret-4242" not in repr(cfg) + repr(remote)


def test_openai_default_url(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path / "c.toml", "[providers.o]\ntype = 'OpenAI'\nkey = 'k'\n"))
    assert cfg.providers["o"] == OpenAIProvider("o", "k", "https://api.openai.com/v1")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[providers.x]\ntype = 'Gemini'\n",
            r"providers\.x: unknown provider type 'Gemini' \(expected one of Ollama",
        ),
        ("[providers.x]\nurl = 'http://h'\n", r"providers\.x: missing required key 'type'"),
        ("[providers.x]\ntype = 'OpenAI'\n", r"providers\.x: missing required key 'key'"),
        (
            "[providers.x]\ntype = 'Ollama'\nurl = 'localhost:11434'\n",
            r"providers\.x: 'url' must start with http",
        ),
        (
            "[providers.x]\ntype = 'Ollama'\nurl = 5\n",
            r"providers\.x: 'url' must be a string or an array of strings \(got integer\)",
        ),
        ("[providers.x]\ntype = 'Ollama'\nurl = []\n", r"providers\.x: 'url' must not be an empty array"),
        (
            "[providers.x]\ntype = 'Ollama'\nurl = ['http://a', 7]\n",
            r"providers\.x: 'url\[1\]' must be a string \(got integer\)",
        ),
        (
            "[providers.x]\ntype = 'Ollama'\nurl = ['http://a', 'b:1']\n",
            r"providers\.x: 'url\[1\]' must start with http:// or https:// \(got 'b:1'\)",
        ),
        (
            "[providers.x]\ntype = 'Ollama'\nurl = ['http://a:1/', 'http://a:1']\n",
            r"providers\.x: 'url\[1\]' repeats 'url\[0\]' \('http://a:1'\)",
        ),
        (
            "[providers.x]\ntype = 'OpenAI'\nkey = 'k'\nurl = 'http://h/v1?api-key=hunter2'\n",
            r"providers\.x: 'url' must not carry a query string or fragment \(got 'http://h/v1\?api-key=\*\*\*'\)",
        ),
        (
            "[providers.x]\ntype = 'Ollama'\nurl = ['http://a', 'http://b/#frag']\n",
            r"providers\.x: 'url\[1\]' must not carry a query string or fragment",
        ),
        ("[providers.Big]\ntype = 'Ollama'\n", r"providers\.Big: invalid name 'Big'"),
        ("providers = 3\n", r"\[providers\] must be a table of tables"),
        ("[databases]\nneo = 'x'\n", r"databases\.neo: must be a table"),
        ("[providers.x\ntype = 'Ollama'\n", r"not valid TOML: .*line 1"),
    ],
)
def test_bad_config_names_file_component_and_problem(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path / "c.toml", text)
    with pytest.raises(ConfigError, match=rf"^{path}: .*{expected}"):
        load_config(path)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"configuration file not found"):
        load_config(tmp_path / "none.toml")


def test_secret_never_in_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAG_TEST_KEY", "sk-planted-secret-4242")
    path = write(
        tmp_path / "c.toml",
        "[providers.x]\ntype = 'OpenAI'\nkey = \"{{ env('KAG_TEST_KEY') }}\"\nurl = 'ftp://h'\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "providers.x" in str(info.value) and "sk-planted" not in str(info.value)


# ---------------------------------------------------------------- benchmark file


def bench(tmp_path: Path, text: str) -> Path:
    return write(tmp_path / "bench.toml", text)


BASE = "provider = 'local'\nmodel = 'm'\ntemperature = 0.0\n"


def test_setup_fields(tmp_path: Path, cfg_path: Path) -> None:
    write(tmp_path / "p.md", "{{INPUT}}\n{{ CHOICE }}\n")
    path = bench(
        tmp_path,
        f"[plain]\n{BASE}tokens = 100\nsystem_prompt = '''{{{{ file('p.md') }}}}'''\ndatasets = ['a', 'b']\n"
        "[other]\nprovider = 'remote'\nmodel = 'gpt'\ntemperature = 1\n",
    )
    setups = load_benchmark(path, load_config(cfg_path)).setups
    assert list(setups) == ["plain", "other"]
    plain = setups["plain"]
    assert (plain.provider, plain.model, plain.temperature, plain.tokens) == ("local", "m", 0.0, 100)
    assert plain.datasets == ("a", "b") and plain.runs_on("a") and not plain.runs_on("c")
    assert plain.template is not None and plain.template.source == "{{INPUT}}\n{{ CHOICE }}\n"
    other = setups["other"]
    assert other.temperature == 1.0 and other.tokens is None and other.datasets is None
    assert other.template is not None and other.template.source == DEFAULT_TEMPLATE


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[s]\nprovider = 'ghost'\nmodel = 'm'\ntemperature = 0\n",
            (
                r"\[s\]: provider 'ghost' is missing from the configuration"
                r" \(providers in .*config.toml: embedder, local, remote\)"
            ),
        ),
        (
            "[s]\nprovider = 'embedder'\nmodel = 'm'\ntemperature = 0\n",
            r"\[s\]: provider 'embedder' is a FastEmbed provider, which embeds but cannot generate text",
        ),
        ("[s]\nmodel = 'm'\ntemperature = 0\n", r"\[s\]: missing required key 'provider'"),
        ("[s]\nprovider = 'local'\nmodel = 'm'\n", r"\[s\]: missing required key 'temperature'"),
        (
            "[s]\nprovider = 'local'\nmodel = 'm'\ntemperature = 'hot'\n",
            r"\[s\]: 'temperature' must be a number \(got string\)",
        ),
        (
            "[s]\nprovider = 'local'\nmodel = 'm'\ntemperature = -1\n",
            r"\[s\]: 'temperature' must be a number >= 0",
        ),
        (f"[s]\n{BASE}tokens = 0\n", r"\[s\]: 'tokens' must be a positive integer"),
        (f"[s]\n{BASE}datasets = ['../etc']\n", r"\[s\]: dataset name '../etc' in 'datasets' contains '/'"),
        (f"[s]\n{BASE}datasets = 'a'\n", r"\[s\]: 'datasets' must be an array"),
        (f"[S-1]\n{BASE}", r"\[S-1\]: invalid name 'S-1'"),
        (
            f"[s]\n{BASE}system_prompt = '''{{% raw %}}{{{{QUESTION}}}}{{% endraw %}}'''\n",
            (
                r"\[s\] system_prompt: undefined template variable 'QUESTION'"
                r" \(a prompt template may use INPUT, CHOICE and RETRIEVAL\)"
            ),
        ),
        (
            f"[s]\n{BASE}system_prompt = '''{{% raw %}}a\n{{{{ INPUT }}{{% endraw %}}'''\n",
            r"\[s\] system_prompt: template syntax error at line 2",
        ),
        (f"[s]\n{BASE}augmented_generation = 'r'\n", r"\[s\]: 'augmented_generation' must be a table"),
        (
            f"[s]\n{BASE}augmented_generation = {{retriever = 'r'}}\n",
            r"\[s\] augmented_generation: missing required key 'database'",
        ),
        ("s = 1\n", r"\[s\]: a setup must be a table"),
        ("", r"the benchmark file defines no setup"),
    ],
)
def test_bad_benchmark_names_file_setup_and_problem(
    tmp_path: Path, cfg_path: Path, text: str, expected: str
) -> None:
    path = bench(tmp_path, text)
    with pytest.raises(ConfigError, match=rf"^{path}: .*{expected}"):
        load_benchmark(path, load_config(cfg_path))


def test_high_temperature_warns(tmp_path: Path, cfg_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = bench(tmp_path, "[s]\nprovider = 'local'\nmodel = 'm'\ntemperature = 1.6\n")
    with caplog.at_level(logging.WARNING, logger="kag"):
        load_benchmark(path, load_config(cfg_path))
    messages = [r.getMessage() for r in caplog.records]
    assert any("[s]: high temperature (1.6)" in m for m in messages)


def test_temperature_at_the_threshold_does_not_warn(
    tmp_path: Path, cfg_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = bench(tmp_path, "[s]\nprovider = 'local'\nmodel = 'm'\ntemperature = 1.5\n")
    with caplog.at_level(logging.WARNING, logger="kag"):
        load_benchmark(path, load_config(cfg_path))
    assert not caplog.records


def test_kag_setup_is_validated_by_the_retrieval_factory(
    tmp_path: Path, cfg_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[tuple[Any, ...]] = []

    def validate_retrieval(*args: Any) -> None:
        calls.append(args)
        if args[1] == "bad":
            raise ConfigError(f"{args[0]}: retrievers.bad: missing 'model'")

    monkeypatch.setattr(retrieval_factory, "validate_retrieval", validate_retrieval)
    write(
        cfg_path,
        PROVIDERS + "[databases.d]\ntype = 'Ladybug'\npath = 'g.lbug'\n[retrievers.r]\ntype = 'Embedder'\n"
        "provider = 'embedder'\nmodel = 'minilm'\n[retrievers.bad]\ntype = 'Embedder'\n",
    )
    cfg = load_config(cfg_path)
    path = bench(tmp_path, f"[kag]\n{BASE}augmented_generation = {{retriever = 'r', database = 'd'}}\n")
    with caplog.at_level(logging.WARNING, logger="kag"):
        setup = load_benchmark(path, cfg).setups["kag"]
    assert setup.augmented_generation is not None and setup.augmented_generation.database == "d"
    assert calls == [(str(cfg_path), "r", "d", cfg.retrievers, cfg.databases, cfg.raw_providers)]
    # The default template appends RETRIEVAL; no warning. A custom one without it warns.
    assert not any("never uses RETRIEVAL" in r.getMessage() for r in caplog.records)
    path = bench(
        tmp_path,
        f"[kag]\n{BASE}system_prompt = 'x'\naugmented_generation = {{retriever = 'r', database = 'd'}}\n",
    )
    with caplog.at_level(logging.WARNING, logger="kag"):
        load_benchmark(path, cfg)
    assert any(
        "[kag]: the setup retrieves, but its prompt template never uses RETRIEVAL" in r.getMessage()
        for r in caplog.records
    )
    path = bench(tmp_path, f"[kag]\n{BASE}augmented_generation = {{retriever = 'bad', database = 'd'}}\n")
    with pytest.raises(ConfigError, match=rf"^{path}: \[kag\]: {cfg_path}: retrievers.bad: missing 'model'"):
        load_benchmark(path, cfg)


def test_generation_setup_checks_flags_and_template(tmp_path: Path, cfg_path: Path) -> None:
    cfg = load_config(cfg_path)
    setup = generation_setup(cfg, "local", "m", 0.2, 64, None, None, None, "Say {{ INPUT | upper }}")
    assert setup.template is not None and setup.template.render({"INPUT": "hi"}) == "Say HI"
    system = write(tmp_path / "sys.md", "Q: {{INPUT}}\n")
    setup = generation_setup(cfg, "local", "m", 0.2, None, system, None, None, "why?")
    assert setup.template is not None and setup.template.render({"INPUT": "why?"}) == "Q: why?"
    with pytest.raises(ConfigError, match=r"sys2.md: 'CHOICE' is undefined"):
        generation_setup(
            cfg, "local", "m", 0, None, write(tmp_path / "sys2.md", "{{ CHOICE }}"), None, None, "x"
        )
    with pytest.raises(ConfigError, match=r"kag generation: provider 'nope' is missing"):
        generation_setup(cfg, "nope", "m", 0, None, None, None, None, "x")
    with pytest.raises(ConfigError, match=r"system prompt file not found"):
        generation_setup(cfg, "local", "m", 0, None, tmp_path / "none.md", None, None, "x")


# ---------------------------------------------------------------- prompt templates


def test_choices_are_key_ordered_lines() -> None:
    assert format_choices({"b": "Vitamin C", "a": "Vitamin A", "d": "K", "c": "D"}) == (
        "a: Vitamin A\nb: Vitamin C\nc: D\nd: K"
    )
    assert (
        format_choices({"10": "ten", "9": "nine"}) == "10: ten\n9: nine"
    )  # string order, like Rust's BTreeMap


def test_variables_are_defined_only_with_content() -> None:
    assert prompt_variables("q") == {"INPUT": "q"}
    assert prompt_variables("q", "a: x", "") == {"INPUT": "q", "CHOICE": "a: x"}
    assert prompt_variables("q", None, "(A)-[r]->(B)") == {"INPUT": "q", "RETRIEVAL": "(A)-[r]->(B)"}


def test_strict_undefined_and_the_default_filter() -> None:
    template = compile_template("{{INPUT}}|{{ RETRIEVAL | default('<empty>') }}", "t")
    assert template.render(prompt_variables("q")) == "q|<empty>"
    assert template.render(prompt_variables("q", None, "ctx")) == "q|ctx"
    strict = compile_template("{{ CHOICE }}", "origin.md")
    with pytest.raises(PromptRenderError, match=r"^origin.md: 'CHOICE' is undefined$"):
        strict.render(prompt_variables("q"))


def test_one_trailing_newline_is_dropped_like_minijinja() -> None:
    assert compile_template("{{INPUT}}\n", "t").render({"INPUT": "x"}) == "x"
    assert compile_template("{{INPUT}}\n\n", "t").render({"INPUT": "x"}) == "x\n"


def test_default_template_never_interprets_the_question() -> None:
    template = compile_template(DEFAULT_TEMPLATE, "default")
    assert template.render(prompt_variables("What is {{ x }}?")) == "What is {{ x }}?"
    assert template.render(prompt_variables("Q?", "a: 1\nb: 2", "ctx")) == "Q?\n\na: 1\nb: 2\n\nContext:\nctx"


# ---------------------------------------------------------------- fingerprints


def _setup(**changes: Any) -> Setup:
    base = {
        "name": "s",
        "provider": "p",
        "model": "m",
        "temperature": 0.0,
        "tokens": None,
        "template": compile_template("{{INPUT}}", "t"),
        "datasets": None,
        "augmented_generation": None,
    }
    base.update(changes)
    return Setup(**base)


QUESTION = Question("d", "1", "Q?", MCQ({"a": "x", "b": "y"}, "a"))


def test_fingerprint_changes_with_what_reaches_the_model() -> None:
    reference = task_fingerprint(_setup(), QUESTION)
    assert len(reference) == 64 and reference == task_fingerprint(_setup(), QUESTION)
    changed = [
        task_fingerprint(_setup(model="m2"), QUESTION),
        task_fingerprint(_setup(temperature=0.5), QUESTION),
        task_fingerprint(_setup(tokens=10), QUESTION),
        task_fingerprint(_setup(provider="q"), QUESTION),
        task_fingerprint(_setup(template=compile_template("{{INPUT}}!", "t")), QUESTION),
        task_fingerprint(_setup(), Question("d", "1", "Q2?", QUESTION.mcq)),
        task_fingerprint(_setup(), Question("d", "1", "Q?", MCQ({"a": "x", "b": "z"}, "a"))),
    ]
    assert reference not in changed and len(set(changed)) == len(changed)


def test_fingerprint_ignores_name_answer_and_dataset_filter() -> None:
    reference = task_fingerprint(_setup(), QUESTION)
    assert task_fingerprint(_setup(name="renamed", datasets=("d",)), QUESTION) == reference
    assert (
        task_fingerprint(_setup(), Question("other", "7", "Q?", MCQ({"a": "x", "b": "y"}, "b"))) == reference
    )


@pytest.mark.parametrize(
    "source",
    [
        "{{ INPUT.__class__ }}",
        "{{ INPUT['__class__'] }}",
        "{{ INPUT|attr('__class__') }}",
        "{% if CHOICE is defined %}{{ CHOICE._x }}{% endif %}",  # reached for some questions only
    ],
)
def test_templates_reaching_for_internals_fail_when_compiled(source: str) -> None:
    with pytest.raises(ConfigError, match=r"^t: the template reaches for Python internals at line 1 \('_"):
        compile_template(source, "t")


def test_the_sandbox_refuses_internals_built_at_render_time() -> None:
    template = compile_template("{{ INPUT|attr('_' ~ '_class__') }}", "t")
    with pytest.raises(PromptRenderError, match="^t: "):
        template.render({"INPUT": "x"})


def test_deeply_nested_templates_and_toml_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^t: the template is nested too deeply"):
        compile_template("{% if INPUT %}" * 300 + "{% endif %}" * 300, "t")
    with pytest.raises(ConfigError, match="^t: the template is nested too deeply"):
        compile_template("{{ " + "(" * 5000 + "INPUT" + ")" * 5000 + " }}", "t")
    path = write(tmp_path / "deep.toml", "a = " + "[" * 100_000)
    with pytest.raises(ConfigError, match=f"^{path}: not valid TOML: arrays or tables nested too deeply"):
        load_config(path)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        # 10^15 iterations: bounded by steps, not by time.
        (
            (
                "{% for a in range(100000) %}{% for b in range(100000) %}{% for c in range(100000) %}"
                "{% endfor %}{% endfor %}{% endfor %}"
            ),
            "takes more than 250,000 steps",
        ),
        (
            "{% macro m(n) %}{% if n %}{{ m(n - 1) }}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(40) }}",
            "takes more than 250,000 steps",
        ),
        ("x = '{{ 'x' * 2000000000 }}'", "computes a value too large to hold"),
        ("x = '{{ 'x' | center(2000000000) }}'", "computes a value too large to hold"),
        ("{% set s = 'x' * 60000000 %}{{ s }}{{ s }}", "computes a value too large to hold"),
    ],
)
def test_the_work_of_a_hostile_configuration_file_is_bounded(
    tmp_path: Path, source: str, message: str
) -> None:
    path = write(tmp_path / "c.toml", source)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: the template {message}"):
        render_file(path)


def test_a_configuration_keeps_its_trailing_newline_in_the_bounded_sandbox(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", "{% for i in range(3) %}k{{ i }} = {{ i }}\n{% endfor %}")
    assert render_file(path) == "k0 = 0\nk1 = 1\nk2 = 2\n"


def test_file_and_env_still_work_in_the_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAG_SANDBOX_VAR", "v1")
    write(tmp_path / "part.txt", "from a file")
    path = write(
        tmp_path / "c.toml", "x = '{{ file('part.txt') }}'\ny = '{{ env('KAG_SANDBOX_VAR') | upper }}'\n"
    )
    monkeypatch.chdir(tmp_path)
    assert render_file(path) == "x = 'from a file'\ny = 'V1'\n"


def test_url_credentials_are_secrets_and_cannot_go_with_a_key(tmp_path: Path) -> None:
    text = '[providers.l]\ntype = "Ollama"\nurl = "http://bob:pw-123@h:1"\n'
    path = write(
        tmp_path / "c.toml", text + '[databases.g]\ntype = "Neo4j"\nuri = "bolt://neo:db-pw-9@db:7687"\n'
    )
    cfg = load_config(path)
    assert {"bob:pw-123", "pw-123", "neo:db-pw-9", "db-pw-9"} <= cfg.secrets
    write(path, '[providers.o]\ntype = "OpenAI"\nurl = "http://bob:pw-123@h:1/v1"\nkey = "sk-zz"\n')
    with pytest.raises(ConfigError, match=f"^{path}: providers.o: 'url' carries credentials") as info:
        load_config(path)
    assert "pw-123" not in str(info.value) and "sk-zz" not in str(info.value)
    write(path, '[providers.o]\ntype = "OpenAI"\nurl = "http://bob:pw-123@h:1/v1"\nkey = ""\n')
    assert load_config(path).providers["o"].url == "http://bob:pw-123@h:1/v1"  # credentials alone are fine
    write(path, '[providers.o]\ntype = "OpenAI"\nurl = "ftp://bob:pw-123@h"\nkey = ""\n')
    with pytest.raises(ConfigError, match="got 'ftp://\\*\\*\\*@h'"):
        load_config(path)


def test_url_may_list_several_servers(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.toml",
        '[providers.v]\ntype = "OpenAI"\nkey = ""\nurl = ["http://a:1/v1/", "http://u:pw-77@b:2/v1"]\n'
        '[providers.l]\ntype = "Ollama"\nurl = "http://c:3"\n',
    )
    cfg = load_config(path)
    vllm, ollama = cfg.providers["v"], cfg.providers["l"]
    assert isinstance(vllm, OpenAIProvider) and isinstance(ollama, OllamaProvider)
    assert vllm.urls == ("http://a:1/v1", "http://u:pw-77@b:2/v1") and vllm.url == "http://a:1/v1"
    assert ollama.urls == ("http://c:3",)
    assert {"u:pw-77", "pw-77"} <= cfg.secrets  # credentials in any entry are secrets
    write(path, '[providers.o]\ntype = "OpenAI"\nkey = "sk-1"\nurl = ["http://a:1", "http://u:pw@b:2"]\n')
    with pytest.raises(ConfigError, match=f"^{path}: providers.o: 'url' carries credentials"):
        load_config(path)


def test_a_system_prompt_without_input_warns_naming_file_and_setup(
    tmp_path: Path, cfg_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """system_prompt is the user message's template: without {{INPUT}} no question is sent."""
    cfg = load_config(cfg_path)
    path = bench(tmp_path, f"[terse]\n{BASE}system_prompt = 'You are a careful doctor.'\n")
    with caplog.at_level(logging.WARNING, logger="kag"):
        load_benchmark(path, cfg)
    assert [r.getMessage() for r in caplog.records] == [
        (
            f"{path}: [terse]: system_prompt never uses {{{{INPUT}}}}, so the question is not sent:"
            " system_prompt is the template of the user message; the system message is 'system'"
        )
    ]
    caplog.clear()
    path = bench(
        tmp_path,
        f"[terse]\n{BASE}system = 'You are a careful doctor.'\nsystem_prompt = '{{% raw %}}Q: {{{{ INPUT }}}}{{% endraw %}}'\n",
    )
    with caplog.at_level(logging.WARNING, logger="kag"):
        load_benchmark(path, cfg)
    assert not caplog.records

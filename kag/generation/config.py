"""The configuration file and the benchmark file: Jinja-rendered TOML, validated at load.

Both files are rendered first as Jinja2 templates with two helpers, then parsed as TOML:

- ``file(path)``: the text of a file. A relative path is looked up from the working
  directory first (see compatibility in docs/architecture.md), then next to the file
  being rendered;
- ``env(name)``: the environment variable, or "" when it is unset.

The rendering runs in Jinja2's immutable sandbox, as prompt templates do: a template that
reaches for Python internals is a configuration error, and nothing it writes can run code.
Undefined variables are errors (a prompt written inline with ``{{INPUT}}`` would otherwise
silently render empty: wrap it in ``{% raw %}...{% endraw %}`` or load it with ``file()``).

Every problem is a ConfigError whose message names the file, the component
(``providers.<name>``, ``[<setup>]``) and the problem, raised before any request is sent.
Secret values (provider keys, database passwords) never appear in these messages.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kag.datasets import name_problem
from kag.errors import ConfigError, toml_type_name
from kag.generation.config_file import render_file
from kag.generation.secrets import display_url, url_credentials
from kag.generation.settings import (
    NO_SETTINGS,
    SETTING_KEYS,
    GenerationSettings,
    parse_settings,
    refuse_unknown,
)
from kag.generation.templates import (
    DEFAULT_TEMPLATE,
    PromptTemplate,
    compile_template,
)
from kag.results import AugmentedGeneration, ModelConfig
from kag.textfile import read_text_file

log = logging.getLogger(__name__)

COMPONENT_NAME = re.compile(r"[a-z0-9-]+")
HIGH_TEMPERATURE = 1.5
OLLAMA_DEFAULT_URL = "http://localhost:11434"
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
# Keys whose values are secrets wherever they appear (databases, retrievers, providers).
SECRET_KEYS = frozenset({"key", "password", "api_key", "token", "secret"})


# ---------------------------------------------------------------- model


class _Served:
    """A provider served over HTTP: ``urls`` holds every endpoint, ``url`` first; given
    empty, it is ``(url,)`` (a one-URL provider)."""

    url: str
    urls: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.urls:
            object.__setattr__(self, "urls", (self.url,))


@dataclass(frozen=True)
class OllamaProvider(_Served):
    """Ollama's native API (``/api/chat``, ``/api/embed``); ``tokens`` becomes ``num_ctx``."""

    name: str
    url: str = OLLAMA_DEFAULT_URL
    type: str = "Ollama"
    urls: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpenAIProvider(_Served):
    """Any OpenAI-compatible server (``/chat/completions``, ``/embeddings``); ``tokens`` is
    ``max_tokens``. An empty ``key`` sends no ``Authorization`` header (local servers)."""

    name: str
    key: str = field(repr=False)
    url: str = OPENAI_DEFAULT_URL
    type: str = "OpenAI"
    urls: tuple[str, ...] = ()


@dataclass(frozen=True)
class FastEmbedProvider:
    """In-process ONNX embeddings (``kag.embedding``); cannot generate text."""

    name: str
    model: str | None = None
    type: str = "FastEmbed"


ProviderConfig = OllamaProvider | OpenAIProvider | FastEmbedProvider
PROVIDER_TYPES = ("Ollama", "OpenAI", "FastEmbed")


@dataclass(frozen=True)
class Config:
    """The configuration file: typed providers, raw ``[databases]`` and ``[retrievers]``
    tables (owned by ``kag.retrieval``), and the secrets to keep out of every output."""

    path: Path
    providers: Mapping[str, ProviderConfig]
    databases: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)
    retrievers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)
    raw_providers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)
    secrets: frozenset[str] = field(default=frozenset(), repr=False)
    # The file after template rendering (secrets and all: redact before showing it).
    rendered: str = field(default="", repr=False)


@dataclass(frozen=True)
class Setup:
    """One ``[<setup>]`` table of the benchmark file (or the flags of ``kag generation``)."""

    name: str
    provider: str
    model: str
    temperature: float
    tokens: int | None = None
    template: PromptTemplate | None = None
    datasets: tuple[str, ...] | None = None
    augmented_generation: AugmentedGeneration | None = None
    settings: GenerationSettings = NO_SETTINGS

    def model_config(self) -> ModelConfig:
        """The ``ok.stats.config`` block (``provider``: the component name, as existing trees have it)."""
        return ModelConfig(
            provider=self.provider,
            model=self.model,
            temperature=self.temperature,
            tokens=self.tokens,
            augmented_generation=self.augmented_generation,
        )

    def runs_on(self, dataset: str) -> bool:
        return self.datasets is None or dataset in self.datasets


@dataclass(frozen=True)
class Benchmark:
    path: Path
    setups: Mapping[str, Setup]
    # The file after template rendering (see Config.rendered).
    rendered: str = field(default="", repr=False)


# ---------------------------------------------------------------- rendering and parsing


def _read_text(path: Path, what: str) -> str:
    return read_text_file(path, what, ConfigError, universal_newlines=True)


def _toml_loads(text: str) -> dict[str, Any]:
    # tomli >= 2.4 reads TOML 1.1 (newlines in inline tables), which existing configurations
    # use (see compatibility in docs/architecture.md); Python 3.11's tomllib reads TOML 1.0.
    try:
        import tomli as toml
    except ImportError:  # pragma: no cover - depends on the environment
        import tomllib as toml  # type: ignore[no-redef]
    return toml.loads(text)


def parse_toml(text: str, path: Path, rendered: bool) -> dict[str, Any]:
    try:
        return _toml_loads(text)
    except RecursionError:  # tomli raises one past its nesting limit, as Python's stack would
        raise ConfigError(
            f"{path}: not valid TOML: arrays or tables nested too deeply to be parsed"
        ) from None
    except ValueError as exc:  # TOMLDecodeError is a ValueError in tomllib and tomli
        note = " (line numbers count in the file after template rendering)" if rendered else ""
        raise ConfigError(f"{path}: not valid TOML: {exc}{note}") from None


def _load_table(path: Path, what: str) -> tuple[dict[str, Any], str]:
    """The parsed file and its rendered text."""
    raw = _read_text(path, what)
    text = render_file(path, what)
    return parse_toml(text, path, rendered=text != raw), text


# ---------------------------------------------------------------- validation helpers


def _check_name(path: Path, where: str, name: str) -> None:
    if not COMPONENT_NAME.fullmatch(name):
        raise ConfigError(
            f"{path}: {where}: invalid name {name!r} (use lowercase ASCII letters, digits and hyphens)"
        )


def _string(
    path: Path,
    where: str,
    table: Mapping[str, Any],
    key: str,
    default: str | None = None,
    required: bool = False,
    secret: bool = False,
) -> str | None:
    if key not in table:
        if required:
            raise ConfigError(f"{path}: {where}: missing required key '{key}'")
        return default
    value = table[key]
    if not isinstance(value, str):
        raise ConfigError(f"{path}: {where}: '{key}' must be a string (got {toml_type_name(value)})")
    if not secret and required and not value.strip():
        raise ConfigError(f"{path}: {where}: '{key}' must not be empty")
    return value


def _collect_secrets(value: Any, into: set[str]) -> None:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if key in SECRET_KEYS and isinstance(inner, str) and inner:
                into.add(inner)
            else:
                _collect_secrets(inner, into)
    elif isinstance(value, list):
        for inner in value:
            _collect_secrets(inner, into)
    elif isinstance(value, str) and "@" in value:
        # Credentials written in any URL (a provider's url, a database's uri) are secrets.
        into |= url_credentials(value)


def _one_url(path: Path, where: str, key: str, url: str) -> str:
    if not re.match(r"https?://[^/\s]", url):
        raise ConfigError(
            f"{path}: {where}: '{key}' must start with http:// or https:// (got {display_url(url)!r})"
        )
    if "?" in url or "#" in url:  # the API path is appended: a query would split it (and leak a key)
        raise ConfigError(
            f"{path}: {where}: '{key}' must not carry a query string or fragment"
            f" (got {display_url(url)!r}); give an API key as 'key'"
        )
    return url.rstrip("/")


def _urls(path: Path, where: str, table: Mapping[str, Any], default: str) -> tuple[str, ...]:
    """The provider's ``url``: one string, or an array of them (several servers of the
    same model, requests spread over them); each checked as a single one."""
    value = table.get("url", default)
    if isinstance(value, str):
        return (_one_url(path, where, "url", value),)
    if not isinstance(value, list):
        raise ConfigError(
            f"{path}: {where}: 'url' must be a string or an array of strings (got {toml_type_name(value)})"
        )
    if not value:
        raise ConfigError(f"{path}: {where}: 'url' must not be an empty array")
    urls: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ConfigError(f"{path}: {where}: 'url[{i}]' must be a string (got {toml_type_name(item)})")
        url = _one_url(path, where, f"url[{i}]", item)
        if url in urls:
            raise ConfigError(
                f"{path}: {where}: 'url[{i}]' repeats 'url[{urls.index(url)}]' ({display_url(url)!r})"
            )
        urls.append(url)
    return tuple(urls)


PROVIDER_KEYS = {"Ollama": ("type", "url"), "OpenAI": ("type", "url", "key"), "FastEmbed": ("type", "model")}


def _provider(path: Path, name: str, table: Any, text: str = "") -> ProviderConfig:
    where = f"providers.{name}"
    _check_name(path, where, name)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: {where}: must be a table (got {toml_type_name(table)})")
    kind = table.get("type")
    if kind is None:
        raise ConfigError(
            f"{path}: {where}: missing required key 'type' (one of {', '.join(PROVIDER_TYPES)})"
        )
    if isinstance(kind, str) and kind in PROVIDER_KEYS:
        refuse_unknown(path, where, table, PROVIDER_KEYS[kind], text, ("providers", name))
    if kind == "Ollama":
        urls = _urls(path, where, table, OLLAMA_DEFAULT_URL)
        return OllamaProvider(name, urls[0], urls=urls)
    if kind == "OpenAI":
        key = _string(path, where, table, "key", required=True, secret=True)
        assert key is not None
        urls = _urls(path, where, table, OPENAI_DEFAULT_URL)
        if key and any(url_credentials(url) for url in urls):
            # The HTTP client cannot send both (one Authorization header): refuse it here,
            # not as an internal error in every task.
            raise ConfigError(
                f"{path}: {where}: 'url' carries credentials (user:password@) and 'key' is set too;"
                " keep one of them"
            )
        return OpenAIProvider(name, key, urls[0], urls=urls)
    if kind == "FastEmbed":
        return FastEmbedProvider(name, _string(path, where, table, "model"))
    raise ConfigError(
        f"{path}: {where}: unknown provider type {kind!r} (expected one of {', '.join(PROVIDER_TYPES)})"
    )


def _raw_components(path: Path, data: Mapping[str, Any], section: str) -> dict[str, Mapping[str, Any]]:
    tables = data.get(section, {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: [{section}] must be a table of tables (got {toml_type_name(tables)})")
    for name, table in tables.items():
        _check_name(path, f"{section}.{name}", name)
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: {section}.{name}: must be a table (got {toml_type_name(table)})")
    return dict(tables)


def load_config(path: str | Path) -> Config:
    """Load and validate the configuration file (see the module docstring)."""
    path = Path(path)
    data, text = _load_table(path, "configuration file")
    extra = sorted(set(data) - {"providers", "databases", "retrievers"})
    if extra:
        log.warning("%s: ignored unknown top-level key(s) %s", path, ", ".join(repr(k) for k in extra))
    raw_providers = _raw_components(path, data, "providers")
    providers = {name: _provider(path, name, table, text) for name, table in raw_providers.items()}
    databases = _raw_components(path, data, "databases")
    retrievers = _raw_components(path, data, "retrievers")
    secrets: set[str] = set()
    for section in (raw_providers, databases, retrievers):
        _collect_secrets(section, secrets)
    return Config(path, providers, databases, retrievers, raw_providers, frozenset(secrets), text)


# ---------------------------------------------------------------- setups


def check_generation(
    path: Path,
    where: str,
    config: Config,
    provider: str,
    temperature: float,
    augmented: AugmentedGeneration | None,
) -> None:
    """Check a (provider, temperature, retrieval) triple against the configuration."""
    # `kag generation` checks against the configuration file itself (path is config.path):
    # its messages name that file once.
    same_file = path == config.path
    if provider not in config.providers:
        known = ", ".join(sorted(config.providers)) or "none"
        listed = "providers" if same_file else f"providers in {config.path}"
        raise ConfigError(
            f"{path}: {where}: provider {provider!r} is missing from the configuration ({listed}: {known})"
        )
    if isinstance(config.providers[provider], FastEmbedProvider):
        raise ConfigError(
            f"{path}: {where}: provider {provider!r} is a FastEmbed provider,"
            " which embeds but cannot generate text"
        )
    if not math.isfinite(temperature) or temperature < 0:
        raise ConfigError(f"{path}: {where}: 'temperature' must be a number >= 0 (got {temperature})")
    if temperature > HIGH_TEMPERATURE:
        log.warning(
            "%s: %s: high temperature (%s): model output may be highly erratic or nonsensical",
            path,
            where,
            temperature,
        )
    if augmented is None:
        return
    # Imported only for a setup that retrieves: the graph backends pull in numpy and asyncio.
    from kag.retrieval.factory import validate_retrieval

    try:
        validate_retrieval(
            str(config.path),
            augmented.retriever,
            augmented.database,
            config.retrievers,
            config.databases,
            config.raw_providers,
        )
    except ConfigError as exc:
        detail = str(exc)
        if same_file:
            detail = detail.removeprefix(f"{config.path}: ")
        raise ConfigError(f"{path}: {where}: {detail}") from None


def _number(path: Path, where: str, table: Mapping[str, Any], key: str, required: bool) -> float | None:
    if key not in table:
        if required:
            raise ConfigError(f"{path}: {where}: missing required key '{key}'")
        return None
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{path}: {where}: '{key}' must be a number (got {toml_type_name(value)})")
    return float(value)


def _tokens(path: Path, where: str, table: Mapping[str, Any]) -> int | None:
    if "tokens" not in table:
        return None
    value = table["tokens"]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{path}: {where}: 'tokens' must be a positive integer (got {value!r})")
    return value


def _augmented(
    path: Path, where: str, table: Mapping[str, Any], text: str = "", header: tuple[str, ...] = ()
) -> AugmentedGeneration | None:
    value = table.get("augmented_generation")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(
            f"{path}: {where}: 'augmented_generation' must be a table"
            ' {retriever = "...", database = "..."}'
        )
    inner = f"{where} augmented_generation"
    refuse_unknown(path, inner, value, ("retriever", "database"), text, (*header, "augmented_generation"))
    retriever = _string(path, inner, value, "retriever", required=True)
    database = _string(path, inner, value, "database", required=True)
    assert retriever is not None and database is not None
    return AugmentedGeneration(retriever, database)


def _datasets_filter(path: Path, where: str, table: Mapping[str, Any]) -> tuple[str, ...] | None:
    if "datasets" not in table:
        return None
    value = table["datasets"]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: {where}: 'datasets' must be an array of dataset names")
    for name in value:
        why = name_problem(name)
        if why:
            raise ConfigError(f"{path}: {where}: dataset name {name!r} in 'datasets' {why}")
    return tuple(value)


# The keys of existing benchmark files (see compatibility in docs/architecture.md), then kag's.
SETUP_KEYS = (
    "provider",
    "model",
    "temperature",
    "tokens",
    "system_prompt",
    "datasets",
    "augmented_generation",
    *SETTING_KEYS,
    "options",
    "extra_body",
)


def _setup(path: Path, name: str, table: Any, config: Config, text: str = "") -> Setup:
    where = f"[{name}]"
    _check_name(path, where, name)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: {where}: a setup must be a table (got {toml_type_name(table)})")
    refuse_unknown(path, where, table, SETUP_KEYS, text, (name,))
    provider = _string(path, where, table, "provider", required=True)
    model = _string(path, where, table, "model", required=True)
    temperature = _number(path, where, table, "temperature", required=True)
    assert provider is not None and model is not None and temperature is not None
    augmented = _augmented(path, where, table, text, (name,))
    check_generation(path, where, config, provider, temperature, augmented)
    chosen = config.providers[provider]
    settings = parse_settings(path, where, table, chosen.name, isinstance(chosen, OllamaProvider))
    source = _string(path, where, table, "system_prompt")
    origin = f"{path}: {where} system_prompt"
    template = compile_template(source if source is not None else DEFAULT_TEMPLATE, origin)
    if source is not None and "INPUT" not in template.variables:
        # A common slip: system_prompt read as the system message, which is `system`.
        log.warning(
            "%s: %s: system_prompt never uses {{INPUT}}, so the question is not sent: system_prompt"
            " is the template of the user message; the system message is 'system'",
            path,
            where,
        )
    if augmented is not None and "RETRIEVAL" not in template.variables:
        log.warning("%s: %s: the setup retrieves, but its prompt template never uses RETRIEVAL", path, where)
    return Setup(
        name=name,
        provider=provider,
        model=model,
        temperature=temperature,
        tokens=_tokens(path, where, table),
        template=template,
        datasets=_datasets_filter(path, where, table),
        augmented_generation=augmented,
        settings=settings,
    )


def load_benchmark(path: str | Path, config: Config) -> Benchmark:
    """Load and validate the benchmark file against the configuration."""
    path = Path(path)
    data, text = _load_table(path, "benchmark file")
    if not data:
        raise ConfigError(f"{path}: the benchmark file defines no setup (add a [<setup>] table)")
    setups = {name: _setup(path, name, table, config, text) for name, table in data.items()}
    return Benchmark(path, setups, text)


def generation_setup(
    config: Config,
    provider: str,
    model: str,
    temperature: float,
    tokens: int | None,
    system_prompt: Path | None,
    retriever: str | None,
    database: str | None,
    text: str,
) -> Setup:
    """The setup of ``kag generation``: its flags, checked like a benchmark setup.

    With ``--system-prompt`` the file is the template and ``text`` fills INPUT; without it
    ``text`` itself is the template (see compatibility in docs/architecture.md). Rendered
    once here (RETRIEVAL stubbed for KAG): an undefined variable stops before any request.
    """
    augmented = AugmentedGeneration(retriever, database) if retriever and database else None
    check_generation(config.path, "kag generation", config, provider, temperature, augmented)
    if system_prompt is not None:
        template = compile_template(_read_text(system_prompt, "system prompt file"), str(system_prompt))
    else:
        template = compile_template(text, "the prompt")
    from kag.generation.templates import prompt_variables

    template.render(prompt_variables(text, None, "(retrieval)" if augmented else None))
    return Setup("generation", provider, model, temperature, tokens, template, None, augmented)

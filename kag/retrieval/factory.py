"""``[databases]`` and ``[retrievers]``: validation at load, retrievers at run time.

The runner (``kag.generation``) calls `validate_retrieval` once per KAG setup before any
request is sent, and `open_retriever` once per (retriever, database) pair per run (see
``kag.retrieval.base``). Both take the raw TOML tables.

Tables::

    [databases.kg]            # type = "Neo4j": uri, user, password, database, query
    type = "Ladybug"          # embedded: path to the file `kag graph import` built
    path = "kg.lbug"          # relative to the working directory

    [retrievers.kg-formal]
    type = "Embedder"
    provider = "fastembed"    # embeds the input
    model = "..."             # required unless the provider is FastEmbed
    top_k = 5                 # seed nodes

    [retrievers.kg-formal.extra.kg]   # optional for Ladybug, required for Neo4j
    type = "Ladybug"          # optional; when given, the database's type
    index = "embedding"       # Neo4j: the vector index; Ladybug: the embedding property
    neighborhood = 1          # hops around the seeds
    translation = { type = "FormalTriplet" }   # or TextualTriplet (kag.retrieval.translate)

Unknown keys are warned about and ignored (as in the rest of the configuration).
Messages name the file, the component and the problem, and never a password.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kag.errors import ConfigError, toml_type_name
from kag.install import missing_extra
from kag.retrieval.base import EmbedFn
from kag.retrieval.embedder import EmbedderRetriever, RetrieverSettings
from kag.retrieval.ladybug_backend import DEFAULT_INDEX, LadybugGraph, LadybugSettings
from kag.retrieval.neo4j_backend import QUERY_FORMS, Neo4jGraph, Neo4jSettings, driver_uri
from kag.retrieval.translate import parse_translation

log = logging.getLogger(__name__)

DATABASE_TYPES = ("Neo4j", "Ladybug")
RETRIEVER_TYPES = ("Embedder",)
DEFAULT_TOP_K = 5
DEFAULT_NEIGHBORHOOD = 1
DatabaseSettings = Neo4jSettings | LadybugSettings


def _warn_unknown(where: str, table: Mapping[str, Any], known: tuple[str, ...]) -> None:
    extra = sorted(set(table) - set(known))
    if extra:
        log.warning("%s: ignored unknown key(s) %s", where, ", ".join(repr(k) for k in extra))


def _string(where: str, table: Mapping[str, Any], key: str, default: str | None = None) -> str:
    if key not in table:
        if default is None:
            raise ConfigError(f"{where}: missing required key '{key}'")
        return default
    value = table[key]
    if not isinstance(value, str):
        raise ConfigError(f"{where}: '{key}' must be a string (got {toml_type_name(value)})")
    return value


def _int(where: str, table: Mapping[str, Any], key: str, default: int, minimum: int) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: '{key}' must be an integer >= {minimum} (got {value!r})")
    return value


def _component(config_path: str, section: str, name: str, tables: Mapping[str, Any]) -> Mapping[str, Any]:
    where = f"{config_path}: {section}.{name}"
    if name not in tables:
        known = ", ".join(sorted(tables)) or "none"
        raise ConfigError(
            f"{config_path}: {section}.{name}: not defined (the [{section}] tables are: {known})"
        )
    table = tables[name]
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: must be a table (got {toml_type_name(table)})")
    return table


def database_settings(config_path: str, name: str, databases: Mapping[str, Any]) -> DatabaseSettings:
    """The ``[databases.<name>]`` table as settings; raises ConfigError."""
    table = _component(config_path, "databases", name, databases)
    where = f"{config_path}: databases.{name}"
    kind = table.get("type")
    if kind == "Neo4j":
        _warn_unknown(where, table, ("type", "uri", "user", "password", "database", "query"))
        query = _string(where, table, "query", "auto")
        if query not in QUERY_FORMS:
            raise ConfigError(f"{where}: 'query' must be one of {', '.join(QUERY_FORMS)} (got {query!r})")
        settings = Neo4jSettings(
            name=name,
            uri=_string(where, table, "uri", "127.0.0.1:7687") or "127.0.0.1:7687",
            user=_string(where, table, "user", "neo4j"),
            password=_string(where, table, "password"),
            database=_string(where, table, "database", "neo4j"),
            query=query,
        )
        try:
            driver_uri(settings.uri)
        except ValueError as exc:
            raise ConfigError(f"{where}: 'uri': {exc}") from None
        return settings
    if kind == "Ladybug":
        _warn_unknown(where, table, ("type", "path"))
        path = _string(where, table, "path")
        if not path.strip():
            raise ConfigError(f"{where}: 'path' must not be empty")
        return LadybugSettings(name=name, path=str(Path(path).expanduser()))
    if kind is None:
        raise ConfigError(f"{where}: missing required key 'type' (one of {', '.join(DATABASE_TYPES)})")
    raise ConfigError(
        f"{where}: unknown database type {kind!r} (expected one of {', '.join(DATABASE_TYPES)})"
    )


def retriever_settings(
    config_path: str, name: str, database: DatabaseSettings, retrievers: Mapping[str, Any]
) -> RetrieverSettings:
    """The ``[retrievers.<name>]`` table resolved for ``database``; raises ConfigError."""
    table = _component(config_path, "retrievers", name, retrievers)
    where = f"{config_path}: retrievers.{name}"
    kind = table.get("type")
    if kind not in RETRIEVER_TYPES:
        if kind is None:
            raise ConfigError(f"{where}: missing required key 'type' (one of {', '.join(RETRIEVER_TYPES)})")
        raise ConfigError(
            f"{where}: unknown retriever type {kind!r} (expected one of {', '.join(RETRIEVER_TYPES)})"
        )
    _warn_unknown(where, table, ("type", "provider", "model", "top_k", "extra"))
    provider = _string(where, table, "provider")
    model = _string(where, table, "model", "")
    top_k = _int(where, table, "top_k", DEFAULT_TOP_K, 1)
    extras = table.get("extra", {})
    if not isinstance(extras, Mapping):
        raise ConfigError(
            f"{where}: 'extra' must be a table of per-database tables (got {toml_type_name(extras)})"
        )
    db_type = "Neo4j" if isinstance(database, Neo4jSettings) else "Ladybug"
    inner = f"{where}.extra.{database.name}"
    extra = extras.get(database.name)
    if extra is None:
        if db_type == "Neo4j":
            raise ConfigError(
                f"{inner}: missing (a Neo4j database needs the retriever's extra.{database.name} table"
                " with at least 'index', the vector index to query)"
            )
        extra = {}
    if not isinstance(extra, Mapping):
        raise ConfigError(f"{inner}: must be a table (got {toml_type_name(extra)})")
    _warn_unknown(inner, extra, ("type", "index", "neighborhood", "translation"))
    declared = extra.get("type", db_type)
    if declared != db_type:
        raise ConfigError(
            f"{inner}: type {declared!r} does not match databases.{database.name} (type {db_type!r})"
        )
    index = _string(inner, extra, "index", None if db_type == "Neo4j" else DEFAULT_INDEX)
    if not index.strip():
        raise ConfigError(f"{inner}: 'index' must not be empty")
    if db_type == "Ladybug" and "`" in index:
        raise ConfigError(f"{inner}: 'index' must not contain a backtick")
    neighborhood = _int(inner, extra, "neighborhood", DEFAULT_NEIGHBORHOOD, 0)
    translation = parse_translation(extra.get("translation"), f"{inner}.translation")
    return RetrieverSettings(
        name=name,
        provider=provider,
        model=model,
        top_k=top_k,
        index=index,
        neighborhood=neighborhood,
        translation=translation,
    )


def validate_retrieval(
    config_path: str,
    retriever: str,
    database: str,
    retrievers: Mapping[str, Any],
    databases: Mapping[str, Any],
    providers: Mapping[str, Any],
) -> None:
    """Check everything a (retriever, database) pair needs that can be checked without
    connecting: the tables, the provider, the translation's templates, the driver
    package, and for Ladybug that the database file exists. Raises ConfigError naming
    ``config_path``, the component and the problem."""
    db = database_settings(config_path, database, databases)
    settings = retriever_settings(config_path, retriever, db, retrievers)
    where = f"{config_path}: retrievers.{retriever}"
    if settings.provider not in providers:
        known = ", ".join(sorted(providers)) or "none"
        raise ConfigError(f"{where}: provider {settings.provider!r} is not defined (providers: {known})")
    provider = providers[settings.provider]
    provider_type = provider.get("type") if isinstance(provider, Mapping) else None
    if not settings.model and provider_type != "FastEmbed":
        raise ConfigError(
            f"{where}: missing required key 'model' (the embedding model of provider {settings.provider!r})"
        )
    if isinstance(db, LadybugSettings):
        if importlib.util.find_spec("ladybug") is None:
            raise ConfigError(f"{config_path}: databases.{database}: {missing_extra('ladybug', 'graph')}")
        if not Path(db.path).exists():
            raise ConfigError(
                f"{config_path}: databases.{database}: {db.path}: no such database (build it with"
                f" `kag graph import -c {config_path} --database {database} ...`)"
            )
    elif importlib.util.find_spec("neo4j") is None:
        raise ConfigError(f"{config_path}: databases.{database}: {missing_extra('neo4j', 'neo4j')}")


def open_retriever(
    retriever: str,
    database: str,
    retrievers: Mapping[str, Any],
    databases: Mapping[str, Any],
    embed: EmbedFn,
) -> EmbedderRetriever:
    """A retriever for the run; nothing connects until the first ``retrieve``, so a
    database that is down gives ``error`` results, not a failed run."""
    db = database_settings("configuration", database, databases)
    settings = retriever_settings("configuration", retriever, db, retrievers)
    graph: Neo4jGraph | LadybugGraph = Neo4jGraph(db) if isinstance(db, Neo4jSettings) else LadybugGraph(db)
    return EmbedderRetriever(settings, database, graph, embed)

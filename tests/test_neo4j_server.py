"""The Neo4j test servers' guard (tests/neo4j_server.py): without Java or Maven the Neo4j
tests skip with one line saying why, except under CI=true, where that is a failure."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tests.neo4j_server as servers


def test_no_java_skips_with_one_line_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(Path, "glob", lambda self, pattern: iter(()))
    reason = servers.unavailable()
    assert reason is not None and reason.startswith("no Java:") and "\n" not in reason
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="^no Java:"):
        servers.skip_or_fail(reason)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and the Neo4j tests cannot run: no Java:"):
        servers.skip_or_fail(reason)


def test_java_without_maven_or_a_built_launcher_names_maven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/java" if name == "java" else None)
    monkeypatch.setattr(servers, "RUN", Path("/nonexistent/tests/neo4j/run"))
    assert servers.unavailable() == "no Maven (mvn): it fetches Neo4j's test harness from Maven Central"


def test_neo4j_uri_replaces_the_started_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEO4J_URI", raising=False)
    assert servers.versions() == ("5.26", "2026")
    monkeypatch.setenv("NEO4J_URI", "bolt://db.example:7687")
    monkeypatch.setenv("NEO4J_PASSWORD", "pw")
    assert servers.versions() == ("own",)
    own = servers.ServerPool().get("own")
    assert (own.uri, own.user, own.password, own.process) == ("bolt://db.example:7687", "neo4j", "pw", None)

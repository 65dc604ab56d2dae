"""Real Neo4j servers for the tests: `tests/neo4j/run VERSION` (Neo4j's test harness from
Maven Central, authentication on), one per version per test session, stopped at its end.

`neo4j_server` (in tests/conftest.py) is parametrized over `VERSIONS`; with ``NEO4J_URI``
set (and ``NEO4J_USER``, ``NEO4J_PASSWORD``), the tests run against that server instead
(version "own"). Without Java or Maven the tests skip with one line saying why; under
``CI=true`` that skip is a failure. The tests run by ``make test-neo4j`` (one process:
each server holds one shared database, which the tests fill with ``--replace``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parent / "neo4j" / "run"
VERSIONS = ("5.26", "2026")
START_TIMEOUT = 600.0  # the first run builds the launcher (Maven downloads ~150 MB)


@dataclass
class Neo4jServer:
    version: str
    uri: str
    user: str
    password: str
    process: subprocess.Popen[str] | None = field(default=None, repr=False)
    started_seconds: float = 0.0

    @property
    def search(self) -> bool:
        """Whether the server has the SEARCH clause (Neo4j 2026.01 and later)."""
        if self.version != "own":
            return self.version != "5.26"
        import neo4j

        from kag.retrieval.neo4j_backend import SEARCH_SINCE, server_version

        with neo4j.GraphDatabase.driver(self.uri, auth=(self.user, self.password)) as driver:
            version = server_version(driver.get_server_info().agent)
        return version is not None and version >= SEARCH_SINCE

    def stop(self) -> None:
        """SIGTERM, then wait for the clean stop (the launcher closes the database)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def unavailable() -> str | None:
    """Why no Neo4j can be started here, or None."""
    if shutil.which("java") is None and not any(Path("/usr/lib/jvm").glob("*/bin/java")):
        return "no Java: the Neo4j tests need a JDK (17 for Neo4j 5.26, 21+ for 2026.x) and Maven"
    if shutil.which("mvn") is None and not (RUN.parent / "target").is_dir():
        return "no Maven (mvn): it fetches Neo4j's test harness from Maven Central"
    return None


def skip_or_fail(reason: str) -> None:
    """Skip with ``reason``; under CI=true a missing Neo4j is a failure instead."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and the Neo4j tests cannot run: {reason}")
    pytest.skip(reason)


def start(version: str, user: str = "neo4j", password: str = "kag-test-password") -> Neo4jServer:
    """Start `tests/neo4j/run VERSION` and wait for its first line (the Bolt URI)."""
    began = time.monotonic()
    process = subprocess.Popen(
        [str(RUN), version, user, password],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a Ctrl-C of pytest does not kill it before its clean stop
    )
    assert process.stdout is not None and process.stderr is not None
    errors: list[str] = []
    drain = threading.Thread(target=lambda: errors.extend(process.stderr), daemon=True)  # type: ignore[arg-type]
    drain.start()
    line = process.stdout.readline()  # blocks until the server serves or the launcher exits
    threading.Thread(target=process.stdout.read, daemon=True).start()
    parts = line.split()
    if len(parts) != 3 or not parts[0].startswith("bolt://"):
        process.wait(timeout=60)
        drain.join(timeout=10)
        tail = "".join(errors[-15:])
        raise RuntimeError(f"tests/neo4j/run {version} did not start (exit {process.returncode}):\n{tail}")
    return Neo4jServer(version, parts[0], parts[1], parts[2], process, time.monotonic() - began)


class ServerPool:
    """One server per version, started on first use, stopped at the session's end."""

    def __init__(self) -> None:
        self.servers: dict[str, Neo4jServer] = {}

    def get(self, version: str) -> Neo4jServer:
        if version == "own":
            return Neo4jServer(
                "own",
                os.environ["NEO4J_URI"],
                os.environ.get("NEO4J_USER", "neo4j"),
                os.environ.get("NEO4J_PASSWORD", ""),
            )
        if version not in self.servers:
            reason = unavailable()
            if reason is not None:
                skip_or_fail(reason)
            self.servers[version] = start(version)
        return self.servers[version]

    def close(self) -> None:
        for server in self.servers.values():
            server.stop()


def versions() -> tuple[str, ...]:
    return ("own",) if os.environ.get("NEO4J_URI") else VERSIONS

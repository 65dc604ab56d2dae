"""The one-node Slurm cluster of these tests, started once per session; where it cannot
start the tests skip with one line saying why, and fail instead in CI (``CI=true``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NoReturn

import pytest

from tests.slurm.cluster import Cluster, SlurmUnavailable, start_cluster

#: Lines for the closing note of the test run (start-up time, how long the arrays took).
NOTES: list[str] = []


def unavailable(reason: SlurmUnavailable) -> NoReturn:
    """Skip, with the one line saying why; in CI (``CI=true``) fail instead."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"Slurm cluster unavailable in CI: {reason}", pytrace=False)
    pytest.skip(f"Slurm cluster unavailable: {reason}")


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    try:
        running = start_cluster()
    except SlurmUnavailable as exc:
        unavailable(exc)
    NOTES.append(f"slurm: slurmctld and slurmd up (node idle) in {running.startup:.2f} s")
    try:
        yield running
    finally:
        running.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if NOTES:
        terminalreporter.write_sep("-", "slurm")
        for line in NOTES:
            terminalreporter.write_line(line)

"""Shared fixtures: offline embeddings, pinned terminal width, the shared real data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# No test depends on timing: hypothesis' per-example deadline would make a loaded CI
# machine fail tests whose logic is right.
settings.register_profile("kag", deadline=None)
settings.load_profile("kag")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("KAG_WIDTH", "200")

REPO = Path(__file__).resolve().parent.parent
TEST_DATA = REPO / "tests" / "data"
SHARED = REPO.parent / "shared"
MED_KAG = SHARED / "data" / "med-kag"


def med_kag_root() -> Path | None:
    """The real Med-KAG data (MIRAGE datasets file and a Rust-tool result tree): the folder
    named by ``KAG_TEST_DATA``, else ``../shared/data/med-kag`` beside the checkout; None
    when neither holds it (a user's clone)."""
    named = os.environ.get("KAG_TEST_DATA")
    for folder in ([Path(named)] if named else []) + [MED_KAG]:
        if (folder / "datasets" / "mirage.json").is_file():
            return folder
    return None


@pytest.fixture
def med_kag() -> Path:
    """The real MIRAGE datasets file and Rust-tool result tree (skips in a user's clone)."""
    root = med_kag_root()
    if root is None:
        pytest.skip("the Med-KAG data is not present (set KAG_TEST_DATA to its folder)")
    return root


@pytest.fixture
def repo() -> Path:
    return REPO


IRT2_DATASET = TEST_DATA / "irt2" / "dataset"


def run_irt2(  # type: ignore[no-untyped-def]
    *args: str | Path, dataset: Path = IRT2_DATASET, task: str = "linking", split: str = "test"
):
    """`kag irt2` through typer's CliRunner on ``dataset`` (the hand-made one in tests/data/irt2
    unless told), linking task, test split by default; ``args`` add the prediction files and
    any other option."""
    from typer.testing import CliRunner

    from kag.cli import app

    command = ["irt2", "--dataset", dataset, "--task", task, "--split", split, *args]
    return CliRunner().invoke(app, [str(part) for part in command])


def write_ok(path: Path, text: str, seconds: int = 1) -> None:
    """An ok result file at ``path`` answering ``text``, written by the real writer."""
    from kag.results import OkResult, OkStats, Timing, write_result

    write_result(path, OkResult(text, OkStats(prompt="p", time=Timing(seconds, 0))))


# ---------------------------------------------------------------- real Neo4j (make test-neo4j)


@pytest.fixture(scope="session")
def neo4j_pool():  # type: ignore[no-untyped-def]
    """The session's Neo4j servers (tests/neo4j_server.py), stopped at its end."""
    from tests.neo4j_server import ServerPool

    pool = ServerPool()
    yield pool
    pool.close()


def _neo4j_versions() -> tuple[str, ...]:
    from tests.neo4j_server import versions

    return versions()


@pytest.fixture(scope="session", params=_neo4j_versions())
def neo4j_server(request: pytest.FixtureRequest, neo4j_pool):  # type: ignore[no-untyped-def]
    """A real Neo4j, once per version (5.26 on Java 17, 2026.x on Java 21+), or the one
    NEO4J_URI names."""
    return neo4j_pool.get(request.param)

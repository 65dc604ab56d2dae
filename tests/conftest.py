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
SHARED = REPO.parent / "shared"
MED_KAG = SHARED / "data" / "med-kag"


@pytest.fixture
def med_kag() -> Path:
    """The real MIRAGE datasets file and Rust-tool result tree (skips in a user's clone)."""
    if not (MED_KAG / "datasets" / "mirage.json").is_file():
        pytest.skip("../shared/data/med-kag is not present")
    return MED_KAG


@pytest.fixture
def repo() -> Path:
    return REPO

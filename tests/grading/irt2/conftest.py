"""Helpers shared by the IRT2 reader tests."""

from __future__ import annotations

from pathlib import Path


def write(tmp_path: Path, text: str | bytes, name: str) -> Path:
    """``text`` (UTF-8 when a str, as is when bytes) written to ``tmp_path / name``."""
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path

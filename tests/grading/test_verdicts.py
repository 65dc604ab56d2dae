"""The judge's verdict cache (kag/grading/verdicts.py): many verdicts read at once give what
reading each one gives, and refuse a planted link or a FIFO the same way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kag.errors import InputError
from kag.grading.verdicts import Judge, Verdict, VerdictCache
from kag.results import LinkInTree

JUDGE = Judge("oa", "judge-model")


def _cache(tmp_path: Path) -> tuple[VerdictCache, list[str]]:
    cache = VerdictCache(tmp_path, JUDGE)
    keys = [f"{i:064x}" for i in range(7)]
    cache.write(keys[0], Verdict.CORRECT, "yes")
    cache.write(keys[1], Verdict.INCORRECT, "no")
    cache.write(keys[2], Verdict.UNUSABLE, "hm")
    cache.path(keys[3]).write_text("{not json")
    cache.path(keys[4]).write_text('{"verdict": "MAYBE"}')
    cache.path(keys[5]).symlink_to(cache.path(keys[0]))  # a planted link: no verdict
    return cache, keys  # keys[6]: none cached


def test_reading_many_verdicts_equals_reading_each(tmp_path: Path) -> None:
    cache, keys = _cache(tmp_path)
    expected = {k: v for k in keys if (v := cache.read(k)) is not None}
    assert cache.read_many(keys) == expected
    assert expected == {keys[0]: Verdict.CORRECT, keys[1]: Verdict.INCORRECT, keys[2]: Verdict.UNUSABLE}
    assert VerdictCache(tmp_path / "none", JUDGE).read_many(keys) == {}


def test_a_fifo_or_a_planted_folder_link_is_refused_as_reading_each(tmp_path: Path) -> None:
    cache, keys = _cache(tmp_path)
    os.mkfifo(cache.path(keys[6]))
    for read in (lambda: cache.read(keys[6]), lambda: cache.read_many(keys)):
        with pytest.raises(InputError, match="not a regular file where a verdict file belongs"):
            read()
    cache.path(keys[6]).unlink()
    folder = cache.path(keys[0]).parent
    folder.rename(tmp_path / "elsewhere")
    folder.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    for read in (lambda: cache.read(keys[0]), lambda: cache.read_many(keys)):
        with pytest.raises(LinkInTree):
            read()

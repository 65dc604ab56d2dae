"""The judge's verdicts in the index's rows: each graded row keeps the key its answer's
verdict is cached under (:func:`judged_key`, the key `kag stats --judge` reads), and a scan
brings the rows' verdicts up to date when the judge's cache changed (:func:`sync_verdicts`).

A `kag stats judge` run adds verdicts without touching a result file, so the scan of the
files alone would never see them. The cache folder of the judge
(``<tree>/.kag-judge/<judge>/``) is listed once per scan: its signature (the verdicts'
names and the folder's mtime, which every verdict written, by an atomic rename, changes)
is kept in the index; only when it differs are the rows' verdicts read again, by their
keys, without reading a result file. Folders are opened without following a link; a
planted link or a file that is not a verdict is refused as `kag stats --judge` refuses it.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import orjson

from kag.grading.mcq.question_files import QuestionTask
from kag.grading.record import GradedFile
from kag.grading.verdicts import (
    CACHE_SUFFIX,
    JudgeKey,
    VerdictCache,
    verdict_key_of,
)
from kag.view.record_rows import detail_field_of, with_detail_field


def judged_key(judge: JudgeKey | None, task: QuestionTask, record: GradedFile) -> str | None:
    """The key the verdict of ``record`` (an answer to the question of ``task``) is cached
    under by ``judge``, as the grading walk reads it; None without a judge, or for a file
    that is not an answer (an error file)."""
    if judge is None or task.judge_texts is None or record.response is None:
        return None
    return verdict_key_of(judge, *task.judge_texts, record.response)


def judge_fingerprint(judge: JudgeKey) -> str:
    """What names the judge's verdicts in an index's settings: the SHA-256 (hex) of the
    judge, its server and its prompt's SHA-256 (another one is another index)."""
    payload = [judge.provider, judge.model, list(judge.endpoint), judge.prompt_sha256]
    return hashlib.sha256(orjson.dumps(payload)).hexdigest()


@dataclass(frozen=True)
class CacheState:
    """The judge's cache folder of one tree as listed: its signature and the keys it holds."""

    signature: str
    keys: frozenset[str]


def cache_state(root: str, judge: JudgeKey) -> CacheState:
    """The judge's cache folder of the tree at ``root``, listed (one listing and one
    ``fstat``): no folder, no key. LinkInTree when a link or a file sits where one of its
    folders belongs."""
    cache = VerdictCache(Path(root), judge.judge)
    cache.check()
    fd = cache.open_folder()
    if fd is None:
        return CacheState("", frozenset())
    try:
        names = os.listdir(fd)
        mtime = os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
    keys = frozenset(n[: -len(CACHE_SUFFIX)] for n in names if n.endswith(CACHE_SUFFIX))
    text = f"{mtime}\0" + "\n".join(sorted(keys))
    return CacheState(hashlib.blake2b(text.encode(), digest_size=16).hexdigest(), keys)


def sync_verdicts(
    db: sqlite3.Connection, root: str, judge: JudgeKey, state: CacheState, *, fresh: bool = False
) -> int:
    """Bring the verdicts of the rows of the tree at ``root`` up to date with its judge's
    cache as listed in ``state`` (taken before the scan read any file, so that a verdict
    written during the scan is read at the next one): nothing when the index holds that
    listing's signature already, or when every row was just read (``fresh``: the tree is
    new to the index); else each row whose key's verdict was not listed and now is gets
    it, and each row whose key is no longer listed loses its verdict.
    The number of rows whose verdict changed."""
    meta = f"verdicts\0{root}"
    stored = db.execute("SELECT value FROM meta WHERE key=?", (meta,)).fetchone()
    changed = 0
    if stored is not None and stored[0] == state.signature:
        return 0
    if not fresh:
        # A row whose verdict is cached and still listed keeps it (kag writes a verdict
        # once, again only where the one cached could not be read: a row without one);
        # the others are read, each key once.
        rows = db.execute(
            "SELECT rel, judged, detail FROM files WHERE tree=? AND judged IS NOT NULL", (root,)
        )
        stale = []
        for rel, key, detail in rows.fetchall():
            held = detail_field_of(detail, "verdict")
            if (held is None) == (key in state.keys):
                stale.append((rel, key, detail))
        cache = VerdictCache(Path(root), judge.judge)
        read = cache.read_many({key for _, key, _ in stale if key in state.keys})
        updates = []
        for rel, key, detail in stale:
            verdict = read.get(key)
            new = with_detail_field(detail, "verdict", verdict.value if verdict is not None else None)
            if new is not None:
                updates.append((new, root, rel))
        db.executemany("UPDATE files SET detail=? WHERE tree=? AND rel=?", updates)
        changed = len(updates)
    db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (meta, state.signature))
    return changed

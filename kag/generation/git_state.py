"""The git commit and dirty state a run record keeps, read without running anything a
repository's own configuration names.

A repository is data a user may have received (an extracted archive holds a ``.git``): its
``.git/config`` can name commands git runs on ``git status`` (``core.fsmonitor``, the
``clean`` filter of a driver its ``.gitattributes`` selects, hooks). So the commit is read
from ``.git`` directly (``HEAD``, a loose ref or ``packed-refs``), and the dirty state comes
from ``git status`` pointed at a throwaway git directory that borrows the repository's
objects and index but not its configuration, hooks or modules. Only the repository holding
the benchmark file is read, and only one the user owns (as git's own ``safe.directory``
rule asks), never the current folder's.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

GIT_TIMEOUT = 5.0

_OID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
#: Largest HEAD, ref or ``.git`` file read (they hold one line).
_SMALL = 4096
#: Largest part of ``packed-refs`` read (a few hundred thousand refs).
_PACKED_REFS = 32 * 1024 * 1024


def _read_small(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(_SMALL).decode("utf-8", errors="replace")
    except OSError:
        return None


def find_repository(start: Path) -> tuple[Path, Path, Path] | None:
    """``(work tree, git dir, common dir)`` of the repository ``start`` (a folder) is in,
    or None: none found, or its work tree or git directory is not the user's own."""
    try:
        folder = start.resolve()
    except (OSError, RuntimeError):
        return None
    for candidate in (folder, *folder.parents):
        dot = candidate / ".git"
        try:
            if dot.is_dir():
                gitdir = dot
            elif dot.is_file():
                text = _read_small(dot) or ""
                if not text.startswith("gitdir: "):
                    return None
                gitdir = (candidate / text[len("gitdir: ") :].strip()).resolve()
            else:
                continue
            common_text = _read_small(gitdir / "commondir")
            common = (gitdir / common_text.strip()).resolve() if common_text else gitdir
            uid = os.getuid()
            if any(p.stat().st_uid != uid for p in (candidate, gitdir, common)):
                return None
        except (OSError, RuntimeError):
            return None
        return candidate, gitdir, common
    return None


def _resolve_ref(name: str, gitdir: Path, common: Path) -> str | None:
    if not name.startswith("refs/") or ".." in name.split("/") or "\\" in name:
        return None
    for folder in (gitdir, common):
        text = _read_small(folder / name)
        if text is not None:
            oid = text.strip()
            return oid if _OID.fullmatch(oid) else None
    try:
        with open(common / "packed-refs", "rb") as handle:
            packed = handle.read(_PACKED_REFS).decode("utf-8", errors="replace")
    except OSError:
        return None
    for line in packed.splitlines():
        oid, _, ref = line.partition(" ")
        if ref == name and _OID.fullmatch(oid):
            return oid
    return None


def read_commit(gitdir: Path, common: Path) -> str | None:
    """The commit ``HEAD`` names (a detached id, or the id of the branch it points at);
    None for a branch without a commit yet or a layout this reader does not know."""
    head = _read_small(gitdir / "HEAD")
    if head is None:
        return None
    head = head.strip()
    if head.startswith("ref: "):
        return _resolve_ref(head[len("ref: ") :].strip(), gitdir, common)
    return head if _OID.fullmatch(head) else None


def _clean_env(gitdir: Path, worktree: Path, index: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_DIR=str(gitdir),
        GIT_WORK_TREE=str(worktree),
        GIT_INDEX_FILE=str(index),
        GIT_OPTIONAL_LOCKS="0",  # status does not rewrite the repository's index
        GIT_TERMINAL_PROMPT="0",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_CONFIG_NOSYSTEM="1",
    )
    return env


def read_dirty(worktree: Path, common: Path, gitdir: Path, commit: str) -> bool | None:
    """Whether the work tree differs from ``commit`` (a changed, staged or untracked file),
    by ``git status`` against a throwaway git directory: ``HEAD`` is ``commit``, objects are
    the repository's (through ``objects/info/alternates``), the index is read in place, and
    ``info/exclude`` is copied; its configuration is empty, so no command the repository
    names can run. None when git is missing, fails or takes longer than ``GIT_TIMEOUT``."""
    with tempfile.TemporaryDirectory(prefix="kag-git-") as tmp:
        shadow = Path(tmp)
        (shadow / "objects" / "info").mkdir(parents=True)
        (shadow / "refs").mkdir()
        (shadow / "info").mkdir()
        (shadow / "objects" / "info" / "alternates").write_text(f"{common / 'objects'}\n")
        (shadow / "HEAD").write_text(f"{commit}\n")
        fmt = "sha256" if len(commit) == 64 else "sha1"
        (shadow / "config").write_text(
            f"[core]\n\trepositoryformatversion = 1\n\tbare = false\n[extensions]\n\tobjectformat = {fmt}\n"
        )
        exclude = _read_small(common / "info" / "exclude")
        if exclude is not None:
            (shadow / "info" / "exclude").write_text(exclude)
        command = [
            "git",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.untrackedCache=false",
            "status",
            "--porcelain",
            "--ignore-submodules=all",
            "--no-renames",
        ]
        try:
            done = subprocess.run(
                command,
                cwd=shadow,
                env=_clean_env(shadow, worktree, gitdir / "index"),
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError):
            return None
    if done.returncode != 0:
        return None
    return bool(done.stdout.strip())


def git_state(benchmark_file: Path) -> dict[str, Any] | None:
    """``{"commit": …, "dirty": …}`` of the repository holding ``benchmark_file``; None when
    it is in none (or one that is not the user's), or HEAD names no commit. ``dirty`` is
    None when git could not tell (:func:`read_dirty`)."""
    found = find_repository(benchmark_file.parent)
    if found is None:
        return None
    worktree, gitdir, common = found
    commit = read_commit(gitdir, common)
    if commit is None:
        return None
    return {"commit": commit, "dirty": read_dirty(worktree, common, gitdir, commit)}

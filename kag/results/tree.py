"""The result tree: its layout, and the walks over it (none follows a symbolic link).

Layout: ``<results>/<dataset>/<question>/<prefix><setup>.json``.
"""

from __future__ import annotations

__all__ = [
    "EPOCHS_FOLDER",
    "ResultFile",
    "TreeListing",
    "Unit",
    "check_results_root",
    "epoch_result_path",
    "expand_unit",
    "glob_filter",
    "iter_result_files_deep",
    "iter_units",
    "iter_walk",
    "list_result_files_deep",
    "list_results",
    "matches_any",
    "relative_path",
    "result_file_setup",
    "result_path",
    "scandir_entries",
    "setup_from_name",
    "sorted_entries",
]

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from kag.errors import InputError
from kag.results.model import RESULT_SUFFIX
from kag.results.runs import KAG_FOLDER
from kag.textsafe import is_utf8


def result_path(root: str | Path, dataset: str, question: str, prefix: str, setup: str) -> Path:
    return Path(root) / dataset / question / f"{prefix}{setup}{RESULT_SUFFIX}"


# The folder of a question's repeated samples. A folder at the file level is never a result
# file: kag stats passes over this name without counting it, so a tree with N epochs grades
# (epoch 1) as the 1-epoch run, as a reader that knows no epochs grades it (compatibility,
# docs/architecture.md). It must not end in ".tmp": users, tools and kag's own clean-up
# treat such names as disposable.
EPOCHS_FOLDER = "epochs"


def epoch_result_path(
    root: str | Path, dataset: str, question: str, prefix: str, setup: str, epoch: int
) -> Path:
    """Where epoch ``epoch`` (1-based) of a task is stored.

    Epoch 1 is the usual file, ``<root>/<dataset>/<question>/<prefix><setup>.json``; epoch
    n >= 2 is ``<root>/<dataset>/<question>/epochs/<n>/<prefix><setup>.json`` (n in
    decimal, no leading zeros). Raises ValueError for an epoch below 1.
    """
    if epoch < 1:
        raise ValueError(f"epochs count from 1 (got {epoch})")
    if epoch == 1:
        return result_path(root, dataset, question, prefix, setup)
    return Path(root) / dataset / question / EPOCHS_FOLDER / str(epoch) / f"{prefix}{setup}{RESULT_SUFFIX}"


def setup_from_name(name: str, prefix: str) -> str | None:
    """The setup a file name belongs to, or None when the name is not ``<prefix>…json``."""
    if not name.startswith(prefix) or not name.endswith(RESULT_SUFFIX):
        return None
    setup = name[len(prefix) : -len(RESULT_SUFFIX)]
    return setup or None


# (prefix, name) -> the setup of a result file of that name, or None: a tree has millions
# of files but few names (one per setup), so each is read once (kept to a bound, for a
# tree that is not laid out so), and the files of a setup share one text.
_NAMES: dict[tuple[str, str], str | None] = {}
_NAMES_KEPT = 4096


def named_setup(name: str, prefix: str) -> str | None:
    """The setup of a regular file named ``name``, or None when it is no result file's
    name: not ``<prefix>…json`` (with a non-empty setup) in valid UTF-8."""
    key = (prefix, name)
    try:
        return _NAMES[key]
    except KeyError:
        if len(_NAMES) >= _NAMES_KEPT:
            _NAMES.clear()
        setup = _NAMES[key] = setup_from_name(name, prefix) if is_utf8(name) else None
        return setup


def result_file_setup(entry: os.DirEntry[str], prefix: str) -> str | None:
    """The setup of a result file, or None when ``entry`` is not one: a name that is not
    ``<prefix>…json`` (with a non-empty setup) in valid UTF-8, or not a regular file (a
    symbolic link is not followed)."""
    setup = named_setup(entry.name, prefix)
    if setup is None or not entry.is_file(follow_symlinks=False):
        return None
    return setup


@dataclass(frozen=True)
class ResultFile:
    path: str
    dataset: str
    question: str
    setup: str


@dataclass
class TreeListing:
    """What a walk of the tree found: the result files and the entries it passed over."""

    files: list[ResultFile] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def check_results_root(root: str) -> None:
    """InputError unless ``root`` is a directory (the root of a result tree)."""
    if not os.path.exists(root):
        raise InputError(f"{root}: results directory not found")
    if not os.path.isdir(root):
        raise InputError(f"{root}: not a directory (--results takes the root of the result tree)")


def scandir_entries(path: str) -> list[os.DirEntry[str]]:
    """The entries of a folder, or none when it is gone, not a folder or not readable."""
    try:
        with os.scandir(path) as it:
            return list(it)
    except (NotADirectoryError, FileNotFoundError, PermissionError):
        return []


def list_results(root: str | Path, prefix: str = "") -> TreeListing:
    """List ``<root>/<dataset>/<question>/<prefix><setup>.json`` files, sorted by path.

    Symbolic links are never followed. ``.tmp`` files, other names, and entries at other
    depths are returned in ``ignored``; kag's own ``.kag`` folder is passed over.
    """
    root = str(root)
    check_results_root(root)
    listing = TreeListing()
    for d in sorted(scandir_entries(root), key=lambda e: e.name):
        if d.name == KAG_FOLDER and d.is_dir(follow_symlinks=False):
            continue  # kag's own records (run records): not part of the tree
        if not d.is_dir(follow_symlinks=False):
            listing.ignored.append(d.path)
            continue
        for q in sorted(scandir_entries(d.path), key=lambda e: e.name):
            if not q.is_dir(follow_symlinks=False):
                listing.ignored.append(q.path)
                continue
            for f in sorted(scandir_entries(q.path), key=lambda e: e.name):
                setup = setup_from_name(f.name, prefix)
                if setup is None or not f.is_file(follow_symlinks=False):
                    listing.ignored.append(f.path)
                    continue
                listing.files.append(ResultFile(f.path, d.name, q.name, setup))
    return listing


def iter_result_files_deep(root: str | Path, prefix: str = "", hidden: bool = True) -> Iterator[str]:
    """Every ``<prefix>…json`` regular file below ``root`` at any depth, sorted by path.

    Symbolic links are never followed (a link in a tree may lead out of it). With
    ``hidden`` False, folders below ``root`` whose name starts with ``.`` are passed over
    (as ripgrep does); kag's own ``.kag`` folders (run records) always are. Raises InputError when ``root`` is not a folder.
    """
    root = str(root)
    check_results_root(root)
    yield from list_result_files_deep(root, prefix, hidden)


def list_result_files_deep(folder: str, prefix: str = "", hidden: bool = True) -> list[str]:
    """:func:`iter_result_files_deep` without the check of ``folder``: a folder that is
    gone (or unreadable) has no files."""
    stack = [folder]
    found: list[str] = []
    while stack:
        current = stack.pop()
        for entry in scandir_entries(current):
            if entry.is_dir(follow_symlinks=False):
                if entry.name != KAG_FOLDER and (hidden or not entry.name.startswith(".")):
                    stack.append(entry.path)
            elif entry.is_file(follow_symlinks=False) and setup_from_name(entry.name, prefix) is not None:
                found.append(entry.path)
    found.sort()
    return found


def sorted_entries(path: str) -> list[os.DirEntry[str]]:
    """The entries of a folder sorted by name; OSError when it cannot be listed."""
    with os.scandir(path) as it:
        return sorted(it, key=lambda e: e.name)


def relative_path(root: str, path: str) -> str:
    """``path`` below ``root`` with ``/`` separators, as the text output shows it. The walk
    yields ``os.path.join(root, …)`` paths, so this is a cheap prefix cut."""
    base = root if root.endswith(os.sep) else root + os.sep
    rel = path[len(base) :] if path.startswith(base) else os.path.relpath(path, root)
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


# A unit of the walk: (path, is_folder). A folder unit stands for every result file of
# its whole subtree, listed by the worker that searches it, so the parent lists only the
# top of the tree.
Unit = tuple[str, bool]


def iter_units(
    root: str,
    prefix: str = "",
    depth: int = 1,
    keep_top: Callable[[str], bool] | None = None,
    hidden: bool = True,
) -> Iterator[Unit]:
    """The tree cut into units, in an order such that the units' deep walks, one after
    the other, give exactly ``iter_result_files_deep(root, prefix)``: the same paths in
    the same order. Folders ``depth`` levels below ``root`` (the question folders of the
    normal layout, with the default 1) are units; result files above them are units of
    their own. ``keep_top`` (the ``--dataset`` filter) is asked about each top-level
    folder name, and about ``""`` for the files directly in ``root``.

    Same order: the deep walk sorts full paths; a file sorts among its siblings by its
    name and a folder's files by ``<name>`` and the separator (``/``; ``\\`` on Windows,
    which sorts otherwise against digits and capitals). A name holds no separator, so
    comparing ``name`` with ``folder/…`` is decided within ``folder/``, at every level. Folders and files are
    told apart without following symbolic links, as the deep walk does. Raises
    InputError when ``root`` is not a folder.
    """
    check_results_root(root)
    yield from _units(root, prefix, depth, keep_top, hidden)


def _units(
    folder: str, prefix: str, depth: int, keep: Callable[[str], bool] | None, hidden: bool
) -> Iterator[Unit]:
    units: list[tuple[str, str, bool]] = []
    for entry in scandir_entries(folder):
        if entry.is_dir(follow_symlinks=False):
            if (
                (keep is None or keep(entry.name))
                and entry.name != KAG_FOLDER
                and (hidden or not entry.name.startswith("."))
            ):
                units.append((entry.name + os.sep, entry.path, True))
        elif (
            (keep is None or keep(""))
            and entry.is_file(follow_symlinks=False)
            and setup_from_name(entry.name, prefix) is not None
        ):
            units.append((entry.name, entry.path, False))
    for _, path, is_dir in sorted(units):
        if is_dir and depth > 0:
            yield from _units(path, prefix, depth - 1, None, hidden)
        else:
            yield (path, is_dir)


def expand_unit(unit: Unit, prefix: str, hidden: bool = True) -> list[str]:
    """The result files of a unit, sorted by path."""
    # A folder removed since it was listed has no files: the deep walk would not see it either.
    path, is_dir = unit
    return list_result_files_deep(path, prefix, hidden) if is_dir else [path]


def iter_walk(root: str, prefix: str = "", depth: int = 1, hidden: bool = True) -> Iterator[str]:
    """``iter_result_files_deep(root, prefix, hidden)``, unit by unit (:func:`iter_units`)."""
    for unit in iter_units(root, prefix, depth, hidden=hidden):
        yield from expand_unit(unit, prefix, hidden)


def matches_any(name: str, globs: Sequence[str]) -> bool:
    """The filters' rule (``--setup``, ``--dataset``): ``name`` matches one of the shell
    globs (``fnmatchcase``, case-sensitive), or there are none."""
    return not globs or any(fnmatchcase(name, g) for g in globs)


def glob_filter(globs: tuple[str, ...], prefix: str = "") -> Callable[[str], bool]:
    """:func:`matches_any` of ``prefix + value`` against ``globs`` (none = everything),
    memoised: a tree has few distinct setups and datasets but many files. ``prefix`` is
    the ``<label>/`` a setup's name has in a report over several trees. A closure, not an
    object: it is asked once per file of a walk."""
    if not globs:
        return lambda value: True
    seen: dict[str, bool] = {}

    def keep(value: str) -> bool:
        hit = seen.get(value)
        if hit is None:
            hit = seen[value] = matches_any(prefix + value, globs)
        return hit

    return keep

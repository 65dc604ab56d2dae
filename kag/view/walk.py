"""The walk of a result tree for the index, as `kag stats` walks it: the question folders,
each one's file-level entries (its later epochs' too), and the signature of a folder's
listing that tells a rescan, from one comparison, that nothing in it changed.

No link is followed; hidden dataset folders and ``.tmp`` writes are passed over; entries at
the wrong level are ignored (question ""). A folder that cannot be listed is reported in
``warnings`` and passed over (its files are then gone from the index).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from operator import attrgetter
from stat import S_ISDIR, S_ISLNK, S_ISREG
from typing import NamedTuple

from kag.results.model import TMP_SUFFIX
from kag.results.tree import EPOCHS_FOLDER, named_setup, sorted_entries

#: (size, mtime_ns) of a file: what tells a rescan it changed; (None, None) for an entry
#: that is not a regular file
Stamp = tuple[int | None, int | None]
#: (relative path, epoch, setup or None when ignored, stamp, index of the stamp in the listing)
Entry = tuple[str, int, str | None, Stamp, int]
NO_STAMP: Stamp = (None, None)


def iter_top(root: str) -> Iterator[tuple[str, str, str, os.DirEntry[str]]]:
    """(relative path, dataset, question, entry) of every question folder, and of every
    entry at the dataset or question level that is not one (question "": ignored)."""
    for d in sorted_entries(root):
        if d.name.startswith(".") and d.is_dir(follow_symlinks=False):
            continue
        if not d.is_dir(follow_symlinks=False):
            if not d.name.endswith(TMP_SUFFIX):
                yield d.name, "", "", d
            continue
        try:
            questions = sorted_entries(d.path)
        except OSError:
            continue
        for q in questions:
            if q.is_dir(follow_symlinks=False):
                yield f"{d.name}/{q.name}", d.name, q.name, q
            elif not q.name.endswith(TMP_SUFFIX):
                yield f"{d.name}/{q.name}", d.name, "", q


_NAME = attrgetter("name")
_EPOCHS_ENTRY = EPOCHS_FOLDER + "\0d"  # the epochs folder in a listing
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Folder(NamedTuple):
    """The listing of one question folder, its later epochs' folders included (entries of
    ``epochs/`` named ``epochs/NAME``, those of an epoch folder ``epochs/<n>/NAME``):
    ``names`` in name order, each one that is not a regular file marked with its kind
    (``\0d`` a folder, ``\0l`` a link, ``\0o`` anything else); ``stamps`` the (size,
    mtime_ns) of the regular files, two numbers each, in the same order (None until known,
    in a listing made without them)."""

    names: list[str]
    stamps: list[int | None]


def list_folder(path: str, warnings: list[str], stamped: bool = True) -> Folder | None:
    """The listing of the question folder ``path``; None when it cannot be listed. An
    epochs folder that cannot be listed keeps the rest of the listing (and marks its place
    in it): a warning names it.

    One listing and one ``lstat`` (relative to the open folder) per entry: the whole cost
    of a rescan of an unchanged folder. Not ``stamped``, the kinds come from the listing
    alone and no entry is stat'ed: a caller that reads every file takes its stamp as it
    reads it (:func:`fill_stamps` then stamps the others)."""
    fd = open_folder(path, warnings)
    if fd is None:
        return None
    try:
        return list_open_folder(fd, path, warnings, stamped)
    finally:
        os.close(fd)


def open_folder(path: str, warnings: list[str]) -> int | None:
    """The question folder ``path`` opened (no link followed) for :func:`list_open_folder`
    and for opening its files; None, and a warning, when it cannot be."""
    try:
        return os.open(path, _DIR_FLAGS)
    except OSError as exc:
        warnings.append(f"{path}: cannot list the question folder: {exc.strerror or exc}")
        return None


def list_open_folder(fd: int, path: str, warnings: list[str], stamped: bool = True) -> Folder | None:
    """:func:`list_folder` of the folder ``path`` open at ``fd`` (left open)."""
    names: list[str] = []
    stamps: list[int | None] = []
    try:
        epochs = _list_fd(fd, "", names, stamps, stamped)
    except OSError as exc:
        warnings.append(f"{path}: cannot list the question folder: {exc.strerror or exc}")
        return None
    if epochs:
        _list_epochs(fd, path, names, stamps, warnings, stamped)
    return Folder(names, stamps)


def signature(folder: Folder) -> bytes:
    """A digest of a listing (its names, kinds and stamps): the one the index keeps of a
    question folder. Equal digests, the same entries and none rewritten (a rewrite in place
    changes a size or an mtime)."""
    stamps = folder.stamps
    try:  # ",".join(map(str, stamps)) of integers, in one call
        numbers = ("%d," * len(stamps) % tuple(stamps))[:-1]
    except TypeError:  # a stamp not known yet (None)
        numbers = ",".join(map(str, stamps))
    text = "\n".join(folder.names) + "\0" + numbers
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).digest()


def fill_stamps(folder: Folder, path: str) -> None:
    """Stamp the regular files of a listing still without one (``lstat`` of each; one gone
    since gets a stamp no file has, so that the next rescan looks at the folder again)."""
    stamps = folder.stamps
    if None not in stamps:  # every file stamped as it was read
        return
    i = 0
    for name in folder.names:
        if "\0" in name:
            continue
        if stamps[i] is None:
            try:
                st = os.lstat(os.path.join(path, name))
                stamps[i], stamps[i + 1] = st.st_size, st.st_mtime_ns
            except OSError:
                stamps[i], stamps[i + 1] = -1, -1
        i += 2


def _list_fd(fd: int, base: str, names: list[str], stamps: list[int | None], stamped: bool) -> bool:
    """Add the entries of the open folder ``fd`` to a listing (each named ``base + name``);
    whether one of them is an ``epochs`` folder. OSError when it cannot be listed."""
    if not stamped:
        return _list_kinds(fd, base, names, stamps)
    found = os.listdir(fd)
    found.sort()
    epochs = False
    for name in found:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue  # gone since the listing
        mode = st.st_mode
        if S_ISREG(mode):
            names.append(base + name)
            stamps.append(st.st_size)
            stamps.append(st.st_mtime_ns)
        elif S_ISDIR(mode):
            names.append(base + name + "\0d")
            epochs = epochs or name == EPOCHS_FOLDER
        else:
            names.append(base + name + ("\0l" if S_ISLNK(mode) else "\0o"))
    return epochs


def _list_kinds(fd: int, base: str, names: list[str], stamps: list[int | None]) -> bool:
    """:func:`_list_fd` with the kinds the listing gives (no ``lstat``), the stamps None."""
    with os.scandir(fd) as it:
        found = sorted(it, key=_NAME)
    epochs = False
    regular = 0
    for e in found:
        name = e.name
        if e.is_file(follow_symlinks=False):
            names.append(base + name)
            regular += 1
        elif e.is_dir(follow_symlinks=False):
            names.append(base + name + "\0d")
            epochs = epochs or name == EPOCHS_FOLDER
        else:
            names.append(base + name + ("\0l" if e.is_symlink() else "\0o"))
    stamps.extend([None] * (2 * regular))  # all alike: their order does not matter
    return epochs


def _list_epochs(
    fd: int, path: str, names: list[str], stamps: list[int | None], warnings: list[str], stamped: bool
) -> None:
    base = EPOCHS_FOLDER + "/"
    inner = _open_at(fd, EPOCHS_FOLDER)
    start = len(names)
    try:
        if inner is None:
            raise OSError
        _list_fd(inner, base, names, stamps, stamped)
    except OSError:
        warnings.append(f"{os.path.join(path, EPOCHS_FOLDER)}: cannot list the epochs folder")
        names.append(base + "\0unlisted")
        _close(inner)
        return
    try:
        for name in names[start:]:
            if not name.endswith("\0d") or epoch_number(name[len(base) : -2]) is None:
                continue
            folder = _open_at(inner, name[len(base) : -2])
            try:
                if folder is None:
                    raise OSError
                _list_fd(folder, name[:-2] + "/", names, stamps, stamped)
            except OSError:
                warnings.append(f"{os.path.join(path, name[:-2])}: cannot list the epoch folder")
                names.append(name[:-2] + "/\0unlisted")
            finally:
                _close(folder)
    finally:
        _close(inner)


def _open_at(fd: int, name: str) -> int | None:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError:
        return None


def _close(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def epoch_number(name: str) -> int | None:
    """The epoch an ``epochs/`` folder's name stands for: n >= 2 in ASCII decimal with no
    leading zero, as `kag stats` reads them; None for any other name."""
    if not (name.isascii() and name.isdigit()) or name.startswith("0"):
        return None
    n = int(name)
    return n if n >= 2 else None


def iter_entries(folder: Folder, rel: str, prefix: str) -> Iterator[Entry]:
    """The file-level entries of a listed question folder (relative path, epoch, setup or
    None when ignored, stamp, the index of the stamp in ``folder.stamps`` or -1): epoch 1's
    entries, then the later epochs' result files (an epoch folder's other entries are not
    counted as ignored). ``.tmp`` writes and the ``epochs/`` folder itself are passed over."""
    stamps = folder.stamps
    i = 0
    for name in folder.names:
        if "\0" not in name:  # a regular file: the next stamp is its
            slot = i
            i += 2
            if "/" not in name:
                if not name.endswith(TMP_SUFFIX):
                    stamp = (stamps[slot], stamps[slot + 1])
                    yield f"{rel}/{name}", 1, named_setup(name, prefix), stamp, slot
                continue
            parts = name.split("/")
            if len(parts) != 3 or parts[2].endswith(TMP_SUFFIX):
                continue
            epoch = epoch_number(parts[1])
            setup = named_setup(parts[2], prefix)
            if epoch is not None and setup is not None:
                yield f"{rel}/{name}", epoch, setup, (stamps[slot], stamps[slot + 1]), slot
        elif "/" not in name:  # only epoch 1's other entries are counted, as ignored
            bare = name[:-2]
            if not bare.endswith(TMP_SUFFIX) and name != _EPOCHS_ENTRY:
                yield f"{rel}/{bare}", 1, None, NO_STAMP, -1

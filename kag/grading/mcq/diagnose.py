"""Why a `kag stats` run graded nothing, or little: a look at the names of the tree.

Run only when a walk graded little (:func:`needs_diagnosis`), so a normal run pays
nothing. It lists folders and reads no file: a census of the file-name prefixes at the
question level, the depth at which ``<prefix>…json`` files actually sit, and the question
folders the datasets file does not know. Rendering the findings is the command's job.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kag.datasets import Datasets
from kag.grading.mcq.metrics import GradeRun
from kag.results.model import RESULT_SUFFIX
from kag.results.tree import matches_any, scandir_entries, setup_from_name


@dataclass(frozen=True)
class TreeDiagnosis:
    """What the names of a result tree say about a run that graded little.

    - ``prefixes``: for the ``*.json`` files at the question level, each name prefix (up to
      and including the first ``-``, ``""`` when there is none) and its file count, most
      common first; empty when some file there starts with the given prefix.
    - ``depth``: when no ``<prefix>…json`` file sits at the layout's depth
      (``<dataset>/<question>/<file>``, depth 3), the depth below the root (1 = directly
      in it, 2, or 4) holding the most of them; None when they are where they belong, or
      nowhere.
    - ``deeper``: for depth 4, the top folders holding them (the roots to use instead).
    - ``question_folders`` / ``unknown_questions``: question folders walked (within the
      ``--dataset`` filter) and how many of them the datasets file does not name.
    - ``unknown_datasets``: the dataset folders the datasets file does not name at all.
    """

    prefixes: tuple[tuple[str, int], ...]
    depth: int | None
    deeper: tuple[str, ...]
    question_folders: int
    unknown_questions: int
    unknown_datasets: tuple[str, ...]


def needs_diagnosis(run: GradeRun) -> bool:
    """True when nothing was graded, or when more files were passed over (ignored or
    unreadable) than graded: the cases where a normal-looking report misleads."""
    graded = graded_files(run)
    return graded == 0 or run.ignored_files + run.unreadable_files > graded


def graded_files(run: GradeRun) -> int:
    """The files graded: those of multiple-choice questions and those of open ones."""
    return sum(m.total + m.open_total for m in run.tallies.values())


def _dirs(path: str) -> list[os.DirEntry[str]]:
    """Sub-folders, by name; hidden ones (``.kag-judge``) and links are passed over."""
    return sorted(
        (e for e in scandir_entries(path) if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")),
        key=lambda e: e.name,
    )


def _result_names(path: str) -> list[str]:
    return [
        e.name
        for e in scandir_entries(path)
        if e.name.endswith(RESULT_SUFFIX) and e.is_file(follow_symlinks=False)
    ]


def _count_results(folder: str, prefix: str) -> int:
    """The ``<dataset>/<question>/<prefix>…json`` files below ``folder``."""
    return sum(
        setup_from_name(n, prefix) is not None
        for d in _dirs(folder)
        for q in _dirs(d.path)
        for n in _result_names(q.path)
    )


def name_prefix(name: str) -> str:
    """The prefix of a result file name: up to and including its first ``-`` (``""`` when none)."""
    cut = name.find("-")
    return name[: cut + 1] if cut >= 0 else ""


def diagnose_tree(
    datasets: Datasets, root: str | os.PathLike[str], prefix: str, dataset_globs: Sequence[str] = ()
) -> TreeDiagnosis:
    """Census of the tree's names (see :class:`TreeDiagnosis`). No file is read."""
    top = os.fspath(root)
    census: Counter[str] = Counter()
    at_depth = [0, 0, 0, 0, 0]  # <prefix>…json files by depth (1..4)
    questions = unknown = 0
    unknown_datasets = []
    at_depth[1] = sum(1 for n in _result_names(top) if setup_from_name(n, prefix))
    for d in _dirs(top):
        at_depth[2] += sum(1 for n in _result_names(d.path) if setup_from_name(n, prefix))
        if not matches_any(d.name, dataset_globs):
            continue
        known = datasets.datasets.get(d.name)
        if known is None:
            unknown_datasets.append(d.name)
        for q in _dirs(d.path):
            questions += 1
            unknown += known is None or q.name not in known
            for n in _result_names(q.path):
                census[name_prefix(n)] += 1
                at_depth[3] += setup_from_name(n, prefix) is not None
    depth: int | None = None
    deeper: list[str] = []
    prefixes: tuple[tuple[str, int], ...] = ()
    if at_depth[3] == 0:
        prefixes = tuple(sorted(census.items(), key=lambda kv: (-kv[1], kv[0])))
        below = {x.name: _count_results(x.path, prefix) for x in _dirs(top)}
        at_depth[4] = sum(below.values())
        best = max((1, 2, 4), key=lambda d: (at_depth[d], -d))
        if at_depth[best]:
            depth = best
            deeper = [name for name, n in below.items() if n] if best == 4 else []
    return TreeDiagnosis(prefixes, depth, tuple(deeper), questions, unknown, tuple(unknown_datasets))


# What ends a file name prefix: `wekgr-qwen.json` with --prefix `wekgr-`.
PREFIX_ENDS = "-_."


def prefix_hint(setups: Iterable[str], prefix: str, filtered: bool = False) -> str | None:
    """A hint when the setups read from a tree show that ``--prefix`` is off, else None.

    ``--prefix wekgr`` on files named ``wekgr-<setup>.json`` gives setups that all start with
    ``-`` (which then read as options): the hint names ``--prefix 'wekgr-'``. No ``--prefix``
    on such files gives setups that all start with ``wekgr-``: the hint names that prefix
    (only over two setups or more, and not when ``--setup`` chose them: the filter shares a
    start by design). Over labelled trees the label is set aside.
    """
    names = sorted({name.rsplit("/", 1)[-1] for name in setups})
    if not names:
        return None
    if prefix and prefix[-1] not in PREFIX_ENDS:
        ends = {name[0] for name in names}
        if len(ends) == 1 and ends <= set(PREFIX_ENDS):
            end = ends.pop()
            return (
                f"every setup name starts with {end!r} ({names[0]!r}…): the files are named"
                f" '{prefix}{end}<setup>.json'; did you mean --prefix '{prefix}{end}'?"
            )
        return None
    if prefix or filtered or len(names) < 2:
        return None
    heads = {name.split("-", 1)[0] for name in names if "-" in name.strip("-")}
    if len(heads) != 1 or not all(name.startswith(f"{next(iter(heads))}-") for name in names):
        return None
    head = f"{heads.pop()}-"
    rest = ", ".join(repr(name[len(head) :]) for name in names[:2])
    return (
        f"every setup name starts with {head!r}: if the results were written with --prefix"
        f" '{head}', give it here too (the setups are then {rest}…)"
    )

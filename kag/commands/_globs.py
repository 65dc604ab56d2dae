"""The checks of filters that select nothing (``--setup``, ``--dataset`` and the like): a
glob that matches no name is a typo, reported with the names there are."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING

from kag.errors import UsageError

if TYPE_CHECKING:
    from kag.grading.mcq.trees import ResultSource


MAX_NAMES_SHOWN = 20


def unmatched_globs(globs: Sequence[str], names: Iterable[str]) -> list[str]:
    """The globs (``fnmatchcase``, as the filters use them) that match none of ``names``, in order."""
    names = list(names)
    return [g for g in globs if not any(fnmatchcase(name, g) for name in names)]


def unmatched_message(option: str, globs: Sequence[str], kind: str, where: str, names: Sequence[str]) -> str:
    """``--setup a, --setup b match no setup in DIR (setups: x, y)``: at most
    ``MAX_NAMES_SHOWN`` names, then how many more."""
    flags = ", ".join(f"{option} {g}" for g in globs)
    verb = "matches" if len(globs) == 1 else "match"
    shown = ", ".join(names[:MAX_NAMES_SHOWN]) or "none"
    if len(names) > MAX_NAMES_SHOWN:
        shown += f", … ({len(names) - MAX_NAMES_SHOWN} more)"
    return f"{flags} {verb} no {kind} {where} ({kind}s: {shown})"


def check_globs(option: str, globs: Sequence[str], kind: str, where: str, names: Sequence[str]) -> None:
    """UsageError naming the globs of ``option`` that match none of ``names``."""
    missing = unmatched_globs(globs, names)
    if missing:
        raise UsageError(unmatched_message(option, missing, kind, where, names))


def check_setup_globs(
    globs: tuple[str, ...],
    graded: set[str],
    root: ResultSource,
    prefix: str,
    dataset_globs: tuple[str, ...],
) -> None:
    """UsageError naming each ``--setup`` glob that matches no setup of the tree (within the
    ``--dataset`` folders), with the setups that are there. Only when a glob matches no
    graded setup is the tree listed again (names only, no file is read), so a filter that
    works costs nothing. Over labelled trees the setups are ``LABEL/setup``."""
    if not unmatched_globs(globs, graded):
        return
    from kag.grading.mcq.trees import describe_source

    in_tree = setups_in(root, prefix, dataset_globs)
    check_globs("--setup", globs, "setup", tree_place(describe_source(root), dataset_globs), in_tree)


def setups_in(source: ResultSource, prefix: str, dataset_globs: Sequence[str] = ()) -> list[str]:
    """The setups of the result files of ``source`` (``LABEL/setup`` over labelled trees) in
    the ``--dataset`` folders, by name; names only, no file is read."""
    from kag.grading.mcq.trees import labelled
    from kag.results import list_results
    from kag.results.tree import matches_any

    trees = [(t.label, t.root) for t in source]
    return sorted(
        {
            f.setup if label is None else labelled(label, f.setup)
            for label, root in trees
            for f in list_results(root, prefix).files
            if matches_any(f.dataset, dataset_globs)
        }
    )


def warn_prefix(
    setups: Iterable[str], prefix: str, filtered: bool = False, source: ResultSource = ()
) -> None:
    """:func:`kag.grading.mcq.diagnose.prefix_hint` as a warning, when there is one and the
    trees of ``source`` do not say otherwise: when the run records of every tree show runs
    given no ``--prefix``, setups that share a first word were named so (``local-native``,
    ``local-rag``)."""
    from kag.grading.mcq.diagnose import prefix_hint
    from kag.results.runs import written_without_prefix

    hint = prefix_hint(setups, prefix, filtered)
    if hint is None or (not prefix and written_without_prefix(t.root for t in source)):
        return
    from kag.console import warn

    warn(hint)


def select_names(
    option: str, globs: Sequence[str], names: Sequence[str], kind: str, where: str
) -> tuple[str, ...]:
    """The ``names`` (in their order) that one of the shell globs of ``option`` matches;
    an exact name matches itself even when it holds ``[``. UsageError naming the globs
    that match nothing, with the names there are; no globs selects none (the caller's "all")."""
    hits = {g: [n for n in names if n == g or fnmatchcase(n, g)] for g in globs}
    missing = [g for g, matched in hits.items() if not matched]
    if missing:
        raise UsageError(unmatched_message(option, missing, kind, where, sorted(names)))
    chosen = {n for matched in hits.values() for n in matched}
    return tuple(n for n in names if n in chosen)


def tree_place(root: Path | str, dataset_globs: Sequence[str]) -> str:
    """``in ROOT``, and ``with --dataset G, …`` when the datasets were filtered: where the
    setups named by an unmatched-filter message were looked for."""
    with_datasets = ", ".join(f"--dataset {g}" for g in dataset_globs)
    return f"in {root}" + (f" with {with_datasets}" if with_datasets else "")

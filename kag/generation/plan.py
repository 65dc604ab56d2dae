"""Planning a benchmark run: every selected (question, setup, epoch) task, what its result
file holds, which tasks run; the checks made before any request (names, name and path
lengths, links in the tree, prompts, a writable output folder); leftover temporaries."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from kag.datasets import Datasets, Question, name_problem
from kag.errors import ConfigError, InputError, UsageError
from kag.generation.config import Benchmark, Config, Setup
from kag.generation.fingerprint import task_fingerprint
from kag.generation.shard import Shard
from kag.generation.templates import PromptRenderError, format_choices, prompt_variables
from kag.results import (
    EPOCHS_FOLDER,
    TMP_OVERHEAD,
    ErrorResult,
    LinkInTree,
    UnreadableResult,
    epoch_result_path,
    find_dead_temporaries,
    read_result_nofollow,
)

log = logging.getLogger(__name__)


class FileState(Enum):
    """What a task's result file held when the run was planned."""

    MISSING = "missing"  # absent or empty
    OK = "ok"
    ERROR = "error"
    STALE = "stale"  # ok, but its fingerprint differs from the task's
    UNREADABLE = "unreadable"
    EXISTS = "exists"  # present, not inspected (a run without --continue overwrites it)


@dataclass(frozen=True)
class PlanOptions:
    output: Path
    prefix: str = ""
    resume: bool = False  # --continue
    retry_errors: bool = False
    rerun_stale: bool = False
    setups: tuple[str, ...] = ()  # --setup (empty: all)
    datasets: tuple[str, ...] = ()  # --dataset (empty: all)
    skip: tuple[str, ...] = ()  # --skip
    limit: int | None = None
    inspect: bool = False  # read existing files even without --continue (--dry-run)
    shard: Shard | None = None  # --shard K/N: only the tasks of this slice
    epochs: int = 1  # --epochs N: each (question, setup) asked N times
    check_only: bool = False  # every check, no result file read (before the tree's lock is taken)


@dataclass(frozen=True)
class Task:
    setup: Setup
    question: Question
    path: Path
    fingerprint: str
    state: FileState
    epoch: int = 1

    @property
    def label(self) -> str:
        epoch = f" epoch {self.epoch}" if self.epoch > 1 else ""
        return f"{self.question.dataset}/{self.question.id} [{self.setup.name}]{epoch}"


@dataclass
class PlanRow:
    """Counts for one (setup, dataset) pair of the plan."""

    setup: str
    dataset: str
    tasks: int = 0
    ok: int = 0
    errors: int = 0
    stale: int = 0
    unreadable: int = 0
    missing: int = 0
    to_run: int = 0


@dataclass(frozen=True)
class Plan:
    tasks: tuple[Task, ...]  # to run, in dataset, question, setup order
    rows: tuple[PlanRow, ...]
    total: int  # every selected (question, setup) pair
    skipped: int  # pairs with a result kept as it is (ok, or error without --retry-errors)
    stale_kept: int  # stale results kept (no --rerun-stale)
    leftovers: tuple[Path, ...]  # `.tmp` files of interrupted writes, to remove
    root: Path | None = None  # the result tree: no link below it is followed when writing
    replaced_ok: int = 0  # ok results a run without --continue overwrites

    @property
    def kept_errors(self) -> int:
        """Error results kept as they are (``--continue`` without ``--retry-errors``)."""
        return sum(row.errors for row in self.rows) - sum(
            1 for task in self.tasks if task.state is FileState.ERROR
        )

    @property
    def stale(self) -> int:
        return sum(row.stale for row in self.rows)


def _inspect(path: Path, fingerprint: str) -> FileState:
    # lstat and a no-follow read: a link planted at a result file is not a result (it is
    # run again, and the write replaces the link).
    try:
        if path.lstat().st_size == 0:
            return FileState.MISSING
    except FileNotFoundError:
        return FileState.MISSING
    except OSError:
        return FileState.UNREADABLE
    try:
        result = read_result_nofollow(path)
    except UnreadableResult:
        return FileState.UNREADABLE
    if isinstance(result, ErrorResult):
        return FileState.ERROR
    stored = result.stats.fingerprint
    # Files without a fingerprint cannot be checked: they count as done (see compatibility
    # in docs/architecture.md).
    if stored is not None and stored != fingerprint:
        return FileState.STALE
    return FileState.OK


def _check_names(kind: str, names: tuple[str, ...], known: Mapping[str, Any] | list[str], flag: str) -> None:
    for name in names:
        why = name_problem(name)
        if why:
            raise UsageError(f"{flag}: {kind} name {name!r} {why}")
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise UsageError(f"{flag}: unknown {kind} {name!r} (known: {listed})")


MAX_LISTED = 10


def _listing(items: list[str]) -> str:
    shown = "; ".join(items[:MAX_LISTED])
    more = len(items) - MAX_LISTED
    return shown + (f"; and {more} more" if more > 0 else "")


def _limits(output: Path) -> tuple[int, int]:
    """NAME_MAX and PATH_MAX of the file system that holds (or will hold) ``output``."""
    folder = output.absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError):
        return 255, 4096


def _check_lengths(output: Path, folders: list[tuple[str, str]], files: set[str], epochs: int = 1) -> None:
    """UsageError listing every dataset, question and result file name (prefix + setup)
    that the results folder's file system cannot hold, before any request (with
    ``epochs`` > 1, the paths of the deepest epoch files)."""
    name_max, path_max = _limits(output)
    base = len(os.fsencode(output.absolute()))
    problems: list[str] = []
    for dataset in sorted({d for d, _ in folders}):
        if len(os.fsencode(dataset)) > name_max:
            problems.append(f"dataset {dataset[:40]!r}… is {len(os.fsencode(dataset))} bytes")
    longest_file = max((len(os.fsencode(f)) for f in files), default=0) + TMP_OVERHEAD
    if epochs > 1:
        longest_file += len(os.fsencode(f"{EPOCHS_FOLDER}/{epochs}/"))
    for name in sorted(files):
        if len(os.fsencode(name)) + TMP_OVERHEAD > name_max:
            problems.append(
                f"result file name {name[:40]!r}… (prefix + setup) is {len(os.fsencode(name))} bytes"
            )
    for dataset, question in folders:
        size = len(os.fsencode(question))
        if size > name_max:
            problems.append(f"question {dataset}/{question[:40]!r}… is {size} bytes")
        elif base + len(os.fsencode(dataset)) + size + longest_file + 3 > path_max:
            problems.append(f"the path of question {dataset}/{question[:40]!r}… is too long")
    if problems:
        raise UsageError(
            f"{output}: names this file system cannot hold (at most {name_max} bytes per name,"
            f" {TMP_OVERHEAD} of them kept for the temporary file's suffix; {path_max} per path):"
            f" {_listing(problems)}"
        )


def _check_folders(output: Path, folders: list[tuple[str, str]], epochs: int = 1) -> None:
    """LinkInTree listing every symbolic link (or file) where a dataset, question or epoch
    folder of the tree belongs: kag would otherwise read or write outside the tree."""
    bad: list[str] = []
    seen: set[str] = set()
    for dataset, question in folders:
        paths = (
            [output / dataset / question]
            if dataset in seen
            else [output / dataset, output / dataset / question]
        )
        if epochs > 1:
            more = output / dataset / question / EPOCHS_FOLDER
            paths += [more, *(more / str(n) for n in range(2, epochs + 1))]
        for path in paths:
            try:
                mode = path.lstat().st_mode
            except FileNotFoundError:
                continue
            except NotADirectoryError:
                continue  # its parent is already listed
            if not stat.S_ISDIR(mode):
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
                bad.append(f"{path} ({kind})")
        seen.add(dataset)
    if bad:
        unique = list(dict.fromkeys(bad))
        raise LinkInTree(
            f"{output}: where a folder of the result tree belongs: {_listing(unique)};"
            " remove or rename it (kag never writes through a link)"
        )


def check_prefix(prefix: str) -> None:
    for bad, label in (("/", "'/'"), ("\\", "'\\'"), ("\0", "NUL")):
        if bad in prefix:
            raise UsageError(f"--prefix: {prefix!r} contains {label} (it becomes part of a file name)")


def _check_prompts(benchmark: Benchmark, setups: list[Setup], questions: list[Question]) -> None:
    """Render each setup's template once per shape of question (with/without CHOICE), so
    an undefined variable is a ConfigError before any request; a KAG setup is rendered
    with a placeholder RETRIEVAL (an empty retrieval is checked, and only warned about)."""
    shapes = {q.mcq is not None: q for q in questions}
    for setup in setups:
        assert setup.template is not None
        kag = setup.augmented_generation is not None
        for question in shapes.values():
            choices = format_choices(question.mcq.options) if question.mcq is not None else None
            try:
                setup.template.render(
                    prompt_variables(question.input, choices, "(retrieval)" if kag else None)
                )
            except PromptRenderError as exc:
                kind = "multiple-choice" if question.mcq is not None else "free-form"
                raise ConfigError(
                    f"{exc} (for the {kind} question {question.dataset}/{question.id})"
                ) from None
        if kag:
            for question in shapes.values():
                choices = format_choices(question.mcq.options) if question.mcq is not None else None
                try:
                    setup.template.render(prompt_variables(question.input, choices, None))
                except PromptRenderError as exc:
                    log.warning(
                        "%s: [%s]: when retrieval returns nothing the prompt cannot render (%s);"
                        " write {{ RETRIEVAL | default('<empty>') }}: such tasks will be error results",
                        benchmark.path,
                        setup.name,
                        exc,
                    )
                    break


def plan_benchmark(config: Config, benchmark: Benchmark, datasets: Datasets, options: PlanOptions) -> Plan:
    """Every selected (question, setup, epoch) task, what its result file holds, and which run.

    With ``epochs`` N, each (question, setup) pair is N tasks, one file each (see
    ``kag.results.epoch_result_path``); every rule below applies to each file alone. With
    ``shard``, only the tasks of that slice are planned and counted (a pair's epochs share
    its slice), and only their leftover temporaries are removed.

    Without ``resume`` every pair runs (existing files are overwritten: see compatibility in
    docs/architecture.md). With it: missing, empty and unreadable files run; ``error`` files
    run only with ``retry_errors``; ``ok`` files whose fingerprint changed (stale) run only
    with ``rerun_stale``; other ``ok`` files are kept.
    """
    check_prefix(options.prefix)
    _check_names("setup", options.setups, benchmark.setups, "--setup")
    _check_names("setup", options.skip, benchmark.setups, "--skip")
    _check_names("dataset", options.datasets, list(datasets.datasets), "--dataset")
    setups = [
        s
        for name, s in benchmark.setups.items()
        if (not options.setups or name in options.setups) and name not in options.skip
    ]
    for setup in setups:
        for name in setup.datasets or ():
            if name not in datasets.datasets:
                log.warning(
                    "%s: [%s]: dataset %r is not in %s", benchmark.path, setup.name, name, datasets.path
                )
    inspect = options.resume or options.inspect
    # The questions of each selected dataset, the first --limit of them (None: all).
    chosen = {
        dataset: list(questions.values())[: options.limit]
        for dataset, questions in datasets.datasets.items()
        if not options.datasets or dataset in options.datasets
    }
    folders = [
        (dataset, question.id)
        for dataset, selected in chosen.items()
        if any(s.runs_on(dataset) for s in setups)
        for question in selected
    ]
    if options.epochs < 1:
        raise UsageError(f"--epochs: must be at least 1 (got {options.epochs})")
    _check_lengths(
        options.output, folders, {f"{options.prefix}{s.name}.json" for s in setups}, options.epochs
    )
    _check_folders(options.output, folders, options.epochs)
    shard = options.shard
    tasks: list[Task] = []
    rows: dict[tuple[str, str], PlanRow] = {}
    leftovers: list[Path] = []
    questions_seen: list[Question] = []
    total = skipped = stale_kept = replaced_ok = 0
    for dataset, selected in chosen.items():
        active = [s for s in setups if s.runs_on(dataset)]
        if active:
            questions_seen.extend(selected)
        for question in selected:
            # A shard owns the files of its own tasks only, temporaries included: it never
            # removes what another shard (on another machine, where a pid means nothing)
            # is writing.
            mine = [s for s in active if shard is None or shard.contains(dataset, question.id, s.name)]
            folder = options.output / dataset / question.id
            if mine and folder.is_dir():
                names = [f"{options.prefix}{s.name}.json" for s in mine]
                leftovers.extend(find_dead_temporaries(folder, names))
                for epoch in range(2, options.epochs + 1):
                    inner = folder / EPOCHS_FOLDER / str(epoch)
                    if inner.is_dir():
                        leftovers.extend(find_dead_temporaries(inner, names))
            fingerprints: dict[str, str] = {}  # per setup: every epoch is the same task
            for setup, epoch in ((s, e) for s in mine for e in range(1, options.epochs + 1)):
                if setup.name not in fingerprints:
                    aug = setup.augmented_generation
                    retriever_table = config.retrievers.get(aug.retriever) if aug else None
                    fingerprints[setup.name] = task_fingerprint(setup, question, retriever_table)
                fingerprint = fingerprints[setup.name]
                path = epoch_result_path(
                    options.output, dataset, question.id, options.prefix, setup.name, epoch
                )
                if inspect and not options.check_only:
                    state = _inspect(path, fingerprint)
                else:
                    state = FileState.EXISTS if os.path.lexists(path) else FileState.MISSING
                    # Overwritten without --continue: the run warns how many answers go.
                    if (
                        state is FileState.EXISTS
                        and not options.check_only
                        and _inspect(path, fingerprint) in (FileState.OK, FileState.STALE)
                    ):
                        replaced_ok += 1
                row = rows.setdefault((setup.name, dataset), PlanRow(setup.name, dataset))
                row.tasks += 1
                total += 1
                if state is FileState.OK:
                    row.ok += 1
                elif state is FileState.ERROR:
                    row.errors += 1
                elif state is FileState.STALE:
                    row.stale += 1
                elif state is FileState.UNREADABLE:
                    row.unreadable += 1
                elif state is FileState.MISSING:
                    row.missing += 1
                run = (
                    not options.resume
                    or state in (FileState.MISSING, FileState.UNREADABLE)
                    or (state is FileState.ERROR and options.retry_errors)
                    or (state is FileState.STALE and options.rerun_stale)
                )
                if run:
                    row.to_run += 1
                    tasks.append(Task(setup, question, path, fingerprint, state, epoch))
                else:
                    skipped += 1
                    if state is FileState.STALE:
                        stale_kept += 1
    _check_prompts(benchmark, setups, questions_seen)
    ordered_rows = sorted(rows.values(), key=lambda r: (list(benchmark.setups).index(r.setup), r.dataset))
    return Plan(
        tuple(tasks),
        tuple(ordered_rows),
        total,
        skipped,
        stale_kept,
        tuple(leftovers),
        options.output,
        replaced_ok,
    )


def remove_leftovers(plan: Plan) -> int:
    """Delete the ``.tmp`` files of writes a crash interrupted; returns how many."""
    removed = 0
    for tmp in plan.leftovers:
        try:
            tmp.unlink()
            removed += 1
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise InputError(f"{tmp}: cannot remove the leftover temporary file: {exc.strerror}") from None
    return removed


def check_output(output: Path) -> None:
    """Create the output folder and check that files can be written there (before any
    request, so a read-only tree fails with exit 2, not with one error per task)."""
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{output}: cannot create the output directory: {exc.strerror}") from None
    if not os.access(output, os.W_OK | os.X_OK):
        raise InputError(f"{output}: the output directory is not writable")

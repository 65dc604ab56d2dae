"""The run record of a ``kag benchmark``: ``<results>/.kag/runs/<UTC time>-<id>.json``.

Written atomically (:func:`kag.results.write_atomic`, no link followed below the tree's
root) once when the run starts, with ``"finished": null``, and again when it ends: a killed
run leaves its record unfinished. Every secret of the configuration (provider keys,
database passwords, credentials and query values of URLs) is redacted in every spelling
:mod:`kag.generation.secrets` knows, in the rendered files and the command line alike;
endpoints are shown as :func:`~kag.generation.secrets.display_url` shows them.
"""

from __future__ import annotations

import hashlib
import platform
import secrets as token
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from kag import __version__
from kag.errors import KagError
from kag.generation.config import Benchmark, Config
from kag.generation.git_state import git_state
from kag.generation.runner import Summary
from kag.generation.secrets import Redactor, display_url, redact_toml, url_credentials
from kag.results import runs_folder, write_atomic


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha256(path: Path) -> str | None:
    try:
        return _sha256(path.read_bytes())
    except OSError:
        return None


def _urls(config: Config) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, provider in sorted(config.providers.items()):
        urls = getattr(provider, "urls", ())
        if urls:
            found[name] = list(urls)
    return found


def _url_secrets(url: str) -> set[str]:
    found = set(url_credentials(url))
    try:
        query = urlsplit(url).query
    except ValueError:
        return found
    for _, value in parse_qsl(query, keep_blank_values=True):
        found.add(value)
    return found


def redactor(config: Config) -> Redactor:
    """Every secret of ``config``: its keys and passwords, and the credentials and query
    values of its providers' URLs."""
    found = set(config.secrets)
    for urls in _urls(config).values():
        for url in urls:
            found |= _url_secrets(url)
    return Redactor.of(found)


@dataclass(frozen=True)
class Selection:
    """What the run was asked to do: setups, datasets with their question counts, epochs,
    shard (``"K/N"`` or None)."""

    setups: Sequence[str]
    questions: Mapping[str, int]
    epochs: int = 1
    shard: str | None = None


class RunRecorder:
    """Writes one run's record: :meth:`start` when the run begins, :meth:`finish` when it ends."""

    def __init__(self, root: Path, record: dict[str, Any], redact: Redactor, when: datetime) -> None:
        self.root = root
        self.record = record
        self.redact = redact
        self.empty = False  # set by start() for a run of no task: no record is written
        # Microseconds in the name: two runs started within one second still sort oldest first.
        self.path = runs_folder(root) / f"{when.strftime('%Y%m%dT%H%M%S.%fZ')}-{token.token_hex(3)}.json"

    @classmethod
    def start(
        cls,
        root: Path,
        argv: Iterable[str],
        config: Config,
        benchmark: Benchmark,
        datasets_file: Path,
        selection: Selection,
        tasks: int,
        kept: int,
    ) -> RunRecorder:
        """Write the record of a run that starts now (``"finished": null``); a run of no task
        (``tasks`` 0) writes none, now or at its end."""
        redact = redactor(config)
        when = _now()
        # On the values TOML reads, not only the text: a key may be written with escapes.
        config_text = redact_toml(config.rendered, redact)
        benchmark_text = redact_toml(benchmark.rendered, redact)
        record: dict[str, Any] = {
            "kag_version": __version__,
            "argv": [redact(arg) for arg in argv],
            "config": {
                "path": redact(str(config.path)),
                "sha256": _file_sha256(config.path),
                "rendered": config_text,
                "rendered_sha256": _sha256(config_text.encode()),
            },
            "benchmark": {
                "path": redact(str(benchmark.path)),
                "sha256": _file_sha256(benchmark.path),
                "rendered": benchmark_text,
                "rendered_sha256": _sha256(benchmark_text.encode()),
            },
            "datasets_file": {"path": redact(str(datasets_file)), "sha256": _file_sha256(datasets_file)},
            "setups": list(selection.setups),
            "datasets": list(selection.questions),
            "questions": dict(selection.questions),
            "epochs": selection.epochs,
            "shard": selection.shard,
            "started": _iso(when),
            "finished": None,
            "tasks": {"planned": tasks, "skipped": kept, "ok": 0, "error": 0, "kept": 0, "not_run": tasks},
            "python": platform.python_version(),
            "platform": platform.platform(),
            "endpoints": {
                name: [redact(display_url(url)) for url in urls] for name, urls in _urls(config).items()
            },
        }
        # The repository of the benchmark file, never the current folder's (which may be
        # anyone's): see kag.generation.git_state.
        git = git_state(benchmark.path)
        if git is not None:
            record["git"] = git
        recorder = cls(root, record, redact, when)
        # A run with nothing to run (a --continue over a complete tree) made nothing: a
        # record of zero tasks would only bury the records of the runs that did.
        recorder.empty = tasks == 0
        recorder.write()
        return recorder

    def finish(self, summary: Summary) -> str | None:
        """Write the record again with the end time and the task counts of ``summary``.

        The run is over and its results are written: a record that cannot be written now
        (a full disk, a link planted in ``.kag/``) does not change its outcome. The reason
        is returned, for a warning; None when the record was written."""
        self.record["finished"] = _iso(_now())
        self.record["interrupted"] = summary.interrupted
        self.record["tasks"].update(
            ok=summary.ok, error=summary.errors, kept=summary.kept, not_run=summary.not_run
        )
        try:
            self.write()
        except (KagError, OSError) as e:
            return self.redact(str(e))
        return None

    def write(self) -> None:
        """Write the record (atomically); nothing for a run of no task."""
        if self.empty:
            return
        body = orjson.dumps(self.record, option=orjson.OPT_INDENT_2) + b"\n"
        # A last pass over the whole document: no secret in any spelling, whatever field.
        text = self.redact(body.decode())
        write_atomic(self.path, (text.encode(),), root=self.root, mode=0o644)

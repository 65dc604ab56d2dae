"""The command that installs an optional extra, said the way this kag was installed.

kag is published as ``kag-toolkit`` (the name ``kag`` belongs to another project on
PyPI); the command and the import package are ``kag``. How it was installed is read
from what is on disk, in this order:

1. a source checkout (the imported ``kag`` package sits next to a ``pyproject.toml``
   that names ``kag-toolkit``: ``pip install -e .`` or ``PYTHONPATH``):
   ``cd ROOT && pip install -e '.[EXTRA]'``;
2. a pipx environment (the interpreter lives under ``pipx/venvs/``):
   ``pipx install --force 'kag-toolkit[EXTRA]'``;
3. a ``uv tool`` environment (under ``uv/tools/``):
   ``uv tool install --reinstall 'kag-toolkit[EXTRA]'``;
4. the installer recorded in the distribution's ``INSTALLER`` file: ``uv`` gives
   ``uv pip install 'kag-toolkit[EXTRA]'``, anything else (or no record)
   ``pip install 'kag-toolkit[EXTRA]'``.
"""

from __future__ import annotations

import shlex
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib import metadata

DIST_NAME = "kag-toolkit"


def _source_checkout(package_dir: Path) -> Path | None:
    root = package_dir.parent
    try:
        with open(root / "pyproject.toml", "rb") as handle:
            project = tomllib.load(handle).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return root if isinstance(project, dict) and project.get("name") == DIST_NAME else None


def _installer(distribution: metadata.Distribution | None) -> str:
    if distribution is None:
        return ""
    return (distribution.read_text("INSTALLER") or "").strip().lower()


def _under(prefix: Path, *parts: str) -> bool:
    names = prefix.parts
    return any(tuple(names[i : i + len(parts)]) == parts for i in range(len(names)))


def install_command(
    extra: str | None = None,
    *,
    package_dir: Path | None = None,
    distribution: metadata.Distribution | None = None,
    prefix: Path | None = None,
) -> str:
    """The shell command that installs kag with ``extra`` (or again, without one).

    ``package_dir`` (the imported ``kag`` package), ``distribution`` (its installed
    metadata, looked up by name when not given) and ``prefix`` (``sys.prefix``) are
    parameters so that each case can be checked; see the module docstring for the order.
    """
    if package_dir is None:
        package_dir = Path(__file__).resolve().parent
    suffix = f"[{extra}]" if extra else ""
    root = _source_checkout(package_dir)
    if root is not None:
        return f"cd {shlex.quote(str(root))} && pip install -e '.{suffix}'"
    spec = f"'{DIST_NAME}{suffix}'"
    prefix = Path(sys.prefix) if prefix is None else prefix
    if _under(prefix, "pipx", "venvs"):
        return f"pipx install --force {spec}"
    if _under(prefix, "uv", "tools"):
        return f"uv tool install --reinstall {spec}"
    if distribution is None:
        from importlib import metadata  # only on this error path: it is slow to import

        try:
            distribution = metadata.distribution(DIST_NAME)
        except metadata.PackageNotFoundError:
            distribution = None
    if _installer(distribution) == "uv":
        return f"uv pip install {spec}"
    return f"pip install {spec}"


def missing_extra(package: str, extra: str) -> str:
    """``the 'PACKAGE' package is not installed (install it with: COMMAND)``."""
    return f"the {package!r} package is not installed (install it with: {install_command(extra)})"

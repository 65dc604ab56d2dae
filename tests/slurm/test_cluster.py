"""The Slurm tests' cluster where it cannot run: one line saying why, a skip, and in CI
(``CI=true``) a failure instead. These run in the default suite (no daemon is started)."""

from __future__ import annotations

import pytest

from tests.slurm import cluster as slurm_cluster
from tests.slurm.conftest import unavailable


def test_without_root_the_cluster_says_why_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 1000)
    with pytest.raises(slurm_cluster.SlurmUnavailable) as caught:
        slurm_cluster.start_cluster()
    assert str(caught.value) == "the Slurm tests need root (slurmd runs each job as its user)"


def test_without_the_packages_the_cluster_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 0)
    monkeypatch.setattr(slurm_cluster, "_SEARCH", "/nonexistent")
    with pytest.raises(slurm_cluster.SlurmUnavailable) as caught:
        slurm_cluster.start_cluster()
    assert str(caught.value) == (
        "munged, slurmctld, slurmd, sbatch, scontrol, scancel, sinfo, munge not found"
        " (Debian: apt-get install slurm-wlm munge)"
    )


def test_an_unavailable_cluster_skips_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    reason = slurm_cluster.SlurmUnavailable("no root")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^Slurm cluster unavailable: no root$"):
        unavailable(reason)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"^Slurm cluster unavailable in CI: no root$"):
        unavailable(reason)

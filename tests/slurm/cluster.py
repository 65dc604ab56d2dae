"""A real one-node Slurm cluster for the tests: Debian's ``slurm-wlm`` and ``munge``, a
configuration written here (controller and node daemon on this machine, its cores, no
accounting), munged on its own socket, slurmctld and slurmd in the foreground as
subprocesses, all in one temporary folder and stopped at the end.

Jobs run as the submitting user, so the node daemon must run as root; where it cannot
(not root, a package missing, a daemon that does not come up) :func:`start_cluster` raises
:class:`SlurmUnavailable` with one line saying why.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

NODE = "kagnode"
PARTITION = "kag"
DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("sbatch", "scontrol", "scancel", "sinfo")
#: Job states after which a job does nothing more (``scontrol show job``'s JobState).
FINISHED = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"}
)
# The daemons of Debian's packages live in /usr/sbin, which a user's PATH may lack.
_SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


class SlurmUnavailable(Exception):
    """The cluster cannot run on this machine (the message says why, in one line)."""


@dataclass(frozen=True)
class Task:
    """One array task as ``scontrol show job`` reports it."""

    task: str  # the array task id ("3"), or the pending ids of the array's record ("3-4")
    state: str  # JobState: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
    exit_code: str  # "0:0", "2:0" (status:signal)
    job_id: str  # the task's own job id


@dataclass
class Cluster:
    """A running cluster: its folder, the environment its commands need (``SLURM_CONF``)
    and how long its daemons took to come up."""

    root: Path
    env: dict[str, str]
    startup: float
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def command(self, *argv: str, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> str:
        """Run a Slurm command (sbatch, scontrol, ...); its stdout, or AssertionError with
        its stderr when it fails."""
        done = subprocess.run(
            list(argv),
            cwd=cwd,
            env={**(env or os.environ), **self.env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}"
        return done.stdout

    def sbatch(
        self,
        script: Path,
        *,
        options: Iterable[str] = (),
        arguments: Iterable[str] = (),
        cwd: Path,
        env: Mapping[str, str],
    ) -> str:
        """Submit ``script`` from ``cwd``, ``env`` the job's environment (sbatch exports
        it), sbatch ``options`` before the script and ``arguments`` after it (the script's
        ``$@``); the job id."""
        out = self.command("sbatch", "--parsable", *options, str(script), *arguments, cwd=cwd, env=env)
        return out.strip().split(";")[0]

    def tasks(self, job: str) -> dict[str, Task]:
        """The tasks of array job ``job`` by array task id (a pending part of the array shows
        as one record, e.g. "3-4")."""
        out = self.command("scontrol", "show", "job", "-o", job)
        found: dict[str, Task] = {}
        for line in out.splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            if "JobState" not in fields:
                continue
            task = fields.get("ArrayTaskId", "")
            found[task] = Task(task, fields["JobState"], fields.get("ExitCode", ""), fields.get("JobId", ""))
        return found

    def wait(
        self, job: str, done: frozenset[str] = FINISHED, count: int | None = None, timeout: float = 300
    ) -> dict[str, Task]:
        """Wait until every task of ``job`` is in a state of ``done`` (and, with ``count``,
        there are that many); its tasks. Follows the scheduler's state, polling it."""
        deadline = time.monotonic() + timeout
        while True:
            tasks = self.tasks(job)
            if (
                tasks
                and all(t.state in done for t in tasks.values())
                and (count is None or len(tasks) == count)
            ):
                return tasks
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job} not done within {timeout} s: {tasks}\n{self.logs()}")
            time.sleep(0.1)

    def logs(self) -> str:
        """The last lines of the daemons' logs (for a failure message)."""
        parts = []
        for name in DAEMONS:
            path = self.root / "log" / f"{name}.log"
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()[-15:]
                parts.append(f"--- {name}\n" + "\n".join(lines))
        return "\n".join(parts)

    def stop(self) -> None:
        """Stop the daemons (node daemon first), then remove the folder."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
        self.processes.clear()
        shutil.rmtree(self.root, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(root: Path, host: str, cpus: int) -> str:
    """slurm.conf of the one-node cluster in ``root``: the machine's ``cpus`` cores, each
    shared by up to 4 jobs (so two 4-task arrays run at once on 2 cores: the jobs wait on
    a model server, not on the CPU), no accounting, no cgroups."""
    return f"""\
ClusterName=kagtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/run/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
PropagateResourceLimits=NONE
KillWait=5
MinJobAge=3600
NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""


def _spawn(argv: list[str], root: Path, name: str, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    out = (root / "log" / f"{name}.out").open("wb")
    try:
        return subprocess.Popen(
            argv, env=dict(env), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    finally:
        out.close()


def _wait_idle(cluster: Cluster, timeout: float = 60) -> None:
    """Until the controller answers and the node reports idle (the scheduler's own state)."""
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        for process, name in zip(cluster.processes, DAEMONS, strict=True):
            if process.poll() is not None:
                raise SlurmUnavailable(f"{name} exited with status {process.returncode} at start-up")
        done = subprocess.run(
            ["sinfo", "-h", "-n", NODE, "-o", "%T"],
            env={**os.environ, **cluster.env},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        state = done.stdout.strip()
        if done.returncode == 0 and state == "idle":
            return
        time.sleep(0.05)
    raise SlurmUnavailable(f"the node did not come up idle within {timeout:.0f} s (state {state!r})")


def start_cluster() -> Cluster:
    """Start munged, slurmctld and slurmd on a configuration of their own; the cluster once
    its node is idle. SlurmUnavailable (one line) when this machine cannot run it."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        raise SlurmUnavailable("the Slurm tests need root (slurmd runs each job as its user)")
    missing = [name for name in DAEMONS + COMMANDS + ("munge",) if shutil.which(name, path=_SEARCH) is None]
    if missing:
        raise SlurmUnavailable(f"{', '.join(missing)} not found (Debian: apt-get install slurm-wlm munge)")
    # munged refuses a socket in a folder that not everyone may enter (pytest's are 0700).
    root = Path(tempfile.mkdtemp(prefix="kag-slurm-", dir="/tmp"))
    root.chmod(0o755)
    for name in ("run", "state", "spool", "log", "munge"):
        (root / name).mkdir()
    (root / "run").chmod(0o755)
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    config = root / "slurm.conf"
    config.write_text(_config(root, socket.gethostname().split(".")[0], os.cpu_count() or 1))
    env = {"SLURM_CONF": str(config), "PATH": _SEARCH}
    cluster = Cluster(root, {"SLURM_CONF": str(config)}, 0.0)
    daemon_env = {**os.environ, **env}
    started = time.monotonic()
    try:
        cluster.processes.append(
            _spawn(
                [shutil.which("munged", path=_SEARCH) or "munged", "--foreground", "--force"]
                + [f"--socket={root}/run/munge.socket", f"--key-file={key}"]
                + [f"--pid-file={root}/run/munged.pid", f"--log-file={root}/log/munged.log"]
                + [f"--seed-file={root}/munge/munged.seed"],
                root,
                "munged",
                daemon_env,
            )
        )
        socket_path = root / "run" / "munge.socket"
        deadline = time.monotonic() + 30
        while not socket_path.exists():
            if cluster.processes[0].poll() is not None:
                detail = (root / "log" / "munged.out").read_text(errors="replace").strip().splitlines()
                raise SlurmUnavailable(f"munged exited at start-up: {detail[-1] if detail else '?'}")
            if time.monotonic() > deadline:
                raise SlurmUnavailable("munged did not create its socket within 30 s")
            time.sleep(0.02)
        sbin = {name: shutil.which(name, path=_SEARCH) or name for name in ("slurmctld", "slurmd")}
        cluster.processes.append(_spawn([sbin["slurmctld"], "-D", "-i"], root, "slurmctld", daemon_env))
        cluster.processes.append(_spawn([sbin["slurmd"], "-D", "-N", NODE], root, "slurmd", daemon_env))
        _wait_idle(cluster)
    except BaseException:
        logs = cluster.logs()
        cluster.stop()
        if logs:
            print(logs)
        raise
    cluster.startup = time.monotonic() - started
    return cluster

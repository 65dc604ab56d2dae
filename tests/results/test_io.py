"""``-o``/``--output``, ``--details`` and ``--per-query`` onto a node that is not a regular file.

A named pipe, a character device (``/dev/full``), ``/dev/stdout`` or a link to one of them is
written in place and stays what it was; a regular file is still replaced atomically. Each case
runs ``python -m kag`` in a subprocess with a timeout (a pipe nobody reads would block); the
devices are nodes made in the test's folder (``mknod``, as root) or links to the real ones, so
a writer that replaced its target never harms the machine's own ``/dev``.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import TEST_DATA

REPO = Path(__file__).resolve().parent.parent.parent
IRT2 = TEST_DATA / "irt2"
TRIPLETS = REPO / "examples" / "triplets"

# One command per writer; the output path is appended after its option.
WRITERS: dict[str, list[str]] = {
    "stats -o": [
        *("stats", "-d", "examples/dataset/datasets.json", "-r", "examples/results"),
        *("--format", "json", "-o"),
    ],
    "stats compare --output": [
        *("stats", "compare", "-d", "examples/dataset/datasets.json", "-r", "examples/results", "--output"),
    ],
    "triplets --details": [
        *("triplets", str(TRIPLETS / "gold.jsonl"), str(TRIPLETS / "finetuned.jsonl"), "--details"),
    ],
    "irt2 --per-query": [
        *("irt2", "--dataset", str(IRT2 / "dataset"), "--task", "linking", "--split", "test"),
        *("--head", str(IRT2 / "predictions" / "linking-head.csv")),
        *("--tail", str(IRT2 / "predictions" / "linking-tail.csv"), "--per-query"),
    ],
}
# What the written bytes start with.
STARTS = {
    "stats -o": b"{",
    "stats compare --output": b"",
    "triplets --details": b'{"',
    "irt2 --per-query": b'{"',
}


def kag(args: list[str], target: Path | str, **kw: object) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "KAG_WIDTH": "100"}
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "kag", *args, str(target)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
        **{"capture_output": True, **kw},
    )


def read_fifo(fifo: Path) -> tuple[threading.Thread, list[bytes]]:
    """A reader of ``fifo`` in a thread (started): what it read lands in the list."""
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    return reader, received


def unblock(fifo: Path) -> None:
    """Open the pipe for writing once, so a reader still waiting (the command failed before
    opening it) sees its end and the thread finishes."""
    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    os.close(fd)


def full_device(folder: Path) -> Path:
    """A node of the full device (char 1, 7) made in ``folder``; skip where mknod is refused."""
    node = folder / "full"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except (PermissionError, AttributeError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    return node


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("through_link", [False, True], ids=["fifo", "link-to-fifo"])
def test_a_named_pipe_gets_the_bytes_and_stays_a_pipe(
    writer: str, through_link: bool, tmp_path: Path
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    target = fifo
    if through_link:
        target = tmp_path / "out.link"
        target.symlink_to(fifo)
    reader, received = read_fifo(fifo)
    try:
        done = kag(WRITERS[writer], target)
    finally:
        reader.join(timeout=5)
        if reader.is_alive():
            unblock(fifo)
            reader.join(timeout=5)
    assert done.returncode == 0, done.stderr.decode()
    assert received and received[0].startswith(STARTS[writer]) and len(received[0]) > 100
    assert received[0].endswith(b"\n")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # not replaced by a regular file
    if through_link:
        assert target.is_symlink() and os.readlink(target) == str(fifo)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"pipe", target.name})  # no temporary left


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_full_device_is_exit_2_naming_the_full_disk_and_stays_a_device(writer: str, tmp_path: Path) -> None:
    node = full_device(tmp_path)
    done = kag(WRITERS[writer], node)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    lines = [line for line in err.splitlines() if line.startswith("kag: error:")]
    assert len(lines) == 1 and str(node) in lines[0] and "No space left on device" in lines[0], err
    assert "Traceback" not in err
    info = node.lstat()
    assert stat.S_ISCHR(info.st_mode) and info.st_rdev == os.makedev(1, 7)
    assert [p.name for p in tmp_path.iterdir()] == ["full"]  # no temporary left


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_a_link_to_dev_full_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    link = tmp_path / "report.json"
    link.symlink_to("/dev/full")
    done = kag(WRITERS["stats -o"], link)
    assert done.returncode == 2
    assert done.stderr.decode().endswith(
        f"kag: error: {link}: cannot write the report: No space left on device\n"
    )
    assert link.is_symlink() and os.readlink(link) == "/dev/full"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("stdout_is", ["pipe", "file"])
def test_a_link_to_a_process_descriptor_is_written_in_place(
    writer: str, stdout_is: str, tmp_path: Path
) -> None:
    """``/dev/stdout`` is a link to ``/proc/self/fd/1``: the report reaches stdout, whether that
    is a pipe or a regular file (``> out``), and the link is never replaced."""
    stdout = tmp_path / "link"
    stdout.symlink_to("/proc/self/fd/1")  # what /dev/stdout is, in a folder of the test's own
    if stdout_is == "pipe":
        done = kag(WRITERS[writer], stdout)
        written = done.stdout
    else:
        captured = tmp_path / "captured"
        with captured.open("wb") as out:
            done = kag(WRITERS[writer], stdout, capture_output=False, stdout=out, stderr=subprocess.PIPE)
        written = captured.read_bytes()
    assert done.returncode == 0, done.stderr.decode()
    assert len(written) > 100 and written.endswith(b"\n")
    if writer.startswith("stats"):  # the report is all of stdout
        assert written.startswith(STARTS[writer])
    else:  # the lines written, then the report printed after them, nothing overwritten
        lines = written.splitlines()
        assert lines[0].startswith(STARTS[writer]) and not lines[-1].startswith(b"{")
        assert sum(line.startswith(b"{") for line in lines) >= (13 if writer.startswith("irt2") else 7)
    assert stdout.is_symlink() and os.readlink(stdout) == "/proc/self/fd/1"


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_regular_file_is_still_replaced_atomically(writer: str, tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.write_bytes(b"old\n")
    before = target.stat().st_ino
    keep = tmp_path / "hardlink"
    os.link(target, keep)  # a rename leaves the old inode's bytes to this name
    done = kag(WRITERS[writer], target)
    assert done.returncode == 0, done.stderr.decode()
    assert target.read_bytes().startswith(STARTS[writer]) and target.stat().st_ino != before
    assert keep.read_bytes() == b"old\n"


@pytest.mark.parametrize("writer", ["stats -o", "triplets --details"])
def test_a_block_device_is_refused_and_left_alone(writer: str, tmp_path: Path) -> None:
    """A disk is never written over by a report, even through a link (nothing is opened)."""
    node = tmp_path / "disk"
    try:
        os.mknod(node, stat.S_IFBLK | 0o600, os.makedev(7, 250))  # a loop device's number
    except (PermissionError, AttributeError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")
    link = tmp_path / "out.link"
    link.symlink_to(node)
    done = kag(WRITERS[writer], link)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert (
        err.splitlines()[-1]
        == f"kag: error: {link}: a block device; reports go to files, pipes and character devices"
    )
    assert stat.S_ISBLK(node.lstat().st_mode) and link.is_symlink()

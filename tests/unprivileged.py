"""Shared by the tests that need a folder the process cannot read or write: run a block as
the user nobody when the tests run as root (who may list, read and write anywhere)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def unprivileged() -> Iterator[None]:
    """Run the block as the user nobody when the tests run as root; as is otherwise."""
    if os.geteuid() != 0:
        yield
        return
    # Python's own files may lie below /root (mode 0700): what kag imports lazily (its worker
    # pools) is imported here, while root can still read it.
    import multiprocessing.connection
    import multiprocessing.pool
    import multiprocessing.popen_fork  # noqa: F401

    import kag.workers  # noqa: F401

    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)

"""The contract between the benchmark runner and graph retrieval.

The runner (``kag.generation``) owns the configuration file and the providers; retrieval
(``kag.retrieval``) owns the ``[databases]`` and ``[retrievers]`` tables, the backends
and the translations. Imports run one way: generation imports retrieval, never the
reverse; retrieval receives what it needs from generation as values (an `EmbedFn`, the
raw tables). They meet in `kag.retrieval.factory`:

- at configuration load, the runner calls ``validate_retrieval(...)`` once per KAG setup
  so that every configuration problem is reported before any request is sent;
- per run, the runner calls ``open_retriever(...)`` once per (retriever, database) pair
  (one database driver for the whole run), which returns a `Retriever`, and
  ``await retriever.retrieve(text)`` per task; ``await retriever.aclose()`` at the end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from kag.errors import KagError
from kag.results import Retrieval

# Embeds texts with a configured provider: (model, texts) -> one vector per text.
EmbedFn = Callable[[str, list[str]], Awaitable[list[list[float]]]]


class RetrievalError(KagError):
    """A retrieval failed at run time (database down, index missing...): the task's
    result becomes an ``error`` file whose message opens with ``RETRIEVAL_FAILED`` and the
    database's name: "Failed during the knowledge retrieval phase (KAG) on database
    '<name>': ..."."""


# The opening of a retrieval failure's message in an ``error`` result file (see
# compatibility in docs/architecture.md).
RETRIEVAL_FAILED = "Failed during the knowledge retrieval phase (KAG) on database"


class RetrievalFailed(RetrievalError):
    """A :class:`RetrievalError` of one retrieval whose message already opens with
    ``RETRIEVAL_FAILED`` and the database's name, so no caller words it again."""


class Retriever(Protocol):
    name: str
    database: str

    async def retrieve(self, text: str) -> Retrieval:
        """Embed ``text``, fetch the subgraph, render it. An empty subgraph gives a
        Retrieval whose ``result`` is "" (the prompt then has no ``RETRIEVAL``)."""
        ...

    async def aclose(self) -> None: ...

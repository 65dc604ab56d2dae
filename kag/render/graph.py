"""The summary `kag graph import` prints once the database is written."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kag.retrieval.importer import ImportReport


def render_import_report(report: ImportReport, index: str) -> str:
    """Five aligned lines (database, nodes, relationships, embeddings, time), each ending in a newline;
    ``index`` is the node property that stores the embedding."""
    lines = [
        f"database       {report.path}",
        f"nodes          {report.nodes} ({report.embedded} embedded)",
        f"relationships  {report.relationships} ({report.relationship_types} type(s))",
        f"embeddings     {report.model}, {report.dimension} dimensions, property '{index}'",
        (
            f"time           read {report.read_seconds:.2f} s, embed {report.embed_seconds:.2f} s,"
            f" write {report.write_seconds:.2f} s"
        ),
    ]
    return "".join(line + "\n" for line in lines)

"""The pages and JSON answers of `kag view`, and its static export.

Every value shown comes from :class:`kag.view.query.View` and is escaped by the templates
(autoescaping, :mod:`kag.render.templating`); the numbers are the `kag stats --format json`
and `kag stats compare --format json` documents of the same inputs.
"""

from __future__ import annotations

import errno
import functools
import html
import os
import re
import stat
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from markupsafe import Markup

from kag.datasets import DatasetsChanged
from kag.errors import InputError, UsageError
from kag.render.templating import environment
from kag.render.view_overview import overview, overview_context
from kag.render.view_pages import error_context, question_nav, questions_context
from kag.results.io import LinkInTree, write_atomic
from kag.view.choices import link_state
from kag.view.graph import Graph, build_graph, graph_data, parse_triplets
from kag.view.query import View
from kag.view.server import Reply

HTML = "text/html; charset=utf-8"
JSON = "application/json"
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
EXPORT_CSP = "default-src 'none'; style-src 'self' file:; img-src data:; base-uri 'none'"
DEFAULT_EXPORT_LIMIT = 2000


def static_files() -> dict[str, bytes]:
    """The files under ``/static/``: the package's own, read once."""
    folder = resources.files("kag.view") / "static"
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name.endswith((".js", ".css"))}


def _json(doc: object) -> bytes:
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)


def svg_graph(graph: Graph) -> Markup:
    """The drawn subgraph: an inline SVG (no script), evidence nodes in their own class."""
    width, height, pad = 760, 520, 40
    if not graph.nodes:
        return Markup("")

    def xy(i: int) -> tuple[float, float]:
        n = graph.nodes[i]
        return pad + n.x * (width - 2 * pad), pad + n.y * (height - 2 * pad)

    e = html.escape
    parts = [f'<svg class="graph" viewBox="0 0 {width} {height}" role="img" aria-label="retrieved subgraph">']
    for a, b, rel in graph.edges:
        (x1, y1), (x2, y2) = xy(a), xy(b)
        parts.append(
            f'<line class="edge" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}"><title>{e(rel)}</title></line>'
        )
    for i, n in enumerate(graph.nodes):
        x, y = xy(i)
        cls = "node evidence" if n.evidence else "node"
        label = n.label if len(n.label) <= 24 else n.label[:23] + "…"
        parts.append(
            f'<g class="{cls}"><circle cx="{x:.1f}" cy="{y:.1f}" r="6"><title>{e(n.label)} ({e(n.id)})</title>'
            f'</circle><text x="{x + 8:.1f}" y="{y + 4:.1f}">{e(label)}</text></g>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


class ViewApp:
    """The routes of the server (see docs/view.md); unknown paths and names are 404."""

    def __init__(self, view: View, title: str) -> None:
        self.view = view
        self.title = title
        self.static = static_files()

    def __call__(
        self,
        segments: list[str],
        params: dict[str, list[str]],
        *,
        method: str = "GET",
        gone: Callable[[], bool] | None = None,
    ) -> Reply:
        # Only a reload changes anything, so only it is a POST (a page of another origin
        # cannot send one unseen: the server checks its origin).
        reload = segments == ["api", "reload"]
        if reload != (method == "POST"):
            allow = "POST" if reload else "GET"
            return Reply(
                405, JSON, _json({"error": f"{method} is not allowed here: use {allow}"}), (("Allow", allow),)
            )
        try:
            return self._route(segments, params, gone)
        except UsageError as exc:
            if segments and segments[0] == "api":
                return Reply(400, JSON, _json({"error": str(exc)}))
            context = error_context(self.view, segments, params, exc, server_link)
            return Reply(400, HTML, self._page("view_error.j2", **context).encode())
        except DatasetsChanged as exc:  # a page's texts are read from the file when shown
            if segments and segments[0] == "api":
                return Reply(409, JSON, _json({"error": str(exc)}))
            page = self._page(
                "view_error.j2", heading="The datasets file changed", error=str(exc), valid=[], grid=False
            )
            return Reply(409, HTML, page.encode())

    def _route(
        self, segments: list[str], params: dict[str, list[str]], gone: Callable[[], bool] | None
    ) -> Reply:
        v = self.view
        chosen = params.get("baseline") or [""]
        baseline = chosen[-1] or None
        match segments:
            case []:
                return Reply(
                    200,
                    HTML,
                    self._page(
                        "view_overview.j2",
                        **overview_context(v, baseline, wait=False),
                        baseline=baseline,
                        priced=v.prices is not None,
                        state=link_state(params),
                    ).encode(),
                )
            case ["questions"]:
                data = v.questions(params, gone)
                context = questions_context(v, params)
                page = self._page("view_questions.j2", data=data, **context)
                return Reply(200, HTML, page.encode())
            case ["q", dataset, question]:
                detail = v.question(dataset, question)
                if detail is None:
                    return _not_found()
                nav = question_nav(v, params, detail)
                return Reply(
                    200, HTML, self._page("view_question.j2", **question_context(detail), **nav).encode()
                )
            case ["api", "setups"]:
                return Reply(200, JSON, _json(overview(v, baseline)))
            case ["api", "questions"]:
                return Reply(200, JSON, _json(v.questions(params, gone)))
            case ["api", "question", dataset, question]:
                detail = v.question(dataset, question)
                return _not_found() if detail is None else Reply(200, JSON, _json(detail))
            case ["api", "reload"]:
                stats = v.reload()
                done = {"seen": stats.seen, "read": stats.read, "removed": stats.removed}
                return Reply(200, JSON, _json({**done, "warnings": list(stats.warnings)}))
            case ["static", name] if name in self.static:
                return Reply(200, STATIC_TYPES[os.path.splitext(name)[1]], self.static[name])
        return _not_found()

    def _page(self, template: str, **context: Any) -> str:
        return render_page(template, self.title, server_link, **context)


def _not_found() -> Reply:
    return Reply(404, "text/plain; charset=utf-8", b"not found\n")


def server_link(kind: str, /, *args: str, **query: Any) -> str:
    """The URL of a page of the server: ``q`` (dataset, question), ``questions``, ``overview``, ``static``."""
    if kind == "static":
        return "/static/" + args[0]
    if kind == "q":
        base = "/q/" + "/".join(quote(a, safe="") for a in args)
    else:
        base = "/questions" if kind == "questions" else "/"
    clean = {k: v for k, v in query.items() if v not in (None, "", [])}
    return base + ("?" + urlencode(clean, doseq=True) if clean else "")


TABLE_ROWS = 1000


_CELL, _ROW, _PROP_ROW = "\x00", "\x01", "\x02"


def triplet_table(graph: Graph) -> Markup:
    """The triplets as table rows, escaped here: the cells are joined with control
    characters, escaped in one call and the separators then made tags (a call per cell
    costs as much as the rest of the page). A text holding those characters itself is
    escaped cell by cell."""
    rows = graph.triplets[:TABLE_ROWS]
    text = "".join(
        f"{_PROP_ROW if t.property else _ROW}{t.subject}{_CELL}{t.relation}{_CELL}{t.object}" for t in rows
    )
    if text.count(_CELL) != 2 * len(rows) or text.count(_ROW) + text.count(_PROP_ROW) != len(rows):
        e = html.escape
        prop = ' class="prop"'
        return Markup(
            "".join(
                f"<tr{prop if t.property else ''}><td>{e(t.subject)}</td><td>{e(t.relation)}</td>"
                f"<td>{e(t.object)}</td></tr>"
                for t in rows
            )
        )
    out = (
        html.escape(text)
        .replace(_CELL, "</td><td>")
        .replace(_ROW, "</td></tr><tr><td>")
        .replace(_PROP_ROW, '</td></tr><tr class="prop"><td>')
    )
    return Markup(out[len("</td></tr>") :] + "</td></tr>" if rows else "")


@functools.lru_cache(maxsize=64)
def _drawn(text: str, evidence: tuple[str, ...], svg: bool) -> tuple[Graph, Markup | None, Markup]:
    """The triplets of ``text`` and their table; with ``svg``, the graph laid out and drawn
    (a page with a script draws it from :func:`kag.view.graph.graph_data` instead)."""
    if svg:
        graph = build_graph(text, evidence)
        return graph, svg_graph(graph), triplet_table(graph)
    triplets, other = parse_triplets(text)
    graph = Graph(tuple(triplets), other, (), (), False)
    return graph, None, triplet_table(graph)


_JSON_IN_HTML = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "'": "\\u0027"})


def json_in_html(value: object) -> Markup:
    """``value`` as JSON that a ``<script type="application/json">`` element holds as is:
    ``<``, ``>``, ``&`` and ``'`` written as JSON escapes (they occur only inside strings),
    so no text can close the element or open a comment."""
    return Markup(orjson.dumps(value).decode().translate(_JSON_IN_HTML))


def question_context(detail: dict[str, Any], *, static: bool = False) -> dict[str, Any]:
    """A question page's retrieved contexts: per setup that retrieved, its triplets table,
    its graph for the page's graph library (:func:`kag.view.graph.graph_data`) and, for a
    ``static`` page (the export: no script), the graph drawn as SVG."""
    entities = tuple(detail["evidence"])
    triples = tuple((s, p, o) for s, p, o in detail.get("evidence_triples", ()))
    graphs = []
    for s in detail["setups"]:
        if s.get("retrieval"):
            graph, svg, table = _drawn(s["retrieval"], entities, static)
            graphs.append(
                {
                    "setup": s["setup"],
                    "graph": graph,
                    "svg": svg,
                    "table": table,
                    "data": (data := graph_data(s["retrieval"], s.get("graph"), entities, triples)),
                    "json": json_in_html(data),
                    "reached": s.get("reached"),
                }
            )
    return {"d": detail, "graphs": graphs}


def render_page(
    template: str, title: str, link: Callable[..., str], csp: str | None = None, **context: Any
) -> str:
    context.setdefault("state", {})  # the export's pages keep no state: their links are files
    return environment().get_template(template).render(title=title, link=link, csp=csp, **context)


# ---------------------------------------------------------------- the static export


def export(view: View, out: Path, title: str, params: dict[str, list[str]], limit: int) -> int:
    """Write the snapshot into ``out``: the overview, the grid of the filtered questions, one
    page per question, ``data.json``. Returns the number of question pages. Refuses (UsageError)
    past ``limit`` questions."""
    first = view.questions({**params, "page": ["1"]})
    if first["cut"] is not None:
        raise InputError(f"--search: {first['cut']}")
    total = first["total"]
    if total > limit:
        raise UsageError(
            f"the filters select {total} questions, more than a browser page can hold "
            f"(--limit {limit}): narrow them with --dataset/--flip/--outcome or raise --limit"
        )
    rows = list(first["rows"])
    for page in range(2, first["pages"] + 1):
        rows.extend(view.questions({**params, "page": [str(page)]})["rows"])
    names = {(r["dataset"], r["question"]): f"q/{i:06d}.html" for i, r in enumerate(rows, 1)}

    def link(kind: str, /, *args: str, **query: Any) -> str:
        if kind == "q":
            return names.get((args[0], args[1]), "#")
        if kind == "static":
            return "static/" + args[0]
        return "questions.html" if kind == "questions" else "index.html"

    def sub_link(kind: str, /, *args: str, **query: Any) -> str:
        target = link(kind, *args, **query)
        return target if target == "#" else ("../" + target if not target.startswith("q/") else target[2:])

    earlier = _earlier_export(out)
    for folder in _FOLDERS:  # before anything is written: a link there is refused, whatever is selected
        _check_folder(out, folder)
    written = ["index.html", "questions.html", "data.json", *names.values()]

    def put(name: str, content: bytes) -> None:
        # Below ``out`` no link is followed: a link planted at a folder is refused
        # (LinkInTree), one at a file's name is replaced, never written through.
        write_atomic(out / name, (content,), root=out, mode=0o644)

    try:
        # Listed before they are written: an export stopped half way still knows its files.
        put(EXPORT_MANIFEST, orjson.dumps({"files": sorted({*earlier, *written})}))
        for name, content in static_files().items():
            if name.endswith(".css"):
                put(f"static/{name}", content)
                written.append(f"static/{name}")
        data = {**first, "rows": rows, "page": 1, "pages": 1, "page_size": len(rows)}
        info = overview(view, None)
        put(
            "index.html",
            render_page(
                "view_overview.j2",
                title,
                link,
                EXPORT_CSP,
                **overview_context(view, None, wait=True),
                baseline=None,
                priced=view.prices is not None,
            ).encode(),
        )
        put(
            "questions.html",
            render_page(
                "view_questions.j2", title, link, EXPORT_CSP, data=data, **questions_context(view, params)
            ).encode(),
        )
        details = {}
        for (dataset, question), name in names.items():
            detail = view.question(dataset, question)
            if detail is None:
                written.remove(name)
                continue
            details[f"{dataset}/{question}"] = detail
            put(
                name,
                render_page(
                    "view_question.j2", title, sub_link, EXPORT_CSP, **question_context(detail, static=True)
                ).encode(),
            )
        put("data.json", _json({"setups": info, "questions": data, "details": details}))
        # The pages of questions no longer selected.
        _remove_pages(out, sorted(n for n in set(earlier) - set(written) if _PAGE.fullmatch(n)))
        put(EXPORT_MANIFEST, orjson.dumps({"files": sorted(written)}))
    except OSError as exc:
        raise InputError(f"{out}: cannot write the export: {exc.strerror or exc}") from None
    return len(names)


# The list of the files an export wrote, so that the next export into the folder removes
# the pages it no longer holds and nothing else.
EXPORT_MANIFEST = ".kag-view-export.json"
_PAGE = re.compile(r"q/[0-9]{6}\.html")


def _earlier_export(out: Path) -> list[str]:
    """The files an earlier export wrote into ``out`` (none when ``out`` is new or empty);
    UsageError when ``out`` holds anything but an earlier export."""
    try:
        entries = os.listdir(out)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise UsageError(f"{out}: not a folder (--export takes a folder to write the snapshot in)") from None
    except OSError as exc:
        raise InputError(f"{out}: cannot list the export folder: {exc.strerror or exc}") from None
    if not entries:
        return []
    refused = UsageError(
        f"{out}: not empty and not an earlier export of kag view: export into a new or empty folder"
    )
    try:
        fd = os.open(out / EXPORT_MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise refused
            files = orjson.loads(f.read(_MAX_MANIFEST)).get("files")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        raise refused from None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise refused
    return files


_FOLDERS = ("q", "static")
_MAX_MANIFEST = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _link_refused(out: Path, folder: str) -> LinkInTree:
    return LinkInTree(f"{out / folder}: a symbolic link or a file where a folder belongs")


def _check_folder(out: Path, folder: str) -> None:
    """LinkInTree when ``out/folder`` is there and is not a folder (a link, say)."""
    try:
        st = os.lstat(out / folder)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError(f"{out / folder}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise _link_refused(out, folder)


def _remove_pages(out: Path, names: list[str]) -> None:
    """Remove the pages ``names`` (``q/NNNNNN.html``) of an earlier export through the
    descriptor of its ``q`` folder, opened without following a link (LinkInTree when one is
    there): a page is removed only when it is a regular file of that folder."""
    if not names:
        return
    out_fd = os.open(out, _DIR_FLAGS)
    try:
        try:
            q_fd = os.open("q", _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=out_fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _link_refused(out, "q") from None
            raise
        try:
            for name in names:
                page = name.removeprefix("q/")
                try:
                    st = os.stat(page, dir_fd=q_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    os.unlink(page, dir_fd=q_fd)
        finally:
            os.close(q_fd)
    finally:
        os.close(out_fd)

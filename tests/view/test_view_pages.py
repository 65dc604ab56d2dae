"""The pages of `kag view` as a user moves through them (kag/render/view_pages.py and the
templates): the grid's menus, a mistyped name answered with the valid ones, the flip's
direction, previous/next and the state every link keeps, the option texts and the legend,
an export that shows no control it cannot serve."""

from __future__ import annotations

import html
import http.client
import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from kag.datasets import load_datasets
from kag.render.view import export
from kag.view.index import Index, Tree
from kag.view.query import View
from tests.view.helpers import make_tree, open_view, serving


@pytest.fixture
def view(tmp_path: Path) -> View:
    return open_view(*make_tree(tmp_path), tmp_path / "index.sqlite")


def _get(url: str) -> tuple[int, str]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port)
    conn.request("GET", parts.path + ("?" + parts.query if parts.query else ""))
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body


def _hrefs(page: str, selector_id: str) -> list[tuple[str, str]]:
    """The (href, text) of the links inside the element with ``id``, unescaped."""
    start = page.index(f'id="{selector_id}"')
    end = (
        page.index("</", page.index(">", start)) if selector_id.startswith(("prev", "next", "list")) else None
    )
    part = page[start:end] if end else page[start : page.index("</ul>", start)]
    return [
        (html.unescape(h), html.unescape(t)) for h, t in re.findall(r'<a href="([^"]*)">([^<]*)</a>', part)
    ]


def _link(page: str, link_id: str) -> str:
    found = re.search(rf'id="{link_id}"[^>]*href="([^"]*)"', page)
    assert found, link_id
    return html.unescape(found.group(1))


def _query(href: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(href).query)


def test_the_grid_offers_every_filter_and_sort_as_menus(view: View) -> None:
    with serving(view) as url:
        status, page = _get(url + "questions")
    assert status == 200
    for name in ("dataset", "outcome", "sort"):
        assert f'<select name="{name}"' in page
    assert page.count('<select name="flip"') == 2  # A right, B not
    menu = page[page.index('id="flip-a"') : page.index("</select>", page.index('id="flip-a"'))]
    assert re.findall(r"<option>([^<]*)</option>", menu) == ["kag", "native"]
    assert "<option selected>med</option>" not in page and "<option>med</option>" in page
    assert re.findall(r'name="setup" value="([^"]*)" checked', page) == ["kag", "native"]
    assert 'name="disagree"' in page and 'id="q"' in page


@pytest.mark.parametrize(
    ("query", "listed"),
    [
        ("dataset=nope", ["med"]),
        ("setup=kag&setup=nativ", ["kag", "native"]),
        ("flip=kag,nativ", ["kag", "native"]),
        ("outcome=right", ["ok", "wrong", "err"]),
    ],
)
def test_a_mistyped_name_answers_400_with_the_valid_ones(view: View, query: str, listed: list[str]) -> None:
    with serving(view) as url:
        status, page = _get(url + "questions?" + query + "&sort=-question")
        api_status, api = _get(url + "api/questions?" + query)
    assert status == 400 and api_status == 400
    error = json.loads(api)["error"]
    assert error.endswith(f"{', '.join(listed)})") and error.split(":")[0] in html.unescape(page)
    names = re.findall(r"<li>(?:<a [^>]*>|<code>)([^<]*)<", page[page.index('id="valid"') :])
    assert names == listed
    assert 'id="filters"' in page  # the menus, to choose again
    if not query.startswith("flip"):  # a pair is chosen with the menus
        key = query.split("=")[0]
        for (href, text), name in zip(_hrefs(page, "valid"), listed, strict=True):
            assert text == name and _query(href)[key][-1] == name
            assert _query(href)["sort"] == ["-question"]  # the rest of the state kept
            with serving(view) as again:
                assert _get(again + href.lstrip("/"))[0] == 200


def test_an_unknown_dataset_is_no_longer_an_empty_grid(view: View) -> None:
    from kag.errors import UsageError

    with pytest.raises(UsageError, match=r"dataset=nope: no dataset has that name \(datasets: med\)"):
        view.questions({"dataset": ["nope"]})
    assert view.questions({"dataset": ["med"]})["total"] == 8


def test_a_bad_baseline_lists_the_setups_as_links_to_the_overview(view: View) -> None:
    with serving(view) as url:
        status, page = _get(url + "?baseline=kga")
    assert status == 400
    assert [(href, text) for href, text in _hrefs(page, "valid")] == [
        ("/?baseline=kag", "kag"),
        ("/?baseline=native", "native"),
    ]
    assert 'id="filters"' not in page


def test_the_flip_page_says_its_direction_and_the_two_menus_show_it(view: View) -> None:
    with serving(view) as url:
        _, by_comma = _get(url + "questions?flip=kag,native")
        _, by_menus = _get(url + "questions?flip=kag&flip=native")
        _, other_way = _get(url + "questions?flip=native&flip=kag")
        status, half = _get(url + "questions?flip=kag&flip=")
    heading = '<h2 id="direction"><span class="good">kag</span> right, <span class="bad">native</span> not (wrong or error)</h2>'
    assert heading in by_comma and heading in by_menus
    assert '<span class="good">native</span> right, <span class="bad">kag</span> not' in other_way
    assert re.search(r'id="count">2<', by_menus) and re.search(r'id="count">3<', other_way)
    for menu, name in (("flip-a", "kag"), ("flip-b", "native")):
        part = by_menus[by_menus.index(f'id="{menu}"') :]
        assert part[: part.index("</select>")].count("<option selected>") == 1
        assert f"<option selected>{name}</option>" in part[: part.index("</select>")]
    assert "<title>kag right, native not" in by_menus
    assert status == 400 and "flip: choose two setups, the one right and the one not" in half


def test_a_question_has_previous_and_next_in_the_list_it_came_from(view: View) -> None:
    state = "flip=native&flip=kag&sort=-question&baseline=native"
    with serving(view) as url:
        _, grid = _get(url + "questions?" + state)
        rows = re.findall(r'<a class="open" href="([^"]*)">', grid)
        assert [urlsplit(html.unescape(r)).path for r in rows] == ["/q/med/q5", "/q/med/q1", "/q/med/q0"]
        # Every link of the grid carries the state: the rows, the menus' page, the nav.
        expected = {"flip": ["native", "kag"], "sort": ["-question"], "baseline": ["native"]}
        assert all(_query(html.unescape(r)) == expected for r in rows)
        _, middle = _get(url + html.unescape(rows[1]).lstrip("/"))
        assert "question 2 of 3 where native right, kag not; sorted by question, reversed" in middle
        assert urlsplit(_link(middle, "prev-q")).path == "/q/med/q5"
        assert urlsplit(_link(middle, "next-q")).path == "/q/med/q0"
        for link_id in ("prev-q", "next-q", "list"):
            assert _query(_link(middle, link_id)) == expected
        nav = re.findall(r'<nav><a href="([^"]*)">Overview</a> <a href="([^"]*)">Questions</a>', middle)
        assert nav and all(_query(html.unescape(h)) == expected for h in nav[0])
        _, first = _get(url + html.unescape(rows[0]).lstrip("/"))
        assert 'id="prev-q"' not in first and "question 1 of 3" in first
        # A question the filters leave out: no neighbours, the way back still there.
        _, outside = _get(url + "q/med/q2?" + state)
        assert "not among the 3 question(s) where" in outside and 'id="next-q"' not in outside
        # The overview keeps the grid's state for the way back, and its menu the rest.
        view.analysis("native").done.wait()  # the menu comes with the comparisons
        _, overview = _get(url + "?" + state)
        assert '<input type="hidden" name="sort" value="-question">' in overview
        assert '<input type="hidden" name="flip" value="native">' in overview


def test_the_way_back_opens_the_grid_page_that_holds_the_question(
    view: View, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kag.view import query

    monkeypatch.setattr(query, "PAGE_SIZE", 2)
    with serving(view) as url:
        _, page = _get(url + "q/med/q3?sort=question&outcome=ok")
        assert "question 4 of 6" in page
        assert _query(_link(page, "list")) == {"sort": ["question"], "outcome": ["ok"], "page": ["2"]}
        _, grid = _get(url + "questions?sort=question&outcome=ok&page=2")
        assert _query(_link(grid, "next")) == {"sort": ["question"], "outcome": ["ok"], "page": ["3"]}
        assert _query(_link(grid, "prev")) == {"sort": ["question"], "outcome": ["ok"], "page": ["1"]}


def test_cells_show_the_option_text_and_the_legend_says_what_marks_mean(tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    index = Index(
        tmp_path / "i.sqlite", load_datasets(datasets), [Tree("", str(tree.resolve()))], "", "letter"
    )
    view = View(index, scan=True)
    with serving(view) as url:
        _, page = _get(url + "questions")
        api = json.loads(_get(url + "api/questions")[1])
    row = next(r for r in api["rows"] if r["question"] == "q1")
    assert row["options"] == {"A": "yes", "B": "no", "C": "maybe"}
    assert row["cells"]["kag"] == {
        "outcome": "wrong",
        "response": "B",
        "extracted": "B",
        "extracted_outcome": "wrong",
        "option": "B",
        "reached": None,  # q1 lists no gold evidence
    }
    q1 = page[page.index("med/q1</a>") : page.index("</tr>", page.index("med/q1</a>"))]
    assert '<td class="gold">A <span class="opt" title="A: yes">yes</span></td>' in q1
    assert 'B <span class="opt" title="B: no">no</span>' in q1
    assert 'class="ext wrong"' in q1 and "ext: wrong" in q1
    legend = page[page.index('id="legend"') :]
    assert "the strict grade" in legend and "ext: right" in legend and "--extract" in legend
    # The hostile response of q0 names no option: its head shows, escaped, with no option text.
    q0 = page[page.index("med/q0</a>") : page.index("</tr>", page.index("med/q0</a>"))]
    assert "&lt;img src=x" in q0


def test_without_extract_the_legend_has_no_extracted_marks(view: View) -> None:
    with serving(view) as url:
        _, page = _get(url + "questions")
    assert "the strict grade" in page and "ext: right" not in page


def test_the_overview_says_pp_as_the_cli_does(view: View) -> None:
    view.analysis("native").done.wait()
    with serving(view) as url:
        _, page = _get(url + "?baseline=native")
    assert "<th>diff (pp)</th><th>95% CI (pp)</th>" in page
    assert re.search(r'<td class="n">[+-]\d+\.\d\d</td>', page) and "pts" not in page


def test_the_export_shows_no_control_it_cannot_serve(view: View, tmp_path: Path) -> None:
    out = tmp_path / "site"
    export(view, out, "t", {"flip": ["kag,native"], "dataset": ["med"]}, 100)
    grid = (out / "questions.html").read_text()
    overview = (out / "index.html").read_text()
    assert "<form" not in grid and "<form" not in overview and "<select" not in overview
    # The overview's flip counts are no links: the export's grid holds its own selection only.
    assert 'class="flip"' not in overview and "right in the baseline only" in overview
    assert "Keys:" not in grid
    assert '<span class="good">kag</span> right, <span class="bad">native</span> not' in grid
    assert "A static snapshot of the questions where kag right, native not; dataset med." in grid
    assert 'href="q/000001.html"' in grid  # the links stay files, with no query
    assert "?" not in "".join(re.findall(r'href="([^"]*)"', grid + overview))


def test_an_export_of_a_mistyped_dataset_exits_2_naming_the_datasets(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kag.cli import app

    datasets, root = make_tree(tmp_path)
    out = tmp_path / "site"
    base = [
        "view",
        "-d",
        str(datasets),
        "-r",
        str(root),
        "--index",
        str(tmp_path / "i.sqlite"),
        "--export",
        str(out),
    ]
    result = CliRunner().invoke(app, [*base, "--dataset", "mde"])
    assert result.exit_code == 2
    assert "kag: error: dataset=mde: no dataset has that name (datasets: med)" in result.stderr
    assert not out.exists()
    result = CliRunner().invoke(app, [*base, "--flip", "kag,natve"])
    assert (
        result.exit_code == 2 and "flip=natve: no setup has that name (setups: kag, native)" in result.stderr
    )


def test_an_export_keeps_the_questions_whose_retrieval_reached_or_missed_the_gold(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kag.cli import app

    example = Path(__file__).resolve().parents[2] / "examples" / "retrieval"
    base = ["view", "-d", str(example / "datasets.json"), "-r", str(example / "results")]
    base += ["--index", str(tmp_path / "i.sqlite")]
    result = CliRunner().invoke(app, [*base, "--export", str(tmp_path / "missed"), "--retrieval", "missed"])
    assert result.exit_code == 0, result.output
    assert "missed: 2 question page(s)" in result.stdout
    grid = (tmp_path / "missed" / "questions.html").read_text()
    assert "the questions where a column&#x27;s retrieval missed the gold." in grid
    assert re.findall(r">vitamins/(\w+)</a>", grid) == ["rickets", "scurvy"]
    result = CliRunner().invoke(app, [*base, "--export", str(tmp_path / "x"), "--retrieval", "found"])
    assert result.exit_code == 2
    assert "retrieval=found: no retrieval has that name (retrievals: reached, missed)" in result.stderr

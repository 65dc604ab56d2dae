"""`kag view` in a real browser: Playwright driving the system chromium (no browser download).
Skipped when chromium or playwright is absent."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from kag.render.view import export
from tests.view.helpers import make_tree, open_view, serving, write_verdicts

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# The screenshot docs/view.md shows: written to artifacts/ (ignored by git) on every run, and
# over docs/images/ only when KAG_UPDATE_DOCS_IMAGES=1, so a test run leaves the checkout alone.
REPO_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = (
    REPO_ROOT / "docs" / "images" / "view-question.png"
    if os.environ.get("KAG_UPDATE_DOCS_IMAGES") == "1"
    else REPO_ROOT / "artifacts" / "view-question.png"
)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian package 'chromium' is not installed")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


BOUND_MS = 120_000


def _page(browser: object, requests: list[str]) -> object:
    context = browser.new_context(viewport={"width": 900, "height": 700})  # type: ignore[attr-defined]
    # Every wait is on an event (a selector, an address, a function); the bound is only how
    # long a loaded machine may take to get there (Playwright's own default is 30 s).
    context.set_default_timeout(BOUND_MS)
    page = context.new_page()
    page.on("request", lambda r: requests.append(r.url))
    return page


def drawn_nodes(page: object, box: str = "cy-1") -> list[dict[str, object]]:
    """The nodes Cytoscape.js drew in the graph box ``box`` of a question's page, read from
    its instance (waits for it)."""
    page.wait_for_function(f"window.kagGraphs && window.kagGraphs[{box!r}]")  # type: ignore[attr-defined]
    return page.evaluate(  # type: ignore[attr-defined,no-any-return]
        f"window.kagGraphs[{box!r}].nodes().map(n => ({{label: n.data('label'), gold: !!n.data('gold'),"
        " seed: n.data('seed') || null}))"
    )


def test_overview_flip_question_subgraph_and_nothing_hostile_runs(browser: object, tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    view = open_view(datasets, tree, tmp_path / "index.sqlite", config=write_verdicts(datasets, tree))
    view.analysis(None).done.wait()  # the flip links come with the comparisons
    requests: list[str] = []
    with serving(view) as url:
        page = _page(browser, requests)
        page.goto(url)  # type: ignore[attr-defined]
        assert "ACC" in page.inner_text("#setups")  # type: ignore[attr-defined]
        page.click("a.flip >> nth=0")  # type: ignore[attr-defined] # kag right, the baseline native not
        page.wait_for_selector("#grid")  # type: ignore[attr-defined]
        assert page.inner_text("#count") == "2"  # type: ignore[attr-defined]
        assert page.inner_text("#direction") == "kag right, native not (wrong or error)"  # type: ignore[attr-defined]
        rows = page.locator("#grid tr.row a.open").all_inner_texts()  # type: ignore[attr-defined]
        assert rows == ["med/q2", "med/q7"]
        shared = page.url  # type: ignore[attr-defined]
        page.keyboard.press("j")  # type: ignore[attr-defined]
        page.keyboard.press("Enter")  # type: ignore[attr-defined]
        page.wait_for_url("**/q/med/q2?*")  # type: ignore[attr-defined]
        assert len(drawn_nodes(page)) == 3
        # The hostile question q0: its response, input and node labels show as text.
        page.goto(url + "q/med/q0")  # type: ignore[attr-defined]
        assert [n["label"] for n in drawn_nodes(page) if n["gold"]] == ["Vitamin C"]
        assert "<script>window.pwned=1</script>" in page.inner_text("pre.response")  # type: ignore[attr-defined]
        assert "<script>window.pwned=1</script>" in page.inner_text("pre.reason")  # type: ignore[attr-defined]
        assert page.evaluate("window.pwned === undefined")  # type: ignore[attr-defined]
        assert page.locator("img").count() == 0  # type: ignore[attr-defined]
        page.goto(url + "q/med/q2")  # type: ignore[attr-defined]
        assert page.locator(".badge.verdict").all_inner_texts() == ["CORRECT", "INCORRECT"]  # type: ignore[attr-defined]
        # A shared URL reloads to the same rows.
        other = _page(browser, requests)
        other.goto(shared)  # type: ignore[attr-defined]
        assert other.locator("#grid tr.row a.open").all_inner_texts() == rows  # type: ignore[attr-defined]
        other.keyboard.press("/")  # type: ignore[attr-defined]
        assert other.evaluate("document.activeElement.id") == "q"  # type: ignore[attr-defined]
    assert requests and all(r.startswith(url) for r in requests), requests


KAG = "qwen35-9b-ollama-neo4j-embedding-triplet-formal"
NATIVE = "qwen35-9b-ollama-native"


def test_a_flip_chosen_from_the_menus_keeps_its_state_from_page_to_page(
    browser: object, med_kag: Path, tmp_path: Path
) -> None:
    """The Med-KAG tree as a new user meets it: the flip chosen with the two menus, the
    list walked question by question, the filters kept through every link; the docs'
    screenshot is this tree's question page."""
    view = open_view(
        med_kag / "datasets" / "mirage.json", med_kag / "results", tmp_path / "i.sqlite", "wekgr-"
    )
    requests: list[str] = []
    with serving(view, "med-kag/results") as url:
        page = _page(browser, requests)
        page.goto(url + "questions")  # type: ignore[attr-defined]
        assert page.locator("#flip-a option").all_inner_texts() == ["-", NATIVE, KAG]  # type: ignore[attr-defined]
        assert page.locator("#f-dataset option").all_inner_texts() == ["any", "pubmedqa"]  # type: ignore[attr-defined]
        page.select_option("#flip-a", KAG)  # type: ignore[attr-defined]
        page.select_option("#flip-b", NATIVE)  # type: ignore[attr-defined]
        page.select_option("#f-sort", "-question")  # type: ignore[attr-defined]
        page.click("#filters button")  # type: ignore[attr-defined]
        page.wait_for_selector("#direction")  # type: ignore[attr-defined]
        # Only the fields that are set make the address.
        query = parse_qs(urlsplit(page.url).query)  # type: ignore[attr-defined]
        assert query == {"flip": [KAG, NATIVE], "sort": ["-question"]}
        assert page.inner_text("#direction") == f"{KAG} right, {NATIVE} not (wrong or error)"  # type: ignore[attr-defined]
        assert page.inner_text("#count") == "15"  # type: ignore[attr-defined]
        rows = page.locator("#grid tr.row a.open").all_inner_texts()  # type: ignore[attr-defined]
        assert len(rows) == 15 and rows == sorted(rows, reverse=True)
        # Each cell names its option's text beside the key; the legend says what colours mean.
        gold = page.locator("#grid tr.row >> nth=0").locator("td.gold .opt").inner_text()  # type: ignore[attr-defined]
        assert gold in {"yes", "no", "maybe"}
        assert page.locator("#grid td.cell .opt").count() == 30  # type: ignore[attr-defined]
        assert "the strict grade" in page.inner_text("#legend")  # type: ignore[attr-defined]
        # A question opened from the list: its place in it, previous and next (j/k too).
        page.click("#grid a.open >> nth=0")  # type: ignore[attr-defined]
        assert page.inner_text("#qnav").startswith("question 1 of 15 where")  # type: ignore[attr-defined]
        assert page.locator("#prev-q").count() == 0  # type: ignore[attr-defined]
        # The keys are heard once the page's deferred script has run, before DOMContentLoaded:
        # a key pressed as soon as the page's text shows may come before it (seen under load).
        page.wait_for_load_state("domcontentloaded")  # type: ignore[attr-defined]
        page.keyboard.press("j")  # type: ignore[attr-defined]
        page.wait_for_url(f"**/q/pubmedqa/{rows[1].split('/')[1]}?*")  # type: ignore[attr-defined]
        assert page.inner_text("#qnav").startswith("← previous · question 2 of 15 where")  # type: ignore[attr-defined]
        page.click("#prev-q")  # type: ignore[attr-defined]
        page.wait_for_url(f"**/q/pubmedqa/{rows[0].split('/')[1]}?*")  # type: ignore[attr-defined]
        # Overview, then Questions: the same list, the menus as they were chosen.
        page.click("nav a >> text=Overview")  # type: ignore[attr-defined]
        page.click("nav a >> text=Questions")  # type: ignore[attr-defined]
        assert page.inner_text("#count") == "15"  # type: ignore[attr-defined]
        assert page.input_value("#flip-a") == KAG and page.input_value("#flip-b") == NATIVE  # type: ignore[attr-defined]
        assert page.input_value("#f-sort") == "-question"  # type: ignore[attr-defined]
        # A mistyped name: a page that names the valid ones, each a link that works.
        answer = page.goto(url + "questions?dataset=pubmedq&sort=-question")  # type: ignore[attr-defined]
        assert answer.status == 400
        assert "dataset=pubmedq" in page.inner_text("#error")  # type: ignore[attr-defined]
        assert page.locator("#valid a").all_inner_texts() == ["pubmedqa"]  # type: ignore[attr-defined]
        page.click("#valid a")  # type: ignore[attr-defined]
        assert parse_qs(urlsplit(page.url).query) == {"dataset": ["pubmedqa"], "sort": ["-question"]}  # type: ignore[attr-defined]
        assert page.inner_text("#count") == "100"  # type: ignore[attr-defined]
        answer = page.goto(url + "questions?setup=qwen35-9b-native")  # type: ignore[attr-defined]
        assert answer.status == 400
        assert page.locator("#valid a").all_inner_texts() == [NATIVE, KAG]  # type: ignore[attr-defined]
        assert page.locator("#filters #flip-a").count() == 1  # type: ignore[attr-defined]
        # The screenshot of docs/view.md: a flipped question of the real tree.
        SCREENSHOT.parent.mkdir(exist_ok=True)
        page.set_viewport_size({"width": 800, "height": 600})  # type: ignore[attr-defined]
        page.goto(f"{url}q/pubmedqa/11411430?setup={KAG}&setup={NATIVE}&flip={KAG}&flip={NATIVE}")  # type: ignore[attr-defined]
        assert page.inner_text("#qnav").startswith("← previous · question 3 of 15")  # type: ignore[attr-defined]
        assert len(drawn_nodes(page)) == 26
        page.screenshot(path=str(SCREENSHOT), full_page=True)  # type: ignore[attr-defined]
        assert SCREENSHOT.read_bytes().startswith(b"\x89PNG")
    assert requests and all(r.startswith(url) for r in requests), requests


def test_static_export_opens_from_file(browser: object, tmp_path: Path) -> None:
    datasets, tree = make_tree(tmp_path)
    view = open_view(datasets, tree, tmp_path / "index.sqlite")
    out = tmp_path / "site"
    export(view, out, "t", {"flip": ["kag,native"]}, 100)
    requests: list[str] = []
    page = _page(browser, requests)
    page.goto((out / "index.html").as_uri())  # type: ignore[attr-defined]
    assert "ACC" in page.inner_text("#setups")  # type: ignore[attr-defined]
    assert page.locator("form").count() == 0  # type: ignore[attr-defined] # no baseline menu either
    page.click("nav a >> text=Questions")  # type: ignore[attr-defined]
    assert page.inner_text("#count") == "2"  # type: ignore[attr-defined]
    assert page.inner_text("#direction") == "kag right, native not (wrong or error)"  # type: ignore[attr-defined]
    # No control that would need a server: no form, no keys.
    assert page.locator("form").count() == 0  # type: ignore[attr-defined]
    assert "Keys:" not in page.inner_text("#total")  # type: ignore[attr-defined]
    page.click("#grid a.open >> nth=0")  # type: ignore[attr-defined]
    page.wait_for_selector("svg.graph")  # type: ignore[attr-defined]
    assert page.evaluate("window.pwned === undefined")  # type: ignore[attr-defined]
    assert page.evaluate("getComputedStyle(document.body).margin") == "0px"  # the stylesheet loaded
    assert all(r.startswith("file://") for r in requests), requests


EXAMPLE = REPO_ROOT / "examples" / "retrieval"
# Records the page's Content-Security-Policy violations (run before the page's own scripts,
# by the browser's debugging protocol, which the policy does not govern).
WATCH_CSP = (
    "window.cspViolations = [];"
    "document.addEventListener('securitypolicyviolation',"
    " e => window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));"
)


def test_examples_retrieval_graphs_reached_filter_and_outcomes_chart(browser: object, tmp_path: Path) -> None:
    """examples/retrieval as a user meets it: the outcomes chart on the overview, the grid
    narrowed to the questions whose retrieval reached the gold, a question's two subgraphs
    drawn with their names, seeds and gold, and not one policy violation."""
    view = open_view(EXAMPLE / "datasets.json", EXAMPLE / "results", tmp_path / "i.sqlite")
    requests: list[str] = []
    with serving(view) as url:
        page = _page(browser, requests)
        page.add_init_script(WATCH_CSP)  # type: ignore[attr-defined]
        page.goto(url)  # type: ignore[attr-defined]
        chart = page.locator("#outcomes-chart svg")  # type: ignore[attr-defined]
        assert chart.locator("text.label").all_text_contents() == ["rust-kag", "kag-graph"]
        assert chart.locator("rect.outcome").count() == 5  # rust-kag 1+1+1, kag-graph 1+1
        page.click("nav a >> text=Questions")  # type: ignore[attr-defined]
        assert page.inner_text("#count") == "4"  # type: ignore[attr-defined]
        page.select_option("#f-retrieval", "reached")  # type: ignore[attr-defined]
        page.click("#filters button")  # type: ignore[attr-defined]
        page.wait_for_url("**/questions?retrieval=reached*")  # type: ignore[attr-defined]
        assert parse_qs(urlsplit(page.url).query)["retrieval"] == ["reached"]  # type: ignore[attr-defined]
        assert page.inner_text("#count") == "3"  # type: ignore[attr-defined]
        page.select_option("#f-outcome", "wrong")  # type: ignore[attr-defined]
        page.click("#filters button")  # type: ignore[attr-defined]
        page.wait_for_url("**/questions?outcome=wrong&retrieval=reached*")  # type: ignore[attr-defined]
        assert page.locator("#grid tr.row a.open").all_inner_texts() == ["vitamins/rickets"]  # type: ignore[attr-defined]
        assert "a column wrong whose retrieval reached the gold" in page.inner_text("#total")  # type: ignore[attr-defined]
        page.goto(url + "q/vitamins/scurvy")  # type: ignore[attr-defined]
        assert page.inner_text("#gold-triples") == (  # type: ignore[attr-defined]
            "(Scurvy, caused by, Vitamin C deficiency), (Vitamin C deficiency, deficiency of, Vitamin C)"
        )
        recorded = drawn_nodes(page, "cy-1")  # kag-graph: the recorded graph, with its seeds
        assert [(n["label"], n["seed"], n["gold"]) for n in recorded] == [
            ("Scurvy", 1, True),
            ("Vitamin C deficiency", None, True),
            ("Vitamin C", None, True),
            ("Rickets", 2, False),
            ("Vitamin D deficiency", None, False),
        ]
        read_back = drawn_nodes(page, "cy-2")  # rust-kag: read back from its text, no seeds
        assert [n["label"] for n in read_back] == [
            "Scurvy",
            "Vitamin C deficiency",
            "Rickets",
            "Vitamin D deficiency",
        ]
        assert (
            page.inner_text("#reached-1") == "gold reached" and page.inner_text("#reached-2") == "gold missed"
        )  # type: ignore[attr-defined]
        edges = page.evaluate(
            "window.kagGraphs['cy-1'].edges().map(e => [e.data('label'), !!e.data('gold')])"
        )  # type: ignore[attr-defined]
        assert edges == [["CAUSED_BY", True], ["DEFICIENCY_OF", True], ["CAUSED_BY", False]]
        # Zoom and pan are the user's; a click on a node says what it is.
        assert page.evaluate(
            "window.kagGraphs['cy-1'].userZoomingEnabled() && window.kagGraphs['cy-1'].userPanningEnabled()"
        )  # type: ignore[attr-defined]
        page.evaluate("() => { window.kagGraphs['cy-1'].$('#n3').emit('tap'); }")  # type: ignore[attr-defined]
        assert page.inner_text("#cy-1-info") == "Rickets · id 4 · seed #2"  # type: ignore[attr-defined]
        assert page.locator("#cy-1 canvas").count() > 0  # type: ignore[attr-defined]
        assert page.evaluate("window.cspViolations") == []  # type: ignore[attr-defined]
    assert requests and all(r.startswith(url) for r in requests), requests


HOSTILE_NODE = "<img src=x onerror=window.pwned=1>"


def test_a_large_subgraph_shows_its_neighbourhood_and_a_hostile_name_stays_text(
    browser: object, tmp_path: Path
) -> None:
    """A retrieval of 400 nodes: the page draws the 150 nearest to the gold and says how
    many are hidden; a node named ``<img src=x onerror=...>`` is a label, never an element."""
    from kag.results import result_path, write_result
    from tests.result_helpers import neo4j_retrieval, ok_result

    datasets = tmp_path / "datasets.json"
    question = {"input": "Q?", "output": {"type": "MCQ", "options": {"A": "a", "B": "b"}, "answer": "A"}}
    datasets.write_text(json.dumps({"d": {"q": {**question, "evidence": [HOSTILE_NODE]}}}))
    lines = [f"(n{i})-[:NEXT]->(n{i + 1})" for i in range(399)]
    lines += [f'(n{i})-[name]->("node {i}")' for i in range(1, 400)]
    lines.append(f"(n0)-[name]->({json.dumps(HOSTILE_NODE)})")
    text = "\n".join(lines) + "\n"
    tree = tmp_path / "results"
    write_result(
        result_path(tree, "d", "q", "", "kag"), ok_result("A", retrieval=neo4j_retrieval(text, 400, 399, 400))
    )
    view = open_view(datasets, tree, tmp_path / "i.sqlite")
    requests: list[str] = []
    with serving(view) as url:
        page = _page(browser, requests)
        page.add_init_script(WATCH_CSP)  # type: ignore[attr-defined]
        page.goto(url + "q/d/q")  # type: ignore[attr-defined]
        nodes = drawn_nodes(page)
        assert len(nodes) == 150
        assert nodes[0] == {"label": HOSTILE_NODE, "gold": True, "seed": None}
        assert {n["label"] for n in nodes[1:]} == {
            f"node {i}" for i in range(1, 150)
        }  # the nearest to the gold
        shown = page.inner_text("#cy-1-shown")  # type: ignore[attr-defined]
        assert shown.startswith("150 of 400 node(s) and 149 of 399 relationship(s) drawn")
        assert "250 node(s) and 250 relationship(s) hidden" in shown
        assert page.locator("img").count() == 0  # type: ignore[attr-defined]
        assert page.evaluate("window.pwned === undefined")  # type: ignore[attr-defined]
        assert page.evaluate("window.cspViolations") == []  # type: ignore[attr-defined]
    assert requests and all(r.startswith(url) for r in requests), requests

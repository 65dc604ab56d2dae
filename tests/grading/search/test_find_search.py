"""kag.grading.search: the library behind `kag stats find` (trees built with the real writer)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kag.grading.search.match as match_module
import kag.grading.search.walk as walk_module
from kag.errors import InputError, KagError, UsageError
from kag.grading.mcq import RUST_WHITESPACE as WHITE_SPACE
from kag.grading.mcq import rust_trim as trim
from kag.grading.search import (
    SearchOptions,
    alternatives_of,
    compile_pattern,
    exact_of,
    iter_walk,
    list_search_files,
    literal_of,
    search,
)
from kag.render.find import flatten, format_hit, hit_to_json, result_to_json
from kag.results import (
    ErrorResult,
    iter_result_files_deep,
    write_result,
)
from tests.conftest import write_ok as ok


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small tree covering every kind of entry the walk meets."""
    root = tmp_path / "results"
    ok(root / "mcq" / "0" / "run-a.json", "  I don't know.\n")
    ok(root / "mcq" / "0" / "run-b.json", "B")
    ok(root / "mcq" / "1" / "run-a.json", "The answer is B because the serum lipase is more specific.")
    ok(root / "mcq" / "1" / "run-b.json", "I DON'T KNOW")
    write_result(root / "mcq" / "2" / "run-a.json", ErrorResult("Failed during the generation phase"))
    ok(root / "mcq" / "2" / "run-b.json", "c")
    ok(root / "free" / "7" / "run-a.json", "know know")
    (root / "free" / "8").mkdir(parents=True)
    (root / "free" / "8" / "run-a.json").write_bytes(b'{"ok": {"result": "know", ')  # truncated
    (root / "free" / "8" / "run-b.json").write_bytes(b'{"ok": {"result": 5}}')  # wrong shape
    # Not result files: never counted.
    (root / "mcq" / "0" / "run-c.json.tmp").write_bytes(b'{"ok": {"result": "know"}}')
    (root / "mcq" / "0" / "other-a.json").write_bytes(b'{"ok": {"result": "know"}}')
    (root / "mcq" / "0" / "run-.json").write_bytes(b'{"ok": {"result": "know"}}')  # empty setup
    os.symlink(root / "mcq" / "0" / "run-a.json", root / "mcq" / "1" / "run-link.json")
    os.symlink(root / "mcq", root / "linked-dir")
    return root


def opts(pattern: str, **kw: object) -> SearchOptions:
    return SearchOptions(pattern, prefix="run-", **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- walk and counts


def test_counts_paths_and_skips(tree: Path) -> None:
    r = search(tree, opts(r"(?i)know"))
    # 9 files: 7 readable/error + 2 unreadable; tmp, other prefix, empty setup and symlinks are not results.
    assert r.total == 9
    assert r.unreadable == (str(tree / "free/8/run-a.json"), str(tree / "free/8/run-b.json"))
    assert r.error_files == 1
    assert r.paths == (
        str(tree / "free/7/run-a.json"),
        str(tree / "mcq/0/run-a.json"),
        str(tree / "mcq/1/run-b.json"),
    )
    assert r.matches == 3
    assert [(h.file.dataset, h.file.question, h.file.setup, h.offset, h.match) for h in r.hits] == [
        ("free", "7", "a", 0, "know"),
        ("free", "7", "a", 5, "know"),
        ("mcq", "0", "a", 8, "know"),  # trimmed: "I don't know." -> offset 8, not 10
        ("mcq", "1", "b", 8, "KNOW"),
    ]
    assert {s: (c.total, c.matched) for s, c in r.per_setup.items()} == {"a": (5, 2), "b": (4, 1)}


def test_unreadable_and_error_files_are_warned(tree: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="kag.grading.search"):
        search(tree, opts("know"))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings[0].startswith(
        f"{tree / 'free/8/run-a.json'}: unreadable result file, skipped: not valid JSON"
    )
    assert (
        warnings[1]
        == f"{tree / 'free/8/run-b.json'}: unreadable result file, skipped: 'ok.result' must be a string"
    )
    assert len(warnings) == 2  # the error file is counted for the caller to say once, not warned here
    infos = [r.getMessage() for r in caplog.records if r.levelname == "INFO"]
    assert infos == [f"{tree / 'mcq/2/run-a.json'}: error result file, skipped (no response to search)"]


def test_any_depth_and_no_prefix(tmp_path: Path) -> None:
    ok(tmp_path / "top.json", "x")
    ok(tmp_path / "d" / "shallow.json", "x")
    ok(tmp_path / "d" / "q" / "s.json", "x")
    ok(tmp_path / "d" / "a" / "b" / "deep.json", "x")
    files = list_search_files(tmp_path, SearchOptions("x"))
    assert [(f.dataset, f.question, f.setup) for f in files] == [
        ("d", "a/b", "deep"),
        ("d", "q", "s"),
        ("d", "", "shallow"),
        ("", "", "top"),
    ]
    assert search(tmp_path, SearchOptions("x")).matches == 4


def test_filters_restrict_total(tree: Path) -> None:
    r = search(tree, opts("(?i)know", setups=("b",)))
    assert (r.total, r.matches, r.error_files, len(r.unreadable)) == (4, 1, 0, 1)
    r = search(tree, opts("(?i)know", datasets=("mc*",), setups=("a", "z*")))
    assert (r.total, r.matches, r.error_files) == (3, 1, 1)
    assert search(tree, opts("x", datasets=("nothing",))).total == 0


def test_missing_root_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="results directory not found"):
        search(tmp_path / "nope", SearchOptions("x"))
    (tmp_path / "file.json").write_text("{}")
    with pytest.raises(InputError, match=r"file\.json: not a directory"):
        search(tmp_path / "file.json", SearchOptions("x"))


def test_streamed_hits_need_not_be_kept(tree: Path) -> None:
    seen: list[str] = []
    kept = search(tree, opts("(?i)know"))
    streamed = search(
        tree,
        opts("(?i)know"),
        on_outcome=lambda o: seen.extend(h.match or "" for h in o.hits),
        keep_hits=False,
    )
    assert streamed.hits == () and seen == [h.match for h in kept.hits]
    assert (streamed.paths, streamed.total, streamed.per_setup) == (kept.paths, kept.total, kept.per_setup)


# ---------------------------------------------------------------- matching


def test_ignore_case_invert_and_limits(tree: Path) -> None:
    assert search(tree, opts("know")).matches == 2
    assert search(tree, opts("know", ignore_case=True)).matches == 3
    inverted = search(tree, opts("(?i)know", invert=True))
    # Selected: readable files without a match; error and unreadable files never.
    assert inverted.paths == (
        str(tree / "mcq/0/run-b.json"),
        str(tree / "mcq/1/run-a.json"),
        str(tree / "mcq/2/run-b.json"),
    )
    assert [(h.offset, h.match, h.after) for h in inverted.hits[:1]] == [(0, None, "B")]
    assert [h.offset for h in search(tree, opts("know", max_count=1)).hits] == [0, 8]
    assert len(search(tree, opts("o", files_only=True)).hits) == 2 + 1  # first hit of each file


def test_empty_matches_and_blank_responses(tmp_path: Path) -> None:
    ok(tmp_path / "d" / "q" / "blank.json", " \n\t ")
    ok(tmp_path / "d" / "q" / "word.json", "ab")
    r = search(tmp_path, SearchOptions(r"^\s*$"))
    assert r.paths == (str(tmp_path / "d/q/blank.json"),)
    assert [(h.offset, h.match) for h in r.hits] == [(0, "")]
    # An empty pattern matches between every character (grep-like), capped by max_count.
    assert [h.offset for h in search(tmp_path, SearchOptions("", setups=("word",))).hits] == [0, 1, 2]
    assert len(search(tmp_path, SearchOptions("", setups=("word",), max_count=2)).hits) == 2


def test_trim_is_rusts_white_space() -> None:
    assert trim("\u3000\u00a0 x \u2029\n") == "x"
    # U+001C..U+001F are not White_Space: Python's str.strip() would drop them, Rust's trim() keeps them.
    assert trim("\x1cx\x1f") == "\x1cx\x1f"
    assert "\x1c".isspace() and "\x1c" not in WHITE_SPACE


def test_context_and_text_line(tmp_path: Path) -> None:
    text = "0123456789" * 3 + "MATCH" + "abcdefghij" * 3
    ok(tmp_path / "ds" / "q1" / "s.json", text)
    r = search(tmp_path, SearchOptions("MATCH", context=5))
    (hit,) = r.hits
    assert (hit.offset, hit.before, hit.match, hit.after, hit.length) == (30, "56789", "MATCH", "abcde", 65)
    assert format_hit(hit, str(tmp_path)) == "ds/q1/s.json:30: …56789[MATCH]abcde…"
    assert format_hit(hit, str(tmp_path), color=True) == (
        "\x1b[35mds/q1/s.json\x1b[0m:\x1b[32m30\x1b[0m: …56789\x1b[1;31m[MATCH]\x1b[0mabcde…"
    )
    # Context reaching both ends: no ellipsis.
    (whole,) = search(tmp_path, SearchOptions("MATCH", context=40)).hits
    assert format_hit(whole, str(tmp_path)) == f"ds/q1/s.json:30: {text[:30]}[MATCH]{text[35:]}"
    assert hit_to_json(hit) == {
        "path": str(tmp_path / "ds/q1/s.json"),
        "dataset": "ds",
        "question": "q1",
        "setup": "s",
        "offset": 30,
        "match": "MATCH",
        "context": "56789MATCHabcde",
    }


def test_text_line_is_one_line_without_escape_codes(tmp_path: Path) -> None:
    ok(tmp_path / "d" / "q" / "s.json", "line one\r\nline\ttwo \x1b[31mred\x1b[0m\nend")
    (hit,) = search(tmp_path, SearchOptions("two")).hits
    line = format_hit(hit, str(tmp_path))
    assert line == "d/q/s.json:15: line one⏎line [two] \\x1b[31mred\\x1b[0m⏎end"
    assert "\n" not in line and "\x1b" not in line
    assert flatten("a\rb\x00c\x9bd") == "a⏎b\\x00c\\x9bd"


def test_inverted_line_shows_the_head(tmp_path: Path) -> None:
    ok(tmp_path / "d" / "q" / "s.json", "x" * 30)
    (hit,) = search(tmp_path, SearchOptions("y", invert=True, context=10)).hits
    assert format_hit(hit, str(tmp_path)) == "d/q/s.json:0: " + "x" * 20 + "…"
    assert hit_to_json(hit)["match"] is None and hit.context == "x" * 20


# ---------------------------------------------------------------- timeouts


def test_catastrophic_pattern_is_cut_per_file_and_the_search_completes(tmp_path: Path) -> None:
    """`(a+)+$` backtracks exponentially on 'aaa…b'; each such file is cut at --timeout."""
    bad = ["a" * 5000 + "b", "a" * 3000 + "b!", "a" * 4000 + "bb"]
    for i, text in enumerate(bad):
        ok(tmp_path / "d" / f"bad{i}" / "s.json", text)
    ok(tmp_path / "d" / "good" / "s.json", "aaaa")
    ok(tmp_path / "d" / "short" / "s.json", "aab")
    r = search(tmp_path, SearchOptions(r"(a+)+$", timeout=0.2), jobs=1)
    assert r.total == 5
    assert r.timed_out == tuple(str(tmp_path / "d" / f"bad{i}" / "s.json") for i in range(3))
    assert r.paths == (str(tmp_path / "d/good/s.json"),)
    assert [(h.offset, h.match) for h in r.hits] == [(0, "aaaa")]


def test_timeout_after_a_hit_keeps_the_hit(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ok(tmp_path / "d" / "q" / "s.json", "x " + "a" * 5000 + "b")
    with caplog.at_level("WARNING", logger="kag.grading.search"):
        r = search(tmp_path, SearchOptions(r"x|(a+)+$", timeout=0.2))
    assert r.paths == (str(tmp_path / "d/q/s.json"),) and r.timed_out == r.paths
    assert [h.match for h in r.hits] == ["x"]
    assert caplog.records[0].getMessage() == (
        f"{tmp_path / 'd/q/s.json'}: pattern timed out (--timeout 0.2 s of CPU) after 1 match(es); "
        "later ones not shown"
    )


# ---------------------------------------------------------------- pool, patterns, options


def test_pool_gives_the_same_result_in_the_same_order(tmp_path: Path) -> None:
    words = ["alpha", "beta", "gamma know", "I don't know.", "delta know know"]
    for q in range(60):
        for s in ("m1", "m2", "m3"):
            ok(tmp_path / f"ds{q % 4}" / str(q) / f"{s}.json", words[(q * 7 + len(s) * q) % len(words)])
    (tmp_path / "ds0" / "0" / "m9.json").write_text("not json")
    one = search(tmp_path, SearchOptions("know"), jobs=1)
    pooled = search(tmp_path, SearchOptions("know"), jobs=2)
    assert pooled == one
    assert list(one.paths) == sorted(one.paths) and one.matches > 10 and len(one.unreadable) == 1


def test_pool_started_after_the_first_files_gives_the_same_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By default the first chunks are searched in this process and a pool takes the rest
    once POOL_MIN_FILES files are walked: the result must not show the seam."""
    words = ["alpha", "know", "beta know", "gamma"]
    for q in range(90):
        for s in ("m1", "m2"):
            ok(tmp_path / f"ds{q % 3}" / f"{q:02}" / f"{s}.json", words[(q + len(s) * q) % len(words)])
        ok(tmp_path / f"ds{q % 3}" / f"top{q}.json", "know")  # file units between folder units
    one = search(tmp_path, SearchOptions("know"), jobs=1)
    started: list[int] = []
    real_workers = walk_module.ordered_map

    def in_workers(work: Any, chunks: Any, workers: int, **messages: str) -> Any:
        started.append(workers)
        return real_workers(work, chunks, workers, **messages)

    monkeypatch.setattr(walk_module, "POOL_MIN_FILES", 40)
    monkeypatch.setattr(walk_module, "HEAD_CHUNK_WEIGHT", 16)
    monkeypatch.setattr(walk_module, "CHUNK_WEIGHT", 24)
    monkeypatch.setattr(walk_module, "ordered_map", in_workers)
    monkeypatch.setattr(walk_module, "default_workers", lambda: 2)
    seamed = search(tmp_path, SearchOptions("know"), jobs=None)
    assert started == [2]
    assert seamed == one and one.total == 270 and one.matches > 90


@pytest.mark.parametrize(
    ("pattern", "ignore_case", "literal"),
    [
        ("serum", False, "serum"),
        ("I don't know", False, "I don't know"),
        ("a-b #1", False, "a-b #1"),
        ("serum", True, None),  # case folding is the engine's job
        ("", False, None),
        *[(f"a{c}b", False, None) for c in "\\.^$*+?{}[]|()"],
    ],
)
def test_literal_of(pattern: str, ignore_case: bool, literal: str | None) -> None:
    assert literal_of(pattern, ignore_case) == literal


@pytest.mark.parametrize(
    ("pattern", "ignore_case", "alternatives"),
    [
        ("^C$", False, ("C",)),
        ("B|C", False, ("B", "C")),
        ("^yes$|^no$", False, ("yes", "no")),
        (r"3\.5|a\|b", False, ("3.5", "a|b")),
        ("I don't know", False, ("I don't know",)),
        ("B|C", True, None),  # case folding is the engine's job
        ("", False, None),
        ("B|", False, None),  # an empty branch matches everywhere
        ("^$", False, None),
        (r"a\b", False, None),  # an escaped letter is not a literal
        (r"a\\", False, ("a\\",)),
        ("a\\", False, None),  # a dangling escape
        *[(f"B|a{c}b", False, None) for c in ".*+?{}[]()"],
    ],
)
def test_alternatives_of(pattern: str, ignore_case: bool, alternatives: tuple[str, ...] | None) -> None:
    assert alternatives_of(pattern, ignore_case) == alternatives


@pytest.mark.parametrize(
    ("pattern", "ignore_case", "exact"),
    [
        ("^C$", False, "C"),
        ("^I don't know$", False, "I don't know"),
        (r"^3\.5 \$$", False, "3.5 $"),
        (r"^a\\$", False, "a\\"),
        ("^C$", True, None),  # case folding is the engine's job
        ("^$", False, None),
        ("C$", False, None),
        ("^C", False, None),
        (r"^C\$", False, None),  # an escaped dollar is no anchor
        ("^B$|^C$", False, None),
        ("^a^b$", False, None),
        (r"^a\b$", False, None),  # an escaped letter is not a literal
        *[(f"^a{c}b$", False, None) for c in ".*+?{}[]|()"],
    ],
)
def test_exact_of(pattern: str, ignore_case: bool, exact: str | None) -> None:
    assert exact_of(pattern, ignore_case) == exact


@pytest.mark.parametrize("pattern", ["^C$", "^a\n$", r"^\.$"])
@pytest.mark.parametrize(
    "text", ["C", "C\n", "C\n\n", "C\r", "C\r\n", " C", "C ", "\nC", "CC", "", "C\u2028", "C\x85"]
)
@pytest.mark.parametrize("invert", [False, True])
def test_exact_shortcut_gives_the_engines_hits(pattern: str, text: str, invert: bool) -> None:
    """``$`` also matches before a final newline (and before no other line end)."""
    text = text.replace("C", exact_of(pattern) or "")
    compiled = compile_pattern(pattern)
    m = match_module.Matcher(compiled, invert, 2, None, 1.0, exact=exact_of(pattern))
    engine = match_module.Matcher(compiled, invert, 2, None, 1.0)
    assert match_module.match_text(text, m) == match_module.match_text(text, engine)


@pytest.mark.parametrize("invert", [False, True])
def test_exact_shortcut_agrees_with_the_engine(tree: Path, invert: bool) -> None:
    """`^B$` is decided with ``==``, `(?:^B$)` by the engine: same files, same hits."""
    fast = search(tree, opts("^B$", invert=invert))
    engine = search(tree, opts("(?:^B$)", invert=invert))
    assert fast == engine and fast.matches > 0


@pytest.mark.parametrize("invert", [False, True])
def test_literal_shortcut_agrees_with_the_engine(tree: Path, invert: bool) -> None:
    """`know` takes the `in` shortcut, `(?:know)` does not: same files, same hits."""
    fast = search(tree, opts("know", invert=invert))
    engine = search(tree, opts("(?:know)", invert=invert))
    assert fast == engine and fast.matches > 0


@pytest.mark.parametrize("invert", [False, True])
def test_alternatives_shortcut_agrees_with_the_engine(tree: Path, invert: bool) -> None:
    """`^C$|know` takes the `in` shortcut, `(?:^C$|know)` does not: same files, same hits."""
    fast = search(tree, opts("^C$|know", invert=invert))
    engine = search(tree, opts("(?:^C$|know)", invert=invert))
    assert fast == engine and fast.matches > 0


def test_invalid_pattern_carries_the_compiler_message() -> None:
    with pytest.raises(UsageError, match=r"^invalid pattern '\(': missing \) at position 1$"):
        compile_pattern("(")
    with pytest.raises(UsageError, match="min repeat greater than max repeat"):
        compile_pattern("a{2,1}")


@pytest.mark.parametrize(
    "pattern", ["(a{1000}){1000}", "((a{100}){100}){100}", "a{1000000000}", "(?#[)(a{1000}){1000}"]
)
def test_a_pattern_spelling_out_too_much_is_refused(pattern: str) -> None:
    with pytest.raises(UsageError, match="repeats too much"):
        compile_pattern(pattern)
    assert compile_pattern("^[A-C]{1}$").match("B")


def test_invalid_pattern_fails_before_the_walk(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="invalid pattern"):
        search(tmp_path / "missing", SearchOptions("[z-a]"))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"context": -1}, "--context must be 0 or more"),
        ({"max_count": 0}, "--max-count must be 1 or more"),
        ({"timeout": 0.0}, "--timeout must be more than 0"),
        ({"timeout": float("nan")}, "--timeout must be more than 0"),
        ({"timeout": float("inf")}, "--timeout must be more than 0"),
    ],
)
def test_bad_options(kw: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        SearchOptions("x", **kw)  # type: ignore[arg-type]


def test_json_document(tree: Path) -> None:
    doc = result_to_json(search(tree, opts("serum")), counts=True)
    assert doc["matches"] == 1 and doc["total"] == 9
    assert doc["paths"] == [str(tree / "mcq/1/run-a.json")]
    assert doc["hits"][0]["context"] == "The answer is B because the serum lipase is more specific."
    assert (doc["unreadable_files"], doc["error_files"], doc["timed_out"]) == (2, 1, [])
    assert doc["counts"] == {"a": {"matches": 1, "total": 5}, "b": {"matches": 0, "total": 4}}


# ---------------------------------------------------------------- invariants


responses = st.lists(st.text(alphabet="ab \n", max_size=12), min_size=1, max_size=6)


@given(responses, st.text(alphabet="ab", min_size=1, max_size=2))
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_literal_search_matches_an_oracle(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], word: str
) -> None:
    root = tmp_path_factory.mktemp("t")
    for i, text in enumerate(texts):
        ok(root / "d" / str(i) / "s.json", text)
    r = search(root, SearchOptions(word))
    expected = []
    for i, text in sorted(enumerate(texts), key=lambda it: str(root / "d" / str(it[0]) / "s.json")):
        t, at = trim(text), 0
        while (found := t.find(word, at)) >= 0:  # non-overlapping, left to right
            expected.append((i, found))
            at = found + len(word)
    assert [(int(h.file.question), h.offset) for h in r.hits] == expected
    inverted = search(root, SearchOptions(word, invert=True))
    assert r.matches + inverted.matches == len(texts)
    assert set(r.paths).isdisjoint(inverted.paths)


names = st.sampled_from(
    ["a", "a-b", "a.b", "a b", "b0", "s.json", "a.json", "s-1.json", "s.json.tmp", "Z.json"]
)


@given(
    st.lists(st.lists(names, min_size=1, max_size=4), min_size=1, max_size=12),
    st.sampled_from(["", "s", "a"]),
    st.integers(0, 3),
)
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_streamed_walk_equals_the_deep_walk(
    tmp_path_factory: pytest.TempPathFactory, paths: list[list[str]], prefix: str, depth: int
) -> None:
    """iter_walk cuts the tree into units (folders ``depth`` levels down, files above);
    walked one after the other they must give iter_result_files_deep's list."""
    root = tmp_path_factory.mktemp("w")
    for parts in paths:
        target = root.joinpath(*parts)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("{}")
        except OSError:  # a name already used as a file (or folder) on this path
            continue
    os.symlink(root / parts[0], root / "link")  # followed by neither walk
    os.symlink(root / parts[0], root / "s-link.json")
    deep = list(iter_result_files_deep(str(root), prefix))
    assert list(iter_walk(str(root), prefix, depth)) == deep
    assert list(iter_walk(str(root) + "/", prefix, depth)) == list(
        iter_result_files_deep(str(root) + "/", prefix)
    )


def test_an_error_in_a_worker_is_reported_by_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected exception while a worker searches (injected here before the workers
    are forked) stops the search with the worker's message, as it would without workers,
    instead of a dead-worker guess."""
    for q in range(20):
        ok(tmp_path / "d" / str(q) / ("t.json" if q == 7 else "s.json"), "know")
    real = match_module.search_path

    def failing(path: str, matcher: Any, dir_fd: int | None = None) -> Any:
        if path.endswith("t.json"):
            raise PermissionError(13, "Permission denied")
        return real(path, matcher, dir_fd)

    monkeypatch.setattr(match_module, "search_path", failing)
    with pytest.raises(KagError) as info:
        search(tmp_path, SearchOptions("know"), jobs=2)
    assert str(info.value) == "a search worker failed: PermissionError: [Errno 13] Permission denied"


_QUICK_PATTERNS = [
    "^C$",
    "^é$",
    "^a\n$",
    r"^\.\|$",
    "^A\nB$",
    "B|C",
    "c",
    "^b",
    "a$",
    r"\bC\b",
    "é",
    "(?m)^B$",
    r"A\nB",
    r"A|^b$|\.|\\",
    "a\nb|C",
    "[ab]+",
    r"\\",
    '"',
    "x*",
]


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list('ABCabcé\n "\\\t\u00c9x.|\r\u2028\x85')), max_size=12),
    pattern=st.sampled_from(_QUICK_PATTERNS),
    ignore_case=st.booleans(),
    hits_per_file=st.sampled_from([None, 1, 2]),
)
def test_quick_search_never_drops_a_hit(
    text: str, pattern: str, ignore_case: bool, hits_per_file: int | None
) -> None:
    """The one ``search`` that rules a response out before ``finditer`` runs, and the
    literal shortcuts before it, give exactly the hits of ``finditer`` alone (inverted: the
    files ``search`` finds nothing in): anchors, case-insensitivity, line breaks, escapes
    and non-ASCII text included."""
    compiled = compile_pattern(pattern, ignore_case)
    m = match_module.Matcher(
        compiled,
        False,
        3,
        hits_per_file,
        1.0,
        literal_of(pattern, ignore_case),
        alternatives_of(pattern, ignore_case),
        exact_of(pattern, ignore_case),
    )
    expected: list[Any] = []
    for found in compiled.finditer(text):
        start, end = found.span()
        expected.append(
            (start, text[start:end], text[max(0, start - 3) : start], text[end : end + 3], len(text))
        )
        if hits_per_file is not None and len(expected) >= hits_per_file:
            break
    assert match_module.match_text(text, m) == (expected, False)
    inverted = match_module.Matcher(compiled, True, 3, None, 1.0, m.literal, m.alternatives, m.exact)
    selected = [(0, None, "", text[:6], len(text))] if compiled.search(text) is None else []
    assert match_module.match_text(text, inverted) == (selected, False)

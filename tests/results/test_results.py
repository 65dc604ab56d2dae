"""kag.results: the one result model, its reader and atomic writer, the tree listing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kag.errors import InputError
from kag.results import (
    AugmentedGeneration,
    DatabaseStats,
    ErrorResult,
    ModelConfig,
    OkResult,
    OkStats,
    Retrieval,
    Timing,
    UnreadableResult,
    Usage,
    dump_result,
    list_results,
    parse_result,
    read_result,
    result_path,
    setup_from_name,
    write_result,
)

# ---------------------------------------------------------------- round trip

names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=12)
u32 = st.integers(0, 2**32 - 1)
timings = st.builds(Timing, st.integers(0, 2**53), st.integers(0, 999_999_999))
counts = st.one_of(st.none(), u32)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)

databases = st.builds(
    DatabaseStats, st.sampled_from(["neo4j", "ladybug"]), counts, counts, counts, st.none() | timings
)
retrievals = st.builds(
    Retrieval,
    result=names,
    retriever=st.sampled_from(["embedder", "other"]),
    document=st.none() | names,
    vector=st.none() | st.lists(finite, max_size=8),
    database=st.none() | databases,
    time=st.none() | timings,
)
configs = st.builds(
    ModelConfig,
    provider=names,
    model=names,
    temperature=finite,
    tokens=counts,
    augmented_generation=st.none() | st.builds(AugmentedGeneration, names, names),
)
ok_results = st.builds(
    OkResult,
    result=names,
    stats=st.builds(
        OkStats,
        prompt=st.none() | st.text(),
        retrieval=st.none() | retrievals,
        config=st.none() | configs,
        time=st.none() | timings,
        generation_time=st.none() | timings,
        usage=st.none() | st.builds(Usage, counts, counts),
        attempts=counts,
        fingerprint=st.none() | names,
        kag_version=st.none() | names,
    ),
)
results = st.one_of(ok_results, st.builds(ErrorResult, st.text()))


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(result=results)
def test_write_then_read_returns_the_same_result(tmp_path: Path, result):
    path = tmp_path / "d" / "q" / "setup.json"
    write_result(path, result)
    assert read_result(path) == result
    assert parse_result(dump_result(result)) == result
    assert not list(path.parent.glob("*.tmp"))  # the temporary file was renamed away


def test_written_file_has_the_rust_field_order(tmp_path: Path):
    result = OkResult(
        "B",
        OkStats(
            prompt="p",
            retrieval=Retrieval(
                "ctx",
                document="q",
                vector=[0.5],
                database=DatabaseStats("neo4j", 1, 2, 3, Timing(0, 9)),
                time=Timing(0, 7),
            ),
            config=ModelConfig("ollama", "qwen3.5:9b", 0.0, 10000, AugmentedGeneration("r", "neo4j")),
            time=Timing(11, 820792699),
        ),
    )
    path = tmp_path / "x.json"
    write_result(path, result)
    raw = json.loads(path.read_text())
    assert list(raw) == ["ok"]
    assert list(raw["ok"]) == ["result", "stats"]
    assert list(raw["ok"]["stats"]) == [
        "prompt",
        "retrieval",
        "config",
        "time",
    ]  # no additive fields unless set
    assert list(raw["ok"]["stats"]["config"]) == [
        "augmented_generation",
        "provider",
        "model",
        "temperature",
        "tokens",
    ]
    assert raw["ok"]["stats"]["retrieval"]["stats"]["embedder"]["database"]["neo4j"]["vertices"] == 1
    assert raw["ok"]["stats"]["time"] == {"secs": 11, "nanos": 820792699}
    write_result(path, ErrorResult("boom"))
    assert json.loads(path.read_text()) == {"error": "boom"}


# ---------------------------------------------------------------- reading Rust-tool files


def test_reads_a_real_rust_tool_file(med_kag: Path):
    folder = med_kag / "results" / "pubmedqa" / "12377809"
    native = read_result(folder / "wekgr-qwen35-9b-ollama-native.json")
    assert isinstance(native, OkResult)
    assert native.stats.time is not None and native.stats.retrieval is None
    assert native.stats.config.model == "qwen3.5:9b" and native.stats.config.augmented_generation is None
    kag = read_result(folder / "wekgr-qwen35-9b-ollama-neo4j-embedding-triplet-formal.json")
    raw = json.loads((folder / "wekgr-qwen35-9b-ollama-neo4j-embedding-triplet-formal.json").read_text())
    db = raw["ok"]["stats"]["retrieval"]["stats"]["embedder"]["database"]["neo4j"]
    r = kag.stats.retrieval
    assert r.retriever == "embedder" and r.database.backend == "neo4j"
    assert (r.database.vertices, r.database.relationships, r.database.properties) == (
        db["vertices"], db["relationships"], db["properties"],
    )  # fmt: skip
    assert len(r.vector) == 768
    assert kag.stats.config.augmented_generation == AugmentedGeneration(
        "neo4j-embedding-triplet-formal", "neo4j"
    )


RUST_OK = b"""{
  "ok": {
    "result": "A",
    "stats": {
      "prompt": "Q",
      "retrieval": null,
      "config": {"augmented_generation": null, "provider": "ollama", "model": "m",
                 "temperature": 0.0, "tokens": 10000},
      "time": {"secs": 11, "nanos": 820792699}
    }
  }
}"""


def test_parses_the_rust_shapes():
    ok = parse_result(RUST_OK)
    assert ok == OkResult(
        "A", OkStats(prompt="Q", config=ModelConfig("ollama", "m", 0.0, 10000), time=Timing(11, 820792699))
    )
    assert parse_result(b'{"error": "Failed during the knowledge retrieval phase (KAG)"}') == ErrorResult(
        "Failed during the knowledge retrieval phase (KAG)"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not valid JSON"),
        (b'{"ok": {"result": "A"', "not valid JSON"),
        (b"[]", "exactly one key"),
        (b"{}", "exactly one key"),
        (b'{"ok": {"result": "a"}, "error": "x"}', "exactly one key"),
        (b'{"error": 5}', "'error' must be a string"),
        (b'{"ok": {"stats": {}}}', "'ok.result' must be a string"),
        (b'{"ok": {"result": null}}', "'ok.result' must be a string"),
        (b'{"ok": "A"}', "exactly one key"),
        (b'{"result": "A"}', "exactly one key"),
        (b"\xff", "not valid JSON"),
    ],
)
def test_other_shapes_are_unreadable(data: bytes, message: str):
    with pytest.raises(UnreadableResult, match=message):
        parse_result(data)


def test_read_result_names_the_file(tmp_path: Path):
    path = tmp_path / "bad.json"
    path.write_bytes(b"{")
    with pytest.raises(UnreadableResult, match=f"^{path}: not valid JSON"):
        read_result(path)
    with pytest.raises(UnreadableResult, match="missing.json"):
        read_result(tmp_path / "missing.json")


def test_mistyped_optional_numbers_are_absent():
    raw = {
        "ok": {
            "result": "b",
            "stats": {
                "prompt": 42,
                "time": {"secs": "11", "nanos": 1},
                "retrieval": {
                    "result": "r",
                    "stats": {
                        "embedder": {
                            "database": {"neo4j": {"vertices": "x", "relationships": 2}},
                            "time": {"secs": 1},
                        }
                    },
                },
                "config": {"temperature": "hot", "tokens": 1.5},
            },
        }
    }
    result = parse_result(orjson.dumps(raw))
    assert isinstance(result, OkResult)
    s = result.stats
    assert (s.prompt, s.time) == (None, None)
    assert s.retrieval.database == DatabaseStats("neo4j", None, 2, None, None)
    assert s.retrieval.time is None
    assert (s.config.temperature, s.config.tokens) == (0.0, None)


# ---------------------------------------------------------------- the tree


def test_setup_from_name():
    assert setup_from_name("wekgr-qwen.json", "wekgr-") == "qwen"
    assert setup_from_name("qwen.json", "") == "qwen"
    assert setup_from_name("wekgr-.json", "wekgr-") is None  # empty setup
    assert setup_from_name("qwen.json.tmp", "") is None
    assert setup_from_name("other-qwen.json", "wekgr-") is None
    assert setup_from_name("wekgr-qwen.JSON", "wekgr-") is None


def test_list_results_ignores_tmp_and_never_follows_symlinks(tmp_path: Path):
    root = tmp_path / "r"
    write_result(result_path(root, "d", "1", "", "a"), ErrorResult("x"))
    write_result(result_path(root, "d", "2", "", "a"), ErrorResult("x"))
    (root / "d" / "1" / "b.json.tmp").write_bytes(b"{")
    (root / "d" / "1" / "notes.txt").write_text("x")
    outside = tmp_path / "outside"
    write_result(result_path(outside, "d", "9", "", "a"), ErrorResult("x"))
    os.symlink(outside / "d" / "9" / "a.json", root / "d" / "1" / "c.json")  # file symlink
    os.symlink(outside / "d" / "9", root / "d" / "3")  # question symlink
    os.symlink(outside / "d", root / "e")  # dataset symlink
    listing = list_results(root)
    assert [(f.dataset, f.question, f.setup) for f in listing.files] == [("d", "1", "a"), ("d", "2", "a")]
    ignored = sorted(Path(p).relative_to(root).as_posix() for p in listing.ignored)
    assert ignored == ["d/1/b.json.tmp", "d/1/c.json", "d/1/notes.txt", "d/3", "e"]
    with pytest.raises(InputError, match="results directory not found"):
        list_results(tmp_path / "missing")


def test_write_is_atomic_over_an_existing_file(tmp_path: Path):
    path = tmp_path / "d" / "q" / "s.json"
    write_result(path, ErrorResult("first"))
    inode = path.stat().st_ino
    write_result(path, ErrorResult("second"))
    assert read_result(path) == ErrorResult("second")
    assert path.stat().st_ino != inode  # replaced by rename, not rewritten in place

"""Rows written to the index many at a time (kag.view.bulk): stored as when written one by
one, value for value and type for type."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import kag.view.index as index_module
from kag.datasets import load_datasets
from kag.view import bulk
from kag.view.index import Index, Tree
from kag.view.record_rows import (
    ANSWER,
    DATASET,
    DETAIL,
    EPOCH,
    ERROR,
    EVIDENCE,
    EXTRACTED,
    JUDGED,
    KIND,
    NAMES,
    REASON,
    REL,
    TREE,
    VERTICES,
    VOTE,
)
from tests.view.helpers import make_tree

# Every value of every row, and its SQLite type (a REAL 1.0 is no INTEGER 1, a BLOB no TEXT).
FILES = f"SELECT *, {', '.join(f'typeof({name})' for name in NAMES)} FROM files ORDER BY tree, rel"
FOLDERS = "SELECT *, typeof(sig), typeof(files) FROM folders ORDER BY tree, rel"


def _rows(tmp_path: Path) -> list[tuple[object, ...]]:
    """The rows a scan of the view tests' tree stores."""
    datasets, tree = make_tree(tmp_path)
    rows: list[tuple[object, ...]] = []
    index = Index(tmp_path / "index.sqlite", load_datasets(datasets), [Tree("", str(tree))], "", None)
    index.scan(rows.extend)
    index.close()
    return rows


def _databases() -> tuple[sqlite3.Connection, sqlite3.Connection]:
    """Two empty indexes: one written many rows at a time, one a row at a time."""
    fast, plain = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    for db in (fast, plain):
        db.execute(index_module._FILES)
        db.execute(index_module._FOLDERS)
    return fast, plain


@pytest.fixture(params=[True, False], ids=["nan-as-null", "none"])
def as_null(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both ways of binding a None among values: a NaN (what SQLite stores as NULL), and
    None itself (with a SQLite that would store a NaN)."""
    if not request.param:
        monkeypatch.setattr(bulk, "_nan_binds_null", lambda: False)
    return bool(request.param)


def test_this_sqlite_stores_a_nan_as_null() -> None:
    # The rows' None are bound as NaN here (the other way is tested by forcing it).
    assert bulk._nan_binds_null()
    db = sqlite3.connect(":memory:")
    assert db.execute("SELECT ? IS NULL", (float("nan"),)).fetchone() == (1,)


def test_rows_written_without_their_empty_rare_columns_are_the_rows_given(
    tmp_path: Path, as_null: bool
) -> None:
    rows = _rows(tmp_path)
    values = {EXTRACTED: "A", ERROR: "boom", REASON: "bad", EVIDENCE: "10", VOTE: "B", JUDGED: "k"}
    graded = next(row for row in rows if row[6] == "graded" and all(row[c] is None for c in values))
    for column, value in values.items():  # each rare column filled in a row of its own
        row = list(graded)
        row[1], row[column] = f"med/extra/{column}.json", value
        rows.append(tuple(row))
    full = list(graded)
    for column, value in values.items():
        full[column] = value
    fast, plain = _databases()
    bulk.insert_rows(fast, [tuple(full)])  # then replaced by a row with none of them
    bulk.insert_rows(fast, rows)
    plain.executemany(index_module._INSERT, rows)
    assert fast.execute(FILES).fetchall() == plain.execute(FILES).fetchall()
    assert len(rows) == fast.execute("SELECT count(*) FROM files").fetchone()[0]
    # A path given twice in one part keeps its last row, whichever of the two has values.
    for twice in ([tuple(full), graded], [graded, tuple(full)]):
        bulk.insert_rows(fast, [*rows[:3], *twice])
        plain.executemany(index_module._INSERT, [*rows[:3], *twice])
        assert fast.execute(FILES).fetchall() == plain.execute(FILES).fetchall()


@pytest.mark.parametrize("count", [1, 2, 3, 64, 65, 66, 75, 76, 77, 153, 1000])
def test_rows_written_many_to_a_statement_are_the_rows_written_one_by_one(
    tmp_path: Path, count: int, as_null: bool
) -> None:
    rows = _rows(tmp_path)
    graded = next(row for row in rows if row[6] == "graded" and row[ERROR] is None)
    many = []
    for n in range(count):
        row = list(graded)
        # Some paths given twice, apart and within a statement's rows; some rows with a
        # rare column, without a response or a vertex count, of another dataset, kind,
        # epoch or tree, or without a detail (bytes elsewhere).
        at = n % max(1, count - 80) if n % 7 == 0 else n - 1 if n % 3 == 0 else n
        row[REL] = f"med/many/{at}.json"
        row[ERROR] = f"boom {n}" if n % 5 == 0 else None
        row[ANSWER] = None if n % 5 == 0 else row[ANSWER]
        row[VERTICES] = n if n % 2 else None
        if n % 11 == 4:
            row[DATASET], row[KIND], row[EPOCH], row[DETAIL] = "other", "open", 2, None
        if n % 13 == 6:
            row[TREE] = "/another/tree"
        many.append(tuple(row))
    alike = [row for row in many if row[ERROR] is None and row[TREE] == graded[TREE]]
    fast, plain = _databases()
    for given in (many, alike, [*rows, *many]):
        bulk.insert_rows(fast, given)
        plain.executemany(index_module._INSERT, given)
        assert fast.execute(FILES).fetchall() == plain.execute(FILES).fetchall()
    folders = [(graded[TREE], f"med/{n % 50}", "med", str(n), bytes([n % 256]), n) for n in range(count)]
    folders += [("/another/tree", "med/x", "x", "x", b"", 0)] if count % 2 else []
    bulk.insert_many(fast, "folders", index_module._FOLDER_NAMES, folders)
    plain.executemany(index_module._INSERT_FOLDER, folders)
    assert fast.execute(FOLDERS).fetchall() == plain.execute(FOLDERS).fetchall()


def test_a_value_all_the_rows_share_is_bound_once_per_statement() -> None:
    # The tree and the dataset are the statement's first parameters, given once; each
    # row's others follow, in their order.
    sql = bulk.insert_statement("t", ("tree", "rel", "dataset", "n"), 2, (0, 2))
    assert sql.endswith("VALUES (?1, ?3, ?2, ?4), (?1, ?5, ?2, ?6)")
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (tree, rel, dataset, n)")
    db.execute(sql, ["T", "D", "a", 1, "b", 2])
    assert db.execute("SELECT * FROM t").fetchall() == [("T", "a", "D", 1), ("T", "b", "D", 2)]


def test_a_row_of_another_width_is_refused(tmp_path: Path) -> None:
    fast, _ = _databases()
    with pytest.raises(ValueError, match="19 values"):
        bulk.insert_rows(fast, [("tree", "rel")])

"""`kag graph import`: Neo4j admin-import CSV headers and values, every bad input as a
one-line error naming the file, line and column (exit 2, nothing written), the database
it builds (typed columns, a table per relationship type, embeddings), and the command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.errors import InputError, UsageError
from kag.retrieval.graph_csv import load_graph, read_nodes, read_relationships
from kag.retrieval.importer import import_graph
from kag.retrieval.ladybug_writer import table_names
from tests.fakeserver import FakeServer
from tests.graph_helpers import TokenEmbedder, einstein_files, write_csv

ladybug = pytest.importorskip("ladybug")


def text_file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------- reading


def test_node_header_types_arrays_labels_and_ignored_columns(tmp_path: Path) -> None:
    path = text_file(
        tmp_path,
        "n.csv",
        (
            "ui:ID(MeSH),:LABEL,name,age:int,score:double,ok:boolean,tags:string[],counts:long[],skip:IGNORE,born:date\n"
            'D1,MeSH;MeSHDescriptor; MeSH ,"Intubation, Intratracheal",7,0.5,TRUE,a;b,1;2,zzz,2001-02-03\n'
            "D2,,x,,,false,,,,\n"
        ),
    )
    header, rows = read_nodes(path)
    assert [(c.name, c.role, c.kind, c.array) for c in header.properties] == [
        ("name", "property", "string", False),
        ("age", "property", "int", False),
        ("score", "property", "float", False),
        ("ok", "property", "boolean", False),
        ("tags", "property", "string", True),
        ("counts", "property", "int", True),
        ("born", "property", "string", False),
    ]
    first, second = rows
    assert first.key == "D1" and first.labels == ["MeSH", "MeSHDescriptor"]
    assert first.properties == {
        "name": "Intubation, Intratracheal",
        "age": 7,
        "score": 0.5,
        "ok": True,
        "tags": ["a", "b"],
        "counts": [1, 2],
        "born": "2001-02-03",
        "ui": "D1",
    }
    assert second.labels == [] and second.properties == {"name": "x", "ok": False, "ui": "D2"}
    assert first.where == f"{path}:2"


def test_relationship_rows(tmp_path: Path) -> None:
    path = text_file(
        tmp_path,
        "r.csv",
        ":START_ID(MeSH),:END_ID(MeSH),:TYPE,isPreferred:boolean,label\nD1,D2,HAS_CONCEPT,true,\n",
    )
    _, rows = read_relationships(path)
    assert [(r.start, r.end, r.type, r.properties) for r in rows] == [
        ("D1", "D2", "HAS_CONCEPT", {"isPreferred": True})
    ]


NODES_OK = "id:ID,name\na,A\nb,B\n"
RELS_OK = ":START_ID,:END_ID,:TYPE\na,b,R\n"

BAD_INPUTS = [
    # (node file text, relationship file text, expected message (after the file name))
    ("", RELS_OK, "n.csv: empty file (expected a header line)"),
    ("name\nx\n", RELS_OK, "n.csv:1: a node file needs exactly one ID column (like 'id:ID'), found 0"),
    ("id:ID,k:ID\na,b\n", RELS_OK, "n.csv:1: a node file needs exactly one ID column"),
    (
        "id:ID,age:integer\na,1\n",
        RELS_OK,
        "n.csv:1: header field 'age:integer': unknown type 'integer'",
    ),
    ("id:ID,:int\na,1\n", RELS_OK, "n.csv:1: header field ':int': a property column needs a name"),
    ("id:ID,name,Name\na,x,y\n", RELS_OK, "n.csv:1: columns 'name' and 'Name' name the same property"),
    (
        "id:ID,na`me\na,x\n",
        RELS_OK,
        "n.csv:1: column 'na`me': a property name cannot contain a backtick",
    ),
    ("id:ID,_labels\na,x\n", RELS_OK, "n.csv:1: property name '_labels' is reserved"),
    ("id:ID,embedding\na,x\n", RELS_OK, "n.csv:1: property name 'embedding' is reserved"),
    (
        "id:ID,:START_ID\na,b\n",
        RELS_OK,
        "n.csv:1: a node file has no :START_ID, :END_ID or :TYPE column",
    ),
    ("id:ID,name\na,A\nb\n", RELS_OK, "n.csv:3: 1 field(s), the header has 2"),
    ("id:ID,age:int\na,1\nb,old\n", RELS_OK, "n.csv:3: column 'age': 'old' is not an int"),
    ("id:ID,ok:boolean\na,yes\n", RELS_OK, "n.csv:2: column 'ok': 'yes' is not a boolean"),
    ("id:ID,xs:float[]\na,1;x\n", RELS_OK, "n.csv:2: column 'xs': '1;x' is not a float array"),
    ("id:ID,name\na,A\n,B\n", RELS_OK, "n.csv:3: empty node ID"),
    ('id:ID,name\na,"A\n', RELS_OK, "n.csv:2: not valid CSV (unexpected end of data)"),
    ("id:ID,name\na,A\na,B\n", RELS_OK, "n.csv:3: node ID 'a' already defined at"),
    (
        NODES_OK,
        ":START_ID,:TYPE\na,R\n",
        "r.csv:1: a relationship file needs exactly one :END_ID column",
    ),
    (
        NODES_OK,
        ":START_ID,:END_ID,:TYPE,:LABEL\na,b,R,X\n",
        "r.csv:1: a relationship file has no :ID or :LABEL column",
    ),
    (
        NODES_OK,
        ":START_ID,:END_ID,:TYPE\na,z,R\n",
        "r.csv:2: relationship refers to node ID 'z', which no node file defines",
    ),
    (NODES_OK, ":START_ID,:END_ID,:TYPE\na,b,\n", "r.csv:2: empty :TYPE"),
    (
        NODES_OK,
        ":START_ID,:END_ID,:TYPE\na,b,R`X\n",
        "r.csv:2: relationship type 'R`X' contains a backtick",
    ),
    (
        NODES_OK,
        ":START_ID,:END_ID,:TYPE,_ID\na,b,R,1\n",
        "r.csv:1: relationship property name '_ID' is reserved",
    ),
    (
        NODES_OK,
        ":START_ID,:END_ID,:TYPE,w:int\na,b,R,1.5\n",
        "r.csv:2: column 'w': '1.5' is not an int",
    ),
]


@pytest.mark.parametrize(
    ("nodes", "rels", "message"), BAD_INPUTS, ids=[m.split(": ", 1)[1][:40] for _, _, m in BAD_INPUTS]
)
def test_bad_input_names_file_line_and_column(tmp_path: Path, nodes: str, rels: str, message: str) -> None:
    n, r = text_file(tmp_path, "n.csv", nodes), text_file(tmp_path, "r.csv", rels)
    with pytest.raises(InputError) as info:
        load_graph([n], [r], reserved=("embedding",))
    assert str(info.value).startswith(str(tmp_path / message.split(":", 1)[0]))
    assert message.split(": ", 1)[1] in str(info.value)


def test_property_types_must_agree_across_files(tmp_path: Path) -> None:
    one = text_file(tmp_path, "one.csv", "id:ID,age:int\na,1\n")
    two = text_file(tmp_path, "two.csv", "id:ID,age\nb,x\n")
    with pytest.raises(
        InputError, match=r"two.csv:1: node property 'age' is STRING here but INT64 in an earlier file"
    ):
        load_graph([one, two], [])
    cased = text_file(tmp_path, "cased.csv", "id:ID,Age:int\nc,1\n")
    with pytest.raises(InputError, match="node property 'Age' differs only in case from 'age'"):
        load_graph([one, cased], [])


def test_relationship_tables_are_named_by_type_when_they_can_be() -> None:
    tables = table_names(["TREATS", "treats", "has part", "Node", "R_1"])
    assert tables["R_1"] == "R_1" and tables["TREATS"] == "TREATS"
    assert (
        tables["has part"].startswith("Rel")
        and tables["Node"].startswith("Rel")
        and tables["treats"].startswith("Rel")
    )
    assert len({t.lower() for t in tables.values()}) == 5


# ---------------------------------------------------------------- the database


def test_the_database_holds_typed_columns_tables_per_type_and_embeddings(tmp_path: Path) -> None:
    nodes, rels = einstein_files(tmp_path)
    extra = write_csv(
        tmp_path / "more.csv", [":START_ID", ":END_ID", ":TYPE", "note"], [("3", "6", "twin city", "sister")]
    )
    embedder = TokenEmbedder()
    report = import_graph(tmp_path / "kg.lbug", [str(nodes)], [str(rels), str(extra)], embedder)
    assert (
        report.nodes,
        report.relationships,
        report.relationship_types,
        report.embedded,
        report.dimension,
    ) == (6, 7, 5, 6, 32)
    assert report.model == "test:tokens"
    db = ladybug.Database(str(tmp_path / "kg.lbug"), read_only=True)
    conn = ladybug.Connection(db)
    try:
        columns = {r[1]: r[2] for r in conn.execute("CALL table_info('Node') RETURN *").get_all()}
        assert columns == {
            "id": "STRING",
            "_labels": "STRING[]",
            "name": "STRING",
            "age": "INT64",
            "tags": "STRING[]",
            "founded": "INT64",
            "embedding": "BLOB",
        }
        tables = {r[1] for r in conn.execute("CALL show_tables() RETURN *").get_all()}
        assert {"Node", "KagMeta", "educatedAt", "bornIn", "award", "spouse"} <= tables
        meta = dict(conn.execute("MATCH (m:KagMeta) RETURN m.key, m.value").get_all())
        assert meta["format"] == "kag-graph/1"
        assert json.loads(meta["embeddings"]) == {
            "embedding": {"model": "test:tokens", "dimension": 32, "property": "name"}
        }
        types = json.loads(meta["relationship_types"])
        assert sorted(types.values()) == ["award", "bornIn", "educatedAt", "spouse", "twin city"]
        row = conn.execute(
            "MATCH (n:Node) WHERE n.id = '1' RETURN n._labels, n.age, n.tags, n.embedding"
        ).get_all()[0]
        assert row[:3] == [["Person", "Scientist"], 76, ["physics", "relativity"]]
        assert np.allclose(np.frombuffer(row[3], "<f4"), embedder.vector("Albert Einstein"))
        twin = conn.execute(
            "MATCH (a:Node)-[r]->(b:Node) WHERE a.id = '3' RETURN label(r), r.note, b.id"
        ).get_all()
        assert twin == [[next(t for t, v in types.items() if v == "twin city"), "sister", "6"]]
    finally:
        conn.close()
        db.close()


TRICKY = [
    "with, comma",
    'with "quotes"',
    "two\nlines",
    "back\\slash",
    "  spaced  ",
    "ünïcödé ✓",
    "[1,2]",
    "NULL",
]


def test_relationship_properties_survive_both_write_paths(tmp_path: Path) -> None:
    """Scalar-only tables are loaded with COPY FROM a temporary CSV, tables with list
    properties with batched CREATE; values come back the same either way."""
    nodes = write_csv(tmp_path / "n.csv", ["id:ID", "name"], [("a", "A"), ("b", "B")])
    scalar = write_csv(
        tmp_path / "r1.csv",
        [":START_ID", ":END_ID", ":TYPE", "s", "f:double", "ok:boolean", "n:int"],
        [("a", "b", "S", text, 1.5e-7 * i, i % 2 == 0, i) for i, text in enumerate(TRICKY)],
    )
    lists = write_csv(
        tmp_path / "r2.csv", [":START_ID", ":END_ID", ":TYPE", "tags:string[]"], [("b", "a", "L", "x;y, z")]
    )
    import_graph(tmp_path / "kg.lbug", [str(nodes)], [str(scalar), str(lists)], TokenEmbedder())
    db = ladybug.Database(str(tmp_path / "kg.lbug"), read_only=True)
    conn = ladybug.Connection(db)
    try:
        rows = conn.execute(
            "MATCH (a:Node)-[r:S]->(b:Node) RETURN r.n, r.s, r.f, r.ok ORDER BY r.n"
        ).get_all()
        listed = conn.execute("MATCH (a:Node)-[r:L]->(b:Node) RETURN a.id, b.id, r.tags").get_all()
    finally:
        conn.close()
        db.close()
    assert rows == [[i, text, 1.5e-7 * i, i % 2 == 0] for i, text in enumerate(TRICKY)]
    assert listed == [["b", "a", ["x", "y, z"]]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kg.lbug", "n.csv", "r1.csv", "r2.csv"]


def test_nodes_without_the_embedded_property_get_no_embedding(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nodes = write_csv(tmp_path / "n.csv", ["id:ID", "name", "title"], [("a", "Alpha", "t"), ("b", "", "t")])
    report = import_graph(tmp_path / "kg.lbug", [str(nodes)], [], TokenEmbedder())
    assert (report.nodes, report.embedded) == (2, 1)
    assert "1 of 2 node(s) have no 'name' property" in caplog.text
    with pytest.raises(UsageError, match="no node has the property 'label' to embed"):
        import_graph(tmp_path / "other.lbug", [str(nodes)], [], TokenEmbedder(), embed_property="label")


def test_an_existing_database_is_kept_unless_replaced(tmp_path: Path) -> None:
    nodes, rels = einstein_files(tmp_path)
    target = tmp_path / "kg.lbug"
    import_graph(target, [str(nodes)], [str(rels)], TokenEmbedder())
    before = target.read_bytes()
    with pytest.raises(UsageError, match=r"kg.lbug: already exists \(use --replace to rebuild it\)"):
        import_graph(target, [str(nodes)], [str(rels)], TokenEmbedder())
    bad = text_file(tmp_path, "bad.csv", ":START_ID,:END_ID,:TYPE\n1,99,R\n")
    with pytest.raises(InputError):
        import_graph(target, [str(nodes)], [bad], TokenEmbedder(), replace=True)
    assert target.read_bytes() == before  # a failed rebuild leaves the old database
    report = import_graph(target, [str(nodes)], [], TokenEmbedder(), replace=True)
    assert report.relationships == 0
    assert sorted(p.name for p in tmp_path.iterdir() if "lbug" in p.name) == [
        "kg.lbug"
    ]  # no staging leftovers


def test_a_directory_in_the_way_is_a_usage_error(tmp_path: Path) -> None:
    nodes, _ = einstein_files(tmp_path)
    (tmp_path / "kg.lbug").mkdir()
    with pytest.raises(UsageError, match="kg.lbug: is a directory, not a Ladybug database file"):
        import_graph(tmp_path / "kg.lbug", [str(nodes)], [], TokenEmbedder(), replace=True)


def test_an_embedder_that_fails_leaves_nothing_behind(tmp_path: Path) -> None:
    nodes, rels = einstein_files(tmp_path)

    class Broken(TokenEmbedder):
        def embed(self, texts: Any) -> Any:
            return np.full((len(texts), 4), np.nan, np.float32)

    with pytest.raises(InputError, match="embedding model test:tokens: returned NaN or infinite values"):
        import_graph(tmp_path / "kg.lbug", [str(nodes)], [str(rels)], Broken())
    assert not any("lbug" in p.name for p in tmp_path.iterdir())


# ---------------------------------------------------------------- the command


CONFIG = """
[providers.fe]
type = "FastEmbed"

[providers.ol]
type = "Ollama"

[databases.kg]
type = "Ladybug"
path = "{{ env('GRAPH_DIR') }}/kg.lbug"

[databases.neo]
type = "Neo4j"
uri = "127.0.0.1:9"
password = "pw"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "config.toml").write_text(CONFIG)
    einstein_files(tmp_path)
    monkeypatch.setenv("GRAPH_DIR", str(tmp_path))
    return tmp_path


def run(project: Path, *extra: str, nodes: str = "nodes.csv") -> Any:
    return CliRunner().invoke(
        app,
        [
            "graph",
            "import",
            "-c",
            str(project / "config.toml"),
            "--nodes",
            str(project / nodes),
            "--relationships",
            str(project / "rels.csv"),
            *extra,
        ],
    )


def test_command_with_the_bundled_model(project: Path) -> None:
    result = run(project, "--database", "kg")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        f"database       {project / 'kg.lbug'}",
        "nodes          6 (6 embedded)",
        "relationships  6 (4 type(s))",
        "embeddings     bundled:all-MiniLM-L6-v2-int8, 384 dimensions, property 'embedding'",
    ]
    assert lines[4].startswith("time           read ")
    # Not a terminal: plain progress lines, at least one per stage as it completes.
    assert result.stderr.splitlines() == [
        "kag: progress: embedding nodes 6/6 (100%)",
        "kag: progress: writing nodes 6/6 (100%)",
        "kag: progress: writing relationships 6/6 (100%)",
    ]
    assert CliRunner().invoke(app, ["-q", "graph", "import", "-c", str(project / "config.toml"),
        "--nodes", str(project / "nodes.csv"), "--database", "kg", "--replace"]).stderr == ""  # fmt: skip


def test_command_reports_progress_while_it_embeds_and_writes(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a terminal, a plain line per batch once the interval has passed (0 here)."""
    import kag.render.progress

    monkeypatch.setattr(kag.render.progress, "PROGRESS_INTERVAL", 0.0)
    names = [(str(i), "Thing", f"thing number {i}", "", "", "") for i in range(1100)]
    write_csv(
        project / "many.csv", ["id:ID", ":LABEL", "name", "age:int", "tags:string[]", "founded:long"], names
    )
    result = CliRunner().invoke(
        app,
        ["graph", "import", "-c", str(project / "config.toml"), "--nodes", str(project / "many.csv"),
         "--database", "kg"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[1] == "nodes          1100 (1100 embedded)"
    assert result.stderr.splitlines() == [
        "kag: progress: embedding nodes 512/1100 (46%)",
        "kag: progress: embedding nodes 1024/1100 (93%)",
        "kag: progress: embedding nodes 1100/1100 (100%)",
        "kag: progress: writing nodes 1100/1100 (100%)",
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--database", "nope"], "databases.nope: not defined (the [databases] tables are: kg, neo)"),
        (
            ["--database", "neo"],
            "Neo4j at 127.0.0.1:9 (database 'neo4j'): ServiceUnavailable: ",
        ),
        (["--database", "kg", "--provider", "zz"], "--provider 'zz': not defined in"),
        (
            ["--database", "kg", "--provider", "ol"],
            "--provider 'ol' is an Ollama provider: give the embedding model with --model",
        ),
        (["--database", "kg", "--embed-property", "title"], "no node has the property 'title' to embed"),
        (["--database", "kg", "--index", "name"], "property name 'name' is reserved"),
    ],
)
def test_command_errors_are_one_line_with_exit_2(project: Path, extra: list[str], message: str) -> None:
    result = run(project, *extra)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("kag: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not (project / "kg.lbug").exists()


def test_command_embeds_through_a_configured_provider(project: Path) -> None:
    """The configuration's Ollama provider embeds the nodes (one request per batch, with the
    runner's retries); a provider that keeps failing is one line naming it, exit 2."""
    with FakeServer(faults={"Einstein": ["503", "ok"]}) as server:
        with (project / "config.toml").open("a") as handle:
            handle.write(f'\n[providers.srv]\ntype = "Ollama"\nurl = "{server.url}"\n')
        result = run(project, "--database", "kg", "--provider", "srv", "--model", "emb")
        assert result.exit_code == 0, result.stderr
        assert result.stdout.splitlines()[3] == (
            "embeddings     Ollama:emb, 8 dimensions, property 'embedding'"
        )
        embeds = [r for r in server.requests if r.path == "/api/embed"]
        assert [r.behaviour for r in embeds] == ["503", "ok"]  # retried once, then one batch
        assert embeds[-1].model == "emb" and len(embeds[-1].texts or []) == 6
    with FakeServer(default="404") as server:
        (project / "config.toml").write_text(
            CONFIG + f'\n[providers.srv]\ntype = "Ollama"\nurl = "{server.url}"\n'
        )
        result = run(project, "--database", "kg", "--provider", "srv", "--model", "emb", "--replace")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("kag: error: embedding provider 'srv' (model 'emb'): ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_command_bad_csv_and_missing_files(project: Path) -> None:
    (project / "bad.csv").write_text("id:ID,age:int\n1,old\n")
    result = run(project, "--database", "kg", nodes="bad.csv")
    assert result.exit_code == 2
    assert result.stderr == f"kag: error: {project / 'bad.csv'}:2: column 'age': 'old' is not an int\n"
    result = run(project, "--database", "kg", nodes="missing.csv")
    assert (
        result.exit_code == 2
        and result.stderr == f"kag: error: {project / 'missing.csv'}: nodes CSV file not found\n"
    )
    result = CliRunner().invoke(
        app,
        [
            "graph",
            "import",
            "-c",
            str(project / "none.toml"),
            "--database",
            "kg",
            "--nodes",
            str(project / "nodes.csv"),
        ],
    )
    assert result.exit_code == 2 and "none.toml: configuration file not found" in result.stderr


def test_command_csv_files_that_cannot_be_read_say_which_file_they_are(project: Path) -> None:
    rows = b"".join(b"n%05d,Person\n" % n for n in range(2000))  # past the decoder's first chunk
    (project / "latin1.csv").write_bytes(b"id:ID,name\n" + rows + b"n,Andr\xe9\n")
    result = run(project, "--database", "kg", nodes="latin1.csv")
    line, byte = 2002, len(b"id:ID,name\n" + rows + b"n,Andr")
    assert (result.exit_code, result.stdout) == (2, "")
    assert (
        result.stderr
        == f"kag: error: {project / 'latin1.csv'}:{line}: nodes CSV file is not UTF-8 text (byte {byte})\n"
    )
    (project / "rels.csv").unlink()
    (project / "rels.csv").mkdir()
    result = run(project, "--database", "kg")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"kag: error: {project / 'rels.csv'}: relationships CSV file is a directory\n"
    assert not (project / "kg.lbug").exists()


def test_command_refuses_to_overwrite_without_replace(project: Path) -> None:
    (project / "kg.lbug").write_bytes(b"precious")
    result = run(project, "--database", "kg")
    assert result.exit_code == 2 and "kg.lbug: already exists (use --replace to rebuild it)" in result.stderr
    assert (project / "kg.lbug").read_bytes() == b"precious"

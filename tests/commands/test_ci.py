"""CI outputs: `--format junit` (valid against Jenkins' schema, read back by junitparser),
the GitHub step summary and workflow commands, and `kag stats compare --against`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.errors import InputError
from kag.grading.compare.against import EXPORT_VERSION, read_previous
from kag.render.export import JSONL_VERSION
from kag.render.github import MAX_ANNOTATIONS, cap_summary, escape_data, escape_property, workflow_annotations
from kag.render.junit import xml_text
from tests.bench_helpers import bench_args, make_project
from tests.conftest import write_ok

XSD = Path(__file__).parents[1] / "data" / "junit" / "junit-10.xsd"

runner = CliRunner()


def kag(*args: str | Path, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    base = {"GITHUB_ACTIONS": "", "GITHUB_STEP_SUMMARY": ""}
    return runner.invoke(app, [str(a) for a in args], env={**base, **(env or {})})


@pytest.fixture
def example(repo: Path) -> list[str]:
    return ["-d", str(repo / "examples/dataset/datasets.json"), "-r", str(repo / "examples/results")]


def _validate(text: str) -> None:
    xmlschema = pytest.importorskip("xmlschema")
    xmlschema.XMLSchema(str(XSD)).validate(text)


def _junit_counts(path: Path) -> dict[str, tuple[int, int, int, int]]:
    junitparser = pytest.importorskip("junitparser")
    xml = junitparser.JUnitXml.fromfile(str(path))
    return {s.name: (s.tests, s.failures, s.errors, s.skipped) for s in xml}


def test_stats_junit_is_valid_and_counts_equal_the_json(example: list[str], tmp_path: Path) -> None:
    out = tmp_path / "junit.xml"
    result = kag("stats", *example, "--format", "junit", "-o", out, "--fail-under", "80")
    assert result.exit_code == 1, result.stderr  # the gate fails: the report is still written
    text = out.read_text()
    _validate(text)
    report = json.loads(kag("stats", *example, "--format", "json").stdout)
    counts = _junit_counts(out)
    expected = {}
    for s in report["setups"]:
        for dataset, m in s["per_dataset"].items():
            expected[f"{s['setup']}/{dataset}"] = (m["total"], m["incorrect"], m["errors"])
    got = {name: c[:3] for name, c in counts.items() if name != "kag.gates"}
    # skipped files add testcases of their own
    skipped = sum(c[3] for c in counts.values())
    assert skipped == report["skipped_files"] > 0
    assert {k: (t - counts[k][3], f, e) for k, (t, f, e) in got.items()} == expected
    assert counts["kag.gates"] == (1, 1, 0, 0)
    assert "--fail-under 80" in text and "ACC% below 80" in text
    assert '<property name="kag_version"' in text and '<property name="model"' in text


def test_stats_junit_extracted_counts_not_extracted_as_errors(example: list[str]) -> None:
    result = kag("stats", *example, "--format", "junit", "--grade", "extracted", "--extract", "letter")
    assert result.exit_code == 0, result.stderr
    _validate(result.stdout)
    report = json.loads(
        kag("stats", *example, "--format", "json", "--grade", "extracted", "--extract", "letter").stdout
    )
    o = report["setups"][0]["overall"]
    assert 'name="grade" value="extracted"' in result.stdout
    suites = [s for s in report["setups"] if s["setup"] == report["setups"][0]["setup"]]
    assert suites and o["total"] >= 1


def test_compare_junit_has_the_gate_suite(example: list[str]) -> None:
    result = kag(
        "stats",
        "compare",
        *example,
        "--format",
        "junit",
        "--fail-if-worse-than",
        "qwen35-9b-kag",
        "--resamples",
        "50",
    )
    assert result.exit_code in (0, 1), result.stderr
    _validate(result.stdout)
    assert 'name="kag.gates"' in result.stdout and "--fail-if-worse-than qwen35-9b-kag" in result.stdout


def test_xml_text_escapes_what_xml_forbids() -> None:
    assert xml_text("a\x00b\x1bc\td\ne\ufffe") == "a\\x00b\\x1bc\td\ne\\ufffe"


def test_junit_with_control_characters_is_valid(tmp_path: Path, repo: Path) -> None:
    tree = tmp_path / "results"
    shutil.copytree(repo / "examples/results", tree)
    target = next(p for p in sorted(tree.rglob("*.json")) if '"ok"' in p.read_text())
    doc = json.loads(target.read_text())
    doc["ok"]["result"] = 'Z\x01\x1b[31m<&>"]]>'
    target.write_text(json.dumps(doc))
    result = kag("stats", "-d", repo / "examples/dataset/datasets.json", "-r", tree, "--format", "junit")
    assert result.exit_code == 0, result.stderr
    _validate(result.stdout)
    assert "Z\\x01\\x1b[31m&lt;&amp;&gt;" in result.stdout


def test_workflow_commands_are_escaped_and_capped() -> None:
    assert escape_data("50% a\r\nb") == "50%25 a%0D%0Ab"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    lines = workflow_annotations(
        [("t:1", f"e{i}") for i in range(12)], [f"w{i}\n::error::x" for i in range(15)]
    )
    errors = [line for line in lines if line.startswith("::error")]
    warnings = [line for line in lines if line.startswith("::warning")]
    assert len(errors) == MAX_ANNOTATIONS and len(warnings) == MAX_ANNOTATIONS
    assert errors[0] == "::error title=t%3A1::e0"
    assert all("\n" not in line for line in lines) and warnings[0] == "::warning::w0%0A::error::x"
    assert "6 more warning(s)" in warnings[-1]


def test_summary_is_capped_under_one_mib() -> None:
    text = cap_summary("x" * 100 + "\n" + ("y" * 1000 + "\n") * 2000)
    assert len(text.encode()) < 1 << 20 and "cut to stay under" in text


def test_summary_and_annotations_under_github_actions(example: list[str], tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    result = kag("stats", *example, "--fail-under", "80", "--fail-if-worse-than", "qwen35-9b-kag", env=env)
    assert result.exit_code == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n## kag stats\n")  # appended
    assert "| GATE | RESULT |" in text and "FAILED: --fail-under 80" in text
    assert "ACC%" in text and "### Comparisons against `qwen35-9b-kag`" in text and "p (Holm)" in text
    assert "### Data quality" in text and "skipped" in text
    assert "::error title=kag --fail-under 80::--fail-under 80: ACC%25 below 80" in result.stderr
    assert "::warning::" in result.stderr and "::" not in result.stdout
    # The few-graded-files warning is a workflow warning too (4 files a setup here).
    assert "::warning::few graded files: qwen35-9b-kag 4" in result.stderr
    assert "few graded files" in text
    off = kag("stats", *example, "--annotations", "none", env=env)
    assert "::warning" not in off.stderr and "::error" not in off.stderr
    plain = kag("stats", *example, "--summary", tmp_path / "own.md", "--annotations", "github")
    assert (tmp_path / "own.md").read_text().startswith("## kag stats\n") and "::warning::" in plain.stderr
    assert kag("stats", *example, "--annotations", "gitlab").exit_code == 2


def _med_tree(med_kag: Path, tmp_path: Path) -> tuple[list[str], Path]:
    tree = tmp_path / "results"
    shutil.copytree(med_kag / "results", tree)
    return ["-d", str(med_kag / "datasets" / "mirage.json"), "-r", str(tree)], tree


def test_against_flags_ten_answers_turned_wrong(med_kag: Path, tmp_path: Path) -> None:
    args, tree = _med_tree(med_kag, tmp_path)
    previous = tmp_path / "previous.jsonl"
    assert kag("stats", *args, "--format", "jsonl", "-o", previous).exit_code == 0
    rows = [orjson.loads(line) for line in previous.read_text().splitlines()]
    assert {r["v"] for r in rows} == {JSONL_VERSION} == {EXPORT_VERSION}
    same = kag("stats", "compare", *args, "--against", previous, "--fail-if-regressed", "--resamples", "200")
    assert same.exit_code == 0, same.stderr
    setup = "wekgr-qwen35-9b-ollama-native"
    right = [r for r in rows if r["setup"] == setup and r["outcome"] == "OK"][:10]
    # "Z" is no option letter: each of the ten turns wrong
    for r in right:
        path = tree / r["dataset"] / r["question"] / f"{setup}.json"
        doc = json.loads(path.read_text())
        doc["ok"]["result"] = "Z"
        path.write_text(json.dumps(doc))
    summary = tmp_path / "summary.md"
    worse = kag(
        "stats", "compare", *args, "--against", previous, "--fail-if-regressed", "--resamples", "200",
        "--format", "junit", "-o", tmp_path / "j.xml",
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)},
    )  # fmt: skip
    assert worse.exit_code == 1, worse.stderr
    assert f"{setup}: 52.00% before, 42.00% now on 100 paired questions, Holm p = " in worse.stderr
    assert "::error title=kag --fail-if-regressed::" in worse.stderr
    _validate((tmp_path / "j.xml").read_text())
    assert _junit_counts(tmp_path / "j.xml")["kag.gates"] == (1, 1, 0, 0)
    text = summary.read_text()
    assert (
        "### Right before, not now" in text
        and f"`{setup}`: {right[0]['dataset']}/{right[0]['question']}" in text
    )
    as_json = kag("stats", "compare", *args, "--against", previous, "--format", "json", "--resamples", "200")
    assert as_json.exit_code == 0  # no gate asked
    doc = json.loads(as_json.stdout)
    mine = next(c for c in doc["comparisons"] if c["setup"] == setup)
    assert mine["baseline_only"] == 10 and mine["setup_only"] == 0


def test_against_names_questions_on_one_side_only(med_kag: Path, tmp_path: Path) -> None:
    args, _ = _med_tree(med_kag, tmp_path)
    previous = tmp_path / "previous.jsonl"
    assert kag("stats", *args, "--format", "jsonl", "-o", previous).exit_code == 0
    lines = previous.read_text().splitlines()
    # rows without "v" (older exports) are read as version 1
    old = [
        orjson.dumps({k: v for k, v in orjson.loads(line).items() if k != "v"}).decode() for line in lines[1:]
    ]
    previous.write_text("\n".join(old) + "\n")
    first = orjson.loads(lines[0])
    result = kag("stats", "compare", *args, "--against", previous, "--resamples", "100")
    assert result.exit_code == 0, result.stderr
    assert (
        f"1 graded file(s) only now, not paired: {first['dataset']}/{first['question']}/{first['setup']}"
        in result.stderr
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[1]", ":1: a row must be a JSON object"),
        ('{"dataset": "d", "question": "q"}', ":1: key 'setup' must be a string"),
        (
            '{"dataset": "d", "question": "q", "setup": "s", "outcome": "MAYBE"}',
            ":1: key 'outcome' must be OK",
        ),
        (
            '{"dataset": "d", "question": "q", "setup": "s", "outcome": "OK", "v": 99}',
            ":1: key 'v': row version 99",
        ),
        ("{", ":1: not JSON"),
    ],
)
def test_bad_export_rows_name_file_line_and_key(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace("[", r"\[")):
        read_previous(path)


def test_against_usage_errors(example: list[str], tmp_path: Path) -> None:
    assert "needs --against" in kag("stats", "compare", *example, "--fail-if-regressed").stderr
    missing = kag("stats", "compare", *example, "--against", tmp_path / "nope.jsonl")
    assert missing.exit_code == 2 and "nope.jsonl: export file not found" in missing.stderr


# ---------------------------------------------------------------- hostile names in a CI log and a job summary

HOSTILE_SETUPS = (
    "::stop-commands::tok",
    "  ::add-mask::s",
    '<img src="x" onerror=alert(1)>',
    "a`<a href=x>`[l](x)",
)
HOSTILE_DATASET = "##[add-mask]ds"
# kag's own workflow commands: the gate failures and the warnings (names only in their message).
# Raw HTML, a link or an image, unless backslash-escaped.
RAW_MARKUP = re.compile(r"(?<!\\)(?:<img|<a |\]\()")
# A code span (its text is never markup): a run of backticks (not backslash-escaped) up to
# the next run as long.
CODE_SPAN = re.compile(r"(?<![`\\])(`+)(?!`).*?(?<!`)\1(?!`)")
OWN_COMMAND = re.compile(r"::(error title=kag [^:]*|warning)::")


def foreign_commands(text: str) -> list[str]:
    """The lines of ``text`` GitHub Actions would run as a workflow command kag did not write."""
    return [
        line
        for line in text.splitlines()
        if "##[" in line or (line.lstrip().startswith("::") and not OWN_COMMAND.match(line))
    ]


@pytest.fixture
def hostile(tmp_path: Path) -> list[str]:
    """A datasets file and a result tree whose dataset, question and setup names are
    workflow commands and markup, written by the library's writer."""
    question = {"input": "q", "output": {"type": "MCQ", "options": {"a": "x", "b": "y"}, "answer": "a"}}
    names = ("::error::q0", "##[warning]q1", "q2")
    datasets = tmp_path / "datasets.json"
    datasets.write_bytes(orjson.dumps({HOSTILE_DATASET: {q: question for q in names}}))
    for setup in HOSTILE_SETUPS:
        for n, q in enumerate(names):
            write_ok(tmp_path / "results" / HOSTILE_DATASET / q / f"{setup}.json", "ab"[n % 2])
    return ["-d", str(datasets), "-r", str(tmp_path / "results")]


def test_names_never_emit_a_workflow_command(hostile: list[str], tmp_path: Path) -> None:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    for args in (
        ["stats", *hostile],
        ["stats", *hostile, "--fail-under", "90", "--fail-if-worse-than", HOSTILE_SETUPS[0]],
        ["stats", "compare", *hostile],
        ["stats", "flips", *hostile, HOSTILE_SETUPS[0], HOSTILE_SETUPS[1]],
        ["stats", "find", "a", "-r", hostile[3]],
        ["datasets", "check", hostile[1]],
    ):
        result = kag(*args, env=env)
        assert result.exit_code in (0, 1), (args, result.stderr)
        assert foreign_commands(result.stdout) == [], args
        assert foreign_commands(result.stderr) == [], args
    table = kag("stats", *hostile, env=env).stdout
    assert "\\x3a:stop-commands::tok" in table and "\\x23#[add-mask]ds" in table  # shown, escaped
    check = kag("datasets", "check", hostile[1]).stdout
    assert check.splitlines()[1].startswith("\\x23#[add-mask]ds ")


def test_run_record_fields_never_emit_a_workflow_command(hostile: list[str]) -> None:
    folder = Path(hostile[3]) / ".kag" / "runs"
    folder.mkdir(parents=True)
    record = {
        "started": "::stop-commands::tok",
        "finished": "##[add-mask]x",
        "kag_version": " ::error::v",
        "setups": list(HOSTILE_SETUPS),
        "git": {"commit": "::error::c", "dirty": False},
        "tasks": {"ok": 1, "error": 0, "kept": 0, "not_run": 0},
    }
    (folder / "20260101T000000.000000Z-abcdef.json").write_bytes(orjson.dumps(record))
    result = kag("stats", "runs", "-r", hostile[3])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("\\x3a:stop-commands::tok")
    assert foreign_commands(result.stdout) == [] and foreign_commands(result.stderr) == []
    raw = kag("stats", "runs", "-r", hostile[3], "--format", "json").stdout
    assert json.loads(raw)[0]["started"] == "::stop-commands::tok"  # JSON keeps the exact text


def test_junit_output_never_emits_a_workflow_command(hostile: list[str]) -> None:
    tree = Path(hostile[3])
    write_ok(tree / HOSTILE_DATASET / "q2" / f"{HOSTILE_SETUPS[0]}.json", "b\n::error::reply\n ##[add-mask]x")
    result = kag("stats", *hostile, "--format", "junit")
    assert result.exit_code == 0, result.stderr
    _validate(result.stdout)
    assert foreign_commands(result.stdout) == [] and "\\x3a:error::reply" in result.stdout


def test_annotations_carry_no_older_form_command() -> None:
    lines = workflow_annotations([("kag t ##[x]", "e ##[add-mask]s")], ["w ##[error]x"])
    assert foreign_commands("\n".join(lines)) == [] and len(lines) == 2


def test_the_job_summary_holds_no_raw_html_link_or_image(hostile: list[str], tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    previous = tmp_path / "previous.jsonl"
    assert kag("stats", *hostile, "--format", "jsonl", "-o", previous).exit_code == 0
    for args in (
        ["stats", *hostile, "--fail-under", "90", "--fail-if-worse-than", HOSTILE_SETUPS[2]],
        ["stats", "compare", *hostile, "--baseline", HOSTILE_SETUPS[3]],
        ["stats", "compare", *hostile, "--against", previous],
        ["stats", *hostile, "--format", "markdown"],
    ):
        result = kag(*args, "--summary", summary)
        assert result.exit_code in (0, 1), (args, result.stderr)
        for text in (summary.read_text(), result.stdout if "markdown" in args else ""):
            assert [l for l in CODE_SPAN.sub("", text).splitlines() if RAW_MARKUP.search(l)] == [], args
    text = summary.read_text()
    assert '\\<img src="x" onerror=alert(1)>' in text  # shown as written, not as markup
    assert "``a`<a href=x>`[l](x)``" in text  # a code span its backticks cannot close


# ---------------------------------------------------------------- a regression gate that paired nothing


def _rows_renamed(row: dict[str, object]) -> dict[str, object]:
    return {**row, "setup": f"old-{row['setup']}"}


def _rows_of_open_questions(row: dict[str, object]) -> dict[str, object]:
    return {**row, "f1": 0.5}


def _rows_of_other_questions(row: dict[str, object]) -> dict[str, object]:
    return {**row, "question": f"x{row['question']}"}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (None, "previous.jsonl holds no MCQ row (an empty file, or open-question rows only)"),
        (
            _rows_of_open_questions,
            "previous.jsonl holds no MCQ row (an empty file, or open-question rows only)",
        ),
        (
            _rows_renamed,
            (
                "none of the setups graded now (qwen35-9b-kag, qwen35-9b-native, smollm2-135m-native) is in "
                "previous.jsonl, whose rows are of old-qwen35-9b-kag, old-qwen35-9b-native, "
                "old-smollm2-135m-native: a renamed setup, or another --prefix or --setup?"
            ),
        ),
        (_rows_of_other_questions, "no question graded now is in previous.jsonl for the same setup"),
    ],
)
def test_a_regression_gate_that_paired_nothing_fails_saying_why(
    example: list[str], tmp_path: Path, change: object, why: str
) -> None:
    exported = kag("stats", *example, "--format", "jsonl").stdout
    rows = [orjson.loads(line) for line in exported.splitlines()]
    previous = tmp_path / "previous.jsonl"
    lines = [orjson.dumps(change(row)).decode() for row in rows] if callable(change) else []
    previous.write_text("".join(f"{line}\n" for line in lines))
    junit, summary = tmp_path / "gate.xml", tmp_path / "summary.md"
    gate = ["stats", "compare", *example, "--against", previous, "--fail-if-regressed"]
    result = kag(*gate, "--format", "junit", "-o", junit, "--summary", summary)
    assert result.exit_code == 1  # the gate failed, as a regression would
    message = "--fail-if-regressed compared nothing: no question was paired with the earlier run: "
    error = result.stderr.strip().splitlines()[-1]
    assert (
        error.startswith(f"kag: error: {message}") and why.replace("previous.jsonl", str(previous)) in error
    )
    failure = re.search(
        r'<testcase classname="kag.gates" name="--fail-if-regressed">\s*<failure [^>]*>', junit.read_text()
    )
    assert failure is not None and message in failure.group()
    assert f"FAILED: {message}" in summary.read_text()
    # Without the gate the comparison is only reported (each setup: no paired questions).
    assert kag(*gate[:-1]).exit_code == 0


def test_a_regression_gate_that_paired_questions_passes(example: list[str], tmp_path: Path) -> None:
    previous = tmp_path / "previous.jsonl"
    previous.write_text(kag("stats", *example, "--format", "jsonl").stdout)
    result = kag(
        "stats", "compare", *example, "--against", previous, "--fail-if-regressed", "--format", "junit"
    )
    assert result.exit_code == 0, result.stderr
    assert '<testcase classname="kag.gates" name="--fail-if-regressed" />' in result.stdout


def test_the_benchmark_plan_never_emits_a_workflow_command(tmp_path: Path) -> None:
    question = {"input": "q", "output": {"type": "MCQ", "options": {"a": "x", "b": "y"}, "answer": "a"}}
    root = make_project(tmp_path, questions={HOSTILE_DATASET: {"::error::q": question}})
    result = kag(*bench_args(root, "--dry-run"), env={"FAKE_URL": "http://127.0.0.1:9", "FAKE_KEY": "k"})
    assert result.exit_code == 0, result.stderr
    assert "\\x23#[add-mask]ds" in result.stdout
    assert foreign_commands(result.stdout) == [] and foreign_commands(result.stderr) == []

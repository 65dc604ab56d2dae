"""One CLI vocabulary: -v/-q anywhere, -V, `kag completion`, one help style, the
--fail-under fraction warning, and FILE:LINE error messages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag import __version__
from kag.cli import app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
DATASETS = str(REPO / "examples/dataset/datasets.json")
RESULTS = str(REPO / "examples/results")
TRIPLETS = REPO / "examples/triplets"

# Every command and group whose --help a user may read.
COMMANDS = [
    [],
    ["completion"],
    ["generation"],
    ["benchmark"],
    ["triplets"],
    ["irt2"],
    ["stats"],
    ["stats", "find"],
    ["stats", "compare"],
    ["stats", "flips"],
    ["stats", "impact"],
    ["stats", "judge"],
    ["graph"],
    ["graph", "import"],
]
GROUPS = ([], ["stats"], ["graph"])


def help_of(command: list[str]) -> str:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.stderr
    return result.stdout


# --- --fail-under given as a fraction -------------------------------------------------


@pytest.mark.parametrize(("value", "meant"), [("0.5", "50"), ("1", "100"), ("0.05", "5")])
def test_fail_under_as_a_fraction_warns_that_it_is_a_percentage(value: str, meant: str) -> None:
    plain = runner.invoke(app, ["stats", "-d", DATASETS, "-r", RESULTS])
    result = runner.invoke(app, ["stats", "-d", DATASETS, "-r", RESULTS, "--fail-under", value])
    assert result.exit_code == 0  # every setup is above 1%: the gate itself is unchanged
    assert result.stdout == plain.stdout
    # The example tree's setups have 4 files each: the small-sample warning follows.
    assert (
        result.stderr.splitlines()[0]
        == f"kag: warning: --fail-under {value} is a percentage: did you mean {meant}?"
    )
    assert result.stderr.replace(plain.stderr, "") == result.stderr.splitlines(keepends=True)[0]


@pytest.mark.parametrize("value", ["0", "1.5", "50"])
def test_fail_under_as_a_percentage_does_not_warn(value: str) -> None:
    result = runner.invoke(app, ["stats", "-d", DATASETS, "-r", RESULTS, "--fail-under", value])
    assert "is a percentage" not in result.stderr


def test_fail_under_fraction_still_gates() -> None:
    """The warning changes nothing: a setup below 0.9% still fails (none here), and a real
    threshold still names the setups below it."""
    result = runner.invoke(app, ["stats", "-d", DATASETS, "-r", RESULTS, "--fail-under", "0.9", "-q"])
    assert result.exit_code == 0 and result.stderr == ""  # -q hides the warning
    failing = runner.invoke(app, ["stats", "-d", DATASETS, "-r", RESULTS, "--fail-under", "50"])
    assert failing.exit_code == 1


# --- -v / -q at any position, -V --------------------------------------------------------


def test_v_after_the_stats_options_is_verbosity() -> None:
    ignored = "ignored (question is free-form or not in the datasets file)"
    plain = runner.invoke(app, ["stats", "-d", DATASETS, "-r", RESULTS])
    late = runner.invoke(app, ["stats", "-d", DATASETS, "-r", RESULTS, "-v"])
    assert late.exit_code == plain.exit_code == 0
    assert late.stdout == plain.stdout
    assert ignored not in plain.stderr
    assert ignored in late.stderr


def test_q_after_triplets_arguments_hides_warnings_and_adds_to_the_root() -> None:
    gold, pred = str(TRIPLETS / "gold.jsonl"), str(TRIPLETS / "finetuned.jsonl")
    warning = "kag: warning: --fuzzy-gate has no effect with --match exact"
    plain = runner.invoke(app, ["triplets", gold, pred, "--fuzzy-gate", "0.5"])
    quiet = runner.invoke(app, ["triplets", gold, pred, "--fuzzy-gate", "0.5", "-q"])
    cancelled = runner.invoke(app, ["-v", "triplets", gold, pred, "--fuzzy-gate", "0.5", "-q"])
    assert plain.exit_code == quiet.exit_code == cancelled.exit_code == 0
    assert plain.stdout == quiet.stdout == cancelled.stdout
    assert warning in plain.stderr
    assert warning not in quiet.stderr
    assert warning in cancelled.stderr  # -v then -q: the default level again


def test_verbosity_does_not_leak_from_one_invocation_to_the_next() -> None:
    gold, pred = str(TRIPLETS / "gold.jsonl"), str(TRIPLETS / "finetuned.jsonl")
    runner.invoke(app, ["triplets", gold, pred, "-qq"])
    again = runner.invoke(app, ["triplets", gold, pred, "--fuzzy-gate", "0.5"])
    assert "--fuzzy-gate has no effect" in again.stderr


@pytest.mark.parametrize("command", [c for c in COMMANDS if c])
def test_every_command_takes_v_and_q(command: list[str]) -> None:
    text = help_of(command)
    assert re.search(r"^  -v, --verbose ", text, re.MULTILINE), text
    assert re.search(r"^  -q, --quiet ", text, re.MULTILINE), text


def test_find_inverts_only_with_the_long_flag() -> None:
    text = help_of(["stats", "find"])
    assert re.search(r"^  --invert-match ", text, re.MULTILINE)
    assert "-v, --invert-match" not in text


def test_capital_v_prints_the_version() -> None:
    short = runner.invoke(app, ["-V"])
    long = runner.invoke(app, ["--version"])
    assert short.exit_code == long.exit_code == 0
    assert short.stdout == long.stdout == f"kag {__version__}\n"


# --- kag completion ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o default -F _kag_completion kag"),
        ("zsh", "compdef _kag_completion kag"),
        ("fish", "complete --command kag"),
    ],
)
def test_completion_prints_the_script_for_the_shell(shell: str, marker: str) -> None:
    result = runner.invoke(app, ["completion", shell])
    assert result.exit_code == 0
    assert result.stderr == ""
    assert marker in result.stdout
    assert f"_KAG_COMPLETE=complete_{shell}" in result.stdout


def test_completion_of_an_unknown_shell_is_exit_2() -> None:
    result = runner.invoke(app, ["completion", "tcsh"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("kag: error: Invalid value for 'SHELL': 'tcsh' is not one of 'bash',")
    assert len(result.stderr.splitlines()) == 1
    assert "Value error" not in result.stderr


@pytest.mark.parametrize(
    ("words", "cword", "expected"),
    [
        ("kag sta", "1", "stats"),
        ("kag stats find --inv", "3", "--invert-match"),
        ("kag completion z", "2", "zsh"),
    ],
)
def test_the_bash_script_gets_its_candidates_from_kag(words: str, cword: str, expected: str) -> None:
    """What the printed bash script runs on <Tab>: kag answers with the candidates."""
    env = dict(os.environ, PYTHONPATH=str(REPO), COMP_WORDS=words, COMP_CWORD=cword)
    env["_KAG_COMPLETE"] = "complete_bash"
    done = subprocess.run(
        [sys.executable, "-m", "kag"], env=env, capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [expected]


# --- help pages -------------------------------------------------------------------------


UPPER = r"[A-Z][A-Z0-9_,./]*"


def _metavars(text: str) -> list[str]:
    """The placeholders of a help page: the words of the usage line after the command
    name, and the metavar of each argument and option row."""
    usage = text.splitlines()[0].split(" ")
    found = [word for word in usage[4:] if not word.islower()]
    for line in text.splitlines():
        option = re.match(r"^  (?:-\w, )?--[\w-]+ (?! )(\S+)", line)
        if option:
            found.append(option.group(1))
    if "\nArguments:\n" in text:
        rows = text.split("\nArguments:\n", 1)[1].split("\n\n", 1)[0]
        found += re.findall(r"^  (\S+)", rows, re.MULTILINE)
    return found


@pytest.mark.parametrize("command", COMMANDS)
def test_help_metavars_are_upper_case_names(command: list[str]) -> None:
    text = help_of(command)
    assert not re.search(r"<(path|str|int|float|text)|(?<!\{)\{[A-Z]+\}(?!\})|range>|list\[", text), text
    for word in _metavars(text):
        assert re.fullmatch(rf"\[?{UPPER}\]?(\.\.\.)?", word), f"{command}: {word!r}"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_page_has_examples(command: list[str]) -> None:
    text = help_of(command)
    examples = text.split("\n  Examples:\n", 1)
    assert len(examples) == 2, text
    lines = [line.strip() for line in examples[1].splitlines() if line.strip()]
    assert lines and " ".join(["kag", *command]) in lines[0], lines


@pytest.mark.parametrize("group", GROUPS)
def test_command_summaries_are_not_cut_off(group: list[str]) -> None:
    text = help_of(group)
    summaries = text.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert summaries
    for line in summaries:
        assert not line.endswith("..."), line
        assert line.endswith("."), line


def test_choice_errors_carry_no_validator_wording() -> None:
    result = runner.invoke(app, ["triplets", "a", "b", "--match", "foo"])
    assert result.exit_code == 2
    assert result.stderr == (
        "kag: error: Invalid value for '--match': 'foo' is not one of 'exact', 'fuzzy', 'embedding'."
        " (see 'kag triplets --help')\n"
    )


# --- FILE:LINE: message -----------------------------------------------------------------


def test_triplets_errors_name_file_colon_line(tmp_path: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"id": 1, "triplets": []}\n{"triplets": []}\n')
    result = runner.invoke(app, ["triplets", str(gold), str(TRIPLETS / "finetuned.jsonl")])
    assert result.exit_code == 2
    assert result.stderr == f"kag: error: {gold}:2: the entry has no 'id'\n"


def test_irt2_errors_name_file_colon_line(tmp_path: Path) -> None:
    dataset = REPO / "examples/irt2/dataset"
    head = tmp_path / "head.csv"
    first = (REPO / "examples/irt2/head.csv").read_text().splitlines()[0]
    head.write_text(f"{first}\n101,0,x,0.5\n")
    result = runner.invoke(
        app,
        ["irt2", "--dataset", str(dataset), "--task", "linking", "--split", "test"]
        + ["--head", str(head), "--tail", str(head)],
    )
    assert result.exit_code == 2
    assert re.fullmatch(rf"kag: error: {re.escape(str(head))}:2: [^\n]+\n", result.stderr), result.stderr


def test_graph_import_errors_name_file_colon_line(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[databases.g]\ntype = "Ladybug"\npath = "g.lbdb"\n')
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("id:ID,age:int\na,1\nb,old\n")
    result = runner.invoke(
        app,
        ["graph", "import", "-c", str(tmp_path / "config.toml"), "--database", "g", "--nodes", str(nodes)],
    )
    assert result.exit_code == 2
    assert result.stderr == f"kag: error: {nodes}:3: column 'age': 'old' is not an int\n"

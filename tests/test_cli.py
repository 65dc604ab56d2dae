"""The root CLI: version, the error boundary, one-line usage errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag import __version__
from kag.cli import app

runner = CliRunner()
REPO = Path(__file__).resolve().parent.parent


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"kag {__version__}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["graph", "import", "--database", "g"],
            "kag: error: missing option '--nodes' (see 'kag graph import --help')",
        ),
        (["triplets"], "kag: error: missing argument 'GOLD' (see 'kag triplets --help')"),
        (
            ["stats", "-d", "x", "--fail-under", "abc"],
            "kag: error: Invalid value for '--fail-under': a number from 0 to 100, like 80 or 80% (got 'abc')",
        ),
        (["stats", "find"], "kag: error: missing argument 'REGEX' (see 'kag stats find --help')"),
        (["nosuchcommand"], "kag: error: No such command 'nosuchcommand'."),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(message)


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["stats", "-r", "x"], "kag stats"),
        (["stats", "compare", "-r", "x"], "kag stats compare"),
        (["benchmark"], "kag benchmark"),
    ],
)
def test_a_missing_datasets_option_reads_the_same_in_every_command(args: list[str], command: str) -> None:
    """Whether the argument parser finds it missing (benchmark) or kag does (stats, which also
    takes it before a sub-command), the line is the same."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr == f"kag: error: missing option '--datasets' / '-d' (see '{command} --help')\n"


@pytest.mark.parametrize(("value", "gate"), [("80%", 80.0), ("80 %", 80.0), ("62.5%", 62.5), (" 80", 80.0)])
def test_fail_under_takes_a_percent_sign(value: str, gate: float) -> None:
    args = ["stats", "-d", str(REPO / "examples/dataset/datasets.json"), "-r", str(REPO / "examples/results")]
    args += ["--format", "json"]
    result = runner.invoke(app, [*args, "--fail-under", value])
    assert result.exit_code == 1, result.stderr  # every example setup is under 80% (and 62.5%)
    assert f"kag: error: --fail-under {gate:g}: ACC% below {gate:g} for " in result.stderr


@pytest.mark.parametrize("value", ["abc", "80%%", "%", "eighty"])
def test_fail_under_that_is_no_number_says_so_in_kags_words(value: str) -> None:
    result = runner.invoke(app, ["stats", "-d", "x", "--fail-under", value])
    assert result.exit_code == 2
    assert result.stderr == (
        f"kag: error: Invalid value for '--fail-under': a number from 0 to 100, like 80 or 80% (got {value!r})"
        " (see 'kag stats --help')\n"
    )
    assert "Input should be" not in result.stderr  # no pydantic wording


def test_library_errors_become_one_line_and_exit_2(tmp_path) -> None:
    broken = tmp_path / "datasets.json"
    broken.write_text("{not json")
    result = runner.invoke(app, ["stats", "-d", str(broken), "-r", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"kag: error: {broken}: not valid JSON")
    assert "Traceback" not in result.stderr


def test_bare_kag_prints_help_on_stderr() -> None:
    result = runner.invoke(app, [])
    assert result.exit_code == 2
    assert result.stderr.startswith("Usage: kag [OPTIONS] COMMAND")
    for command in ("stats", "benchmark", "generation", "triplets", "irt2", "graph"):
        assert command in result.stderr


def test_python_dash_m_kag_runs_the_same_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kag", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == f"kag {__version__}"


def _kag(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kag", *args],
        capture_output=True,
        text=True,
        check=False,
        **kwargs,  # type: ignore[call-overload]
    )


def test_the_fast_exit_delivers_all_output_and_the_exit_code(tmp_path) -> None:
    """`main` leaves through os._exit once the command is done: everything written must
    still reach a pipe, warnings (logging) included, with the command's exit code."""
    from kag.results import OkResult, write_result

    for q in range(3000):
        write_result(tmp_path / "d" / f"{q:04}" / "s.json", OkResult(f"I know {q}"))
    (tmp_path / "d" / "0000" / "bad.json").write_text("{")
    done = _kag("stats", "find", "know", "-r", str(tmp_path), "--format", "jsonl", "--jobs", "2")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 3000
    assert lines[-1].endswith('"match":"know","context":"I know 2999"}')
    assert "d/0000/bad.json: unreadable result file" in done.stderr
    nothing = _kag("stats", "find", "zebra", "-r", str(tmp_path))
    assert nothing.returncode == 1 and nothing.stderr.strip().endswith("0 file(s) matched out of 3001.")
    bad = _kag("stats", "find", "(", "-r", str(tmp_path))
    assert bad.returncode == 2 and bad.stderr.startswith("kag: error: invalid pattern '('")


@pytest.mark.parametrize(("code", "expected", "printed"), [(None, 0, ""), (3, 3, ""), ("boom", 1, "boom\n")])
def test_exit_codes_follow_sys_exit(
    code: object, expected: int, printed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from kag.cli import _exit_code

    assert _exit_code(code) == expected
    assert capsys.readouterr().err == printed


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("unbuffered", ["1", ""])
@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["stats", "--datasets", "examples/dataset/datasets.json", "--results", "examples/results"],
        ["stats", "find", "know", "-r", "examples/results"],
    ],
)
def test_a_full_disk_is_one_error_line_and_exit_2(args: list[str], unbuffered: str) -> None:
    """Output that cannot be written (here: /dev/full, "No space left on device") is an
    error a CI job must see: one line, exit 2, no traceback, buffered or not."""
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "kag", *args],
            check=False,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
    errors = [line for line in done.stderr.splitlines() if line.startswith("kag: error:")]
    assert done.returncode == 2
    assert errors == ["kag: error: cannot write the output: No space left on device"]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("exc", "output", "expected"),
    [
        (OSError(28, "No space left on device"), False, "cannot write the output: No space left on device"),
        (OSError(5, "Input/output error"), True, "cannot write the output: Input/output error"),
        (OSError(11, "Resource temporarily unavailable"), False, "Resource temporarily unavailable"),
        (OSError(13, "Permission denied", "/x/y.json"), False, "/x/y.json: Permission denied"),
    ],
)
def test_an_unhandled_os_error_is_described_in_one_line(exc: OSError, output: bool, expected: str) -> None:
    from kag.cli import _describe

    assert _describe(exc, output) == expected

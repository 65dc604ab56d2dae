"""pricing: loading and checking --prices files, and costs computed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from kag.errors import InputError, KagError
from kag.pricing import ModelPrice, load_prices

GOOD = """\
[models."gpt-4o-mini"]
prompt = 0.15
completion = 0.6

[models."qwen3.5:9b"]
prompt = 0
completion = 0
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_load_and_cost(tmp_path: Path) -> None:
    prices = load_prices(write(tmp_path, GOOD))
    assert prices.models == {"gpt-4o-mini": ModelPrice(0.15, 0.6), "qwen3.5:9b": ModelPrice(0.0, 0.0)}
    # (2,000,000 × 0.15 + 500,000 × 0.6) / 1e6 = 0.3 + 0.3
    assert prices.cost_usd("gpt-4o-mini", 2_000_000, 500_000) == pytest.approx(0.6)
    # (1234 × 0.15 + 56 × 0.6) / 1e6 = (185.1 + 33.6) / 1e6
    assert prices.cost_usd("gpt-4o-mini", 1234, 56) == pytest.approx(218.7e-6)
    assert prices.cost_usd("qwen3.5:9b", 10**9, 10**9) == 0.0
    assert prices.cost_usd("gpt-4o", 1, 1) is None  # not in the file
    assert prices.cost_usd("GPT-4o-mini", 1, 1) is None  # names compare exactly


def test_integer_prices_and_no_tokens(tmp_path: Path) -> None:
    prices = load_prices(write(tmp_path, "[models.m]\nprompt = 3\ncompletion = 15\n"))
    assert prices.cost_usd("m", 0, 0) == 0.0
    assert prices.cost_usd("m", 1_000_000, 1_000_000) == pytest.approx(18.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[models."m"]\nprompt = -1\ncompletion = 1\n',
            r'models\."m"\.prompt: must be a finite number >= 0 \(got -1\)',
        ),
        ('[models."m"]\nprompt = 1\n', r"models\.\"m\": missing required key 'completion'"),
        (
            '[models."m"]\nprompt = "1"\ncompletion = 1\n',
            r'models\."m"\.prompt: must be a number \(got string\)',
        ),
        (
            '[models."m"]\nprompt = true\ncompletion = 1\n',
            r'models\."m"\.prompt: must be a number \(got boolean\)',
        ),
        ('[models."m"]\nprompt = nan\ncompletion = 1\n', r'models\."m"\.prompt: must be a finite number'),
        ('[models."m"]\nprompt = inf\ncompletion = 1\n', r'models\."m"\.prompt: must be a finite number'),
        (
            '[models."m"]\nprompt = 1\ncompletion = 1\ncompletions = 2\n',
            r'models\."m"\.completions: unknown key',
        ),
        ("[models]\nm = 1\n", r'models\."m": must be a table \(got integer\)'),
        ("models = 3\n", r"models: must be a table of tables \(got integer\)"),
        ('[prices."m"]\nprompt = 1\n', r"unknown top-level key 'prices'"),
        ("", r'no \[models\."<model>"\] table'),
        ("[models\nprompt = 1\n", r"not valid TOML: .*line 1"),
    ],
)
def test_bad_files_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError, match=message) as info:
        load_prices(path)
    assert str(info.value).startswith(f"{path}: ")
    assert isinstance(info.value, KagError)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="prices file not found"):
        load_prices(tmp_path / "missing.toml")
    with pytest.raises(InputError, match="is a directory"):
        load_prices(tmp_path)
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[models."caf\xe9"]\n')
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 12\)"):
        load_prices(path)

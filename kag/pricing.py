"""Token prices for ``kag stats --prices FILE``: load and check the TOML file, price token counts.

The file names one table per model, prices in US dollars per million tokens::

    [models."gpt-4o-mini"]
    prompt = 0.15
    completion = 0.60

    [models."qwen3.5:9b"]   # a local model: free, but listed so that it gets a cost of 0
    prompt = 0
    completion = 0

Both keys are required, numbers (integer or float, not boolean), finite and not negative.
Any other key is an error, so that a typo (``completions``) does not price a model at 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from kag.errors import InputError, toml_type_name
from kag.textfile import read_text_file

#: Prices are per this many tokens.
TOKENS_PER_PRICE_UNIT = 1_000_000
_KEYS = ("prompt", "completion")


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million prompt tokens and per million completion tokens."""

    prompt: float
    completion: float


@dataclass(frozen=True, slots=True)
class Prices:
    """The prices of a ``--prices`` file, by model name as written in the result files."""

    path: Path
    models: Mapping[str, ModelPrice]

    def cost_usd(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The cost of the tokens in USD, or None when ``model`` has no price in the file.

        cost = (prompt_tokens × prompt + completion_tokens × completion) / 1,000,000.
        Model names are compared exactly (``"qwen3.5:9b"`` is not ``"Qwen3.5:9B"``).
        """
        price = self.models.get(model)
        if price is None:
            return None
        return (prompt_tokens * price.prompt + completion_tokens * price.completion) / TOKENS_PER_PRICE_UNIT


def _price(path: Path, where: str, table: Mapping[str, Any], key: str) -> float:
    if key not in table:
        raise InputError(f"{path}: {where}: missing required key '{key}' (USD per 1M {key} tokens)")
    value = table[key]
    # bool is an int subclass: `prompt = true` is a mistake, not a price of 1.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{path}: {where}.{key}: must be a number (got {toml_type_name(value)})")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise InputError(f"{path}: {where}.{key}: must be a finite number >= 0 (got {value!r})")
    return number


def parse_prices(text: str, path: Path) -> Prices:
    """Check the TOML text of a prices file; errors name ``path`` and the key."""
    # tomli, as for the configs: TOML 1.1, the dialect kag's users already write.
    import tomli

    try:
        data = tomli.loads(text)
    except tomli.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"models"})
    if unknown:
        raise InputError(
            f"{path}: unknown top-level key '{unknown[0]}' (expected [models.\"<model>\"] tables)"
        )
    models = data.get("models")
    if models is None:
        raise InputError(f'{path}: no [models."<model>"] table')
    if not isinstance(models, dict):
        raise InputError(f"{path}: models: must be a table of tables (got {toml_type_name(models)})")
    prices: dict[str, ModelPrice] = {}
    for name, table in models.items():
        where = f'models."{name}"'
        if not isinstance(table, dict):
            raise InputError(f"{path}: {where}: must be a table (got {toml_type_name(table)})")
        extra = sorted(set(table) - set(_KEYS))
        if extra:
            raise InputError(f"{path}: {where}.{extra[0]}: unknown key (expected 'prompt' and 'completion')")
        prices[name] = ModelPrice(
            _price(path, where, table, "prompt"), _price(path, where, table, "completion")
        )
    return Prices(path, MappingProxyType(prices))


def load_prices(path: Path) -> Prices:
    """Read and check a ``--prices`` TOML file (see the module docstring for the format).

    Raises InputError naming the file (and the key) when it cannot be read, is not UTF-8
    TOML, or a price is missing, not a number, negative or not finite.
    """
    text = read_text_file(path, "prices file", InputError)
    return parse_prices(text, path)

"""The cost of the tokens a run used (``kag stats --prices FILE``).

Which files count (:func:`usage_sample`) is decided here; the token sums live in the
tallies (:class:`~kag.grading.mcq.metrics.Tally`); a cost needs the
model of each file as well, so it is computed here from the per-file records of a grading
run that kept them (``records`` asked for). Per block, tokens are summed per model first and
priced once per model, so the cost does not depend on the order of the files.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kag.errors import InputError
from kag.grading.record import GradedFile
from kag.pricing import Prices
from kag.results.codec import MAX_COUNT
from kag.textsafe import escape_controls

#: A block of the report: (setup, dataset), or (setup, None) for the setup overall.
Block = tuple[str, str | None]


@dataclass(frozen=True)
class Costs:
    """USD per block; None for a block with a file whose model has no price.

    ``missing_models`` are the models (``ok.stats.config.model``, ``""`` when a file records
    none) of files with usage but no price, sorted.
    """

    by_block: Mapping[Block, float | None]
    missing_models: tuple[str, ...]

    def of(self, setup: str, dataset: str | None = None) -> float | None:
        """The cost of a block; None when it has no usage or a model has no price."""
        return self.by_block.get((setup, dataset))


def usage_sample(graded: GradedFile) -> tuple[int, int] | None:
    """(prompt_tokens, completion_tokens) of an ``ok`` file whose ``ok.stats.usage`` has both
    counts as integers in [0, MAX_COUNT]; None otherwise (no usage, a count missing, negative
    or past belief: see :func:`usage_beyond_bound`), so that the two means are taken over the
    same files."""
    usage = graded.usage
    if usage is None:
        return None
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    if (
        prompt is None
        or completion is None
        or not (0 <= prompt <= MAX_COUNT and 0 <= completion <= MAX_COUNT)
    ):
        return None
    return prompt, completion


def usage_beyond_bound(graded: GradedFile) -> bool:
    """Whether the file's usage records a token count above :data:`MAX_COUNT` (2**32 - 1):
    no model call uses that many, and summing such counts (a hostile server's 2**64 - 1)
    would leave the integers JSON can carry."""
    usage = graded.usage
    if usage is None:
        return False
    return any(n is not None and n > MAX_COUNT for n in (usage.prompt_tokens, usage.completion_tokens))


def price_records(records: Iterable[GradedFile], prices: Prices) -> Costs:
    """Cost of every block from the per-file records.

    cost(block) = Σ over models m of ``prices.cost_usd(m, prompt_m, completion_m)``, where
    prompt_m and completion_m sum the usage samples (:func:`usage_sample`) of the block's
    files of model m. A block whose files have no usage sample is absent (cost None); a
    block with a sample of an unpriced model costs None.
    """
    tokens: dict[Block, dict[str, list[int]]] = {}
    for record in records:
        sample = usage_sample(record)
        if sample is None:
            continue
        model = record.config.model if record.config is not None else ""
        blocks: tuple[Block, Block] = ((record.setup, record.dataset), (record.setup, None))
        for block in blocks:
            sums = tokens.setdefault(block, {}).setdefault(model, [0, 0])
            sums[0] += sample[0]
            sums[1] += sample[1]
    missing: set[str] = set()
    by_block: dict[Block, float | None] = {}
    for block, per_model in tokens.items():
        total: float | None = 0.0
        for model in sorted(per_model):
            prompt, completion = per_model[model]
            cost = prices.cost_usd(model, prompt, completion)
            if cost is None:
                missing.add(model)
                total = None
            elif total is not None:
                total += cost
                if not math.isfinite(total):
                    raise _overflow(prices, model, block, prompt, completion)
        by_block[block] = total
    return Costs(MappingProxyType(by_block), tuple(sorted(missing)))


def _overflow(prices: Prices, model: str, block: Block, prompt: int, completion: int) -> InputError:
    """The error of a cost past the largest float: the prices file's price is to blame (a
    token count is at most MAX_COUNT per file), and an infinite cost must not read as none."""
    setup, dataset = block
    where = f"setup '{escape_controls(setup)}'" + (
        f", dataset '{escape_controls(dataset)}'" if dataset else ""
    )
    price = prices.models[model]
    return InputError(
        f'{prices.path}: models."{escape_controls(model)}": the cost of {where} ({prompt} prompt and '
        f"{completion} completion tokens at {price.prompt:g} and {price.completion:g} USD per 1M) "
        "is too large to compute; check the prices"
    )

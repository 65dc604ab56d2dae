"""Exact match and token F1 for free-form answers, with SQuAD v1.1's normalization.

The definitions follow the official SQuAD v1.1 evaluation script (``evaluate-v1.1.py``:
``normalize_answer``, ``exact_match_score``, ``f1_score``, ``metric_max_over_ground_truths``)
so that numbers reported by kag compare with published ones.

Normalization, in the script's order: lower-case (``str.lower``), drop every ASCII
punctuation character (``string.punctuation``; the character is removed, not replaced by
a space, so ``"don't"`` becomes ``"dont"``), replace the whole words ``a``, ``an``, ``the``
by a space, collapse whitespace runs to one space and strip the ends.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

# The official script uses `re` (Unicode \b) and string.punctuation (ASCII only); kept as is
# so that non-ASCII punctuation such as "«" stays part of a token, as in published scores.
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's canonical form: lower, ASCII punctuation removed, articles removed, spaces collapsed.

    ``"The  City of Paris!"`` → ``"city of paris"``; ``""`` → ``""``; ``"the"`` → ``""``.
    """
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the normalized prediction equals some normalized answer, else 0.0.

    EM = max over answers g of [normalize(prediction) == normalize(g)].
    Two strings that normalize to ``""`` are equal (``"The"`` matches ``"a"``).

    Raises ValueError when ``answers`` is empty: there is nothing to compare with (the
    official script fails there too).
    """
    if not answers:
        raise ValueError("exact_match needs at least one reference answer")
    normalized = normalize_answer(prediction)
    return 1.0 if any(normalized == normalize_answer(answer) for answer in answers) else 0.0


def _f1(prediction_tokens: list[str], answer_tokens: list[str]) -> float:
    common = Counter(prediction_tokens) & Counter(answer_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(prediction_tokens)
    recall = same / len(answer_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, answers: Sequence[str]) -> float:
    """The best token F1 of the prediction against any answer, after `normalize_answer`.

    Tokens are the whitespace-separated words of the normalized strings, counted as
    multisets. For prediction tokens P and answer tokens G, with
    ``same = |P ∩ G|`` (multiset intersection):
    precision = same / |P|, recall = same / |G|, F1 = 2·precision·recall / (precision + recall),
    and F1 = 0 when ``same`` = 0. The result is the maximum over the answers.

    Edge cases (SQuAD v1.1, unlike v2.0): when the prediction or the answer normalizes to
    no token, ``same`` is 0 and F1 is 0, even when both are empty (EM is 1 there).

    Raises ValueError when ``answers`` is empty.
    """
    if not answers:
        raise ValueError("token_f1 needs at least one reference answer")
    prediction_tokens = normalize_answer(prediction).split()
    return max(_f1(prediction_tokens, normalize_answer(answer).split()) for answer in answers)

"""Task fingerprints: detect result files that no longer match their setup.

A fingerprint is the SHA-256 (hex) of a canonical JSON document holding everything that
reaches the model for one task:

- the setup's generation parameters: provider name, model, temperature, tokens and the
  ``augmented_generation`` pair;
- the prompt template's source text (after ``file()`` inclusion);
- the retriever's configuration table when the setup retrieves;
- the question's ``input`` and MCQ ``options``;
- the setup's generation settings (``seed``, ``top_p``, ``stop``, ``system``, the
  passthrough table...), only when it sets any: a setup without them keeps the fingerprint
  it always had, so results of older kag versions stay current (see compatibility in
  docs/architecture.md).

Left out on purpose: the setup's name (it is the file name already), provider URLs and
keys, database connection settings (moving a server does not change an answer), and the
question's ``answer`` (fixing a gold label must not force a re-run).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from kag.datasets import Question
from kag.generation.config import Setup

FINGERPRINT_VERSION = 1


def task_fingerprint(setup: Setup, question: Question, retriever: Mapping[str, Any] | None = None) -> str:
    """The hex SHA-256 of the task's canonical description (see the module docstring)."""
    aug = setup.augmented_generation
    document: dict[str, Any] = {
        "version": FINGERPRINT_VERSION,
        "provider": setup.provider,
        "model": setup.model,
        "temperature": setup.temperature,
        "tokens": setup.tokens,
        "augmented_generation": {"retriever": aug.retriever, "database": aug.database} if aug else None,
        "template": setup.template.source if setup.template is not None else None,
        "retriever": retriever if aug else None,
        "input": question.input,
        "options": question.mcq.options if question.mcq is not None else None,
    }
    if setup.settings:
        document["settings"] = setup.settings.to_json()
    data = orjson.dumps(document, option=orjson.OPT_SORT_KEYS, default=str)
    return hashlib.sha256(data).hexdigest()

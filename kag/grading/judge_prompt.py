"""The judge's prompt: the built-in template, and a ``--prompt FILE`` read, checked and compiled."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kag.errors import InputError
from kag.generation.templates import PromptTemplate, compile_template
from kag.textfile import read_text_file

JUDGE_VARIABLES = frozenset({"QUESTION", "REFERENCE", "RESPONSE"})

DEFAULT_PROMPT = """\
You are grading an answer to a question against the reference answer.

Question:
{{ QUESTION }}

Reference answer (any line below counts as correct):
{{ REFERENCE }}

Response to grade:
{{ RESPONSE }}

Does the response give the same answer as the reference? Ignore wording, case and \
explanations; judge only the answer. Reply with exactly one word: CORRECT or INCORRECT.
"""


@dataclass(frozen=True)
class JudgePrompt:
    """The compiled prompt template and the SHA-256 (hex) of its source text."""

    template: PromptTemplate
    sha256: str


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def compile_judge_prompt(source: str, origin: str) -> JudgePrompt:
    """Compile a judge prompt (Jinja, in the same sandbox as benchmark prompts) that may use
    QUESTION, REFERENCE and RESPONSE; ConfigError naming ``origin`` for anything else."""
    template = compile_template(source, origin, JUDGE_VARIABLES, "a judge prompt")
    return JudgePrompt(template, sha256_text(source))


_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def load_judge_prompt(
    path: str | Path | None,
    default: str = DEFAULT_PROMPT,
    compile: Callable[[str, str], JudgePrompt] = compile_judge_prompt,
) -> JudgePrompt:
    """The prompt template in ``path`` (UTF-8), or the built-in ``default`` when None, compiled
    by ``compile`` (a pairwise prompt has variables of its own).

    InputError naming the file when it is missing, a directory, a FIFO, a device or a
    socket (looked at before it is opened: opening a FIFO would wait for a writer, and a
    device such as ``/dev/zero`` never ends), not UTF-8, or empty (nothing but white space:
    a judge given no instructions).
    """
    if path is None:
        return compile(default, "the built-in judge prompt")
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None  # missing or unreadable: read_text_file names the reason
    if mode is not None:
        for test, kind in _SPECIAL_FILES:
            if test(mode):
                raise InputError(f"{path}: judge prompt is {kind}, not a regular file")
    source = read_text_file(path, "judge prompt", InputError, universal_newlines=True)
    if not source.strip():
        raise InputError(f"{path}: judge prompt is empty")
    return compile(source, str(path))

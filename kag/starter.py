"""``kag init``: a working project to start from (configuration, benchmark, prompt, datasets).

The files are written new and exclusively (``O_CREAT|O_EXCL``, no link followed), all or
nothing (a failure removes what was written before it): an existing
file, or a link planted where one goes, is never replaced. The URL and model given are
checked first, because they are written into a file that kag renders as a template and
parses as TOML: nothing that could run as template code, end a TOML string or carry a
secret (credentials in a URL) gets in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import orjson

from kag.errors import InputError, UsageError


class StarterProvider(StrEnum):
    OLLAMA = "ollama"
    OPENAI = "openai"
    LLAMA_CPP = "llama-cpp"


@dataclass(frozen=True)
class _Defaults:
    name: str  # the provider's name in config.toml
    type: str
    url: str
    model: str
    key: str | None  # the environment variable holding the key; None: no key line


DEFAULTS: Mapping[StarterProvider, _Defaults] = {
    StarterProvider.OLLAMA: _Defaults("ollama", "Ollama", "http://localhost:11434", "qwen2.5:0.5b", None),
    StarterProvider.OPENAI: _Defaults(
        "openai", "OpenAI", "https://api.openai.com/v1", "gpt-4o-mini", "OPENAI_API_KEY"
    ),
    StarterProvider.LLAMA_CPP: _Defaults(
        "local", "OpenAI", "http://127.0.0.1:8080/v1", "local", "KAG_LLAMA_KEY"
    ),
}

# What a URL or model name may hold: no white space, quote, backslash, brace, '%' pair that
# Jinja reads ({% %}), nor '#'. Percent-encoding stays possible in a URL's path.
_URL = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]+(?::[0-9]+)?(?:/[A-Za-z0-9._~\-/%+]*)?")
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+\-]{0,199}")

#: The files kag init writes, relative to its folder.
FILES = ("config.toml", "benchmark.toml", "prompts/mcq.md", "datasets.json")

PROMPT = """Answer the following multiple-choice question.

{{INPUT}}
{%- if CHOICE is defined %}

Choices:
{{ CHOICE }}

Reply with the key of the correct choice only (e.g. 'A').
{%- endif %}
"""

QUESTIONS = {
    "starter": {
        "1": {
            "input": "Which organ secretes insulin?",
            "output": {
                "type": "MCQ",
                "options": {"A": "Liver", "B": "Kidney", "C": "Pancreas", "D": "Spleen"},
                "answer": "C",
            },
        },
        "2": {
            "input": "What is the chemical symbol of sodium?",
            "output": {"type": "MCQ", "options": {"A": "S", "B": "Na", "C": "So", "D": "N"}, "answer": "B"},
        },
        "3": {
            "input": "How many chambers does the human heart have?",
            "output": {
                "type": "MCQ",
                "options": {"A": "Two", "B": "Three", "C": "Four", "D": "Five"},
                "answer": "C",
            },
        },
        "4": {
            "input": "Which vitamin does the skin make in sunlight?",
            "output": {
                "type": "MCQ",
                "options": {"A": "Vitamin A", "B": "Vitamin C", "C": "Vitamin K", "D": "Vitamin D"},
                "answer": "D",
            },
        },
        "5": {
            "input": "Which blood cells carry oxygen?",
            "output": {
                "type": "MCQ",
                "options": {
                    "A": "Red blood cells",
                    "B": "White blood cells",
                    "C": "Platelets",
                    "D": "Plasma cells",
                },
                "answer": "A",
            },
        },
    }
}


def check_url(url: str) -> str:
    """``url`` when it is a plain http(s) URL without credentials; UsageError otherwise."""
    if "@" in url.split("//", 1)[-1].split("/", 1)[0]:
        raise UsageError(
            "--url: credentials in the URL would be written to config.toml; give the key through the environment instead"
        )
    if not _URL.fullmatch(url) or "{" in url or "%}" in url:
        raise UsageError(f"--url must be a plain http:// or https:// URL (got {url!r})")
    return url.rstrip("/")


def check_model(model: str) -> str:
    """``model`` when it is a model name (letters, digits and ``._:/@+-``); UsageError otherwise."""
    if not _MODEL.fullmatch(model):
        raise UsageError(f"--model must be a model name of letters, digits and ._:/@+- (got {model!r})")
    return model


def setup_name(model: str) -> str:
    """The benchmark setup of ``model``: lowercase letters, digits and hyphens, ``-native``."""
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")[:60].strip("-") or "model"
    return f"{slug}-native"


def _length_cap(d: _Defaults) -> str:
    """The reply-length line of the setup: an MCQ answer is a letter, and a capped reply keeps
    a first run short (OpenAI-compatible ``max_tokens``, Ollama ``options.num_predict``)."""
    return "max_tokens = 16    # the longest reply, in tokens\n"


def render_files(provider: StarterProvider, url: str | None, model: str | None) -> dict[str, bytes]:
    """The files' contents, by relative path."""
    d = DEFAULTS[provider]
    url = check_url(url) if url is not None else d.url
    model = check_model(model) if model is not None else d.model
    key = ""
    if d.key is not None:
        key = (
            f'key = "{{{{ env(\'{d.key}\') }}}}"  # from the environment; "" sends no Authorization header\n'
        )
    config = (
        "# kag configuration: the model servers (providers) that benchmark setups name.\n"
        "# Rendered as a Jinja template first: env('NAME') reads an environment variable.\n\n"
        f"[providers.{d.name}]\n"
        f'type = "{d.type}"\n'
        f'url = "{url}"\n'
        f"{key}"
    )
    setup = setup_name(model)
    benchmark = (
        "# One [<setup>] table per configuration to compare; the name becomes the result file name.\n\n"
        f"[{setup}]\n"
        f'provider = "{d.name}"\n'
        f'model = "{model}"\n'
        "temperature = 0.0\n"
        f"{_length_cap(d)}"
        "system_prompt = '''{{ file('prompts/mcq.md') }}'''\n"
    )
    datasets = orjson.dumps(QUESTIONS, option=orjson.OPT_INDENT_2) + b"\n"
    return {
        "config.toml": config.encode(),
        "benchmark.toml": benchmark.encode(),
        "prompts/mcq.md": PROMPT.encode(),
        "datasets.json": datasets,
    }


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def write_starter(
    folder: Path, provider: StarterProvider, url: str | None = None, model: str | None = None
) -> list[Path]:
    """Write the starter files into ``folder`` (created when missing) and return their paths.

    All or nothing: a file that exists already (checked before writing any), a link where a
    folder belongs, or a file that cannot be written (a full disk) is an InputError naming
    it, and every file and folder written before it is removed again, so that the same
    command can simply be run again.
    """
    files = render_files(provider, url, model)
    for name in files:
        target = folder / name
        if os.path.lexists(target):
            raise InputError(
                f"{target}: already exists; kag init never replaces a file (choose another folder)"
            )
    made = _missing_folders(folder)
    try:
        os.makedirs(folder, exist_ok=True)
        root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        _remove_folders(made)
        raise InputError(f"{folder}: cannot create the folder: {exc.strerror}") from None
    created: list[tuple[str, ...]] = []  # relative paths written, folders with a trailing ""
    try:
        for name, data in files.items():
            _write_one(root, folder, name, data, created)
    except BaseException:
        _undo(root, created)
        os.close(root)
        _remove_folders(made)
        raise
    os.close(root)
    return [folder / name for name in files]


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first."""
    missing: list[Path] = []
    for path in (folder, *folder.parents):
        if os.path.lexists(path):
            break
        missing.append(path)
    return missing


def _remove_folders(folders: list[Path]) -> None:
    for path in folders:
        try:
            os.rmdir(path)
        except OSError:
            return  # no longer empty: something else was put there


def _write_one(root: int, folder: Path, name: str, data: bytes, created: list[tuple[str, ...]]) -> None:
    parent = root
    *dirs, base = name.split("/")
    opened: list[int] = []
    try:
        for i, d in enumerate(dirs):
            try:
                os.mkdir(d, dir_fd=parent)
                created.append((*dirs[: i + 1], ""))
            except FileExistsError:
                pass
            except OSError as exc:
                raise InputError(f"{folder / d}: cannot create the folder: {exc.strerror}") from None
            try:
                parent = os.open(d, _DIR, dir_fd=parent)
            except OSError:
                raise InputError(f"{folder / d}: not a folder (a link or a file is there)") from None
            opened.append(parent)
        try:
            fd = os.open(base, _CREATE, 0o644, dir_fd=parent)
        except FileExistsError:
            raise InputError(f"{folder / name}: already exists; kag init never replaces a file") from None
        except OSError as exc:
            raise InputError(f"{folder / name}: cannot write: {exc.strerror}") from None
        created.append((*dirs, base))
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            raise InputError(f"{folder / name}: cannot write: {exc.strerror}") from None
        finally:
            os.close(fd)
    finally:
        for fd_ in opened:
            os.close(fd_)


def _undo(root: int, created: list[tuple[str, ...]]) -> None:
    """Remove what :func:`_write_one` created below ``root``, newest first (files, then the
    folders that held them); what cannot be removed is left."""
    for parts in reversed(created):
        *dirs, base = parts
        is_dir = base == ""
        if is_dir:
            *dirs, base = dirs
        parent = root
        opened: list[int] = []
        try:
            for d in dirs:
                parent = os.open(d, _DIR, dir_fd=parent)
                opened.append(parent)
            if is_dir:
                os.rmdir(base, dir_fd=parent)
            else:
                os.unlink(base, dir_fd=parent)
        except OSError:
            pass
        finally:
            for fd in opened:
                os.close(fd)

"""Rendering a configuration or benchmark file: the file is a Jinja2 template, rendered
before it is parsed as TOML, with ``file(name)`` (another file's text, looked for in the
working directory, then next to the file) and ``env(name)`` (an environment variable, ""
when unset), in the prompt templates' bounded sandbox (:mod:`kag.generation.templates`):
no Python internals, at most 250,000 steps and 64 Mi characters.
"""

from __future__ import annotations

import os
from pathlib import Path

import jinja2

from kag.errors import ConfigError
from kag.generation.templates import (
    TOO_DEEP,
    TOO_LARGE,
    TemplateWorkError,
    bound_loops,
    check_no_internals,
    internals_message,
    new_environment,
    render_bounded,
)
from kag.textfile import read_text_file


class _FileNotReadable(ConfigError):
    """A ``file()`` target that cannot be read; the configuration file's name is put before it."""


def render_file(path: str | Path, what: str = "configuration file") -> str:
    """Render ``path`` as a Jinja2 template with ``file()`` and ``env()``; ConfigError names
    the file and the line of any problem."""
    path = Path(path)
    raw = read_text_file(path, what, ConfigError, universal_newlines=True)

    def file_helper(name: str) -> str:
        candidates = [Path(name)]
        if not Path(name).is_absolute():
            candidates.append(path.parent / name)
        for candidate in candidates:
            if candidate.is_file():
                return read_text_file(candidate, "included file", _FileNotReadable, universal_newlines=True)
        tried = " or ".join(str(c) for c in dict.fromkeys(candidates))
        raise _FileNotReadable(f"file({name!r}): not found (looked for {tried})")

    def env_helper(name: str) -> str:
        return os.environ.get(str(name), "")

    # The prompt templates' bounded sandbox: a hostile file's loops, calls and values are
    # bounded as a prompt's are (kag.generation.templates).
    environment = new_environment(keep_trailing_newline=True)
    environment.globals.update(file=file_helper, env=env_helper)
    try:
        ast = environment.parse(raw)
        check_no_internals(ast, str(path))
        template = environment.from_string(bound_loops(ast))
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"{path}: line {exc.lineno}: template syntax error: {exc.message}") from None
    except (MemoryError, OverflowError):
        raise ConfigError(f"{path}: {TOO_LARGE}") from None
    except (RecursionError, SyntaxError):
        # See compile_template: Jinja recurses per nesting level, Python's compiler gives up
        # on the generated code past ~100 nested blocks.
        raise ConfigError(f"{path}: {TOO_DEEP}") from None
    try:
        return render_bounded(template, {})
    except TemplateWorkError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except (MemoryError, OverflowError):
        raise ConfigError(f"{path}: {TOO_LARGE}") from None
    except RecursionError:
        raise ConfigError(f"{path}: {TOO_DEEP}") from None
    except jinja2.exceptions.SecurityError as exc:
        raise ConfigError(f"{path}: {internals_message(exc)}") from None
    except _FileNotReadable as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except jinja2.UndefinedError as exc:
        hint = ""
        if any(v in str(exc.message) for v in ("INPUT", "CHOICE", "RETRIEVAL")):
            hint = (
                " (this file is rendered as a template before it is parsed: write an inline prompt"
                " inside {% raw %}...{% endraw %}, or load it with file('prompt.md'))"
            )
        raise ConfigError(f"{path}: {exc.message}{hint}") from None
    except jinja2.TemplateError as exc:
        raise ConfigError(f"{path}: template error: {exc}") from None

"""Prompt templates: Jinja2 with strict undefined variables.

A prompt template sees at most three variables:

- ``INPUT``: the question (or the prompt given to ``kag generation``);
- ``CHOICE``: the options of a multiple-choice question, one ``key: text`` line per option
  in key order (the Rust tool kept options in a ``BTreeMap``, so keys sort as strings);
  undefined for free-form questions;
- ``RETRIEVAL``: the rendered subgraph, defined only when retrieval returned non-empty
  text, so templates write ``{{ RETRIEVAL | default('<empty>') }}``.

Any other name is a configuration error found when the template is compiled, before any
request is sent. As in Jinja2 (and minijinja), one trailing newline of the template is
dropped, so a prompt file that ends with a newline renders without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jinja2
import jinja2.meta

from kag.errors import ConfigError

VARIABLES = frozenset({"INPUT", "CHOICE", "RETRIEVAL"})

# Used by benchmark setups without a `system_prompt`: the question verbatim (never
# interpreted as a template: a question may contain braces), then the options, then the
# retrieved context when there is one.
DEFAULT_TEMPLATE = (
    "{{ INPUT }}"
    "{% if CHOICE is defined %}\n\n{{ CHOICE }}{% endif %}"
    "{% if RETRIEVAL is defined %}\n\nContext:\n{{ RETRIEVAL }}{% endif %}"
)

_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    keep_trailing_newline=False,
    auto_reload=False,
)


class PromptRenderError(ConfigError):
    """A prompt template failed to render (an undefined variable, a filter error)."""


@dataclass(frozen=True)
class PromptTemplate:
    """A compiled prompt template; ``origin`` says where it came from, for messages."""

    source: str
    origin: str
    variables: frozenset[str] = frozenset()
    compiled: jinja2.Template | None = field(default=None, compare=False, repr=False, hash=False)

    def render(self, variables: Mapping[str, str]) -> str:
        """Render with ``variables``; raises PromptRenderError naming the origin."""
        assert self.compiled is not None
        try:
            return self.compiled.render(variables)
        except jinja2.UndefinedError as exc:
            raise PromptRenderError(f"{self.origin}: {exc.message}") from None
        except jinja2.TemplateError as exc:
            raise PromptRenderError(f"{self.origin}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - a filter raising on a value (e.g. int('x'))
            raise PromptRenderError(f"{self.origin}: {type(exc).__name__}: {exc}") from None


def compile_template(source: str, origin: str) -> PromptTemplate:
    """Compile ``source``; raises ConfigError for a syntax error or an unknown variable.

    ``origin`` names the template in messages, e.g. ``benchmark.toml: [setup] system_prompt``.
    Line numbers in messages count from the template's first line.
    """
    try:
        ast = _ENV.parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"{origin}: template syntax error at line {exc.lineno}: {exc.message}") from None
    used = frozenset(jinja2.meta.find_undeclared_variables(ast))
    unknown = sorted(used - VARIABLES)
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        raise ConfigError(
            f"{origin}: undefined template variable {names}"
            " (a prompt template may use INPUT, CHOICE and RETRIEVAL)"
        )
    return PromptTemplate(source, origin, used, _ENV.from_string(source))


def format_choices(options: Mapping[str, str]) -> str:
    """``key: text`` lines in key order (string order), joined by newlines; "" when empty."""
    return "\n".join(f"{key}: {options[key]}" for key in sorted(options))


def prompt_variables(text: str, choices: str | None = None, retrieval: str | None = None) -> dict[str, Any]:
    """The variables of one prompt; CHOICE and RETRIEVAL only when they have content."""
    variables: dict[str, Any] = {"INPUT": text}
    if choices is not None:
        variables["CHOICE"] = choices
    if retrieval:
        variables["RETRIEVAL"] = retrieval
    return variables

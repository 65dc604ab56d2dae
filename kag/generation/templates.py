"""Prompt templates: Jinja2 with strict undefined variables.

A prompt template sees at most three variables:

- ``INPUT``: the question (or the prompt given to ``kag generation``);
- ``CHOICE``: the options of a multiple-choice question, one ``key: text`` line per option
  in key order, keys sorted as strings (see compatibility in docs/architecture.md);
  undefined for free-form questions;
- ``RETRIEVAL``: the rendered subgraph, defined only when retrieval returned non-empty
  text, so templates write ``{{ RETRIEVAL | default('<empty>') }}``.

Any other name is a configuration error found when the template is compiled, before any
request is sent. Templates run in Jinja2's immutable sandbox: a template that reaches for
Python internals (an attribute or key starting with ``_``, as in
``cycler.__init__.__globals__``) is a configuration error, found in the source when it is
compiled and refused by the sandbox if it gets there another way; one nested past the
parser's limits is a configuration error too, never a RecursionError. As in Jinja2 (and minijinja), one trailing newline of the template is
dropped, so a prompt file that ends with a newline renders without it.

The work of one rendering is bounded: at most :data:`MAX_STEPS` loop iterations, calls
and filters (nested ``range`` loops, a macro calling itself twice), no value or prompt
past :data:`MAX_SIZE` characters (``'x' * 2000000000``, ``'x'|center(2000000000)``, a
format width of that size), ``range`` past 100,000 items (Jinja's sandbox), and no
``lipsum``. Each is a PromptRenderError naming the template, raised before the value is
built.
"""

from __future__ import annotations

import contextvars
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import jinja2
import jinja2.meta
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from kag.errors import ConfigError

VARIABLES = frozenset({"INPUT", "CHOICE", "RETRIEVAL"})
_VARIABLE_ORDER = ("INPUT", "CHOICE", "RETRIEVAL")  # as the messages have always listed them

# Used by benchmark setups without a `system_prompt`: the question verbatim (never
# interpreted as a template: a question may contain braces), then the options, then the
# retrieved context when there is one.
DEFAULT_TEMPLATE = (
    "{{ INPUT }}"
    "{% if CHOICE is defined %}\n\n{{ CHOICE }}{% endif %}"
    "{% if RETRIEVAL is defined %}\n\nContext:\n{{ RETRIEVAL }}{% endif %}"
)

#: The most steps (loop iterations and calls, filters included) one rendering may take.
MAX_STEPS = 250_000
#: The most characters (or items) a rendering may build: the whole prompt, and any one value.
MAX_SIZE = 64 * 1024 * 1024
TOO_LARGE = "the template computes a value too large to hold"
TOO_MUCH = f"the template takes more than {MAX_STEPS:,} steps (loop iterations and calls) to render"


class TemplateWorkError(Exception):
    """A rendering went past `MAX_STEPS` or `MAX_SIZE` (turned into a PromptRenderError)."""


_STEPS: contextvars.ContextVar[list[int]] = contextvars.ContextVar("template_steps")
# A width or count past this in a format string ("%2000000000d", "{:>2000000000}") is refused.
_WIDE_FORMAT = re.compile(r"\d{9,}")


def _charge(steps: int = 1) -> None:
    budget = _STEPS.get(None)
    if budget is None:
        return
    budget[0] -= steps
    if budget[0] < 0:
        raise TemplateWorkError(TOO_MUCH)


def _check_size_arguments(args: Iterable[Any]) -> None:
    for value in args:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SIZE:
            raise TemplateWorkError(TOO_LARGE)


def _check_format(template: Any) -> None:
    """Refuse a format string asking for a width past `MAX_SIZE` ("%2000000000d")."""
    if isinstance(template, str) and any(int(width) > MAX_SIZE for width in _WIDE_FORMAT.findall(template)):
        raise TemplateWorkError(TOO_LARGE)


def _power_too_large(base: Any, exponent: Any) -> bool:
    """Whether ``base ** exponent`` of two integers would have more than 8 x `MAX_SIZE` bits."""
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0 or abs(base) <= 1:
        return False
    return exponent * abs(base).bit_length() > 8 * MAX_SIZE


def _bounded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)  # keeps jinja's pass_context & co. markers
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _charge()
        _check_size_arguments((*args[1:], *kwargs.values()))
        if name == "format":
            _check_format(next((a for a in args if isinstance(a, str)), None))
        return function(*args, **kwargs)

    return bounded


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with the work of a rendering bounded.

    Every loop iteration, call and filter costs a step (at most `MAX_STEPS` a rendering);
    ``*`` and ``**`` may not build a value past `MAX_SIZE`; a call or filter given a count
    or width past `MAX_SIZE` ("x"|center(2000000000)) is refused; ``lipsum`` is not offered.
    """

    intercepted_binops = frozenset({"*", "**", "%"})

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        _charge()
        if operator == "*":
            for sized, count in ((left, right), (right, left)):
                if (
                    isinstance(sized, str | list | tuple)
                    and isinstance(count, int)
                    and len(sized) * count > MAX_SIZE
                ):
                    raise TemplateWorkError(TOO_LARGE)
        elif operator == "%":
            _check_format(left)
        elif _power_too_large(left, right):
            raise TemplateWorkError(TOO_LARGE)
        return super().call_binop(context, operator, left, right)

    def call(self, context: jinja2.runtime.Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        _charge()
        _check_size_arguments((*args, *kwargs.values()))
        if getattr(obj, "__name__", "") in ("format", "format_map"):
            # The sandbox hands str.format over wrapped (its safe formatter): the string is the bound one's.
            _check_format(getattr(getattr(obj, "__wrapped__", obj), "__self__", None))
        return super().call(context, obj, *args, **kwargs)

    def bounded_iter(self, iterable: Any) -> Iterator[Any]:
        """``iterable``, one step charged per item (every ``for`` loop goes through it)."""
        for item in iterable:
            _charge()
            yield item


def new_environment(*, keep_trailing_newline: bool = False) -> _BoundedSandbox:
    """A bounded sandbox (:class:`_BoundedSandbox`, filters bounded, no ``lipsum``): the
    prompt templates' (one trailing newline dropped), or the configuration file's
    (``keep_trailing_newline``). A template it compiles must go through :func:`bound_loops`
    and be rendered by :func:`render_bounded` for its work to be bounded."""
    environment = _BoundedSandbox(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=keep_trailing_newline,
        auto_reload=False,
    )
    environment.globals.pop("lipsum", None)
    environment.filters = {name: _bounded_filter(name, f) for name, f in environment.filters.items()}
    return environment


_ENV = new_environment()


def bound_loops(ast: jinja2.nodes.Template) -> jinja2.nodes.Template:
    """``ast`` with the iterable of every ``for`` loop passed through `_BoundedSandbox.bounded_iter`."""
    for loop in ast.find_all(jinja2.nodes.For):
        loop.iter = jinja2.nodes.Call(
            jinja2.nodes.EnvironmentAttribute("bounded_iter"),
            [loop.iter],
            [],
            None,
            None,
        )
    return ast


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
            return render_bounded(self.compiled, variables)
        except TemplateWorkError as exc:
            raise PromptRenderError(f"{self.origin}: {exc}") from None
        except (MemoryError, OverflowError):
            raise PromptRenderError(f"{self.origin}: {TOO_LARGE}") from None
        except jinja2.UndefinedError as exc:
            raise PromptRenderError(f"{self.origin}: {exc.message}") from None
        except jinja2.exceptions.SecurityError as exc:
            raise PromptRenderError(f"{self.origin}: {internals_message(exc)}") from None
        except RecursionError:
            raise PromptRenderError(f"{self.origin}: {TOO_DEEP}") from None
        except jinja2.TemplateError as exc:
            raise PromptRenderError(f"{self.origin}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - a filter raising on a value (e.g. int('x'))
            raise PromptRenderError(f"{self.origin}: {type(exc).__name__}: {exc}") from None


def render_bounded(compiled: jinja2.Template, variables: Mapping[str, Any]) -> str:
    """Render ``compiled`` (made by :func:`new_environment` from :func:`bound_loops`' tree)
    in at most :data:`MAX_STEPS` steps and :data:`MAX_SIZE` characters; TemplateWorkError
    past either, what the template raises otherwise."""
    token = _STEPS.set([MAX_STEPS])
    try:
        return _join_bounded(compiled.generate(variables))
    finally:
        _STEPS.reset(token)


def _join_bounded(pieces: Iterator[str]) -> str:
    """The pieces of a rendering joined, stopping with TemplateWorkError past `MAX_SIZE` characters."""
    kept: list[str] = []
    size = 0
    for piece in pieces:
        size += len(piece)
        if size > MAX_SIZE:
            raise TemplateWorkError(TOO_LARGE)
        kept.append(piece)
    return "".join(kept)


def compile_template(
    source: str, origin: str, allowed: frozenset[str] = VARIABLES, role: str = "a prompt template"
) -> PromptTemplate:
    """Compile ``source``; raises ConfigError for a syntax error or an unknown variable.

    ``origin`` names the template in messages, e.g. ``benchmark.toml: [setup] system_prompt``.
    Line numbers in messages count from the template's first line. ``allowed`` are the
    variables the template may use (a benchmark prompt's by default) and ``role`` names the
    kind of template in the message about any other.
    """
    try:
        ast = _ENV.parse(source)
        check_no_internals(ast, origin)
        used = frozenset(jinja2.meta.find_undeclared_variables(ast))
        compiled = _ENV.from_string(bound_loops(ast))
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"{origin}: template syntax error at line {exc.lineno}: {exc.message}") from None
    except (MemoryError, OverflowError):
        # Jinja folds constant expressions when it compiles: 'x' * 2000000000 is built then.
        raise ConfigError(f"{origin}: {TOO_LARGE}") from None
    except (RecursionError, SyntaxError):
        # Jinja's parser and code generator recurse per nesting level, and Python's compiler
        # refuses the generated code past ~100 nested blocks (IndentationError).
        raise ConfigError(f"{origin}: {TOO_DEEP}") from None
    unknown = sorted(used - allowed)
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        ordered = list(_VARIABLE_ORDER) if allowed == VARIABLES else sorted(allowed)
        may_use = ", ".join(ordered[:-1]) + f" and {ordered[-1]}" if len(ordered) > 1 else "".join(ordered)
        raise ConfigError(f"{origin}: undefined template variable {names} ({role} may use {may_use})")
    return PromptTemplate(source, origin, used, compiled)


TOO_DEEP = "the template is nested too deeply to be parsed"


def internals_message(exc: Exception) -> str:
    """The words for a template the sandbox stopped (jinja2's SecurityError)."""
    return f"the template reaches for Python internals, which templates may not use ({exc})"


def check_no_internals(ast: jinja2.nodes.Template, origin: str) -> None:
    """Raise ConfigError when the template names an attribute or key starting with ``_``
    (``x.__init__``, ``x['_y']``, ``x|attr('__init__')``).

    The sandbox refuses these when they are evaluated; finding them in the source makes a
    template that would only reach them for some questions fail before any request.
    """
    found: dict[str, int] = {}
    stack: list[jinja2.nodes.Node] = [ast]
    while stack:  # iterative: the tree may be as deep as the parser allowed
        node = stack.pop()
        name: object = None
        if isinstance(node, jinja2.nodes.Getattr):
            name = node.attr
        elif isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Const):
            name = node.arg.value
        elif isinstance(node, jinja2.nodes.Filter) and node.name == "attr" and node.args:
            first = node.args[0]
            name = first.value if isinstance(first, jinja2.nodes.Const) else None
        if isinstance(name, str) and name.startswith("_"):
            found[name] = min(found.get(name, node.lineno), node.lineno)
        stack.extend(node.iter_child_nodes())
    if found:
        names = sorted(found, key=lambda n: (found[n], n))
        raise ConfigError(
            f"{origin}: the template reaches for Python internals at line {found[names[0]]}"
            f" ({', '.join(repr(n) for n in names)}), which templates may not use"
        )


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

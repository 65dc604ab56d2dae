"""The jinja2 environment of the HTML reports: templates shipped in ``kag/render/templates``,
autoescaping on, undefined names an error."""

from __future__ import annotations

import functools
import html

import jinja2
from markupsafe import Markup


def _escape(value: object) -> object:
    """Every ``{{ value }}`` of a template: markup passes, anything else is escaped.

    Escaped as :func:`html.escape` spells it (``&quot;``, ``&#x27;``) rather than as
    markupsafe does (``&#34;``, ``&#39;``): the same characters are escaped either way,
    and the pages stay byte-identical to those kag wrote before its templates.
    """
    if hasattr(value, "__html__"):
        return value
    return Markup(html.escape(str(value)))


@functools.cache
def environment() -> jinja2.Environment:
    """The shared environment (built once): autoescape for every template, whatever its name."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kag.render", "templates"),
        autoescape=True,
        finalize=_escape,
        undefined=jinja2.StrictUndefined,
    )
    env.globals["zip"] = zip
    return env


def render_template(name: str, **context: object) -> Markup:
    """``templates/<name>`` rendered with ``context``, as markup (safe to insert in a page)."""
    return Markup(environment().get_template(name).render(**context))

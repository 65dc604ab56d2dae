"""templates: the work of a rendering is bounded (steps, sizes), and ordinary templates render within them."""

from __future__ import annotations

import pytest

from kag.errors import ConfigError
from kag.generation import templates
from kag.generation.templates import MAX_STEPS, PromptRenderError, compile_template

VARIABLES = {"INPUT": "What is 50% of 1000000000?", "CHOICE": "a: x\nb: y"}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{% for i in range(3) %}{% for j in range(2) %}{{ i }}{{ j }} {% endfor %}{% endfor %}",
         "00 01 10 11 20 21 "),
        ("{{ INPUT|upper }}|{{ INPUT|length }}", "WHAT IS 50% OF 1000000000?|26"),
        ("{% for line in CHOICE.splitlines() %}{{ loop.index }}={{ line }};{% endfor %}", "1=a: x;2=b: y;"),
        ("{{ 'ab' * 3 }}{{ [1] * 2 }}{{ 2 ** 10 }}{{ '%05d' % 42 }}{{ '{:>4}'.format(7) }}", "ababab[1, 1]102400042   7"),
        ("{{ 'x'|center(5) }}|{{ range(100000)|list|length }}", "  x  |100000"),
        ("{% macro f(n) %}{% if n %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}", "54321"),
    ],
)  # fmt: skip
def test_ordinary_templates_render(source: str, expected: str) -> None:
    assert compile_template(source, "p.md").render(VARIABLES) == expected


@pytest.mark.parametrize(
    "source",
    [
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
        "{% for c in INPUT * 1000 %}{% for d in INPUT * 1000 %}{% endfor %}{% endfor %}",
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
    ],
)
def test_templates_that_only_compute_stop_after_a_bounded_number_of_steps(source: str) -> None:
    template = compile_template(source, "p.md")
    with pytest.raises(PromptRenderError, match=rf"^p\.md: the template takes more than {MAX_STEPS:,} steps"):
        template.render(VARIABLES)


def test_the_step_budget_is_per_rendering() -> None:
    assert MAX_STEPS < 3 * 100_000  # three renderings take more than one budget
    template = compile_template("{% for i in range(100000) %}{% endfor %}ok", "p.md")
    assert [template.render(VARIABLES) for _ in range(3)] == ["ok"] * 3


@pytest.mark.parametrize(
    "source",
    [
        "{% set n = 2000000000 %}{{ 'x' * n }}",
        "{% set n = 2000000000 %}{{ n * 'x' }}",
        "{% set n = 100000000 %}{{ [INPUT] * n }}",
        "{% set n = 10 %}{{ n ** 1000000000 }}",
        "{{ 'x'|center(2000000000) }}",
        "{{ INPUT|indent(2000000000, true) }}",
        "{{ 'x'.ljust(2000000000) }}",
        "{{ '%2000000000d'|format(1) }}",
        "{{ '%2000000000d' % 1 }}",
        "{{ '{:2000000000}'.format(1) }}",
        "{% set s = INPUT * 1000000 %}{{ s }}{{ s }}{{ s }}",  # each value fits, the prompt does not
    ],
)
def test_values_past_the_size_cap_are_too_large(source: str) -> None:
    assert templates.MAX_SIZE == 64 * 1024 * 1024
    template = compile_template(source, "p.md")
    with pytest.raises(PromptRenderError, match=r"^p\.md: the template computes a value too large to hold$"):
        template.render(VARIABLES)


@pytest.mark.parametrize("source", ["{{ 'x' * 2000000000 }}", "{{ range(2000000000)|list }}"])
def test_a_constant_too_large_is_too_large_not_nested_too_deeply(source: str) -> None:
    with pytest.raises(PromptRenderError, match=r"^p\.md: the template computes a value too large to hold$"):
        compile_template(source, "p.md").render(VARIABLES)


def test_lipsum_is_not_offered() -> None:
    with pytest.raises(ConfigError, match=r"^p\.md: undefined template variable 'lipsum'"):
        compile_template("{{ lipsum(1000000) }}", "p.md")

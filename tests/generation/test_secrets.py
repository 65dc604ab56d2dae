"""kag.generation.secrets: every spelling of a secret is redacted; URL credentials."""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus

import pytest

from kag.generation.secrets import Redactor, display_url, redact_toml, secret_forms, url_credentials

KEY = 'k3y-With_odd/chars+ "é\\'


@pytest.mark.parametrize(
    "spelling",
    [
        KEY,
        json.dumps(KEY)[1:-1],
        json.dumps(KEY, ensure_ascii=False)[1:-1],
        json.dumps(json.dumps(KEY)[1:-1])[1:-1],
        quote(KEY, safe=""),
        quote(KEY, safe="").lower(),  # lower-case percent escapes
        quote(KEY),
        quote_plus(KEY),
        KEY.upper(),
        KEY.lower(),
        KEY.translate(str.maketrans("-_", "_-")),
        KEY.translate(str.maketrans("-_", "__")),
        KEY.upper().translate(str.maketrans("-_", "_-")),
    ],
)
def test_every_spelling_is_redacted(spelling: str) -> None:
    assert Redactor.of([KEY])(f"before {spelling} after") == "before *** after"


def test_forms_are_distinct_spellings_and_short_secrets_are_left_alone() -> None:
    assert {KEY, quote_plus(KEY), json.dumps(KEY)[1:-1]} <= secret_forms(KEY)
    redact = Redactor.of(["ab", "abc-long", "abc"])
    assert redact.secrets == ("abc-long", "abc")
    assert redact("ab abc_LONG abcd") == "ab *** ***d"
    assert Redactor.of([])("unchanged") == "unchanged"


def test_url_credentials_and_display_url() -> None:
    assert url_credentials("http://host:1/v1") == frozenset()
    assert url_credentials("http://alice:p%40ss@host/v1") == {"alice:p%40ss", "alice:p@ss", "p%40ss", "p@ss"}
    assert url_credentials("https://tok3n@host") == {"tok3n"}
    assert display_url("http://alice:pw@127.0.0.1:8/v1") == "http://***@127.0.0.1:8/v1"
    assert display_url("http://127.0.0.1:8/v1") == "http://127.0.0.1:8/v1"


def test_redact_toml_works_on_the_values_and_keeps_the_rest() -> None:
    import tomllib

    text = (
        '# a comment with a quote " and sk-abcdef\n'
        "[p]\n"
        'key = "sk-\\u0061bcdef"\n'
        'wrapped = """sk-\\\n    abcdef"""\n'
        "literal = 'sk-abcdef'\n"
        "kept = '''lit \"\" ' x'''\n"
        'quotes = """a"\\"""""\n'
        'url = "http://u:sk-abc\\u0064ef@h"\n'
        'other = "keep \\u00e9 \\"q\\" # not a comment"\n'
    )
    out = redact_toml(text, Redactor.of(["sk-abcdef"]))
    assert tomllib.loads(out) == {
        "p": {
            "key": "***",
            "wrapped": "***",
            "literal": "***",
            "kept": 'lit "" \' x',
            "quotes": 'a"""',
            "url": "http://u:***@h",
            "other": 'keep é "q" # not a comment',
        }
    }
    assert out.splitlines()[0] == '# a comment with a quote " and ***'
    assert out.splitlines()[-1] == 'other = "keep \\u00e9 \\"q\\" # not a comment"'  # as written
    assert redact_toml('k = "unterminated', Redactor.of(["sk-abcdef"])).startswith("# (not kept")

"""JUnit XML of a graded tree (``kag stats --format junit``, ``kag stats compare --format junit``).

What CI systems read natively (Jenkins, GitLab, the GitHub test reporters, Azure): one
``<testsuite>`` per setup and dataset, one ``<testcase>`` per graded file (``classname`` =
the dataset, ``name`` = the question, ``time`` = the generation seconds when the file
records them): ``<failure>`` for a wrong answer, ``<error>`` for an error file (and, under
``--grade extracted``, for a reply with no extractable answer), ``<skipped>`` for a file of
a question without an answer key. One more suite, ``kag.gates``, holds a testcase per CI
gate given, failed when the gate fails. The counts of each suite are the JSON report's.

Valid against the JUnit schema Jenkins publishes (``junit-10.xsd`` of the xUnit plugin).
Built with :mod:`xml.etree.ElementTree`, which escapes markup; the characters XML 1.0
forbids (C0 controls but tab, LF and CR; lone surrogates; U+FFFE, U+FFFF) are written as
``\\xNN`` / ``\\uNNNN`` text, since no XML parser would read them back.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kag.grading.mcq.metrics import duration_secs
from kag.grading.mcq.rule import Outcome
from kag.textsafe import neutralize_commands

if TYPE_CHECKING:
    from kag.datasets import Datasets
    from kag.grading.mcq.skipped import SkippedFile
    from kag.grading.record import GradedFile

#: The name of the suite of CI gates.
GATES_SUITE = "kag.gates"

#: Longest message attribute (characters); the element's text holds up to BODY_CHARS.
MESSAGE_CHARS = 200
BODY_CHARS = 4000

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """``text`` with each character XML 1.0 forbids written as ``\\xNN`` or ``\\uNNNN``, and
    no GitHub workflow command (:func:`~kag.textsafe.neutralize_commands`): the document
    may be printed in a CI log."""

    def escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return neutralize_commands(_NOT_XML.sub(escape, text))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Case:
    """One testcase: ``outcome`` is OK, WRONG or ERR, or None for a skipped file.
    ``expected`` is the answer key, ``given`` the response (or the error text of an error
    file), ``reason`` why an ERR is one (``"error file"`` or ``"no extractable answer"``)."""

    dataset: str
    question: str
    setup: str
    outcome: Outcome | None
    expected: str | None
    given: str | None
    secs: float | None = None
    reason: str = "error file"
    model: str | None = None
    provider: str | None = None


@dataclass(frozen=True)
class Gate:
    """A CI gate given on the command line (``--fail-under 50``) and its verdict (None = passed)."""

    name: str
    verdict: str | None


def cases_from_records(
    records: Iterable[GradedFile],
    datasets: Datasets,
    open_records: Iterable[GradedFile] = (),
    skipped: Iterable[SkippedFile] = (),
    *,
    extracted: bool = False,
) -> list[Case]:
    """The cases of a grading run that kept its records (with ``extracted``, each
    MCQ file's extracted grade), its open-question records and its skipped files."""
    cases = []
    for r in records:
        question = datasets.get(r.dataset, r.question)
        gold = question.mcq.answer if question is not None and question.mcq is not None else None
        outcome, reason = r.outcome, "error file"
        if extracted and r.extracted is not None and r.outcome is not Outcome.ERR:
            outcome = r.extracted
            reason = "no extractable answer"
        given = r.response if r.response is not None else r.error
        config = r.config
        cases.append(
            Case(
                r.dataset,
                r.question,
                r.setup,
                outcome,
                gold,
                given,
                duration_secs(r.generation_ns) if r.generation_ns is not None else None,
                reason,
                config.model if config is not None else None,
                config.provider if config is not None else None,
            )
        )
    for o in open_records:
        question = datasets.get(o.dataset, o.question)
        answers = question.open.answers if question is not None and question.open is not None else ()
        given = o.response if o.response is not None else o.error
        secs = duration_secs(o.generation_ns) if o.generation_ns is not None else None
        cases.append(Case(o.dataset, o.question, o.setup, o.outcome, " | ".join(answers), given, secs))
    for s in skipped:
        cases.append(Case(s.dataset, s.question, s.setup, None, None, None))
    return cases


def cases_from_answers(answers: Iterable[GradedFile], *, extracted: bool = False) -> list[Case]:
    """The cases of the graded answers a comparison pairs (they record no generation time)."""
    cases = []
    for a in answers:
        config = a.config
        # An ERR answer with a config is an ok file: under --grade extracted, not extracted.
        reason = "no extractable answer" if extracted and config is not None else "error file"
        cases.append(
            Case(
                a.dataset,
                a.question,
                a.setup,
                a.outcome,
                a.gold,
                a.response_or_error,
                None,
                reason,
                config.model if config is not None else None,
                config.provider if config is not None else None,
            )
        )
    return cases


def _secs(value: float) -> str:
    return f"{value:.3f}"


def _add_properties(parent: ET.Element, properties: Mapping[str, str | None]) -> None:
    element = ET.SubElement(parent, "properties")
    for name, value in properties.items():
        ET.SubElement(element, "property", name=name, value=xml_text(value or ""))


def _testcase(suite: ET.Element, case: Case) -> None:
    attrs = {"classname": xml_text(case.dataset), "name": xml_text(case.question)}
    if case.secs is not None:
        attrs["time"] = _secs(case.secs)
    element = ET.SubElement(suite, "testcase", attrs)
    given = (case.given or "").strip()
    if case.outcome is None:
        ET.SubElement(element, "skipped", message="the question has no answer key")
    elif case.outcome is Outcome.WRONG:
        message = f"expected {case.expected!r}, given {_cut(given, MESSAGE_CHARS)!r}"
        failure = ET.SubElement(element, "failure", type="wrong answer", message=xml_text(message))
        failure.text = xml_text(_cut(case.given or "", BODY_CHARS))
    elif case.outcome is Outcome.ERR:
        first = given.splitlines()[0] if given else ""
        message = f"{case.reason}: {_cut(first, MESSAGE_CHARS)}" if first else case.reason
        error = ET.SubElement(element, "error", type=case.reason, message=xml_text(message))
        error.text = xml_text(_cut(case.given or "", BODY_CHARS))


def render_junit(
    cases: Sequence[Case],
    gates: Sequence[Gate] = (),
    *,
    prefix: str = "",
    version: str = "",
    grade: str | None = None,
    suite_properties: Mapping[tuple[str, str], Mapping[str, str]] | None = None,
) -> str:
    """The JUnit document: suites by (setup, dataset) in name order, then ``kag.gates``
    when a gate was given. ``grade`` (``"extracted"``) is named in each suite's properties,
    and ``suite_properties`` of (setup, dataset) after it (the values of the measures a
    request asked for, such as the judge's)."""
    root = ET.Element("testsuites", name="kag")
    groups: dict[tuple[str, str], list[Case]] = {}
    for case in cases:
        groups.setdefault((case.setup, case.dataset), []).append(case)
    totals = [0, 0, 0, 0.0]
    for (setup, dataset), members in sorted(groups.items()):
        failures = sum(1 for c in members if c.outcome is Outcome.WRONG)
        errors = sum(1 for c in members if c.outcome is Outcome.ERR)
        skipped = sum(1 for c in members if c.outcome is None)
        secs = sum(c.secs for c in members if c.secs is not None)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=xml_text(f"{setup}/{dataset}"),
            tests=str(len(members)),
            failures=str(failures),
            errors=str(errors),
            skipped=str(skipped),
            time=_secs(secs),
        )
        configured = next((c for c in members if c.model is not None), None)
        properties = {
            "setup": setup,
            "dataset": dataset,
            "model": configured.model if configured is not None else None,
            "provider": configured.provider if configured is not None else None,
            "prefix": prefix,
            "kag_version": version,
        }
        if grade is not None:
            properties["grade"] = grade
        properties.update((suite_properties or {}).get((setup, dataset), {}))
        _add_properties(suite, properties)
        for case in members:
            _testcase(suite, case)
        totals[0] += len(members)
        totals[1] += failures
        totals[2] += errors
        totals[3] += secs
    if gates:
        failed = sum(1 for g in gates if g.verdict is not None)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=GATES_SUITE,
            tests=str(len(gates)),
            failures=str(failed),
            errors="0",
            skipped="0",
        )
        _add_properties(suite, {"prefix": prefix, "kag_version": version})
        for gate in gates:
            element = ET.SubElement(suite, "testcase", classname=GATES_SUITE, name=xml_text(gate.name))
            if gate.verdict is not None:
                failure = ET.SubElement(
                    element, "failure", type="gate", message=xml_text(_cut(gate.verdict, 1000))
                )
                failure.text = xml_text(gate.verdict)
        totals[0] += len(gates)
        totals[1] += failed
    root.set("tests", str(totals[0]))
    root.set("failures", str(totals[1]))
    root.set("errors", str(totals[2]))
    root.set("time", _secs(totals[3]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"

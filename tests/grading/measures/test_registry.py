"""The registry of measures (kag.grading.measures.registry) and how the blocks use it."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from kag.grading.mcq.metrics import GradeRun, Metrics, Tally
from kag.grading.measures import measure, merge_by_setup, merge_first, register, registered, run_fields
from kag.grading.measures.declarations import Block
from kag.grading.measures.registry import ByQuestion, Measure
from kag.grading.record import GradedFile, Outcome
from kag.render.columns import STATS_COLUMNS
from kag.render.stats import metrics_to_json
from kag.results.model import Usage


def test_a_block_holds_one_state_per_measure_with_a_state_in_registration_order() -> None:
    stateful = [m for m in registered() if m.state is not None]
    block = Metrics(correct=1)
    assert [type(s) for s in block.states] == [type(m.new_state()) for m in stateful]
    assert len(Tally().states) == len(block.states)
    # Every counter and every declared value of a measure is a value of the block.
    for m in registered():
        for name in m.value_names:
            block.value(name)
    with pytest.raises(AttributeError, match="'nope'"):
        block.nope  # noqa: B018


def test_a_state_that_is_no_counters_needs_its_merge_and_a_stateless_measure_adds_nothing() -> None:
    with pytest.raises(ValueError, match="needs its merge"):
        Measure("again", list)
    with pytest.raises(ValueError, match="needs a state"):
        Measure("again", None, lambda state, graded: None)


def test_a_list_state_merges_in_order_and_finishes_into_the_block_s_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from statistics import median

    from kag.grading.measures import registry

    def add(lengths: list[int], graded: GradedFile) -> None:
        lengths.append(len(graded.response or ""))

    def merge(into: list[int], other: list[int]) -> list[int]:
        into.extend(other)
        return into

    lengths = Measure(
        "lengths",
        list,
        add,
        merge=merge,
        finish=lambda values: median(values) if values else None,
        values={"median_length": lambda v: v},
    )
    monkeypatch.setitem(registry._REGISTRY, "lengths", lengths)
    monkeypatch.setattr(registry, "_generation", registry._generation + 1)
    one, two = Tally(), Tally()
    for text in ("a", "abcd"):
        one.add(GradedFile("d", text, "s", Outcome.WRONG, text))
    two.add(GradedFile("d", "x", "s", Outcome.WRONG, "abcdefghi"))
    frozen = two.freeze()
    one.merge(frozen)
    assert one.freeze().median_length == 4
    assert frozen.median_length == 9  # the merged-from block is left as it was
    assert Tally().freeze().median_length is None


def test_the_names_are_the_measures_the_stats_columns_show() -> None:
    shown = {c.measure for c in STATS_COLUMNS}
    assert shown <= {m.name for m in registered()} | {"epochs"}


def test_the_json_keys_of_a_block_are_declared_by_the_measures() -> None:
    declared = [key for m in registered() for key in m.json_keys]
    assert len(declared) == len(set(declared))
    # The optional keys of a block are each its measure's own, named after it, and conditional.
    optional = {"extracted", "open", "usage", "epochs", "evidence", "judge", "retrieval_quality"}
    assert all(measure(name).json_keys == (name,) for name in optional)
    assert all(k.when is not None for name in optional for k in measure(name).json)
    assert set(declared) - optional == set(metrics_to_json(Metrics(correct=1)))


def test_a_block_of_a_report_has_the_keys_whose_condition_holds() -> None:
    from kag.grading.mcq.summary import SetupSummary, Summary
    from kag.render.stats import block_to_json

    m = Metrics(correct=1, open_total=1, open_exact=1, open_f1=1.0)
    plain = Summary(1, 1, 0, 0, 0, (SetupSummary("s", m, {}),))
    assert "open" not in block_to_json(Block("s", None, m, None, plain))
    with_open = dataclasses.replace(plain, scorable_open_questions=1)
    block = block_to_json(Block("s", None, m, None, with_open))
    assert list(block)[-1] == "open"
    assert block["open"] == {"total": 1, "errors": 0, "exact_match": 1.0, "f1": 1.0}


def test_a_measure_names_itself_on_the_columns_it_declares() -> None:
    assert all(c.measure == m.name for m in registered() for c in m.columns)
    assert [c.header for c in measure("retrieval").columns] == ["RET(s)", "VERTICE", "RELATION", "PROPERTY"]


def test_a_name_or_a_counter_is_registered_once() -> None:
    class Again:
        correct: int = 0

    with pytest.raises(ValueError, match="'accuracy' is registered already"):
        register(Measure("accuracy", Again))
    with pytest.raises(ValueError, match=r"values \['correct'\] belong to another measure"):
        register(Measure("again", Again))
    with pytest.raises(ValueError, match="a run field needs its merge"):
        register(Measure("again", Again, run_field="again"))
    with pytest.raises(ValueError, match="the run field 'epochs' belongs to another measure"):
        register(Measure("again", Again, run_field="epochs", merge_trees=merge_first))
    assert "again" not in {m.name for m in registered()}


def test_the_fields_of_a_run_besides_its_own_are_owned_by_measures() -> None:
    owned = {field: m.name for field, m in run_fields().items()}
    assert owned == {
        "extract": "extracted",
        "scorable_open_questions": "open",
        "epochs": "epochs",
        "evidence": "evidence",
        "judge": "judge",
    }
    assert set(owned) <= {f.name for f in dataclasses.fields(GradeRun)}


def test_merging_by_setup_renames_sorts_and_keeps_none_when_a_tree_lacks_it() -> None:
    def rename(label: str, setup: str) -> str:
        return f"{label}/{setup}"

    parts = [("b", {("x", "d"): 1}), ("a", {("y", "d"): 2, ("x", "c"): 3})]
    assert list(merge_by_setup(parts, rename).items()) == [  # type: ignore[union-attr]
        (("a/x", "c"), 3),
        (("a/y", "d"), 2),
        (("b/x", "d"), 1),
    ]
    assert merge_by_setup([("a", {}), ("b", None)], rename) is None
    assert merge_first([("a", "letter"), ("b", "letter")], rename) == "letter"


def test_an_unknown_measure_is_named_in_the_error() -> None:
    assert measure("timing").counters == ("generation_ns", "generation_samples")
    with pytest.raises(KeyError, match="'nope'"):
        measure("nope")


def test_adding_a_record_runs_each_measure_and_merging_sums_them() -> None:
    wrong = GradedFile("d", "1", "s", Outcome.WRONG, "x", abstained=True, generation_ns=5, context_length=3)
    ok = GradedFile("d", "2", "s", Outcome.OK, "A", generation_ns=7)
    one, two = Tally(), Tally()
    one.add(wrong)
    two.add(ok)
    one.merge(two.freeze())
    m = one.freeze()
    assert (m.correct, m.incorrect, m.errors, m.abstentions) == (1, 1, 0, 1)
    assert (m.generation_ns, m.generation_samples, m.context_bytes, m.context_samples) == (12, 2, 3, 1)
    assert m.retrieval is None
    assert m.usage is None


def test_open_files_and_usage_and_the_extracted_grade_are_counted_by_their_measures() -> None:
    tally = Tally()
    tally.add_open(1.0, 1.0, False)
    tally.add_open(0.0, 0.25, True)
    tally.add(GradedFile("d", "1", "s", Outcome.OK, "A", extracted=Outcome.WRONG, usage=Usage(3, 4)))
    tally.add(GradedFile("d", "2", "s", Outcome.OK, "A", extracted=Outcome.ERR, usage=Usage(2**40, 1)))
    m = tally.freeze()
    assert (m.open_total, m.open_errors, m.open_exact) == (2, 1, 1)
    assert m.open_f1 == pytest.approx(1.25)
    assert (m.extracted_correct, m.extracted_incorrect, m.not_extracted) == (0, 1, 1)
    assert m.usage is not None
    assert (m.usage.samples, m.usage.prompt_tokens, m.usage.completion_tokens) == (1, 3, 4)
    assert m.unbelievable_usage == 1


def _module_of(m: Measure) -> Any:
    """The module whose ``MEASURE`` is ``m``."""
    import sys

    return next(mod for mod in list(sys.modules.values()) if getattr(mod, "MEASURE", None) is m)


def test_a_measure_module_imports_only_the_registry_and_what_it_reads() -> None:
    for m in registered():
        module = _module_of(m)
        imported = [
            line.split()[1]
            for line in inspect.getsource(module).splitlines()
            if line.startswith(("from ", "import "))
        ]
        assert not [name for name in imported if name.startswith("kag.grading.mcq")], module.__name__


def test_every_module_of_the_package_but_its_parts_registers_one_measure() -> None:
    import pkgutil

    import kag.grading.measures as package

    modules = {f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)}
    parts = {f"{package.__name__}.{name}" for name in ("registry", "declarations", "layout")}
    owners = [_module_of(m).__name__ for m in registered()]
    assert sorted(owners) == sorted(modules - parts)


def test_two_reducers_cannot_share_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from kag.grading.measures import reducers, registry
    from kag.grading.measures.declarations import Reducer

    assert "pass_at" in {r.key for r in reducers()}
    again = Measure("again", reducers=(Reducer("pass_at", lambda counts, n: None),))
    monkeypatch.setitem(registry._REGISTRY, "again", again)
    with pytest.raises(ValueError, match=r"share a key: \['pass_at'\]"):
        reducers()


def test_a_kept_part_by_question_is_finished_sorted_by_key_then_question_whatever_order_it_came_in():
    part = ByQuestion()
    part.merge(ByQuestion({("s2", "d"): {"q1": 1, "q2": 2}, ("s1", "d"): {"q3": 3, "q10": 10, "q1": 1}}))
    part.merge(ByQuestion({("s2", "d"): {"q3": 3}}))
    finished = part.finish()
    assert [(key, list(questions.items())) for key, questions in finished.items()] == [
        (("s1", "d"), [("q1", 1), ("q10", 10), ("q3", 3)]),
        (("s2", "d"), [("q1", 1), ("q2", 2), ("q3", 3)]),
    ]
    finished[("s2", "d")]["q9"] = 9  # a new mapping: the part is left as it was
    assert "q9" not in part[("s2", "d")]

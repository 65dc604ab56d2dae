"""The collector paused while objects are made (kag.gcpause)."""

from __future__ import annotations

import gc

import pytest

from kag.gcpause import collector_paused


def _generation_of(obj: object) -> int | None:
    for generation in range(3):
        if any(o is obj for o in gc.get_objects(generation=generation)):
            return generation
    return None


def test_the_collector_is_paused_inside_and_left_as_it_was_after():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused(keep=True):
            pass
        assert not gc.isenabled()  # it was paused already: it stays so
    finally:
        gc.enable()


def test_what_is_kept_goes_to_the_oldest_generation_unwalked_and_the_rest_stays_young():
    gc.collect()  # no collection comes between an object made and its check
    with collector_paused():
        young = [[]]
    assert _generation_of(young) == 0
    with collector_paused(keep=True):
        kept = [[]]
    assert _generation_of(kept) == 2 and _generation_of(kept[0]) == 2
    assert gc.get_freeze_count() == 0 and gc.get_count()[0] < 50  # nothing left to walk young


def test_objects_a_program_keeps_frozen_stay_frozen():
    frozen = [[]]
    gc.collect()
    gc.freeze()
    try:
        count = gc.get_freeze_count()
        with collector_paused(keep=True):
            made = [[]]
        assert gc.get_freeze_count() == count and _generation_of(frozen) is None  # still frozen
        assert _generation_of(made) == 0
    finally:
        gc.unfreeze()


def test_nothing_is_kept_when_the_block_fails():
    made: list[object] = []
    gc.collect()
    with pytest.raises(ValueError), collector_paused(keep=True):
        made.append([])
        raise ValueError("stop")
    assert gc.isenabled() and _generation_of(made[0]) == 0

"""The walk of the index (kag/view/walk.py): a question folder's listing gives the entries
`kag stats` grades, and its signature changes with every change a rescan must see."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from kag.view.walk import Folder, epoch_number, fill_stamps, iter_entries, list_folder, signature


def _folder(path: Path) -> Folder:
    warnings: list[str] = []
    folder = list_folder(str(path), warnings)
    assert folder is not None and warnings == []
    return folder


@pytest.fixture
def question(tmp_path: Path) -> Path:
    q = tmp_path / "med" / "q1"
    (q / "epochs" / "2").mkdir(parents=True)
    (q / "kag.json").write_text("{}")
    (q / "native.json").write_text("{}")
    (q / "epochs" / "2" / "kag.json").write_text("{}")
    return q


def test_the_entries_are_those_kag_stats_reads(question: Path) -> None:
    (question / "notes.txt").write_text("x")
    (question / "sub").mkdir()
    (question / "link.json").symlink_to(question / "kag.json")
    (question / "native.json.tmp").write_text("{")
    for name in ("02", "1", "\u0662", "x"):  # not later epochs
        (question / "epochs" / name).mkdir()
        (question / "epochs" / name / "kag.json").write_text("{}")
    (question / "epochs" / "2" / "notes.txt").write_text("x")
    (question / "epochs" / "2" / "kag.json.tmp").write_text("{")
    (question / "epochs" / "3.json").write_text("{}")
    entries = {
        rel: (epoch, setup) for rel, epoch, setup, _, _ in iter_entries(_folder(question), "med/q1", "")
    }
    assert entries == {
        "med/q1/kag.json": (1, "kag"),
        "med/q1/native.json": (1, "native"),
        "med/q1/notes.txt": (1, None),
        "med/q1/sub": (1, None),
        "med/q1/link.json": (1, None),
        "med/q1/epochs/2/kag.json": (2, "kag"),
    }
    stamp = next(
        s for rel, _, _, s, _ in iter_entries(_folder(question), "med/q1", "") if rel.endswith("/kag.json")
    )
    st = os.lstat(question / "kag.json")
    assert stamp == (st.st_size, st.st_mtime_ns)


def test_the_signature_changes_with_each_change_a_rescan_must_see(question: Path) -> None:
    before = signature(_folder(question))
    assert signature(_folder(question)) == before
    changes = [
        lambda: os.utime(question / "kag.json", ns=(1, 10**18)),  # rewritten in place, same size
        lambda: (question / "kag.json").write_text("{ }"),  # another size
        lambda: (question / "gpt.json").write_text("{}"),  # a new file
        lambda: (question / "native.json").unlink(),  # a file gone
        lambda: (question / "epochs" / "3").mkdir(),  # a new epoch
        lambda: (question / "epochs" / "3" / "kag.json").write_text("{}"),
        lambda: os.utime(question / "epochs" / "2" / "kag.json", ns=(1, 10**17)),
    ]
    seen = {before}
    for change in changes:
        change()
        after = signature(_folder(question))
        assert after not in seen
        seen.add(after)
    (question / "native.json").write_text("{}")  # the same listing again: the same signature
    os.utime(question / "native.json", ns=(1, 5))
    again = signature(_folder(question))
    os.utime(question / "native.json", ns=(1, 5))
    assert signature(_folder(question)) == again


def test_a_folder_in_place_of_a_file_changes_the_signature(question: Path) -> None:
    before = signature(_folder(question))
    (question / "native.json").unlink()
    (question / "native.json").mkdir()
    assert signature(_folder(question)) != before


def test_a_question_folder_that_is_gone_or_a_link_is_not_listed(question: Path, tmp_path: Path) -> None:
    warnings: list[str] = []
    assert list_folder(str(tmp_path / "none"), warnings) is None
    (tmp_path / "link").symlink_to(question)
    assert list_folder(str(tmp_path / "link"), warnings) is None
    assert len(warnings) == 2 and str(tmp_path / "link") in warnings[1]


def test_epoch_numbers_are_two_and_more_in_ascii_decimal() -> None:
    assert [epoch_number(n) for n in ("2", "10", "1", "0", "02", "\u0662", "-3", "")] == [
        2,
        10,
        None,
        None,
        None,
        None,
        None,
        None,
    ]


def test_a_listing_stamped_afterwards_has_the_signature_of_a_stamped_one(question: Path) -> None:
    (question / "notes.txt").write_text("x")
    (question / "sub").mkdir()
    (question / "link.json").symlink_to(question / "kag.json")
    (question / "epochs" / "3.json").write_text("{}")
    warnings: list[str] = []
    kinds = list_folder(str(question), warnings, stamped=False)
    assert kinds is not None and None in kinds.stamps
    stamped = _folder(question)
    assert kinds.names == stamped.names
    fill_stamps(kinds, str(question))
    assert kinds.stamps == stamped.stamps and signature(kinds) == signature(stamped)


@pytest.mark.parametrize(
    "stamps", [[], [0, -1], [5917, 1764676983123456789, 7, 2**70], [None, None, 12, 3]], ids=str
)
def test_the_signature_is_the_digest_of_the_names_and_the_stamps_written_out(
    stamps: list[int | None],
) -> None:
    # The digest an index already holds of a folder: the same formula, however it is computed.
    folder = Folder([f"n{i}.json" for i in range(len(stamps) // 2)] + ["epochs\0d"], stamps)
    text = "\n".join(folder.names) + "\0" + ",".join(map(str, stamps))
    assert signature(folder) == hashlib.blake2b(text.encode(), digest_size=16).digest()

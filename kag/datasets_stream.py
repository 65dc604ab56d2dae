"""The datasets file read as a stream, into a lean table of its questions: what grading
reads of each (its kind, answer key, option keys, accepted answers, evidence), not its
texts (the question's input, the options' texts), and where its entry lies in the file,
to read it back whole on demand (:meth:`LeanQuestions.full_question`).

:func:`read_lean` reads the file in chunks of 256 KiB and parses one entry at a time with
the whole-file reader's JSON rules (:func:`kag.datasets_entries.entry_decoder`) and
validation (:func:`kag.datasets_entries.parse_question`): its memory is the table (about
35 bytes a question) and a chunk, never the file's objects. It gives up (None) at the
first thing the whole-file reader words better: any error or problem (which the whole-file
reader lists with its lines and its cap), a lone surrogate (an entry that escapes one is
checked by orjson, as that reader checks the whole file), an entry nested deeply, a file
that is not a regular file or that changed while read. The caller then reads the file whole (:func:`kag.datasets.load_datasets`),
so every message stays the whole-file reader's and a file is refused or accepted alike.
"""

from __future__ import annotations

import codecs
import math
import os
import re
import stat
import zlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, ValuesView
from dataclasses import dataclass
from json import JSONDecodeError
from json.scanner import make_scanner
from pathlib import Path
from typing import IO, Any

import orjson

from kag.datasets_entries import (
    MCQ,
    SURROGATE,
    Duplicate,
    Question,
    entry_decoder,
    entry_name_problem,
    parse_question,
)
from kag.errors import InputError
from kag.textfile import MAX_FILE_BYTES, read_failure

#: Bytes read at a time (an entry longer than what is buffered doubles the next read).
CHUNK_BYTES = 1 << 18
#: An entry with more brackets than this has its depth measured; deeper than it, the
#: whole-file reader decides (its limit counts the levels above the entry too).
MAX_DEPTH = 256

_WS = re.compile(r"[ \t\n\r]*")
#: A key without escapes or control characters, with the colon after it.
_KEY = re.compile(r'[ \t\n\r]*"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*')
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
#: The code of a question kept whole (without its texts) in ``LeanQuestions._kept``; the
#: others' is 1 + the code of their MCQ's form (:meth:`LeanFile.code`).
_KEPT = 0


class DatasetsChanged(InputError):
    """The datasets file changed since it was read: an entry cannot be read back from it."""


class _Unusual(Exception):
    """Something the whole-file reader words (an error, a problem) or checks over the whole
    file (an escaped surrogate): the stream gives up."""


Stamp = tuple[int, int, int, int]


def _stamp(info: os.stat_result) -> Stamp:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


class LeanFile:
    """The file a lean table was read from: its stamp when read (device, inode, size,
    modification time), and the option forms its MCQs share."""

    def __init__(self, path: Path, stamp: Stamp) -> None:
        self.path = path
        self.stamp = stamp
        # code -> the MCQ of (answer, option keys), its options' texts "": 0 is "no MCQ".
        self.shapes: list[MCQ | None] = [None]
        self._codes: dict[tuple[str | None, tuple[str, ...]], int] = {}

    def code(self, mcq: MCQ | None) -> int:
        """The code of ``mcq``'s answer and option keys (0 for None)."""
        return 0 if mcq is None else self._code(mcq.answer, mcq.options)

    def _code(self, answer: str | None, options: dict[str, str]) -> int:
        key = (answer, tuple(options))
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self.shapes)
            self.shapes.append(MCQ(dict.fromkeys(key[1], ""), answer))
        return code

    def shape(self, answer: str | None, options: dict[str, str]) -> MCQ:
        """The MCQ of the questions with this answer key and these options (their keys),
        without the options' texts: one object for all of them."""
        return self.shapes[self._code(answer, options)]  # type: ignore[return-value]  # code > 0

    def read_entry(self, start: int, length: int, crc: int) -> str:
        """The text of the entry at bytes ``start`` to ``start + length`` of the file;
        DatasetsChanged when the file is not the one read (its stamp or the entry's CRC-32)."""
        try:
            # Non-blocking: a pipe put in the file's place must not hang the reader.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                if _stamp(os.fstat(fd)) != self.stamp:
                    raise self.changed()
                data = os.pread(fd, length, start)
            finally:
                os.close(fd)
        except OSError as exc:
            raise read_failure(self.path, "datasets file", exc) from None
        if len(data) != length or zlib.crc32(data) != crc:
            raise self.changed()
        return data.decode("utf-8")

    def changed(self) -> DatasetsChanged:
        return DatasetsChanged(
            f"{self.path}: the datasets file changed since it was read: run the command again to read it anew"
        )


class _Questions(ValuesView[Question]):
    """The questions of a :class:`LeanQuestions`, made one at a time in file order."""

    def __init__(self, table: LeanQuestions) -> None:
        super().__init__(table)
        self._table = table

    def __iter__(self) -> Iterator[Question]:
        table = self._table
        for i in range(len(table)):
            yield table.question_at(i)


class LeanQuestions(Mapping[str, Question]):
    """The questions of one dataset of a lean table, question id -> :class:`Question`, in
    the file's order. Each question is made when asked for, without its texts (``input``
    is ``""``, and the options' texts; the option keys, the answer key, the accepted
    answers and the evidence are the file's): :meth:`full_question` reads it whole.

    Kept per question: the id's UTF-8 bytes in one buffer, a slot of an open-addressing
    hash table (hashed by CRC-32, the same in every process: a table may be pickled), the
    code of its MCQ's form (shared by the questions of the same answer and option keys),
    and its entry's offset, length and CRC-32 in the file. A question with accepted answers
    or evidence is kept as a Question (without its texts)."""

    __slots__ = ("_codes", "_ends", "_file", "_ids", "_kept", "_spans", "_table", "dataset")

    def __init__(self, dataset: str, file: LeanFile) -> None:
        self.dataset = dataset
        self._file = file
        self._ids = bytearray()
        self._ends = array("I")  # where each id ends in _ids
        self._table = array("I", bytes(4 * 8))  # index + 1 of the id hashed there, 0 = free (seal)
        self._codes = array("B")  # "I" once a code is past 255
        self._spans = array("I")  # offset, length and CRC-32 of each entry in the file
        self._kept: dict[int, Question] = {}

    def __len__(self) -> int:
        return len(self._ends)

    def _id(self, i: int) -> bytearray:
        return self._ids[self._ends[i - 1] if i else 0 : self._ends[i]]

    def _index(self, key: bytes) -> int:
        """The index of the question whose id is ``key`` (UTF-8), -1 when none is."""
        table, ids, ends = self._table, self._ids, self._ends
        mask = len(table) - 1
        slot = zlib.crc32(key) & mask
        while found := table[slot]:
            i = found - 1
            start = ends[i - 1] if i else 0
            if ends[i] - start == len(key) and ids.startswith(key, start):
                return i
            slot = (slot + 1) & mask
        return -1

    def add(self, question: Question, start: int, length: int, crc: int) -> None:
        """Keep ``question`` (read without its texts, its MCQ the file's shape of its form:
        ``parse_question(..., shapes=file.shape)``), its entry being ``length`` bytes at
        ``start`` with CRC-32 ``crc``; :meth:`seal` once every question is added."""
        self._ids += question.id.encode()
        self._ends.append(len(self._ids))
        mcq = question.mcq
        if question.open is not None or question.evidence or question.evidence_triples:
            self._kept[len(self._codes)] = question
            self._codes.append(_KEPT)
        else:
            code = self._file.code(mcq) + 1
            if code > 255 and self._codes.typecode == "B":
                self._codes = array("I", self._codes)
            self._codes.append(code)
        self._spans.extend((start, length, crc))

    def seal(self) -> bool:
        """Index the ids added; False when one of them is written twice."""
        size = 8
        while 5 * size < 8 * len(self._ends):  # at most 5/8 full
            size *= 2
        table = self._table = array("I", bytes(4 * size))
        ids, ends, mask = self._ids, self._ends, size - 1
        start = 0
        for i, end in enumerate(ends):
            key = ids[start:end]
            slot = zlib.crc32(key) & mask
            while found := table[slot]:
                j = found - 1
                other = ends[j - 1] if j else 0
                if ends[j] - other == end - start and ids.startswith(key, other):
                    return False
                slot = (slot + 1) & mask
            table[slot] = i + 1
            start = end
        return True

    def question_at(self, i: int, qid: str | None = None) -> Question:
        """The question at index ``i`` (in file order), without its texts."""
        code = self._codes[i]
        if code == _KEPT:
            return self._kept[i]
        return Question(
            self.dataset, self._id(i).decode() if qid is None else qid, "", self._file.shapes[code - 1]
        )

    def count(self, test: Callable[[Question], bool]) -> int:
        """How many questions pass ``test``, which reads what a question asks for (its MCQ,
        accepted answers and evidence), not its id: tested once per MCQ form."""
        found = sum(1 for q in self._kept.values() if test(q))
        for code, n in Counter(self._codes).items():
            if code != _KEPT and test(Question(self.dataset, "", "", self._file.shapes[code - 1])):
                found += n
        return found

    def _find(self, qid: object) -> int:
        if not isinstance(qid, str):
            return -1
        try:
            return self._index(qid.encode())
        except UnicodeEncodeError:  # a folder name that was not UTF-8: no id of the file
            return -1

    def __getitem__(self, qid: str) -> Question:
        i = self._find(qid)
        if i < 0:
            raise KeyError(qid)
        return self.question_at(i, qid)

    def get(self, qid: str, default: Any = None) -> Any:
        i = self._find(qid)
        return default if i < 0 else self.question_at(i, qid)

    def __contains__(self, qid: object) -> bool:
        return self._find(qid) >= 0

    def __iter__(self) -> Iterator[str]:
        for i in range(len(self._ends)):
            yield self._id(i).decode()

    def values(self) -> ValuesView[Question]:
        return _Questions(self)

    def full_question(self, qid: str) -> Question | None:
        """The question ``qid`` with its texts, its entry read again from the file (None when
        the dataset has no such question); DatasetsChanged when the file changed since."""
        i = self._find(qid)
        if i < 0:
            return None
        text = self._file.read_entry(*self._spans[3 * i : 3 * i + 3])
        try:
            value = entry_decoder().decode(text)
        except (ValueError, RecursionError, Duplicate):
            raise self._file.changed() from None
        question = parse_question(self.dataset, qid, value, [])
        if question is None:
            raise self._file.changed()
        return question


@dataclass(frozen=True)
class LeanDatasets:
    """A datasets file read by :func:`read_lean`: its datasets in file order, and the file."""

    datasets: dict[str, LeanQuestions]
    file: LeanFile


def read_lean(path: Path) -> LeanDatasets | None:
    """The lean table of the datasets file ``path`` (see the module's docstring); None when
    the whole-file reader must read it: it is not a regular file, or it is not valid (its
    message is that reader's), or it holds what only that reader checks."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            return None  # a pipe is read once, by the whole-file reader; a large file refused there
        with open(path, "rb") as handle:
            stamp = _stamp(os.fstat(handle.fileno()))
            file = LeanFile(path, stamp)
            datasets = _Stream(handle, file).read()
            if _stamp(os.fstat(handle.fileno())) != stamp:
                return None  # written while read
    except (OSError, _Unusual):
        return None
    return LeanDatasets(datasets, file)


class _Stream:
    """The file as text, a buffer at a time: ``buf[pos:]`` is what is not read yet, and
    ``mark_byte`` the byte offset of ``buf[mark]``."""

    def __init__(self, handle: IO[bytes], file: LeanFile) -> None:
        self.handle = handle
        self.file = file
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        # The C scanner of json.loads, one value at a given offset (a key, an entry).
        self.scan = make_scanner(entry_decoder(self._float))  # type: ignore[arg-type]
        # An escaped surrogate makes the whole-file reader check the file with orjson, which
        # refuses a lone surrogate and a number too large for a float: each entry with one
        # is checked so, and a number too large anywhere leaves the file to that reader.
        self.surrogates = self.infinite = False
        self.buf = ""
        self.pos = 0
        self.mark = 0
        self.mark_byte = 0
        self.ascii = True  # whether buf is ASCII: a character is a byte
        self.eof = False

    def _float(self, text: str) -> float:
        value = float(text)
        if math.isinf(value):
            self.infinite = True
        return value

    def check_surrogates(self, start: int, end: int) -> None:
        """The orjson check of ``buf[start:end]`` (a key or an entry), when it escapes a surrogate."""
        if self.buf.find("\\u", start, end) < 0 or not SURROGATE.search(self.buf, start, end):
            return
        self.surrogates = True
        try:
            orjson.loads(self.buf[start:end].encode())
        except orjson.JSONDecodeError:
            raise _Unusual from None

    def byte_at(self, index: int) -> int:
        """The byte offset of ``buf[index]`` (at or after the last one asked for)."""
        self.mark_byte += index - self.mark if self.ascii else len(self.buf[self.mark : index].encode())
        self.mark = index
        return self.mark_byte

    def more(self) -> bool:
        """Read on (a chunk, or as much as is buffered for a long entry); False at the end."""
        if self.eof:
            return False
        data = self.handle.read(max(CHUNK_BYTES, len(self.buf) - self.pos))
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError:
            raise _Unusual from None
        self.byte_at(self.pos)
        self.buf = self.buf[self.pos :] + text
        self.pos = self.mark = 0
        self.ascii = self.buf.isascii()
        self.eof = not data
        return not self.eof

    def next_char(self) -> str:
        """The character after the whitespace at ``pos`` ("" at the end of the file)."""
        while True:
            match = _WS.match(self.buf, self.pos)
            assert match is not None
            self.pos = match.end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, char: str) -> None:
        if self.next_char() != char:
            raise _Unusual
        self.pos += 1

    def key(self) -> str:
        """The object key at ``pos`` with its colon: a string a directory can be named by."""
        if self.next_char() != '"':
            raise _Unusual
        while True:
            try:
                key, end = self.scan(self.buf, self.pos)
            except JSONDecodeError:
                if self.more():
                    continue
                raise _Unusual from None
            if entry_name_problem(key):
                raise _Unusual
            self.check_surrogates(self.pos, end)
            self.pos = end
            self.expect(":")
            return key

    def entry(self) -> tuple[object, int, int]:
        """The entry (a JSON object) at ``pos``: its value, and where it starts and ends in ``buf``."""
        if self.next_char() != "{":
            raise _Unusual
        while True:
            try:
                value, end = self.scan(self.buf, self.pos)
            except (JSONDecodeError, StopIteration):
                if self.more():
                    continue
                raise _Unusual from None
            except (ValueError, RecursionError, Duplicate):
                raise _Unusual from None
            start, self.pos = self.pos, end
            return value, start, end

    def after_item(self) -> bool:
        """Past the comma after an item (True) or the brace that closes the object (False)."""
        char = self.next_char()
        self.pos += 1
        if char == ",":
            return True
        if char == "}":
            return False
        raise _Unusual

    def read(self) -> dict[str, LeanQuestions]:
        self.expect("{")
        datasets: dict[str, LeanQuestions] = {}
        if self.next_char() == "}":
            self.pos += 1
        else:
            while True:
                name = self.key()
                if name in datasets:
                    raise _Unusual
                self.expect("{")
                datasets[name] = self.questions(name)
                if not self.after_item():
                    break
        if self.next_char() != "" or (self.surrogates and self.infinite):
            raise _Unusual  # more after the object, or what orjson refuses
        return datasets

    def questions(self, name: str) -> LeanQuestions:
        """The questions of the dataset ``name``, whose object is open."""
        table = LeanQuestions(name, self.file)
        if self.next_char() == "}":
            self.pos += 1
            return table
        scan, key_at, shape = self.scan, _KEY.match, self.file.shape
        while True:
            # The usual key (no escape) and entry in one step; the general ones else.
            match = key_at(self.buf, self.pos)
            if match is None:
                qid = self.key()
            else:
                qid, self.pos = match.group(1), match.end()
                if entry_name_problem(qid):
                    raise _Unusual
            buf, pos = self.buf, self.pos
            try:
                if pos >= len(buf) or buf[pos] != "{":
                    raise StopIteration
                value, end = scan(buf, pos)
                start = self.pos = pos
            except (JSONDecodeError, StopIteration):  # at the end of the buffer, or not an object
                value, start, end = self.entry()
                buf = self.buf
            except (ValueError, RecursionError, Duplicate):
                raise _Unusual from None
            else:
                self.pos = end
            if end - start > 2 * MAX_DEPTH and _too_deep(buf, start, end):  # a level is 2 characters
                raise _Unusual
            if buf.find("\\u", start, end) >= 0:
                self.check_surrogates(start, end)
            question = parse_question(name, qid, value, [], shape)
            if question is None:
                raise _Unusual
            data = buf[start:end].encode()
            offset = self.mark_byte + start - self.mark if self.ascii else self.byte_at(start)
            table.add(question, offset, len(data), zlib.crc32(data))
            self.mark, self.mark_byte = end, offset + len(data)
            if end < len(buf) and buf[end] in ",}":
                self.pos = end + 1
                if buf[end] == ",":
                    continue
            elif self.after_item():
                continue
            if not table.seal():
                raise _Unusual  # an id written twice
            return table


def _too_deep(text: str, start: int, end: int) -> bool:
    """Whether the JSON ``text[start:end]`` nests more than :data:`MAX_DEPTH` arrays and objects."""
    if text.count("[", start, end) + text.count("{", start, end) <= MAX_DEPTH:
        return False
    depth = 0
    for match in _BRACKETS.finditer(text, start, end):
        token = match.group()
        if token == "[" or token == "{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif token == "]" or token == "}":
            depth -= 1
    return False

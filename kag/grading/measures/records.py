"""Records (``records``, asked for by name): one record per graded file, kept by the walk
for the features that pair files across setups (comparisons, flips, exports); the MCQ
files' in ``GradeRun.records``, the open questions' apart in ``GradeRun.open_records``.

It counts nothing and shows nothing: it keeps. A kept record carries the file's model
configuration (``config``), which a walk that keeps no record does not build.
"""

from __future__ import annotations

from kag.grading.measures.registry import Files, Measure, register

MEASURE = register(
    Measure(
        "records",
        needs=frozenset({"config"}),
        keeps={"records": Files, "open_records": Files},
        optional=True,
    )
)

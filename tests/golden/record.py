"""Regenerate the golden outputs: ``python tests/golden/record.py [CASE-GLOB ...]``.

Every case of ``tests/golden/cases.py`` (or those matching a glob) is run and its stdout,
stderr, exit code and written files are stored under ``tests/golden/<case>/``. Med-KAG
cases are left as they are when ``../shared/data/med-kag`` is absent. Review the diff
(``git diff tests/golden``) before committing: a golden changes only on purpose.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from fnmatch import fnmatchcase
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from tests.golden.cases import CASES, MED_KAG_DATASETS, Case, golden_dir, run


def record(case: Case) -> str:
    with tempfile.TemporaryDirectory(prefix="kag-golden-") as tmp:
        outcome = run(case, Path(tmp))
    target = golden_dir(case)
    shutil.rmtree(target, ignore_errors=True)
    for name, data in outcome.parts().items():
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return f"{case.name}: exit {outcome.exit_code}"


def main(globs: list[str]) -> int:
    cases = [c for c in CASES if not globs or any(fnmatchcase(c.name, g) for g in globs)]
    if not MED_KAG_DATASETS.is_file():
        print(f"{MED_KAG_DATASETS} is absent: Med-KAG goldens kept as they are", file=sys.stderr)
        cases = [c for c in cases if not c.med_kag]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for line in pool.map(record, cases):
            print(line)
    print(f"{len(cases)} case(s) recorded")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Degenerate input: wall time and peak memory of each case, comparable before and after a change.

    PYTHONPATH=<checkout> .venv/bin/python benchmarks/bench_degenerate.py [CASE ...] [--timeout 300]

Each case runs in a fresh interpreter that imports kag from ``PYTHONPATH``, so running the
script once with an older checkout and once with this one gives the two columns of a
before/after table. Figures: the case's wall-clock seconds (input generation excluded) and
the process's peak resident memory (``ru_maxrss``, input and interpreter included: about
60 MB is Python with numpy loaded). A case still running after ``--timeout`` seconds is
killed and reported as such.

Cases (each input is generated in the child, deterministically):

- ``parse-nested``: `parse_model_output` on 1.8 MB of ``[1,1,1,…`` where a new ``[``
  opens every 2,000 bytes (900 levels): each failed attempt at a bracket used to re-read
  the rest of the text. Target: well under 1 s.
- ``parse-strings``: 1.8 MB of ``["[1,",…`` (brackets inside strings, each a fresh start).
- ``parse-think``: 1.8 MB of unclosed ``<think>`` tags (the reasoning-block pattern used to
  re-read the rest of the text for each).
- ``assign-10k``: `grade_triplets` (exact mode) on one entry of 10,000 gold × 10,000
  predicted triplets (90% of them equal to a gold triplet, in shuffled order, the rest with
  another target). Target: bounded memory (the alignment matrix is 800 MB of float64).
- ``irt2-line``: `iter_line_blocks` over a 48 MiB prediction line (1 MiB blocks).
- ``endless-reply``: one chat request (8 s deadline) to a loopback server whose 200 reply
  streams spaces for ever. Before: the body was read until the deadline (8.9 s, 1207 MB
  peak here, more on a faster machine); after: refused at the 64 MiB reply cap (1.4 s,
  114 MB peak).
- ``bootstrap-cap``: `paired_bootstrap_diff` over 10,000 paired answers at 1,000,000
  resamples, the most `kag stats compare --resamples` accepts: the cost at the bound.
- ``judge-think``: `parse_verdict` on a 600 KB judge reply of repeated ``<think`` (the
  reasoning-block patterns re-read the rest of the reply from each).
- ``extract-think``: the ``--extract letter`` grade of one 300 KB response of repeated
  ``<think>``, a ``</think>``, repeated ``<think`` and the answer.
- ``extract-spaces``: the ``--extract letter`` grade of ``"B"`` + 60,000 spaces + ``"x"``.
- ``extract-keys``: the ``--extract letter`` grade of a 300 KB response that is all key
  mentions (``"A or B, not C; "`` repeated): the cost of reading each mention.
- ``evidence-long``: `evidence_found` for a 150 KB evidence name that occurs, never as
  whole words, at every offset of a 300 KB retrieval text.
- ``template-loops``: a judge prompt of two nested ``range(100000)`` loops, rendered.
- ``regex-huge``: ``--extract 'regex:(?:a{1000000}){1000000}'`` (compiling it unrolls the
  repeats).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kag.errors import KagError

MB = 1 << 20


def _parse_case(text: str) -> Callable[[], object]:
    from kag.grading.triplets.io import parse_model_output

    def run() -> object:
        try:
            return type(parse_model_output(text)).__name__
        except RecursionError:
            return "RecursionError"

    return run


def case_parse_nested() -> Callable[[], object]:
    return _parse_case(("[" + "1," * 999) * 900)


def case_parse_strings() -> Callable[[], object]:
    return _parse_case(("[" + '"[1,",' * 300_000)[:1_800_000])


def case_parse_think() -> Callable[[], object]:
    return _parse_case("<think>" * (1_800_000 // 7))


def case_assign_10k() -> Callable[[], object]:
    import orjson

    from kag.grading.triplets.model import DEFAULT_RELATIONS
    from kag.grading.triplets.score import grade_triplets

    rng = random.Random(0)

    def triplet(source: str, target: str, relation: str) -> dict[str, object]:
        return {
            "source": {"title": source, "type": "T"},
            "target": {"title": target, "type": "T"},
            "relation": relation,
            "weight": 0.5,
        }

    gold = [triplet(f"s{k}", f"t{k}", rng.choice(DEFAULT_RELATIONS)) for k in range(10_000)]
    predicted = [
        dict(item, target={"title": f"t{rng.randrange(10_000)}", "type": "T"}) if rng.random() < 0.1 else item
        for item in gold
    ]
    rng.shuffle(predicted)
    folder = Path(tempfile.mkdtemp(prefix="bench-degenerate-"))
    (folder / "gold.jsonl").write_bytes(orjson.dumps({"id": 1, "triplets": gold}))
    (folder / "pred.jsonl").write_bytes(orjson.dumps({"id": 1, "triplets": predicted}))

    def run() -> object:
        report = grade_triplets(folder / "gold.jsonl", [folder / "pred.jsonl"])
        return f"composite {report.runs[0].composite:.4f}"

    return run


def case_irt2_line() -> Callable[[], object]:
    from kag.grading.irt2.io.files import iter_line_blocks

    path = Path(tempfile.mkdtemp(prefix="bench-degenerate-")) / "head.csv"
    path.write_bytes(b"100,0" + b",2,0.5" * (48 * MB // 6) + b"\n")

    def run() -> object:
        return f"{sum(len(block) for _, block in iter_line_blocks(path, 'predictions file')) // MB} MiB read"

    return run


def case_bootstrap_cap() -> Callable[[], object]:
    from kag.grading.compare import paired_bootstrap_diff

    rng = random.Random(0)
    a = [rng.random() < 0.6 for _ in range(10_000)]
    b = [rng.random() < 0.5 for _ in range(10_000)]

    def run() -> object:
        ci = paired_bootstrap_diff(a, b, n_resamples=1_000_000)
        return f"[{ci.low:.4f}, {ci.high:.4f}]"

    return run


def case_judge_think() -> Callable[[], object]:
    from kag.grading.judge import parse_verdict

    reply = "<think" * (600_000 // 6) + " CORRECT"
    return lambda: parse_verdict(reply).value


def _extracted(response: str) -> Callable[[], object]:
    from kag.grading.mcq.extracted import compile_spec, extracted_outcome
    from kag.grading.mcq.rule import AnswerKey

    key = AnswerKey("B", ("A", "B", "C", "D"))
    spec = compile_spec("letter")
    return lambda: extracted_outcome(spec, response, key).name


def case_extract_think() -> Callable[[], object]:
    return _extracted("<think>" * 20_000 + "</think>" + "<think" * 27_000 + "\nThe answer is B.")


def case_extract_spaces() -> Callable[[], object]:
    return _extracted("B" + " " * 60_000 + "x")


def case_extract_keys() -> Callable[[], object]:
    return _extracted(("A or B, not C; " * 20_000)[:300_000])


def case_evidence_long() -> Callable[[], object]:
    from kag.grading.evidence import evidence_found

    name, text = "a" * 150_000, "a" * 300_000
    return lambda: evidence_found([name], text)


def case_template_loops() -> Callable[[], object]:
    from kag.grading.judge import JudgeItem, Kind, compile_judge_prompt, render_judge_prompt

    source = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ QUESTION }}"
    source += "{{ RESPONSE }}{{ REFERENCE }}"

    def run() -> object:
        prompt = compile_judge_prompt(source, "judge.md")
        item = JudgeItem("d", "q", "s", Kind.OPEN, "question", "reference", "response", exact=False)
        return len(render_judge_prompt(prompt, item))

    return run


def case_endless_reply() -> Callable[[], object]:
    import asyncio
    import threading

    from kag.generation.config import OpenAIProvider
    from kag.generation.providers import ChatRequest, OpenAIClient

    ready = threading.Event()
    port: list[int] = []

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[")
        block = b" " * MB
        try:
            while True:
                writer.write(block)
                await writer.drain()
        except (ConnectionError, OSError):
            pass

    async def serve() -> None:
        server = await asyncio.start_server(endless, "127.0.0.1", 0)
        port.append(server.sockets[0].getsockname()[1])
        ready.set()
        await server.serve_forever()

    threading.Thread(target=lambda: asyncio.run(serve()), daemon=True).start()
    ready.wait()

    def run() -> object:
        client = OpenAIClient(OpenAIProvider("o", "k", f"http://127.0.0.1:{port[0]}/v1"), 8.0, 1)

        async def ask() -> object:
            try:
                return await client.chat(ChatRequest("m", "hi", 0.0))
            finally:
                await client.aclose()

        try:
            return asyncio.run(ask())
        except Exception as exc:  # noqa: BLE001 - the refusal is the figure
            return f"{type(exc).__name__}: {str(exc)[:90]}"

    return run


def case_regex_huge() -> Callable[[], object]:
    from kag.grading.extract import parse_extract_spec

    return lambda: parse_extract_spec("regex:(?:a{1000000}){1000000}").text


CASES: dict[str, Callable[[], Callable[[], object]]] = {
    "endless-reply": case_endless_reply,
    "parse-nested": case_parse_nested,
    "parse-strings": case_parse_strings,
    "parse-think": case_parse_think,
    "assign-10k": case_assign_10k,
    "irt2-line": case_irt2_line,
    "bootstrap-cap": case_bootstrap_cap,
    "judge-think": case_judge_think,
    "extract-think": case_extract_think,
    "extract-spaces": case_extract_spaces,
    "extract-keys": case_extract_keys,
    "evidence-long": case_evidence_long,
    "template-loops": case_template_loops,
    "regex-huge": case_regex_huge,
}


def _child(name: str) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-degenerate-") as scratch:
        tempfile.tempdir = scratch  # the cases' inputs go here and are removed with it
        _measure(name)


def _measure(name: str) -> None:
    run = CASES[name]()
    start = time.perf_counter()
    try:
        outcome = str(run())
    except (KagError, ValueError, RecursionError, MemoryError) as exc:  # a refusal is a figure too
        outcome = f"{type(exc).__name__}: {str(exc)[:80]}"
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(json.dumps({"seconds": seconds, "peak_mb": peak / MB, "outcome": outcome}))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "cases", nargs="*", metavar="CASE", help=f"cases to run (default: all): {', '.join(CASES)}"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds before a case is killed")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    unknown = [name for name in args.cases if name not in CASES]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    import kag

    print(f"kag from {Path(kag.__file__).parent}")
    print(f"{'case':15} {'seconds':>9} {'peak MB':>9}  outcome")
    for name in args.cases or CASES:
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--child", name],
                capture_output=True,
                text=True,
                timeout=args.timeout,
                env=os.environ,
                check=False,
            )
        except subprocess.TimeoutExpired:
            print(f"{name:15} {'>' + format(args.timeout, '.0f'):>9} {'':>9}  killed after the timeout")
            continue
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["?"])[-1]
            print(f"{name:15} {'':>9} {'':>9}  exit {done.returncode}: {last[:80]}")
            continue
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{name:15} {figures['seconds']:9.3f} {figures['peak_mb']:9.0f}  {figures['outcome']}")


if __name__ == "__main__":
    main()

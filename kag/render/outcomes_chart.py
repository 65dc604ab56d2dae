"""The chart of retrieval quality's outcomes split: per setup, its questions with gold
evidence and a retrieval split four ways, reached or missed (every gold triple retrieved;
without triples every gold entity) crossed with the answer right or wrong, as one stacked
bar. Drawn as inline SVG (its text escaped by ``templates/svg.html.j2``) for the
`kag stats --format html` page and `kag view`'s overview, from the same blocks as
`kag stats --format json`'s ``retrieval_quality.outcomes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from kag.grading.mcq.summary import SetupSummary
from kag.grading.measures.retrieval_quality import quality_to_json
from kag.render.templating import environment

#: The four parts of a bar, in its order: (key of ``outcomes``, what the key says, colour).
OUTCOME_PARTS = (
    ("reached_right", "reached, right", "#009E73"),
    ("reached_wrong", "reached, wrong (a reasoning miss)", "#E69F00"),
    ("missed_right", "missed, right", "#56B4E9"),
    ("missed_wrong", "missed, wrong (a retrieval miss)", "#D55E00"),
)

OUTCOMES_LEGEND = (
    "Per setup, the questions with gold evidence and a retrieval: reached = every gold triple "
    "retrieved (without triples, every gold entity), crossed with the strict grade; "
    "n = those questions (the retrieval_quality outcomes of kag stats --format json). "
    "Setups without such a question are not drawn."
)


def outcome_rows(summaries: Sequence[SetupSummary]) -> list[tuple[str, dict[str, int]]]:
    """(setup, its ``outcomes`` counts) of each setup whose retrieval-quality block has a
    question, in the order of ``summaries``."""
    rows = []
    for s in summaries:
        block = quality_to_json(s.overall)
        if block is not None:
            rows.append((s.setup, dict(block["outcomes"])))
    return rows


def outcomes_chart(summaries: Sequence[SetupSummary]) -> Markup:
    """One bar per setup that has retrieval quality (:func:`outcome_rows`), its four parts
    (:data:`OUTCOME_PARTS`) in proportion to its questions, each part's count on it when
    it is wide enough, and ``n`` after the bar; the key above. Empty when no setup has any."""
    rows = outcome_rows(summaries)
    if not rows:
        return Markup("")
    svg: Any = environment().get_template("svg.html.j2").module
    left, plot_w, right, row_h, key_h = 330, 480, 150, 22, 44
    width = left + plot_w + right
    height = key_h + row_h * len(rows) + 10
    out = [
        str(
            svg.open(
                width, height, "Gold evidence reached or missed, and the answer right or wrong, per setup"
            )
        )
    ]
    for i, (_, words, colour) in enumerate(OUTCOME_PARTS):
        kx, ky = 8 + 240 * i, 14
        out.append(f'<rect x="{kx}" y="{ky - 10}" width="12" height="12" fill="{colour}"/>')
        out.append(str(svg.text(f"{kx + 17}", f"{ky}", words, "start", "axis")))
    y = float(key_h)
    for setup, counts in rows:
        total = sum(counts.values())
        cy = y + row_h / 2
        out.append(str(svg.text(f"{left - 10}", f"{cy + 4:.1f}", setup, "end", "label")))
        at = float(left)
        for key, _, colour in OUTCOME_PARTS:
            count = counts[key]
            w = plot_w * count / total if total else 0.0
            if w > 0:
                out.append(
                    f'<rect class="outcome {key}" x="{at:.1f}" y="{cy - 8:.1f}" width="{w:.1f}" height="16" '
                    f'fill="{colour}"><title>{key}: {count}</title></rect>'
                )
                if w >= 10 * len(str(count)):
                    out.append(
                        f'<text x="{at + w / 2:.1f}" y="{cy + 4:.1f}" text-anchor="middle" fill="#ffffff" '
                        f'font-size="11" font-weight="600">{count}</text>'
                    )
            at += w
        out.append(str(svg.text(f"{left + plot_w + 10}", f"{cy + 4:.1f}", f"n={total}", "start", "value")))
        y += row_h
    out.append("</svg>")
    return Markup("".join(out))

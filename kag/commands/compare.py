"""`kag stats compare`, `kag stats flips`, `kag stats impact`: wiring only (see kag.grading.compare)."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated, Any

import typer

from kag.errors import UsageError


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    html = "html"


class TableFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


# Options shared with `kag stats`: accepted after the sub-command, or before it on `stats`.
DatasetsOpt = Annotated[str | None, typer.Option("--datasets", "-d", help="Datasets file (ground truth).")]
ResultsOpt = Annotated[str | None, typer.Option("--results", "-r", help="Result tree root [default: .]")]
PrefixOpt = Annotated[str | None, typer.Option("--prefix", help="File name prefix of the result files.")]
SetupOpt = Annotated[list[str] | None, typer.Option("--setup", help="Only setups matching this glob (repeatable).")]
DatasetOpt = Annotated[list[str] | None, typer.Option("--dataset", help="Only datasets matching this glob (repeatable).")]
OutputOpt = Annotated[str | None, typer.Option("--output", "-o", help="Write the report to this file instead of stdout.")]


def _inherited(ctx: typer.Context, name: str, value: Any) -> Any:
    """The sub-command's value, else the one given to `kag stats` before the sub-command."""
    if value not in (None, [], ()):
        return value
    parent = ctx.parent.params if ctx.parent is not None else {}
    return parent.get(name)


def _load(ctx: typer.Context, datasets: str | None, results: str | None, prefix: str | None,
          setup: list[str] | None, dataset: list[str] | None, named: tuple[str | None, ...] = ()):  # -> (AnswerSet, ...)
    """Grade the tree with the shared options; setups in ``named`` are loaded whatever ``--setup`` says."""
    import glob

    from kag.datasets import load_datasets
    from kag.grading.compare import load_answers

    datasets = _inherited(ctx, "datasets", datasets)
    if not datasets:
        raise UsageError("missing option '-d' / '--datasets' (the datasets file)")
    results = _inherited(ctx, "results", results) or "."
    prefix = _inherited(ctx, "prefix", prefix) or ""
    setups = tuple(_inherited(ctx, "setup", setup) or ())
    if setups:
        setups += tuple(glob.escape(n) for n in named if n)
    globs = tuple(_inherited(ctx, "dataset", dataset) or ())
    loaded = load_answers(load_datasets(datasets), results, prefix, setups, globs)
    for name in named:
        if name and name not in loaded.setups:
            where = "no graded answers after the filters" if name in loaded.tree_setups else "no such setup"
            raise UsageError(f"setup {name!r}: {where}; setups in {results}: {', '.join(loaded.tree_setups) or 'none'}")
    if not loaded.answers:
        raise UsageError(f"{results}: no graded result file (prefix {prefix!r}, setups {list(setups) or 'all'}, "
                         f"datasets {list(globs) or 'all'})")
    return loaded, (datasets, results, prefix)


def _emit(text: str, output: str | None) -> None:
    from kag.console import info
    from kag.report_html import write_report

    if output:
        write_report(output, text)
        info(f"kag: wrote {output}")
    else:
        sys.stdout.write(text)


def _json(document: object) -> str:
    import orjson

    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"


def register(stats_app: typer.Typer) -> None:
    @stats_app.command("compare")
    def compare(
        ctx: typer.Context,
        datasets: DatasetsOpt = None,
        results: ResultsOpt = None,
        prefix: PrefixOpt = None,
        setup: SetupOpt = None,
        dataset: DatasetOpt = None,
        baseline: Annotated[str | None, typer.Option(help="Setup to compare against [default: the best-ranked]")] = None,
        fail_if_worse_than: Annotated[
            str | None,
            typer.Option(help="Baseline setup; exit 1 when a setup is significantly worse than it (after Holm)."),
        ] = None,
        alpha: Annotated[float, typer.Option(help="Family-wise significance level (Holm).")] = 0.05,
        seed: Annotated[int, typer.Option(min=0, help="Bootstrap seed (reported).")] = 0,
        resamples: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 10_000,
        native: Annotated[str | None, typer.Option(help="html: the setup without retrieval for every KAG setup.")] = None,
        max_flips: Annotated[int, typer.Option(min=0, help="html: flips listed per direction and pair.")] = 50,
        output_format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
        output: OutputOpt = None,
    ) -> None:
        """Each setup against a baseline on the questions both answered: McNemar, paired bootstrap CI, Holm."""
        from kag import __version__
        from kag.console import info, warn
        from kag.grading import compare as lib
        from kag import report_html as rep

        if not 0 < alpha < 1:
            raise UsageError(f"--alpha {alpha}: must be between 0 and 1")
        if baseline and fail_if_worse_than and baseline != fail_if_worse_than:
            raise UsageError("--baseline and --fail-if-worse-than name different setups; give one")
        base = fail_if_worse_than or baseline
        loaded, (ds_path, res_path, pfx) = _load(ctx, datasets, results, prefix, setup, dataset, (base, native))
        known = loaded.setups
        if len(known) < 2:
            raise UsageError(f"only one setup ({known[0]}) has graded answers: nothing to compare")
        answers = loaded.answers
        if output_format is Format.html:
            analysis = lib.analyse(answers, base, alpha, resamples, seed, native)
            for note in analysis.notes:
                warn(note)
            run = analysis.comparisons
            assert run is not None
            meta = rep.PageMeta(datasets=ds_path, results=res_path, prefix=pfx or None, version=__version__)
            text = rep.render_html(rep.summaries_from_answers(answers), run, analysis.flips, analysis.impacts,
                                   meta, max_flips=max_flips)
        else:
            run = lib.compare_setups(answers, base or lib.best_setup(answers), None, alpha, resamples, seed)
            renderers = {
                Format.text: rep.comparisons_text,
                Format.markdown: rep.comparisons_markdown,
                Format.json: lambda r: _json(lib.comparison_run_to_json(r)),
            }
            text = renderers[output_format](run)
        _emit(text, output)
        significant = sum(1 for c in run.comparisons if c.significant)
        info(f"kag: {significant} of {len(run.comparisons)} comparison(s) against {run.baseline} significant "
             f"at alpha {alpha:g} (Holm)")
        if fail_if_worse_than:
            lib.gate_regressions(run)

    @stats_app.command("flips")
    def flips_command(
        ctx: typer.Context,
        a: Annotated[str, typer.Argument(metavar="A", help="First setup.")],
        b: Annotated[str, typer.Argument(metavar="B", help="Second setup.")],
        datasets: DatasetsOpt = None,
        results: ResultsOpt = None,
        prefix: PrefixOpt = None,
        dataset: DatasetOpt = None,
        max_chars: Annotated[int, typer.Option(min=0, help="Cut responses to N characters (0 = whole; JSON is never cut).")] = 120,
        output_format: Annotated[TableFormat, typer.Option("--format", help="Output format.")] = TableFormat.text,
        output: OutputOpt = None,
    ) -> None:
        """The questions A gets right and B does not, and the reverse, with both responses."""
        import glob

        from kag.console import info
        from kag.grading import compare as lib
        from kag import report_html as rep

        if a == b:
            raise UsageError(f"A and B are the same setup ({a})")
        loaded, _ = _load(ctx, datasets, results, prefix, [glob.escape(a), glob.escape(b)], dataset, (a, b))
        report = lib.flips(loaded.answers, a, b)
        renderers = {
            TableFormat.text: lambda r: rep.flips_text(r, max_chars),
            TableFormat.markdown: lambda r: rep.flips_markdown(r, max_chars),
            TableFormat.json: lambda r: _json(lib.flip_report_to_json(r)),
        }
        _emit(renderers[output_format](report), output)
        info(f"kag: {len(report.a_only)} question(s) only {a} got right, {len(report.b_only)} only {b}, "
             f"out of {report.paired} paired")

    @stats_app.command("impact")
    def impact(
        ctx: typer.Context,
        kag_setups: Annotated[list[str] | None, typer.Argument(metavar="[SETUP]...", help="KAG setups [default: every setup that retrieves].")] = None,
        datasets: DatasetsOpt = None,
        results: ResultsOpt = None,
        prefix: PrefixOpt = None,
        dataset: DatasetOpt = None,
        native: Annotated[str | None, typer.Option(help="The setup without retrieval to compare with [default: same model and provider].")] = None,
        output_format: Annotated[TableFormat, typer.Option("--format", help="Output format.")] = TableFormat.text,
        output: OutputOpt = None,
    ) -> None:
        """Accuracy of KAG setups by retrieved-subgraph size; questions retrieval helped or hurt."""
        from kag.console import warn
        from kag.grading import compare as lib
        from kag import report_html as rep

        loaded, _ = _load(ctx, datasets, results, prefix, None, dataset, (*(kag_setups or ()), native))
        known = loaded.setups
        plans = lib.plan_impacts(loaded.answers, kag_setups or None, native)
        if not plans:
            raise UsageError(f"no setup retrieves (no retrieval record, no augmented_generation); setups: {', '.join(known)}")
        for plan in plans:
            if plan.note:
                warn(plan.note)
        impacts = [lib.retrieval_impact(loaded.answers, p.setup, p.native) for p in plans]
        renderers = {
            TableFormat.text: rep.impact_text,
            TableFormat.markdown: rep.impact_markdown,
            TableFormat.json: lambda i: _json({"impacts": [lib.impact_to_json(x) for x in i]}),
        }
        _emit(renderers[output_format](impacts), output)


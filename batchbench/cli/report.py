"""``batchbench report``: the page to share (and its figures as JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .common import (
    AllowPartialOpt,
    FilesDatasetOpt,
    JobsDirOpt,
    LabelOpt,
    MarginOpt,
    SourcesArg,
    friendly,
    warn,
)


@friendly
def report(
    runs: SourcesArg,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="The page (default: report.html).", metavar="FILE"),
    ] = None,
    baseline: Annotated[
        str | None, typer.Option(help="Compare against this run.", metavar="RUN")
    ] = None,
    dataset: FilesDatasetOpt = None,
    jobs_dir: JobsDirOpt = Path("jobs"),
    label: LabelOpt = None,
    margin: MarginOpt = None,
    allow_partial: AllowPartialOpt = False,
    labels: Annotated[
        list[Path] | None,
        typer.Option(
            "--labels",
            metavar="FILE...",
            help="Physicians' verdicts (a filled `calibrate sheet`): adds each labelled"
            " run's calibration against them.",
        ),
    ] = None,
    length_adjusted: Annotated[
        bool,
        typer.Option(
            "--length-adjusted",
            metavar="",
            help="Show each run's length-adjusted mean beside its raw one (HealthBench"
            " Professional's rule: less 0.0147 per 500 characters beyond 2,000).",
        ),
    ] = False,
    checklist: Annotated[
        list[str] | None,
        typer.Option(
            "--checklist",
            metavar="NAME",
            help="Fill a reporting checklist from the runs' record: chart or mi-clear-llm"
            " (repeatable); a section of the page, and PAGE.NAME.md and PAGE.NAME.csv beside"
            " it.",
        ),
    ] = None,
    as_json: Annotated[
        Path | None,
        typer.Option(
            "--json",
            metavar="FILE",
            help="Also write the page's own figures as JSON: endorsed harm (rates, intervals,"
            " paired differences, every negative item), the prompts' templates and every"
            " request file, each with its SHA-256.",
        ),
    ] = None,
) -> None:
    """Write one self-contained HTML page: header, leaderboard, per-benchmark table,
    figures, the comparison, endorsed harm, the judge against physicians (with
    --labels), every case with each run's verdicts, and the failures.

    Example: batchbench report gpt-5.4-mini gpt-5.5 -o bedside.html
    """
    from ..views.page import page_record, render, write_page
    from ..views.page_sources import load_sources

    asked = _checklists(checklist or [])
    if _healthbench_page(runs, jobs_dir, label, baseline, output, bool(asked or labels)):
        return
    sources, ds = load_sources(runs, jobs_dir, dataset, label or (), warn=warn)
    sections = _calibrations(runs, jobs_dir, labels) if labels else []
    out = output or Path("report.html")
    record = page_record(sources, ds, length_adjusted=length_adjusted, margin=margin)
    filled = _fill(asked, sources, record, bool(sections), out.name)
    page = render(
        sources,
        ds,
        baseline,
        margin=margin,
        allow_partial=allow_partial,
        calibrations=sections,
        record=record,
        appendices=[html for html, _, _ in filled.values()],
    )
    write_page(out, page)
    typer.echo(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    for name, (_, markdown, table) in filled.items():
        _write_checklist(out, name, markdown, table)
    if as_json is not None:
        import json

        from .._io import atomic_write_text

        atomic_write_text(as_json, json.dumps(record, indent=1) + "\n")
        typer.echo(f"wrote {as_json}")


def _healthbench_page(
    runs: list[str],
    jobs_dir: Path,
    label: list[str] | None,
    baseline: str | None,
    output: Path | None,
    asked_more: bool,
) -> bool:
    """HealthBench runs: their page (True); BedsideBench's: False, for the page above."""
    from ..bench.results import read_rows
    from ..errors import ConfigError
    from ..scores import healthbench_compare as hb
    from ..scores.sources import resolve_all
    from ..views.page import write_page
    from ..views.page_healthbench import render

    named = resolve_all(runs, jobs_dir, label or ())
    sides = hb.loaded(named)
    if sides is None:
        return False
    if asked_more:
        raise ConfigError(
            "--checklist and --labels are built for BedsideBench runs, not HealthBench's"
        )
    comparison = hb.compare(sides, baseline) if len(sides) > 1 else None
    rows = {}
    for n in named:
        assert n.run is not None
        rows[n.name] = {str(r["case_id"]): r for r in read_rows(n.run.results_path)}
    out = output or Path("report.html")
    write_page(out, render(named, sides, comparison, rows))
    typer.echo(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return True


def _checklists(names: list[str]) -> list[str]:
    """The checklists asked for, each known (else one line saying which are)."""
    from ..errors import ConfigError
    from ..views.checklists import CHECKLISTS, CHECKLISTS_MISSING

    for name in names:
        if name in CHECKLISTS_MISSING:
            raise ConfigError(f"--checklist {name}: {CHECKLISTS_MISSING[name]}")
        if name not in CHECKLISTS:
            raise ConfigError(f"--checklist {name!r}: one of {', '.join(CHECKLISTS)}")
    return list(dict.fromkeys(names))


def _fill(
    names: list[str], sources: list[Any], record: dict[str, Any], labelled: bool, page: str
) -> dict[str, tuple[str, str, str]]:
    """Each checklist filled: its page section, Markdown and CSV (and in ``record``)."""
    from ..views.checklists import CHECKLISTS, facts_of, filled
    from ..views.page_checklist import checklist_csv, checklist_html, checklist_markdown

    out = {}
    facts = facts_of(sources, record, labelled)
    for name in names:
        rows = filled(CHECKLISTS[name], facts)
        record.setdefault("checklists", {})[name] = rows
        html = checklist_html(CHECKLISTS[name], rows)
        out[name] = (
            html,
            checklist_markdown(CHECKLISTS[name], rows, page),
            checklist_csv(rows),
        )
    return out


def _write_checklist(page: Path, name: str, markdown: str, table: str) -> None:
    from .._io import atomic_write_text

    for suffix, text in ((".md", markdown), (".csv", table)):
        path = page.with_name(f"{page.stem}.{name}{suffix}")
        atomic_write_text(path, text)
        typer.echo(f"wrote {path}")


def _calibrations(runs: list[str], jobs_dir: Path, labels: list[Path]) -> list[str]:
    """Each run's calibration section, for the runs the labels speak of (none: refused)."""
    from ..calibration import judge_panel, load_run
    from ..calibration.analysis import calibrate
    from ..calibration.judge_choice import panel_html
    from ..calibration.labels import NoVerdicts, formats_of, read_labels
    from ..calibration.text import calibration_html
    from ..errors import ConfigError
    from ..scores.sources import resolve

    sections = []
    for name in runs:
        named = resolve(name, jobs_dir)
        if named.run is None:
            continue
        graded = load_run(named, warn=warn)
        try:
            found = read_labels(labels, graded.name, graded.cases, keep_unsure=True)
        except NoVerdicts:
            continue
        formats = formats_of(labels, None)
        result = calibrate(
            graded.name, graded.rows, graded.summary, found, graded.cases, None, formats
        )
        sections.append(calibration_html(result))
        abstained = {(x.rater, x.case_id) for x in found if x.unsure}
        whole = [x for x in found if (x.rater, x.case_id) not in abstained]
        panel = judge_panel(named, whole, graded, warn=warn)
        if panel is not None:  # its other judges against the same labels (#63.3)
            sections.append(panel_html(panel, graded.name))
    if not sections:
        raise ConfigError(f"--labels: no verdicts on any of the runs {', '.join(runs)}")
    return sections

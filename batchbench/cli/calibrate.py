"""``batchbench calibrate``: the labelling sheet, and the judge against physicians' labels."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

if TYPE_CHECKING:
    from ..calibration import Graded
    from ..calibration.formats import LabelsFormat
    from ..calibration.labels import Label

from ..calibration.readers import LABEL_FORMATS, formats_help, names_help
from .common import Command, JobsDirOpt, JsonOpt, finite, friendly, warn
from .folders import complete_runs


def _labels_formats() -> list[str]:
    from ..calibration.readers import BY_NAME

    return list(BY_NAME)


def _runs_or_sheet(ctx: typer.Context, incomplete: str) -> list[str]:
    """A TAB: ``sheet`` first (when nothing is typed yet), and the runs."""
    first = [] if ctx.params.get("runs") else [w for w in ("sheet",) if w.startswith(incomplete)]
    return first + complete_runs(ctx, incomplete)


SHEET_PARAMS = ("runs", "cases", "seed", "output", "sheet_format", "jobs_dir", "help")
SHEET_HELP = """Write a blind labelling sheet of these runs' answers, for physicians to
mark each rubric item met or not (the judge's verdicts hidden, the cases drawn equally
per benchmark with --seed). Fill it, then: batchbench calibrate RUN --labels FILE.

Example: batchbench calibrate sheet gpt-5.4-mini --cases 40 --seed 7 -o sheet.csv"""


def _sheet_param(param: Any) -> Any:
    """The runs as ``sheet`` takes them (its own words); any other parameter as it is."""
    if param.name != "runs":
        return param
    runs = copy.copy(param)
    runs.metavar = "RUN..."
    runs.help = "The runs whose answers the sheet holds (one or more)."
    return runs


class CalibrateCommand(Command):
    """``calibrate`` and ``calibrate sheet``: one command, whose ``sheet --help`` is the
    sheet's own help (its options only, its usage), not calibrate's."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta["sheet"] = bool(args) and args[0] == "sheet"
        return super().parse_args(ctx, args)

    def get_help(self, ctx: Any) -> str:
        if not ctx.meta.get("sheet"):
            return str(super().get_help(ctx))
        kept, said, usage = self.params, self.help, ctx.info_name
        self.params = [_sheet_param(p) for p in kept if p.name in SHEET_PARAMS]
        self.help = SHEET_HELP
        ctx.info_name = f"{usage} sheet"
        try:
            return str(super().get_help(ctx))
        finally:
            self.params, self.help, ctx.info_name = kept, said, usage


RunsArg = Annotated[
    list[str],
    typer.Argument(
        metavar="[sheet] RUN...",
        help="`sheet RUN...` writes a blind labelling sheet of these runs' answers;"
        " `RUN --labels FILE...` calibrates the run's judge against the labels.",
        autocompletion=_runs_or_sheet,
    ),
]
LabelsOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--labels",
        metavar="FILE...",
        help=f"Physicians' verdicts: {formats_help()}, told apart by content; several"
        " files after one --labels (--labels-format to name it).",
    ),
]
LabelsFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--labels-format",
        metavar="FORMAT",
        autocompletion=_labels_formats,
        help=f"{names_help()}.",
    ),
]
CasesOpt = Annotated[
    int | None,
    typer.Option("--cases", metavar="N", help="sheet: cases to draw, equal per benchmark."),
]
SeedOpt = Annotated[int, typer.Option(metavar="S", min=0, help="sheet: the draw's seed.")]
SheetOutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        metavar="FILE",
        help="sheet: FILE.csv, FILE.html for a form, or FILE.json for Label Studio tasks"
        " with the judge's verdicts as predictions to correct.",
    ),
]
SheetFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        metavar="FORMAT",
        autocompletion=lambda: list(SHEET_KINDS),
        help="sheet: csv, html (a form), label-studio (tasks with the judge's verdicts"
        " as predictions) or redcap (a REDCap project's data dictionary: a record a case"
        " and rater, a yes/no field an item); default: from -o's suffix.",
    ),
]
RatersOpt = Annotated[
    Path | None,
    typer.Option(
        "--raters",
        metavar="FILE",
        help="A CSV describing the physicians (id, specialty, years, country), shown"
        " beside their labels, abstentions and time per label (GRRAS).",
    ),
]
PlanOpt = Annotated[
    bool,
    typer.Option("--plan", metavar="", help="From labels of a pilot: how many to label."),
]
WidthOpt = Annotated[
    float | None,
    typer.Option(metavar="W", help="--plan: the corrected interval's half-width wanted."),
]


@friendly
def calibrate(
    runs: RunsArg,
    labels: LabelsOpt = None,
    labels_format: LabelsFormatOpt = None,
    cases: CasesOpt = None,
    seed: SeedOpt = 0,
    output: SheetOutputOpt = None,
    sheet_format: SheetFormatOpt = None,
    raters: RatersOpt = None,
    plan: PlanOpt = False,
    width: WidthOpt = None,
    jobs_dir: JobsDirOpt = Path("jobs"),
    as_json: JsonOpt = False,
) -> None:
    """Calibrate the judge against physicians: a labelling sheet, then agreement
    (sensitivity, specificity, κ) and the PPI++ corrected score per benchmark.

    Example: batchbench calibrate sheet gpt-5.4-mini --cases 40 --seed 7 -o sheet.csv;
    then batchbench calibrate gpt-5.4-mini --labels sheet.csv
    """
    from ..errors import ConfigError

    if runs[0] == "sheet":
        _sheet(runs[1:], cases, seed, output, jobs_dir, sheet_format)
        return
    if len(runs) != 1:
        raise ConfigError("calibrate takes one run (or `sheet RUN...`)")
    if _meta_eval(runs[0], jobs_dir, bool(labels), as_json):
        return
    if not labels:
        raise ConfigError("calibrate RUN needs --labels FILE (a filled labelling sheet)")
    if plan and (width is None or not 0 < width < 1):
        raise ConfigError("--plan needs --width W, a half-width in (0, 1)")
    typer.echo(
        _against(runs[0], jobs_dir, labels, labels_format, raters, width if plan else None, as_json)
    )


def _meta_eval(name: str, jobs_dir: Path, labelled: bool, as_json: bool) -> bool:
    """A run of HealthBench's meta-eval carries its physicians' labels: the grader against
    them is its summary's (simple-evals' figures), printed here; True when it was one."""
    import json

    from ..engine.rundir import existing_run
    from ..errors import BatchbenchError, ConfigError, NotFinished
    from ..scores.sources import not_finished
    from ..scores.summary_file import summary_table

    try:
        run = existing_run(jobs_dir, name)
        if not run.load_config().grading.always_given:
            return False
    except BatchbenchError:  # no run by that name: the command's own checks say what it is
        return False
    if labelled:
        raise ConfigError(f"run {name!r} is a meta-eval: its physicians' labels are its own")
    if not run.summary_path.is_file():
        raise NotFinished(not_finished(run))
    summary = json.loads(run.summary_path.read_text(encoding="utf-8"))
    typer.echo(json.dumps(summary, indent=1) if as_json else summary_table(summary))
    return True


def _against(
    name: str,
    jobs_dir: Path,
    labels: list[Path],
    labels_format: str | None,
    raters: Path | None,
    width: float | None,
    as_json: bool,
) -> str:
    """The run's judge against the labels (or, with ``width``, the labels a corrected
    interval of that half-width needs), as text or JSON."""
    from ..calibration import judge_panel, load_run
    from ..calibration.analysis import calibrate as calibrate_run
    from ..calibration.analysis import plan_labels, plan_text
    from ..calibration.judge_choice import panel_text
    from ..calibration.labels import formats_of
    from ..calibration.raters import read_raters
    from ..calibration.text import calibration_text
    from ..scores.sources import resolve

    graded = load_run(resolve(name, jobs_dir), warn=warn)
    everything = _labels(name, jobs_dir, graded, labels, labels_format)
    abstained = {(x.rater, x.case_id) for x in everything if x.unsure}
    whole = [x for x in everything if (x.rater, x.case_id) not in abstained]  # cases said
    if width is not None:
        planned = plan_labels(graded.rows, whole, graded.cases, width)
        return json_text(planned) if as_json else plan_text(planned)
    described = read_raters(raters) if raters is not None else None
    formats = formats_of(labels, cast("LabelsFormat | None", labels_format))
    result = calibrate_run(
        graded.name, graded.rows, graded.summary, everything, graded.cases, described, formats
    )
    panel = judge_panel(resolve(name, jobs_dir), whole, graded, warn=warn)
    if as_json:
        return json_text({**result, **({"panel": panel} if panel else {})})
    return calibration_text(result) + (f"\n\n{panel_text(panel)}" if panel else "")


def _labels(
    name: str, jobs_dir: Path, graded: Graded, labels: list[Path], labels_format: str | None
) -> list[Label]:
    """The labels read for the run; none for it, and a panel's other judge is pointed
    at the panel's first run, whose sheet the labels are."""
    from ..calibration.labels import NoVerdicts, read_labels
    from ..calibration.readers import BY_NAME
    from ..errors import ConfigError

    if labels_format is not None and labels_format not in BY_NAME:
        raise ConfigError(f"--labels-format {labels_format!r}: one of {', '.join(BY_NAME)}")
    fmt = BY_NAME[labels_format].name if labels_format is not None else None
    try:
        return read_labels(labels, graded.name, graded.cases, fmt, keep_unsure=True)
    except NoVerdicts as exc:
        first = _first_of_panel(name, jobs_dir)
        if first is None:
            raise
        raise NoVerdicts(
            f"{exc}: run {graded.name!r} judges the answers of run {first!r} (a judge"
            f" panel), whose sheet the labels are: `batchbench calibrate {first} --labels"
            " …` sets every judge of the panel against them"
        ) from None


def _first_of_panel(name: str, jobs_dir: Path) -> str | None:
    """The run whose answers this one judges (a panel's first run), if any."""
    from ..scores.sources import resolve

    named = resolve(name, jobs_dir)
    return None if named.run is None else named.run.load_config().answers_from


# The sheet a physician fills: the CSV, its HTML form, or a tool's own (each format that
# writes one: :data:`..calibration.readers.LABEL_FORMATS`).
SHEET_KINDS = ("csv", "html", *(f.name for f in LABEL_FORMATS if f.write and f.name != "sheet"))
SHEET_FORMATS = {"csv": "csv", "html": "html", "htm": "html", "json": "label-studio"}


def _sheet(
    runs: list[str],
    cases: int | None,
    seed: int,
    output: Path | None,
    jobs_dir: Path,
    fmt: str | None = None,
) -> None:
    from ..bench.results import row_verdicts
    from ..calibration import load_run
    from ..calibration.readers import BY_NAME, Sheet
    from ..calibration.sheet import draw, sheet_rows, write_html
    from ..errors import ConfigError
    from ..scores.sources import resolve

    if not runs:
        raise ConfigError("calibrate sheet needs at least one run")
    if cases is None or cases < 1:
        raise ConfigError("calibrate sheet needs --cases N (at least 1)")
    if output is None:
        raise ConfigError("calibrate sheet needs -o FILE (.csv, or .html for a form)")
    if fmt is not None and fmt not in SHEET_KINDS:
        raise ConfigError(f"--format {fmt!r}: the sheet is {', '.join(SHEET_KINDS)}")
    graded = [load_run(resolve(r, jobs_dir), warn=warn) for r in runs]
    digests = {g.summary["dataset_sha256"] for g in graded}
    if len(digests) > 1:
        raise ConfigError("the runs of one sheet must share their dataset (their digests differ)")
    answered = {cid: c for g in graded for cid, c in g.cases.items()}
    per_run = [{r["case_id"] for r in g.rows if "score" in r} for g in graded]
    chosen = draw(answered, per_run, cases, seed)
    answers = {g.name: {r["case_id"]: r["answer"] for r in g.rows} for g in graded}
    rows = sheet_rows(chosen, answers)
    benchmarks = len({c["benchmark"] for c in chosen})
    note = (
        f"batchbench calibration sheet: {len(chosen)} cases over {benchmarks} benchmarks,"
        f" drawn with seed {seed} among the cases every run answered; runs"
        f" {', '.join(g.name for g in graded)}; fill rater and verdict (1 met, 0 not met,"
        " unsure)"
    )
    kind = fmt or SHEET_FORMATS.get(output.suffix.lower().lstrip("."), "csv")
    if kind == "html":  # the sheet as a form, which saves the filled-in CSV
        write_html(output, note, rows)
    else:
        judged = {
            (g.name, r["case_id"], item): met
            for g in graded
            for r in g.rows
            for item, met in (row_verdicts(r.get("decisions")) or {}).items()
        }
        write = BY_NAME["sheet" if kind == "csv" else kind].write
        assert write is not None  # SHEET_KINDS holds only the formats that write a sheet
        write(output, Sheet(note, rows, judged))
    typer.echo(f"wrote {output}: {len(rows)} items of {len(chosen)} cases")
    _say_panel(runs, jobs_dir, kind)


def _say_panel(runs: list[str], jobs_dir: Path, kind: str) -> None:
    """A run with a judge panel: which judge's verdicts the sheet shows, and why (#50)."""
    from ..scores.judge_rankings import panel_of
    from ..scores.sources import resolve

    for name in runs:
        found = resolve(name, jobs_dir).run
        judges = list(panel_of(found)) if found is not None else []
        if len(judges) < 2:
            continue
        if kind == "label-studio":
            said = (
                f"the predictions to correct are {judges[0]}'s (the first judge's) alone;"
                " physicians correcting them lean toward it, so to choose among the judges"
                " label blind (-o FILE.csv or .html)"
            )
        else:
            said = (
                f"the sheet shows none of the judges' verdicts ({', '.join(judges)}): blind, so"
                " the labels favour no judge, and `calibrate RUN --labels` then compares them all"
            )
        typer.echo(f"run {name} has a judge panel: {said}")


def json_text(found: object) -> str:
    """Valid JSON: a figure these labels cannot give (NaN, ±∞) is null, and the
    ``not_computable`` list names each such field."""
    missing: list[str] = []
    cleaned = finite(found, missing)
    if missing and isinstance(cleaned, dict):
        cleaned["not_computable"] = [
            f"{where}: not computable from these labels (too few, or no variation)"
            for where in missing
        ]
    return json.dumps(cleaned, indent=2, allow_nan=False)

"""The physicians' verdicts: a labelling sheet filled in, read and checked.

One row per run, case, rubric item and rater; ``verdict`` is 1 (met), 0 (not met) or
``unsure`` (the rater could not tell: an abstention, counted, never a verdict), empty
where nobody labelled it. A row naming a case the run does not hold, an item
its case's rubric does not hold, a verdict that is not 0/1, no rater, or the same
(run, case, item, rater) twice is refused in one line naming the file and line. Lines
whose first cell starts with ``#`` are the sheet's notes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._io import read_bounded
from ..bench.dataset import Case
from ..errors import LabelsError
from . import redcap
from .formats import UNSURE, LabelsFormat, Row, csv_header
from .readers import BY_NAME, REQUIRED, Reading, detect

__all__ = ["Label", "LabelsError", "NoVerdicts", "read_labels"]


class NoVerdicts(LabelsError):
    """The files hold no verdict on this run (a sheet of other runs)."""


@dataclass(frozen=True)
class Label:
    case_id: str
    item_id: str
    rater: str
    met: bool
    unsure: bool = False  # an abstention (``met`` means nothing then)
    seconds: float | None = None  # the time it took, where the tool keeps it


def read_labels(
    paths: Sequence[Path],
    run: str,
    cases: Mapping[str, Case],
    fmt: LabelsFormat | None = None,
    keep_unsure: bool = False,
) -> list[Label]:
    """The verdicts these files give on ``run``'s answers (rows of other runs are the
    sheet's other runs: skipped), every row checked against the run's cases. Each file
    is in ``fmt``, or in the format its content says (:mod:`.formats`). With
    ``keep_unsure`` an ``unsure`` is a label with ``unsure`` set (:func:`.analysis.calibrate`
    reports them); without, it and the rest of that rater's case are left out."""
    found: list[Label] = []
    seen: set[tuple[str, str, str]] = set()
    texts = {path: _text(path) for path in paths}
    # A REDCap project's data dictionary, given beside its export, says which field is
    # which rubric item; it holds no verdicts itself.
    dictionary = redcap.Dictionary()
    for path, text in texts.items():
        if redcap.is_dictionary(text):
            dictionary.merge(redcap.read_dictionary(path, text))
    for path, text in texts.items():
        if redcap.is_dictionary(text):
            continue
        given = dictionary if dictionary.labels else None
        for where, row in _records(path, text, run, fmt, cases, given):
            if row.get("run") != run or not (row.get("verdict") or "").strip():
                continue
            case = cases.get(row["case_id"])
            if case is None:
                raise LabelsError(f"{where}: case {row['case_id']!r} is not a case of run {run!r}")
            items = {item["item_id"] for item in case["rubric_items"]}
            if row["item_id"] not in items:
                raise LabelsError(
                    f"{where}: item {row['item_id']!r} is not in case {row['case_id']}'s rubric"
                )
            verdict = row["verdict"].strip()
            verdict = UNSURE if verdict.lower() in ("unsure", "?") else verdict
            if verdict not in ("0", "1", UNSURE):
                raise LabelsError(
                    f"{where}: verdict {verdict!r} is not 0 (not met), 1 (met) or unsure"
                )
            rater = (row.get("rater") or "").strip()
            if not rater:
                raise LabelsError(f"{where}: a verdict without a rater")
            key = (row["case_id"], row["item_id"], rater)
            if key in seen:
                raise LabelsError(
                    f"{where}: rater {rater!r} labelled item {row['item_id']} of case"
                    f" {row['case_id']} twice"
                )
            seen.add(key)
            seconds = _seconds(row.get("seconds"), where)
            met, unsure = verdict == "1", verdict == UNSURE
            found.append(Label(row["case_id"], row["item_id"], rater, met, unsure, seconds))
    if not keep_unsure:  # a rater unsure of an item of a case says nothing of that case
        abstained = {(x.rater, x.case_id) for x in found if x.unsure}
        found = [x for x in found if (x.rater, x.case_id) not in abstained]
    if not found:
        raise NoVerdicts(f"no verdicts on run {run!r} in {', '.join(map(str, paths))}")
    return found


def _seconds(cell: str | None, where: str) -> float | None:
    """The time a label took (Label Studio's ``lead_time``, a sheet's ``seconds``)."""
    if not (cell or "").strip():
        return None
    try:
        seconds = float(str(cell))
    except ValueError:
        raise LabelsError(f"{where}: seconds {cell!r} is not a number") from None
    if not 0 <= seconds < float("inf"):
        raise LabelsError(f"{where}: seconds {cell!r} is not a number of seconds")
    return seconds


def formats_of(paths: Sequence[Path], fmt: LabelsFormat | None) -> list[LabelsFormat]:
    """The format each labels file was read in (the one named, or its content's); a
    REDCap data dictionary holds no labels and is none."""
    texts = {path: _text(path) for path in paths}
    return [fmt or detect(p, t).name for p, t in texts.items() if not redcap.is_dictionary(t)]


MAX_LABELS_BYTES = 64 << 20  # a team's labels are a few MB: more is no labels file


def _text(path: Path) -> str:
    """A labels file's text: read up to a bound (a device that never ends, /dev/zero,
    is refused, not read for ever; a pipe from the shell still reads)."""
    too_big = f"over {MAX_LABELS_BYTES >> 20} MiB: not a labels file"
    data = read_bounded(path, MAX_LABELS_BYTES, LabelsError, str(path), too_big)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LabelsError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:
        raise LabelsError(f"{path}: not text (it holds NUL bytes)")
    return text


def _records(
    path: Path,
    text: str,
    run: str,
    fmt: LabelsFormat | None,
    cases: Mapping[str, Case],
    dictionary: redcap.Dictionary | None,
) -> Iterator[Row]:
    """The file's rows of the long table, with where each was read (a CSV whose first
    column is the given REDCap dictionary's record id field is that project's export)."""
    first = text.lstrip("\ufeff").split("\n", 1)[0].split(",", 1)[0].strip().strip('"')
    ours = False
    if dictionary is not None and dictionary.record_id is not None:
        record_id = dictionary.record_id
        ours = first in (record_id, dictionary.labels.get(record_id))
    content = BY_NAME["redcap"] if ours else detect(path, text)
    lines = (ln for ln in text.lstrip("\ufeff").splitlines() if ln.strip())
    header = next((ln for ln in lines if not ln.lstrip().startswith("#")), "")  # past notes
    sheet = content.name == "sheet" and set(REQUIRED) <= set(csv_header(header))
    if fmt is not None and fmt != "sheet" and sheet:  # told wrong: say what it is
        raise LabelsError(
            f"{path} is batchbench's labelling sheet (its columns say so), not {fmt}'s"
            " export: --labels-format sheet, or leave the format out (the content says)"
        )
    chosen = BY_NAME[fmt] if fmt is not None else content
    yield from chosen.read(path, text, Reading(run, cases, dictionary))

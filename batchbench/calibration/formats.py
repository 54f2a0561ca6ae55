"""Labels from the tools physicians already use, each read into the one long table the
calibration takes: ``(where, row)`` with ``run``, ``case_id``, ``item_id``, ``rater``
and ``verdict`` (``1`` met, ``0`` not met, empty: not labelled).

- ``sheet``: batchbench's own CSV (:mod:`.labels`).
- ``label-studio``: Label Studio's JSON export — a list of tasks, one a rubric item,
  its ``data`` naming ``case_id`` and ``item_id`` (and ``run``), each annotation's
  ``choices`` result ``met`` or ``not met`` (``yes``/``no``, ``1``/``0`` too), its
  rater the annotator (``completed_by``: an email, or the user's id) — or its JSON_MIN
  or CSV export of the same (a record an annotation: the data, ``verdict`` and
  ``annotator``), as label-studio-sdk's converter writes them.
- ``healthbench``: the HealthBench meta-evaluation's JSONL — one line a rubric item of
  an answer, ``binary_labels`` and ``anonymized_physician_ids`` side by side (one
  physician's verdict each); the case is ``case_id`` (else ``prompt_id``), the item
  ``item_id``, else the case's rubric item whose text is the line's ``rubric``.
- ``redcap``: a REDCap project's CSV export, one record a case and rater, one column a
  rubric item (with its data dictionary when given): :mod:`.redcap`.
- ``prodigy``: Prodigy's JSONL — one line a rubric item, ``case_id`` and ``item_id``
  on the task or in its ``meta``, ``answer`` ``accept`` (met) or ``reject`` (not met;
  ``ignore``: not labelled), or its choice view's chosen option (met / not met), the
  rater ``_annotator_id`` (else ``_session_id``).

A record that does not fit is refused in one line naming the file, the task or line,
and the field. ``calibrate sheet --format label-studio`` writes the tasks, with the
judge's verdicts as pre-filled ``predictions`` for physicians to correct.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from .._io import atomic_write_text
from ..errors import LabelsError
from .csvtext import csv_records

LabelsFormat = Literal["sheet", "label-studio", "prodigy", "healthbench", "redcap"]
Row = tuple[str, dict[str, str]]  # where (file and record), the long table's row

MET = {"met": "1", "yes": "1", "1": "1", "true": "1", "not met": "0", "no": "0", "0": "0"}
MET |= {"false": "0", "not_met": "0", "unmet": "0"}
# The rater could not tell (GRRAS: an abstention, reported as a rate, never a verdict).
UNSURE = "unsure"
MET |= {UNSURE: UNSURE, "not sure": UNSURE, "uncertain": UNSURE, "?": UNSURE}
PRODIGY = {"accept": "1", "reject": "0", "ignore": ""}

# The labelling interface the Label Studio tasks are made for (the README shows it).
LABEL_STUDIO_CONFIG = """<View>
  <Header value="$benchmark · case $case_id · $run"/>
  <Text name="prompt" value="$prompt"/>
  <Text name="answer" value="$answer"/>
  <Header value="Is this rubric item met? ($points points)"/>
  <Text name="item" value="$item"/>
  <Choices name="verdict" toName="answer" choice="single" required="true">
    <Choice value="met"/>
    <Choice value="not met"/>
    <Choice value="unsure"/>
  </Choices>
</View>"""


# What only a Prodigy task carries (its hashes, its answer, who gave it).
PRODIGY_KEYS = ("answer", "_input_hash", "_task_hash", "_annotator_id", "_session_id")


def csv_header(text: str) -> list[str]:
    """A CSV text's first row's cells (its header)."""
    first = text.lstrip("\ufeff").split("\n", 1)[0]
    return [cell.strip() for cell in next(csv.reader([first]), [])]


def label_studio_rows(path: Path, text: str, run: str) -> Iterator[Row]:
    """Label Studio's JSON export (tasks, each with its annotations), its JSON_MIN export
    (a flat record an annotation) or its CSV export (the same, a row each)."""
    if text.lstrip()[:1] not in ("[", "{"):
        yield from _label_studio_flat(path, list(_csv_dicts(path, text)), run, "CSV")
        return
    try:
        tasks = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabelsError(
            f"{path}: line {exc.lineno}: not Label Studio's JSON ({exc.msg})"
        ) from None
    if not isinstance(tasks, list):
        raise LabelsError(f"{path}: not Label Studio's JSON export (a list of tasks)")
    if tasks and isinstance(tasks[0], dict) and "data" not in tasks[0] and "annotator" in tasks[0]:
        yield from _label_studio_flat(path, list(enumerate(tasks, 1)), run, "JSON_MIN")
        return
    for n, task in enumerate(tasks, 1):
        where = f"{path}: task {n}"
        data = _object(task, "data", where) if isinstance(task, dict) else None
        if data is None:
            raise LabelsError(f"{where}: a task is an object with 'data'")
        case_id, item_id = _field(data, "case_id", where), _field(data, "item_id", where)
        annotations = task.get("annotations") or []
        if not isinstance(annotations, list):
            raise LabelsError(f"{where}: 'annotations' is not a list")
        for k, annotation in enumerate(annotations, 1):
            here = f"{where}, annotation {k}"
            if not isinstance(annotation, dict):
                raise LabelsError(f"{here}: an annotation is an object")
            if annotation.get("was_cancelled"):
                continue  # skipped by its annotator: no verdict
            verdict = _choice(annotation.get("result"), here)
            rater = _rater(annotation.get("completed_by"), here, "completed_by")
            row = {"run": str(data.get("run") or run), "case_id": case_id, "item_id": item_id}
            row["seconds"] = _seconds(annotation.get("lead_time"), here)
            yield here, {**row, "rater": rater, "verdict": verdict}


def _csv_dicts(path: Path, text: str) -> Iterator[tuple[int, dict[str, str]]]:
    """Each record of a CSV file as a dict by its header, with the line it starts on."""
    records = csv_records(path, text, LabelsError)
    if not records:
        return
    header = [h.strip() for h in records[0][1]]
    for n, record in records[1:]:
        if not any(cell.strip() for cell in record):
            continue
        if len(record) != len(header):
            raise LabelsError(
                f"{path}: line {n}: {len(record)} cells where the header has {len(header)}"
            )
        yield n, dict(zip(header, record))


def _label_studio_flat(
    path: Path, records: list[tuple[int, Any]], run: str, export: str
) -> Iterator[Row]:
    """JSON_MIN or CSV: one record an annotation, the task's data beside its choice (a
    column named as the labelling interface's Choices, ``verdict``) and its
    ``annotator``. A task nobody labelled has no annotator and no choice."""
    unit = "line" if export == "CSV" else "record"
    for n, record in records:
        where = f"{path}: {unit} {n}"
        if not isinstance(record, dict):
            raise LabelsError(f"{where}: a {export} record is an object")
        annotator = record.get("annotator")
        said = record.get("verdict")
        if annotator in (None, "") and said in (None, ""):
            continue  # a task nobody labelled
        if "verdict" not in record:
            raise LabelsError(
                f"{where}: no 'verdict' (the labelling interface's Choices, named verdict)"
            )
        if isinstance(said, list):  # a choice Label Studio wrote as a list of one
            said = said[0] if len(said) == 1 else said
        if isinstance(said, str) and said.startswith("{") and export == "CSV":
            said = _csv_choice(said, where)
        if not isinstance(said, str) or said.strip().lower() not in MET:
            raise LabelsError(f"{where}: verdict {said!r} is not met, not met or unsure")
        yield (
            where,
            {
                "run": str(record.get("run") or run),
                "case_id": _field(record, "case_id", where),
                "item_id": _field(record, "item_id", where),
                "rater": _rater(annotator, where, "annotator"),
                "verdict": MET[said.strip().lower()],
                "seconds": _seconds(record.get("lead_time"), where),
            },
        )


def _seconds(value: Any, where: str) -> str:
    """Label Studio's ``lead_time``: the seconds an annotation took ("" when not kept)."""
    if value in (None, ""):
        return ""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise LabelsError(f"{where}: lead_time {value!r} is not a number of seconds") from None
    if not seconds >= 0 or seconds == float("inf"):
        raise LabelsError(f"{where}: lead_time {value!r} is not a number of seconds")
    return repr(seconds)


def _csv_choice(cell: str, where: str) -> str:
    """A CSV cell holding a multiple choice as JSON: its one choice."""
    try:
        value = json.loads(cell)
    except json.JSONDecodeError:
        return cell
    choices = value.get("choices") if isinstance(value, dict) else None
    if isinstance(choices, list) and len(choices) == 1 and isinstance(choices[0], str):
        return choices[0]
    raise LabelsError(f"{where}: verdict {cell!r} is not one choice")


def _json_lines(path: Path, text: str, what: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each non-blank line of a JSONL file as an object, with where it was read."""
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}: line {lineno}"
        try:
            task = json.loads(line)
        except json.JSONDecodeError as exc:
            raise LabelsError(f"{where}: not {what} ({exc.msg})") from None
        if not isinstance(task, dict):
            raise LabelsError(f"{where}: a line of {what} is an object")
        yield where, task


def prodigy_rows(path: Path, text: str, run: str) -> Iterator[Row]:
    """Prodigy's JSONL: ``answer`` accept (met), reject (not met) or ignore; or, from its
    ``choice`` view (``options`` met / not met, the chosen option's id in ``accept``,
    explosion/prodigy-recipes ``other/choice.py``), the choice, ``answer`` saying only
    that the annotator accepted the task (reject or ignore: not labelled)."""
    for where, task in _json_lines(path, text, "Prodigy's JSONL"):
        meta = task.get("meta")
        fields = {**(meta if isinstance(meta, dict) else {}), **task}
        answer = task.get("answer")
        if answer not in PRODIGY:
            raise LabelsError(f"{where}: answer {answer!r} is not accept, reject or ignore")
        rater = task.get("_annotator_id") or task.get("_session_id")
        if not isinstance(rater, str) or not rater.strip():
            raise LabelsError(f"{where}: no _annotator_id (or _session_id) names the rater")
        verdict = PRODIGY[answer]
        if "options" in task:
            verdict = _prodigy_choice(task, where) if answer == "accept" else ""
        yield (
            where,
            {
                "run": str(fields.get("run") or run),
                "case_id": _field(fields, "case_id", where),
                "item_id": _field(fields, "item_id", where),
                "rater": rater.strip(),
                "verdict": verdict,
            },
        )


def _prodigy_choice(task: Mapping[str, Any], where: str) -> str:
    """The verdict a choice-view task's chosen option says (none chosen: not labelled)."""
    options, chosen = task.get("options"), task.get("accept", [])
    if not isinstance(options, list) or not isinstance(chosen, list):
        raise LabelsError(f"{where}: 'options' and 'accept' are lists in a choice task")
    if not chosen:
        return ""
    if len(chosen) > 1:
        raise LabelsError(f"{where}: 'accept' chooses {len(chosen)} options, not one")
    text = {o.get("id"): o.get("text") for o in options if isinstance(o, dict)}
    said = text.get(chosen[0], chosen[0])
    if not isinstance(said, str) or said.strip().lower() not in MET:
        raise LabelsError(f"{where}: the option chosen, {said!r}, is not met or not met")
    return MET[said.strip().lower()]


def healthbench_rows(
    path: Path, text: str, run: str, rubrics: Mapping[str, Mapping[str, str | None]]
) -> Iterator[Row]:
    """``rubrics``: each case's items, text → item id (None: two items share the text),
    to find an item by its text."""
    for where, task in _json_lines(path, text, "HealthBench's meta-eval JSONL"):
        case_id = _field(task, "case_id" if "case_id" in task else "prompt_id", where)
        item_id = task.get("item_id")
        if item_id is None:
            text_of = _field(task, "rubric", where)
            items = rubrics.get(case_id, {})
            if text_of.strip() not in items:
                raise LabelsError(f"{where}: 'rubric' is no item of case {case_id}'s rubric")
            item_id = items[text_of.strip()]
            if item_id is None:
                raise LabelsError(
                    f"{where}: 'rubric' is the text of two items of case {case_id}: give item_id"
                )
        labels, raters = task.get("binary_labels"), task.get("anonymized_physician_ids")
        if not isinstance(labels, list) or not all(isinstance(v, bool) for v in labels):
            raise LabelsError(f"{where}: 'binary_labels' is not a list of true/false")
        if not isinstance(raters, list) or len(raters) != len(labels):
            raise LabelsError(
                f"{where}: 'anonymized_physician_ids' does not name one physician a label"
            )
        for met, rater in zip(labels, raters):
            yield (
                where,
                {
                    "run": str(task.get("run") or run),
                    "case_id": case_id,
                    "item_id": str(item_id),
                    "rater": _rater(rater, where, "anonymized_physician_ids"),
                    "verdict": "1" if met else "0",
                },
            )


def write_label_studio(
    path: Path, rows: Sequence[Mapping[str, Any]], judged: Mapping[tuple[str, str, str], bool]
) -> None:
    """The sheet's rows as Label Studio tasks (:data:`LABEL_STUDIO_CONFIG`), the prompt and
    answer on every task, and where the run's judge gave one, its verdict as a
    prediction (``judged``: ``(run, case_id, item_id)`` → met), to correct."""
    tasks = []
    case, prompt, answer = None, "", ""
    for row in rows:
        if (row["run"], row["case_id"]) != case:  # a case's first row holds both
            case, prompt, answer = (row["run"], row["case_id"]), row["prompt"], row["answer"]
        data = {k: str(v) for k, v in row.items() if k not in ("rater", "verdict")}
        task: dict[str, Any] = {"data": {**data, "prompt": str(prompt), "answer": str(answer)}}
        verdict = judged.get((str(row["run"]), str(row["case_id"]), str(row["item_id"])))
        if verdict is not None:
            choice = "met" if verdict else "not met"
            result = {"value": {"choices": [choice]}, "from_name": "verdict", "to_name": "answer"}
            task["predictions"] = [{"model_version": "judge", "result": [result | _CHOICES]}]
        tasks.append(task)
    atomic_write_text(path, json.dumps(tasks, ensure_ascii=False, indent=1) + "\n", mode=0o644)


_CHOICES = {"type": "choices"}


def _object(task: Mapping[str, Any], key: str, where: str) -> dict[str, Any] | None:
    found = task.get(key)
    return found if isinstance(found, dict) else None


def _field(found: Mapping[str, Any], key: str, where: str) -> str:
    value = found.get(key)
    if not isinstance(value, (str, int)) or isinstance(value, bool) or not str(value).strip():
        raise LabelsError(f"{where}: no {key!r}")
    return str(value)


def _choice(result: Any, where: str) -> str:
    choices = [
        r["value"]["choices"]
        for r in result or []
        if isinstance(r, dict)
        and r.get("type") == "choices"
        and isinstance(r.get("value"), dict)
        and isinstance(r["value"].get("choices"), list)
    ]
    if len(choices) != 1 or len(choices[0]) != 1:
        raise LabelsError(f"{where}: 'result' needs one choices result with one choice")
    said = str(choices[0][0]).strip().lower()
    if said not in MET:
        raise LabelsError(f"{where}: choice {choices[0][0]!r} is not met, not met or unsure")
    return MET[said]


def _rater(who: Any, where: str, key: str) -> str:
    """The rater a record names (Label Studio's user: its email, else its id), in the
    record's own field ``key``."""
    if isinstance(who, dict):
        who = who.get("email") or who.get("id")
    if isinstance(who, bool) or not isinstance(who, (str, int)) or not str(who).strip():
        raise LabelsError(f"{where}: no {key!r} names the rater")
    return str(who).strip()

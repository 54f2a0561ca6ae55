"""A run on disk: an immutable config, an append-only journal, and a lock.

The run's state is never stored, only computed: :func:`fold` reads the journal
and returns what each submission and each case has reached. A crash can
therefore leave nothing inconsistent behind; at worst the last journal line is
torn, and a torn line is ignored (the action it described is repeated, and
every action is safe to repeat).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ._io import append_line, atomic_write_text, jsonl_lines
from .errors import ConfigError, RunLockedError, RunStateError

NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")
CONFIG_FILE = "run.json"
JOURNAL_FILE = "journal.jsonl"
RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "results.summary.json"
REPORT_FILE = "report.json"
LOCK_FILE = ".lock"

# Settings that define what a run measures: resuming with other values is refused.
IDENTITY_KEYS = (
    "answer_model",
    "judge_model",
    "reasoning_effort",
    "protocol_version",
    "dataset_sha256",
    "selection",
    "case_ids",
)


@dataclass
class RunConfig:
    name: str
    answer_model: str
    judge_model: str
    reasoning_effort: str | None
    protocol_version: str
    dataset: str
    dataset_sha256: str
    selection: dict[str, Any]
    case_ids: list[str]
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_at: float = field(default_factory=time.time)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


def check_name(name: str) -> str:
    if not NAME_RE.match(name) or name in (".", ".."):
        raise ConfigError(f"run name {name!r} must match [A-Za-z0-9._-]+ (and not be . or ..)")
    return name


def default_name(answer_model: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", answer_model).strip("-.")
    return name or "run"


class Run:
    """Paths and files of one run directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = root.name

    # paths ----------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_FILE

    @property
    def journal_path(self) -> Path:
        return self.root / JOURNAL_FILE

    @property
    def results_path(self) -> Path:
        return self.root / RESULTS_FILE

    @property
    def summary_path(self) -> Path:
        return self.root / SUMMARY_FILE

    @property
    def report_path(self) -> Path:
        return self.root / REPORT_FILE

    @property
    def requests_dir(self) -> Path:
        return self.root / "requests"

    @property
    def raw_dir(self) -> Path:
        return self.root / "raw"

    def raw_path(self, file_id: str) -> Path:
        if not re.match(r"^[A-Za-z0-9_.-]+$", file_id):
            raise RunStateError(f"unsafe file id from the API: {file_id!r}")
        return self.raw_dir / f"{file_id}.jsonl"

    # config ---------------------------------------------------------------
    def exists(self) -> bool:
        return self.config_path.is_file()

    def load_config(self) -> RunConfig:
        try:
            data = json.loads(self.config_path.read_text(encoding="utf-8"))
            return RunConfig(**data)
        except FileNotFoundError:
            raise RunStateError(f"{self.root}: not a batchbench run (no {CONFIG_FILE})") from None
        except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as exc:
            raise RunStateError(f"{self.config_path}: unreadable run config ({exc})") from None

    def create(self, config: RunConfig) -> None:
        """Make the private run directory and write the immutable config last."""
        self.root.parent.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(mode=0o700, exist_ok=True)
        os.chmod(self.root, 0o700)
        for sub in (self.requests_dir, self.raw_dir):
            sub.mkdir(mode=0o700, exist_ok=True)
        atomic_write_text(self.config_path, config.to_json())

    # journal --------------------------------------------------------------
    def record(self, event: str, **data: Any) -> dict[str, Any]:
        entry = {"ev": event, "t": round(time.time(), 3), **data}
        append_line(self.journal_path, json.dumps(entry, separators=(",", ":")))
        return entry

    def events(self) -> list[dict[str, Any]]:
        try:
            data = self.journal_path.read_bytes()
        except FileNotFoundError:
            return []
        events = []
        last = data.count(b"\n") + 1
        for lineno, line in jsonl_lines(data):
            try:
                event = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                if lineno == last:  # torn by a crash mid-append: the action repeats
                    continue
                raise RunStateError(f"{self.journal_path}: line {lineno} is corrupt") from None
            events.append(event)
        return events

    def repair(self) -> None:
        """Drop a line torn by a crash from the end of the journal and the results.

        Only a line without its newline is dropped: the action it recorded is
        repeated (journal) or its rows are written again (results).
        """
        for path in (self.journal_path, self.results_path):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            if data and not data.endswith(b"\n"):
                with open(path, "r+b") as fh:
                    fh.truncate(data.rfind(b"\n") + 1)
                    fh.flush()
                    os.fsync(fh.fileno())

    # lock -----------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive right to advance this run: a second process is refused."""
        path = self.root / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
                raise RunLockedError(
                    f"run {self.name!r} is being advanced by another process (pid {holder});"
                    " wait for it or stop it"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            yield
        finally:
            os.close(fd)


def open_run(jobs_dir: Path, name: str) -> Run:
    return Run(Path(jobs_dir) / check_name(name))


def list_runs(jobs_dir: Path) -> list[Run]:
    jobs_dir = Path(jobs_dir)
    if not jobs_dir.is_dir():
        return []
    return [Run(p) for p in sorted(jobs_dir.iterdir()) if (p / CONFIG_FILE).is_file()]


def config_conflicts(old: RunConfig, new: RunConfig) -> list[str]:
    """Human-readable differences in the settings that define a run."""
    diffs = []
    for key in IDENTITY_KEYS:
        a, b = getattr(old, key), getattr(new, key)
        if a != b:
            if key == "case_ids":
                diffs.append(f"selected cases ({len(a)} in the run, {len(b)} now)")
            else:
                diffs.append(f"{key} (run has {a!r}, now {b!r})")
    return diffs


# ---------------------------------------------------------------------------
# The fold: journal events → the run's current state.


@dataclass
class StageState:
    """One case in one stage. ``status``: pending, inflight, ok, failed."""

    status: str = "pending"
    attempt: int = 0
    temperature: bool = True  # False once the model rejected it: send none from then on
    transients: int = 0
    invalid: int = 0
    sub: str | None = None
    source: str | None = None  # raw file id holding the successful line
    custom_id: str | None = None  # the successful line's custom id
    used_temperature: bool | None = None  # whether the successful request carried temperature


@dataclass
class CaseState:
    case_id: str
    answers: StageState = field(default_factory=StageState)
    judges: StageState = field(default_factory=StageState)
    started: float | None = None
    final: str | None = None  # "scored" or "error" once its row is written
    error: str | None = None
    rows: int = 0  # result rows written for it so far (one per final outcome)

    def stage(self, name: str) -> StageState:
        return self.answers if name == "answers" else self.judges


@dataclass
class Submission:
    """One request file and the batch it became."""

    id: str
    stage: str
    seq: int
    path: str
    lines: list[list[Any]]  # [case_id, attempt, sent_temperature]
    planned_at: float
    tokens: int = 0  # estimated prompt tokens, for the enqueued-token budget
    upload_started: bool = False
    file_id: str | None = None
    create_started: float | None = None
    batch_id: str | None = None
    adopted: bool = False
    status: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None
    downloaded: set[str] = field(default_factory=set)
    discarded: dict[str, int] = field(default_factory=dict)
    collected: bool = False
    remote_deleted: bool = False
    counts: dict[str, int] = field(default_factory=dict)

    TERMINAL = ("completed", "failed", "expired", "cancelled")

    @property
    def terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def in_flight(self) -> bool:
        return self.batch_id is not None and not self.terminal

    def result_files(self) -> list[str]:
        return [f for f in (self.output_file_id, self.error_file_id) if f]


@dataclass
class RunState:
    cases: dict[str, CaseState]
    subs: dict[str, Submission] = field(default_factory=dict)
    holds: dict[str, float] = field(default_factory=dict)  # stage → not before (time)
    caps: dict[str, int] = field(default_factory=dict)  # stage → shrunk shard size
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)
    cancelled: bool = False
    started: float | None = None

    def next_seq(self, stage: str) -> int:
        return 1 + max((s.seq for s in self.subs.values() if s.stage == stage), default=0)

    def apply(self, event: dict[str, Any]) -> None:
        """Fold one journal event into the state (the only way state changes)."""
        kind = event["ev"]
        t = event.get("t", 0.0)
        sub = self.subs.get(event.get("sub", ""))
        if kind == "plan":
            sub = Submission(
                event["sub"],
                event["stage"],
                event["seq"],
                event["path"],
                event["lines"],
                t,
                int(event.get("tokens", 0)),
            )
            self.subs[sub.id] = sub
            self.started = self.started or t
            for case_id, attempt, _ in sub.lines:
                case = self.cases[case_id]
                st = case.stage(sub.stage)
                st.status, st.attempt, st.sub = "inflight", attempt, sub.id
                if case.started is None:
                    case.started = t
        elif kind == "upload_started" and sub:
            sub.upload_started = True
        elif kind == "uploaded" and sub:
            sub.file_id = event["file_id"]
        elif kind == "create_started" and sub:
            sub.create_started = t
        elif kind == "created" and sub:
            sub.batch_id = event["batch_id"]
            sub.adopted = bool(event.get("adopted"))
            sub.status = sub.status or "validating"
        elif kind == "batch" and sub:
            sub.status = event["status"]
            sub.output_file_id = event.get("output_file_id")
            sub.error_file_id = event.get("error_file_id")
            sub.errors = event.get("errors")
        elif kind == "downloaded" and sub:
            sub.downloaded.add(event["file_id"])
        elif kind == "discarded" and sub:
            sub.downloaded.discard(event["file_id"])
            sub.discarded[event["file_id"]] = sub.discarded.get(event["file_id"], 0) + 1
        elif kind == "collected" and sub:
            self._apply_collected(sub, event)
        elif kind == "remote_deleted" and sub:
            sub.remote_deleted = True
        elif kind == "redo":
            for case_id in event["cases"]:
                self._reopen(self.cases[case_id])
        elif kind == "cancel_requested":
            self.cancelled = True
        elif kind == "resumed":
            self.cancelled = False

    @staticmethod
    def _reopen(case: CaseState) -> None:
        """A case whose last row is an error is not done: a new invocation redoes it.

        It restarts from the stage that failed (a failed judge judges the kept
        answer again) with a fresh retry budget, as a new invocation of the
        reference would; attempt numbers go on, so every ``custom_id`` stays new.
        """
        if case.final != "error":
            return
        case.final, case.error, case.started = None, None, None
        for st in (case.answers, case.judges):
            if st.status == "failed":
                st.status = "pending"
            st.transients = st.invalid = 0
            st.temperature = True

    def _apply_collected(self, sub: Submission, event: dict[str, Any]) -> None:
        sub.collected = True
        stage = sub.stage
        for case_id, (kind, detail, source, custom_id) in event["outcomes"].items():
            case = self.cases[case_id]
            st = case.stage(stage)
            if st.sub != sub.id:
                continue  # superseded (cannot happen in order, but never regress)
            sent = next((line[2] for line in sub.lines if line[0] == case_id), True)
            if kind == "ok":
                st.status, st.source, st.custom_id = "ok", source, custom_id
                st.used_temperature = sent
                if stage == "judges":
                    case.final = "scored"
                    case.rows += 1
            elif kind == "failed":
                st.status = "failed"
                case.final, case.error = "error", detail
                case.rows += 1
            else:
                st.status = "pending"
                if kind == "no_temperature":
                    st.temperature = False
                    st.transients += 1  # the reference's drop uses up an attempt
                elif kind == "invalid":
                    st.invalid += 1
                elif kind == "transient" and not event.get("free_retry"):
                    st.transients += 1
        if event.get("hold_until"):
            self.holds[stage] = max(self.holds.get(stage, 0.0), event["hold_until"])
        if event.get("cap"):
            self.caps[stage] = event["cap"]
        usage = self.usage.setdefault(stage, {})
        for key, value in (event.get("usage") or {}).items():
            usage[key] = usage.get(key, 0) + int(value)
        self.anomalies.extend(event.get("anomalies") or [])


def fold(case_ids: list[str], events: list[dict[str, Any]]) -> RunState:
    state = RunState({cid: CaseState(cid) for cid in case_ids})
    for event in events:
        state.apply(event)
    return state

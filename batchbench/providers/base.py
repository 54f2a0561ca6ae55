"""The provider seam: what a batch service must do for a run, as two protocols and plain records.

A provider has two halves. Its :class:`Wire` is offline and needs no SDK: how a neutral
:class:`Prompt` is rendered into the service's request body, the request ids, the request
file's lines and rules, and how downloaded result files read into the one frame
:mod:`batchbench.engine.collection` consumes. Its :class:`Client` speaks to the service
through the official SDK: upload (or not), create, find a batch again after a crash,
poll, cancel, download. The pipeline, journal, progress and report read only these
records, never a service's own vocabulary: a provider is one module pair behind this seam.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from ..bench.protocol import Prompt
from ..errors import ApiError
from ..kinds import Ending, Phase, ProviderName, Stage
from .ids import run_token

if TYPE_CHECKING:
    import polars as pl

    from .one_by_one import CallKind, Calls


# How long a create may still land after its caller gave up: undocumented by any service;
# no front door holds a request longer than the SDKs wait ("By default requests time out
# after 10 minutes": the openai-python and anthropic-sdk-python READMEs).
LANDS_WITHIN = 600.0

# A service's clock may be this far behind the clock that stamped the journal (a run in
# a bucket is ticked by machines minutes apart: one 700 s ahead missed its own batch): a
# batch is looked for, or polled by a walk of the list, from this long before.
CLOCK_SKEW = 3600.0


# A request's fallbacks so far, in its wire's own words (a dropped temperature, an effort
# sent lower): the core keeps it per case and stage, journals it as the wire wrote it,
# and gives it back to the wire when the request is rendered again. Empty: none yet.
Adjust = Mapping[str, Any]


@dataclass(frozen=True)
class Rendered:
    """A request body exactly as the service receives it, and what the wire notes of it."""

    body: dict[str, Any]
    temperature: bool  # whether it carries a temperature (the row records 1 or null)
    # What the service takes per batch rather than per line, in the wire's own words:
    # requests whose value differs go in other submissions (None: nothing shared).
    shared: dict[str, Any] | None = None
    # What the wire needs to know of this request to read its failure (journaled with it).
    sent: dict[str, Any] | None = None


Account = tuple[tuple[str, str], ...]  # (variable, value) pairs, e.g. the Fireworks account


@dataclass(frozen=True)
class Service:
    """Where a stage's batches live: a provider, its base URL and the account within it
    (a Fireworks account, an OpenAI organization or project; never a key)."""

    provider: ProviderName
    base_url: str
    account: Account = ()

    def __str__(self) -> str:
        return f"{self.provider} at {self.base_url}"

    def setting(self, variable: str) -> str | None:
        """The account's value of one of its provider's account variables."""
        return dict(self.account).get(variable)


@dataclass(frozen=True)
class Limits:
    """How large one batch may be."""

    max_lines: int
    max_bytes: int
    # Fewer requests than this make a batch the service refuses (Bedrock's per-account
    # minimum of records per job): never sent as a batch.
    min_lines: int = 1
    # How many of its batches the service runs at once for an account (Claude on Vertex:
    # 4 a project); the run keeps its own below it (None: no such limit).
    max_batches: int | None = None


@dataclass(frozen=True)
class LineRules:
    """How a failed line is treated, in the reference's words for this provider."""

    label: str  # "<label> request failed after <n> attempts: ..."
    retried: frozenset[int]  # HTTP statuses sent again


@dataclass(frozen=True)
class Tag:
    """What identifies one submission to the service, so it can be found again."""

    run: str
    run_id: str
    stage: Stage
    sub: str
    seq: int
    attempt: int  # the highest attempt among its lines
    requests: int
    model: str  # the id the service is asked for (a service that names it per batch)
    shared: dict[str, Any] | None = None  # what its requests share (:attr:`Rendered.shared`)

    @property
    def token(self) -> str:
        """The run's short mark (:func:`.ids.run_token`)."""
        return run_token(self.run_id)


@dataclass(frozen=True)
class BatchError:
    """Why a batch failed as a whole, in the service's words: its code, its message and,
    where the service names one, the request file's line at fault."""

    code: str | None
    message: str | None
    line: int | None = None

    @classmethod
    def of(cls, found: Mapping[str, Any]) -> BatchError:
        """From the service's record (or a journal's copy of it): unknown keys are not
        ours to keep; a code or message of another type is kept as its text."""
        code, message, line = found.get("code"), found.get("message"), found.get("line")
        return cls(
            None if code is None else str(code),
            None if message is None else str(message),
            line if isinstance(line, int) and not isinstance(line, bool) else None,
        )

    def record(self) -> dict[str, Any]:
        """As journaled."""
        return {"code": self.code, "message": self.message, "line": self.line}


@dataclass(frozen=True)
class BatchView:
    """A batch as the service describes it, normalised.

    ``completed`` and ``failed`` count lines as the service reports them while
    it runs (a service that reports nothing until the end says 0, and how many
    lines are still ``processing``); ``files`` are the result files to
    download, set once the results can be fetched.
    """

    id: str
    status: str  # the service's own word, for people
    phase: Phase
    ending: Ending | None = None
    total: int = 0
    completed: int = 0
    failed: int = 0
    files: tuple[str, ...] = ()
    errors: tuple[BatchError, ...] | None = None  # why a batch failed as a whole
    created_at: float | None = None
    processing: int | None = None  # lines not yet done, from a service that says only that
    # The service says the batch has ended, but its results are not there yet (as each
    # service does for a while): it runs on (phase "running") for a bounded wait.
    awaiting: bool = False

    @property
    def done(self) -> int:
        """Lines the service says have run (succeeded or failed)."""
        return self.completed + self.failed

    @property
    def word(self) -> str:
        """The batch's state in batchbench's one vocabulary, whatever the service calls it
        (``status`` keeps the service's own word, for ``--json`` and ``show``)."""
        if self.phase == "ended":
            return self.ending or "ended"
        return PHASE_WORDS[self.phase]

    @property
    def lines_text(self) -> str:
        """What the service says of the batch's lines: ``120/250 lines done``, or (from a
        service that says only that) ``40 of 250 lines still processing``."""
        if self.processing is not None:
            return f"{self.processing} of {self.total or '?'} lines still processing"
        return f"{self.done}/{self.total or '?'} lines done"


PHASE_WORDS: dict[str, str] = {
    "pending": "queued",
    "running": "running",
    "cancelling": "cancelling",
}


FailureKind = Literal["resubmit", "smaller", "later_smaller", "fail"]


@dataclass(frozen=True)
class BatchFailure:
    """What a batch that failed as a whole (no result files) means for its requests.

    ``resubmit``: not their fault, send them again; ``smaller``: in smaller
    batches; ``later_smaller``: smaller and after a wait; ``fail``: the
    requests themselves are refused (``detail`` is each one's error). ``stop``: why
    the run cannot go on as asked (a model the service does not have): said in one
    line, and nothing more is sent.
    """

    kind: FailureKind
    code: str | None
    detail: str
    stop: str | None = None


class Wire(Protocol):
    """The offline half: what is sent and how replies read (no SDK, no network)."""

    name: ProviderName
    limits: Limits
    rules: LineRules

    def effort(self, asked: str | None) -> str | None:
        """The reasoning effort the service is sent (and the row records)."""
        ...

    def render(self, prompt: Prompt, model: str, adjust: Adjust) -> Rendered:
        """The request for ``prompt``, with the fallbacks ``adjust`` says (none: ``{}``)."""
        ...

    def fallback(
        self, status: int, body_text: str, sent: Mapping[str, Any] | None, adjust: Adjust
    ) -> Adjust | None:
        """What a failed reply (HTTP ``status``, its body as text) means by the reference's
        rules: the adjustments to send the request again with (an attempt spent), or
        None when none applies. ``sent``: what :attr:`Rendered.sent` noted of it."""
        ...

    def custom_id(
        self, stage: Stage, case_id: str, attempt: int, run_id: str, judge_pass: int = 1
    ) -> str:
        """A request's id: new for every stage, case, attempt and judge pass."""
        ...

    def request_line(self, custom_id: str, rendered: Rendered) -> bytes: ...

    def check_file(self, lines: Sequence[bytes], where: str) -> None:
        """The service's rules for one request file; a PlanError when broken."""
        ...

    def check_replies(self, frame: pl.DataFrame, requests: Sequence[bytes], where: str) -> None:
        """That each reply of a downloaded file is its own request's, where the service is
        known to misfile them; an ApiError naming the file when not (else nothing)."""
        ...

    def failure(self, errors: Sequence[BatchError] | None, requests: int) -> BatchFailure: ...

    def read_results(self, paths: Sequence[Path]) -> pl.DataFrame:
        """Downloaded result files → the frame of :data:`.frames.FRAME_SCHEMA`."""
        ...


# Where a service keeps a run's mark: on the batch itself ("tag": metadata, a display
# name, an id the run chose), so the batch is found by it; or only in its results'
# request ids ("results"), so a batch is told to be the run's once its results are in.
Marks = Literal["tag", "results"]


class Client(Protocol):
    """The online half: one service, through its official SDK, errors mapped to ours."""

    service: Service
    marks: Marks
    # How long a create of unknown outcome (:func:`~batchbench.errors.may_land_later`) may
    # still make a batch: no second create before. 0 where the service keeps creates
    # unique (an id or token the run chooses).
    lands_within: float

    def check_models(self, models: Iterable[str]) -> None: ...

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """How this service sends ``model``'s requests one call at a time, for the kinds
        it has (a flex tier, on-demand calls), else None (:mod:`.one_by_one`)."""
        ...

    def upload(self, path: Path, tag: Tag) -> str | None:
        """Put a request file where the service reads a batch's input from (an upload);
        its reference for :meth:`create`, or None for a service whose requests travel
        in the create call itself (nothing is sent then)."""
        ...

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        """One attempt, never retried blind: after an ambiguous failure the caller
        looks for the batch (:meth:`find`) before creating again."""
        ...

    def find(self, tag: Tag, since: float, known: Collection[str]) -> list[BatchView]:
        """Batches on the service that may be this submission's, created since ``since``
        (our clock; the client allows :data:`CLOCK_SKEW`), none of ``known``. Where
        :attr:`marks` is ``"tag"``, the one carrying the submission's tag (at most one:
        the run looks before every create); where ``"results"``, every batch of its size
        (candidates after a lost create, told apart by their results' ids)."""
        ...

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        """What one walk of the service's batch list says of these batches (those it
        reaches; the caller retrieves the rest)."""
        ...

    def retrieve(self, batch_id: str) -> BatchView: ...

    def cancel(self, batch_id: str) -> BatchView | None:
        """None when the batch had already ended."""
        ...

    def download(self, batch_id: str, ref: str, dest: Path) -> int:
        """A result file's bytes, verbatim, to ``dest`` (atomically); its size."""
        ...

    def delete(self, refs: Sequence[str]) -> None:
        """Remove a batch's files from the service (the run keeps its copies)."""
        ...

    def close(self) -> None:
        """Release its connections: a run's end, in a process that may run on (Python
        code, a test) — no socket outlives the command that opened it."""
        ...


@dataclass(frozen=True)
class Provider:
    """One stage's service: its wire and, when talking to it, its client."""

    wire: Wire
    client: Client


T = TypeVar("T")


def walk_list(
    items: Iterable[T],
    wanted: Collection[str],
    id_of: Callable[[T], str],
    view: Callable[[T], BatchView],
) -> dict[str, BatchView]:
    """What one walk of a service's batch list says of the ``wanted`` batches, stopping
    once each is found (lists come newest first, so a run's batches come early)."""
    want, found = set(wanted), {}
    for item in items:
        key = id_of(item)
        if key in want:
            found[key] = view(item)
            if len(found) == len(want):
                break
    return found


def timestamp(value: Any, where: str) -> float | None:
    """A service's time field as seconds since the epoch (a number, a datetime, or an
    ISO 8601 text); anything else is one line naming the object and the field."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    raise ApiError(f"{where}: its created_at {str(value)[:40]!r} is not a timestamp")


def cancel_unless_ended(
    cancel: Callable[[], BatchView], retrieve: Callable[[], BatchView]
) -> BatchView | None:
    """``cancel()``, or None when the service refused it (400 or 409) because the batch had
    already ended: every service refuses to cancel an ended batch, and a run telling its
    batches to stop must not fail over one that stopped by itself meanwhile."""
    try:
        return cancel()
    except ApiError as exc:
        if exc.status not in (400, 409) or retrieve().phase != "ended":
            raise
        return None

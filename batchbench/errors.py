"""The exceptions batchbench raises on purpose, and the exit status each one means.

Every error a user can meet (a broken file, a bad option, a damaged run, an API
refusal) is a :class:`BatchbenchError`: the CLI prints its message on one line
and exits with the class's ``exit_code``, so no traceback reaches the user for
a foreseeable problem. The tree:

- :class:`InputError` (exit 2): the user's own inputs — options, dataset,
  results files, pricing, a resume with another configuration. Fix the input.
- :class:`NotFinished` (exit 3): the run is still in progress (``run
  --no-wait`` says so too); there is nothing to show, export or report yet.
- :class:`RunStateError` (exit 4): a run folder that cannot be advanced as it
  is — locked by another process, a corrupt journal, a downloaded batch file
  that breaks the Batch API's format, a disk that is full or read-only. The
  run's state is left as it was.
- :class:`ApiError` (exit 5): a batch service refused or could not be reached
  after the retry policy; carries the HTTP ``status`` and the ``batch_id`` when
  known. Resuming later is safe. :class:`TransientApiError` is the kind the
  retry policy (:mod:`batchbench.providers.retry`) tries again; :class:`Unreachable`
  (nothing listening) and :class:`NoAnswer` (a silent server) are two of it.

Each provider's client maps its SDK's exceptions onto this tree, so nothing
above a client knows which SDK raised what.

:class:`InvariantError` is not in the tree on purpose: it is a bug in
batchbench (exit 70), never a user's or a judge's fault; so is any exception
the CLI did not foresee. A judge reply that breaks the protocol is not an
exception at all for the user: it becomes the case's error row
(:class:`JudgeReplyError` carries the reference's text).
"""

from __future__ import annotations


class BatchbenchError(Exception):
    """Base class: the message is complete and fit for one line on stderr."""

    exit_code = 2


class InputError(BatchbenchError):
    """An option, file or configuration the user gave is invalid."""

    exit_code = 2


class LabelsError(InputError):
    """A labels file that cannot be read as physicians' verdicts, whatever its format."""


class DatasetError(InputError):
    """A BedsideBench checkout is missing a file or holds an invalid case."""


class ResultsError(InputError):
    """A results JSONL file cannot be read as reference-format rows."""


class ConfigError(InputError):
    """An option or run configuration is invalid or conflicts with a run."""


class UnknownRun(ConfigError):
    """A run name that is not a run of the jobs folder (the same for every command)."""


class BelowMinimum(ConfigError):
    """Too few requests for a batch the service accepts (Bedrock's minimum records per
    job), and sending them on demand was not chosen (``--on-demand-remainder``)."""


class ProviderUnavailable(ConfigError):
    """A model's provider needs an SDK that is not installed (an optional extra)."""


class NotFinished(BatchbenchError):
    """A run with nothing to show yet: still in progress (exit 3, as ``run --no-wait``)."""

    exit_code = 3


class RunStateError(BatchbenchError):
    """A run directory cannot be advanced as it is (journal, raw files, lock)."""

    exit_code = 4


class RunLockedError(RunStateError):
    """Another process is advancing the same run."""


class StorageError(RunStateError):
    """A file or folder cannot be written or read (read-only, full disk, not a folder).

    Nothing half-written is left behind: the run resumes unchanged once fixed.
    """

    @classmethod
    def of(cls, exc: OSError, path: object) -> StorageError:
        """Names the path the caller was writing (not a temporary name beside it)."""
        return cls(f"cannot write {path}: {exc.strerror or exc}")


class BatchFileError(RunStateError):
    """A downloaded batch output or error file breaks the Batch API format."""


class TruncatedFileError(BatchFileError):
    """The file ends in the middle of a line: download it again."""


class ApiError(BatchbenchError):
    """The Batch API refused a call in a way retries cannot fix."""

    exit_code = 5

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        batch_id: str | None = None,
        param: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.batch_id = batch_id
        self.param = param  # the request field the API blamed, when it said
        self.retry_after = retry_after  # seconds the service asked us to wait


class FileNotYetVisible(ApiError):
    """Creating a batch right after its upload: ``Cannot find file`` (400, ``file_id``).

    The service says so for a while after an upload; nothing was created, so the
    create may simply be tried again a little later.
    """


class NoRoom(ApiError):
    """A create the service refused for want of room — its quota of jobs running at once
    is full — definitely: nothing was made. Tried again when a job has ended, never
    counted as an outage."""


class TransientApiError(ApiError):
    """A call that may succeed later (429, 5xx, timeouts, dropped connections),
    still failing once the retry policy is spent."""


def may_land_later(exc: ApiError) -> bool:
    """Whether a call that failed so may still reach the service and take effect: it went
    out and nothing came back (a timeout, a connection dropped after the request was
    sent), or a front door said it gave up waiting for the service behind it (502, 504:
    RFC 9110 §15.6.3, §15.6.5). A reply from the service itself (429, 500, 503) says
    the service is done with the request; nothing listening (:class:`Unreachable`)
    says it never left."""
    if isinstance(exc, Unreachable) or not isinstance(exc, TransientApiError):
        return False
    return exc.status is None or exc.status in (502, 504)


class Unreachable(TransientApiError):
    """Nothing answers at the base URL. Before a run starts that is a wrong URL
    (said at once); once it has started, an outage (tried again for a while)."""


class NoAnswer(TransientApiError):
    """The service took the connection and sent nothing back in time (a silent server).
    During a run that is an outage (tried again, bounded); before one, a wrong URL or a
    service that is down, said at once."""


class ApiNotFoundError(ApiError):
    """The API says an object (batch or file) does not exist (404)."""


class ApiConflictError(ApiError):
    """The API refused a change of state (409), e.g. cancelling a finished batch."""


class CanaryFailed(BatchbenchError):
    """A canary batch came back with no good case: nothing more of its stage was bought
    (:mod:`batchbench.engine.canary`)."""

    exit_code = 5


class JudgeReplyError(ValueError):
    """A judge reply breaks the protocol; its message is the case's error-row text."""


class InvariantError(RuntimeError):
    """Something batchbench itself guarantees did not hold: a bug to report."""

    exit_code = 70


class PlanError(InvariantError):
    """A request file that the service would reject: batchbench built it wrong."""

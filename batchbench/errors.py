"""The exceptions batchbench raises on purpose.

Every error a user can cause (a broken file, a bad option, an API refusal) is a
``BatchbenchError``: the CLI prints its message on one line and exits non-zero,
so no traceback ever reaches the user for a foreseeable problem.
"""

from __future__ import annotations


class BatchbenchError(Exception):
    """Base class: the message is complete and fit for one line on stderr."""

    exit_code = 2


class DatasetError(BatchbenchError):
    """A BedsideBench checkout is missing a file or holds an invalid case."""


class ResultsError(BatchbenchError):
    """A results JSONL file cannot be read as reference-format rows."""


class JudgeReplyError(BatchbenchError):
    """A judge reply breaks the protocol; the case gets no partial credit."""


class ConfigError(BatchbenchError):
    """An option or run configuration is invalid or conflicts with a run."""


class RunStateError(BatchbenchError):
    """A run directory is damaged or inconsistent (journal, raw files)."""


class BatchFileError(BatchbenchError):
    """A downloaded batch output or error file breaks the Batch API format."""


class ApiError(BatchbenchError):
    """The Batch API refused a call in a way retries cannot fix."""


class RunLockedError(BatchbenchError):
    """Another process is advancing the same run."""


class TransientApiError(ApiError):
    """A call that may succeed if repeated (429, 5xx, timeouts, dropped connections)."""


class ApiNotFoundError(ApiError):
    """The API says an object (batch or file) does not exist."""

"""OpenAI's files and batches as records, the list pages, and the create call's checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...core import ApiFailure
from ...endpoints import usage_of

ENDPOINTS = (
    "/v1/responses",
    "/v1/chat/completions",
    "/v1/embeddings",
    "/v1/completions",
    "/v1/moderations",
    "/v1/images/generations",
    "/v1/images/edits",
    "/v1/videos",
)
UPLOAD_PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
TERMINAL = ("completed", "failed", "expired", "cancelled")
MAX_FILE_BYTES = 512 * 1024 * 1024
Result = tuple[str, "dict[str, Any] | None", "dict[str, Any] | None"]


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int
    expires_at: int | None = None
    # empty-results: the batch whose file reads empty while that bad day lasts
    withheld: str | None = None

    def obj(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": self.expires_at,
            "status_details": None,
        }


@dataclass
class Batch:
    id: str
    endpoint: str
    input_file_id: str
    metadata: dict[str, str] | None
    created: float
    seq: int
    status: str = "validating"
    model: str | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)
    order: list[int] = field(default_factory=list)  # lines run in parallel: any order
    tokens: int = 0
    executed: int = 0
    results: list[Result] = field(default_factory=list)
    stamps: dict[str, float] = field(default_factory=dict)
    errors: list[dict[str, Any]] | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts_reset: bool = False
    output_expires_after: int | None = None  # seconds after the output file is made
    polls: int = 0
    reported: dict[str, int] | None = None  # the counts the last poll saw (lagging-counts)
    overrides: dict[str, Any] = field(default_factory=dict)  # tests: fields it misreports
    window: str = "24h"  # the completion window the create named (Groq's run to 7d)

    @property
    def span(self) -> float:
        """The window in days: what the emulated day (``--completion-window``) is
        multiplied by for this batch's deadline."""
        number, unit = int(self.window[:-1]), self.window[-1]
        return number / 24 if unit == "h" else float(number)

    def counts(self) -> dict[str, int]:
        ok = sum(1 for _, r, e in self.results if _ok(r, e))
        if self.status in ("validating", "failed"):
            return {"total": 0, "completed": 0, "failed": 0}
        counts = {"total": len(self.lines), "completed": ok, "failed": len(self.results) - ok}
        if self.counts_reset:  # observed on cancelled batches: completed reset to 0
            counts["completed"] = 0
        return counts

    def obj(self, window: float, counts: dict[str, int] | None = None) -> dict[str, Any]:
        usage = {"input_tokens": 0, "output_tokens": 0, "cached": 0, "reasoning": 0}
        for _, response, error in self.results:
            if _ok(response, error) and response is not None:
                body = response.get("body") or {}
                u = body.get("usage") or {}
                spent_in, spent_out = usage_of(body)  # every reply shape's own names
                usage["input_tokens"] += spent_in
                usage["output_tokens"] += spent_out
                usage["cached"] += int(
                    (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                )
                usage["reasoning"] += int(
                    (u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
                )

        def stamp(name: str) -> int | None:
            value = self.stamps.get(name)
            return None if value is None else int(value)

        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "model": self.model,
            "errors": None if self.errors is None else {"object": "list", "data": self.errors},
            "input_file_id": self.input_file_id,
            "completion_window": self.window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": int(self.created),
            "in_progress_at": stamp("in_progress"),
            "expires_at": int(self.created + window * self.span),
            "finalizing_at": stamp("finalizing"),
            "completed_at": stamp("completed"),
            "failed_at": stamp("failed"),
            "expired_at": stamp("expired"),
            "cancelling_at": stamp("cancelling"),
            "cancelled_at": stamp("cancelled"),
            "request_counts": counts if counts is not None else self.counts(),
            "usage": {
                "input_tokens": usage["input_tokens"],
                "input_tokens_details": {"cached_tokens": usage["cached"]},
                "output_tokens": usage["output_tokens"],
                "output_tokens_details": {"reasoning_tokens": usage["reasoning"]},
                "total_tokens": usage["input_tokens"] + usage["output_tokens"],
            },
            "metadata": self.metadata,
        } | self.overrides


def _ok(response: dict[str, Any] | None, error: dict[str, Any] | None) -> bool:
    return error is None and response is not None and 200 <= response["status_code"] < 300


def page(items: list[dict[str, Any]], limit: int, after: str | None) -> dict[str, Any]:
    start = 0
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise ApiFailure(400, f"Invalid 'after' cursor: {after}", param="after")
        start = ids.index(after) + 1
    chunk = items[start : start + limit]
    return {
        "object": "list",
        "data": chunk,
        "first_id": chunk[0]["id"] if chunk else None,
        "last_id": chunk[-1]["id"] if chunk else None,
        "has_more": start + limit < len(items),
    }


def check_metadata(metadata: Any) -> None:
    if not isinstance(metadata, dict):
        raise ApiFailure(400, "metadata must be an object", param="metadata")
    if len(metadata) > 16:
        raise ApiFailure(400, "metadata may have at most 16 keys", param="metadata")
    for key, value in metadata.items():
        if not isinstance(key, str) or len(key) > 64:
            raise ApiFailure(
                400, "metadata keys must be strings of at most 64 characters", param="metadata"
            )
        if not isinstance(value, str) or len(value) > 512:
            raise ApiFailure(
                400,
                f"metadata value for {key!r} must be a string of at most 512 characters",
                param="metadata",
            )


def check_create(
    payload: Any, endpoints: Mapping[str, str], windows: frozenset[str] = frozenset({"24h"})
) -> dict[str, Any]:
    """A create body's own rules (the input file is the book's business)."""
    if not isinstance(payload, dict):
        raise ApiFailure(400, "Request body must be a JSON object")
    for key in ("input_file_id", "endpoint", "completion_window"):
        if key not in payload:
            raise ApiFailure(400, f"Missing required parameter: '{key}'.", param=key)
    if payload["endpoint"] not in endpoints:
        raise ApiFailure(400, f"Invalid endpoint: {payload['endpoint']!r}", param="endpoint")
    if payload["completion_window"] not in windows:
        allowed = ", ".join(repr(w) for w in sorted(windows))
        raise ApiFailure(
            400,
            f"Invalid completion_window: only {allowed} is supported",
            param="completion_window",
        )
    if payload.get("metadata") is not None:
        check_metadata(payload["metadata"])
    expires_after = payload.get("output_expires_after")
    if expires_after is not None:
        seconds = expires_after.get("seconds") if isinstance(expires_after, dict) else None
        if (
            not isinstance(expires_after, dict)
            or expires_after.get("anchor") != "created_at"
            or not isinstance(seconds, int)
            or not 3600 <= seconds <= 2_592_000
        ):
            raise ApiFailure(
                400,
                "output_expires_after must be {anchor: created_at, seconds: 3600 to 2592000}",
                param="output_expires_after",
            )
    return payload

"""One Vertex AI batch prediction job as the emulator keeps it, and as the API shows it
(``BatchPredictionJob`` in REST's camelCase)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...core import rfc3339

ENDED = (
    "JOB_STATE_SUCCEEDED",
    "JOB_STATE_PARTIALLY_SUCCEEDED",
    "JOB_STATE_FAILED",
    "JOB_STATE_CANCELLED",
    "JOB_STATE_EXPIRED",
)


@dataclass
class Job:
    id: str
    parent: str  # projects/P/locations/L
    display_name: str
    publisher: str  # google or anthropic
    model: str
    input_uri: str
    output_prefix: str
    labels: dict[str, str]
    created: float
    state: str = "JOB_STATE_QUEUED"
    error: dict[str, Any] | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)
    order: list[int] = field(default_factory=list)
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    executed: int = 0
    stamps: dict[str, float] = field(default_factory=dict)
    output_dir: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    # The failed-while-running bad day: reads that still say FAILED, and until when.
    failed_reads: int = 0
    failed_until: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.parent}/batchPredictionJobs/{self.id}"

    def obj(self, now: float = 0.0) -> dict[str, Any]:
        if self.state == "JOB_STATE_RUNNING" and (self.failed_reads > 0 or now < self.failed_until):
            self.failed_reads -= 1
            return self._reads_failed()
        return self._obj()

    def _obj(self) -> dict[str, Any]:
        ok = sum(1 for r in self.results.values() if not r.get("status"))
        out: dict[str, Any] = {
            "name": self.name,
            "displayName": self.display_name,
            "model": f"publishers/{self.publisher}/models/{self.model}",
            "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris": [self.input_uri]}},
            "outputConfig": {
                "predictionsFormat": "jsonl",
                "gcsDestination": {"outputUriPrefix": self.output_prefix},
            },
            "state": self.state,
            "createTime": rfc3339(self.created),
            "updateTime": rfc3339(max([self.created, *self.stamps.values()])),
            "labels": dict(self.labels),
        }
        if "started" in self.stamps:
            out["startTime"] = rfc3339(self.stamps["started"])
        if self.state in ENDED:
            out["endTime"] = rfc3339(self.stamps.get("ended", self.created))
            out["completionStats"] = {
                "successfulCount": str(ok),
                "failedCount": str(len(self.results) - ok),
                "incompleteCount": str(len(self.lines) - len(self.results)),
            }
        if self.output_dir is not None:
            out["outputInfo"] = {"gcsOutputDirectory": self.output_dir}
        if self.error is not None:
            out["error"] = self.error
        return out | self.overrides

    def _reads_failed(self) -> dict[str, Any]:
        """A running job read as failed (an internal error, nothing written yet), as the
        failed-while-running bad day has it: it runs on and ends as it would have."""
        out = {k: v for k, v in self._obj().items() if k not in ("outputInfo",)}
        out["state"] = "JOB_STATE_FAILED"
        out["error"] = {"code": 13, "message": "Internal error encountered."}
        out["endTime"] = out["updateTime"] = rfc3339(self.stamps["started"])
        return out

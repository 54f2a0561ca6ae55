"""A run's ``report.json``: what the reference's summary has no field for — counts,
usage, cost, batches and the run's provenance (#66.1) — written beside the summary,
whose bytes stay the reference's."""

from __future__ import annotations

import json

from .._io import atomic_write_text
from ..costs.pricing import Pricing, load_pricing
from ..engine.provenance import provenance
from ..engine.runconfig import RunConfig
from ..engine.rundir import Run
from ..engine.state import RunState
from ..kinds import STAGES
from .status import run_cost_of, stage_status


def write_report(
    run: Run, state: RunState, config: RunConfig, pricing: Pricing | None = None
) -> None:
    """report.json: what the reference has no field for (counts, usage, cost, batches)."""
    pricing = pricing or load_pricing()
    report = {
        "run": config.name,
        "run_id": config.run_id,
        "stages": {stage: stage_status(state, stage) for stage in STAGES},
        "batches": [
            {
                "submission": s.id,
                "stage": s.stage,
                "batch_id": s.batch_id,
                "status": s.word,
                "service_status": s.status,
                "requests": len(s.lines),
                "adopted": s.adopted,
                "input_file_id": s.file_id,
                "result_files": s.result_files(),
            }
            for s in state.subs.values()
        ],
        "anomalies": list(state.anomalies),
        "cost": run_cost_of(state, config, pricing),
        "provenance": provenance(state, config),
    }
    atomic_write_text(run.report_path, json.dumps(report, indent=2) + "\n")

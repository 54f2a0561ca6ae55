"""A HealthBench run as an Inspect log, written by inspect_ai's own writer (as the
BedsideBench log is, :mod:`.inspect_log`): a sample per example — its input the
conversation as the model was sent it (the sampler's system message first), its target
the rubric items as ``[points] criterion``, its output the completion, one score
``healthbench`` with simple-evals' example score and each item's verdict and the
grader's explanation — and simple-evals' metrics (overall, each theme, axis and tag,
with ``n_samples`` and ``bootstrap_std``) as the results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..bench import healthbench
from .inspect_log import inspect_model_name, require, save, tokens, total

SCORER = "healthbench_rubric"


def _messages(row: Mapping[str, Any]) -> list[Any]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {
        "system": ChatMessageSystem,
        "user": ChatMessageUser,
        "assistant": ChatMessageAssistant,
    }
    sent = [{"role": "system", "content": healthbench.SYSTEM_MESSAGE}, *row["prompt"]]
    return [kinds[m["role"]](content=m["content"]) for m in sent]


def _sample(row: Mapping[str, Any], model: str, used: Mapping[str, int] | None) -> Any:
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput
    from inspect_ai.scorer import Score

    items = row.get("rubric_items") or []
    messages = _messages(row)
    shared: dict[str, Any] = {
        "id": str(row["prompt_id"]),
        "epoch": 1,
        "input": messages,
        "target": [f"[{i['points']}] {i['criterion']}" for i in items],
        "metadata": {"example_tags": list(row.get("example_tags") or [])},
    }
    if "error" in row:
        error = EvalError(message=str(row["error"]), traceback="", traceback_ansi="")
        return EvalSample(**shared, messages=messages, error=error)
    answer = "".join(str(m.get("content", "")) for m in row["completion"])
    output = ModelOutput.from_content(model, answer)
    found = tokens(used)
    output.usage = found
    scores = {}
    if row.get("score") is not None:  # no positive point: simple-evals scores it not
        scores["healthbench"] = Score(
            value=float(row["score"]),
            answer=answer,
            explanation="\n".join(
                f"{'met' if i['criteria_met'] else 'not met'}: [{i['points']}] {i['criterion']}"
                f" ({i.get('explanation', '')})"
                for i in items
            ),
            metadata={"rubric_items": items, "judge_model": row.get("judge_model")},
        )
    return EvalSample(
        **shared,
        messages=[*messages, ChatMessageAssistant(content=answer, model=model)],
        output=output,
        scores=scores,
        model_usage={} if found is None else {inspect_model_name(model): found},
    )


def write(
    path: Path,
    rows: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any],
    *,
    run_name: str,
    run_id: str,
    started: str,
    finished: str,
    usage: Mapping[str, Mapping[str, int]] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> None:
    """One HealthBench run as an Inspect log (each example's last row)."""
    require()
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )

    last: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        last[str(row["case_id"])] = row
    answer_model = str(summary["answer_model"])
    model = inspect_model_name(answer_model)
    samples = [_sample(last[c], answer_model, (usage or {}).get(c)) for c in sorted(last)]
    figures = summary["metrics"]
    names = [k for k in figures if not k.endswith((":n_samples", ":bootstrap_std"))]
    metrics = {
        name: EvalMetric(
            name=name,
            value=figures[name],
            metadata={
                "n_samples": figures[f"{name}:n_samples"],
                "bootstrap_std": figures[f"{name}:bootstrap_std"],
            },
        )
        for name in ["overall_score", *sorted(n for n in names if n != "overall_score")]
        if name in figures
    }
    scored = sum(1 for s in samples if s.scores)
    metadata = {
        "protocol_version": str(summary["protocol_version"]),
        "dataset_sha256": str(summary["dataset_sha256"]),
        "judge_model": str(summary["judge_model"]),
        "judge_temperature": healthbench.TEMPERATURE,
        "batchbench_version": __version__,
        "bootstrap": f"{summary['bootstrap']['samples']} resamples, seed"
        f" {summary['bootstrap']['seed']} (simple-evals' draws are unseeded)",
    }
    if provenance is not None:
        metadata["provenance"] = dict(provenance)
    log = EvalLog(
        status="success",
        eval=EvalSpec(
            run_id=run_id,
            eval_id=run_id,
            created=started,
            task="healthbench",
            task_display_name=f"HealthBench: {run_name}",
            dataset=EvalDataset(
                name="HealthBench", samples=len(samples), sample_ids=[s.id for s in samples]
            ),
            model=model,
            config=EvalConfig(),
            metadata=metadata,
        ),
        results=EvalResults(
            total_samples=len(samples),
            completed_samples=scored,
            scores=[
                EvalScore(
                    name="healthbench",
                    scorer=SCORER,
                    scored_samples=scored,
                    unscored_samples=len(samples) - scored,
                    metrics=metrics,
                )
            ],
        ),
        stats=EvalStats(
            started_at=started, completed_at=finished, model_usage=total(samples, model)
        ),
        samples=samples,
    )
    save(path, log)

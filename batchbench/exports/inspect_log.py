"""A run as an Inspect log (``.eval``) that ``inspect view`` opens, written by inspect_ai's
own log writer (the ``[inspect]`` extra).

Samples are cases: the model's input (the reference's system message and the case's
prompt), the rubric as the target, the answer as the output, and one score
``rubric`` with the case's score, the judge's per-item verdicts and the score's
components in its metadata; a case that ended in an error is a sample with that
error. The results carry each benchmark's mean and 95 % interval and the overall
macro mean, as the run's summary has them; the spec carries the run's fingerprint
(protocol, dataset digest, judge, batchbench's version).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__, providers
from .._io import replacing
from ..bench import protocol
from ..bench.dataset import Case
from ..errors import ProviderUnavailable, StorageError
from ..scores.summary import Summary, last_rows

try:  # the [inspect] extra: this module is imported only by an Inspect export
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalError,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalSample,
        EvalScore,
        EvalSpec,
        EvalStats,
        write_eval_log,
    )
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageUser,
        ModelOutput,
        ModelUsage,
    )
    from inspect_ai.scorer import Score

    INSTALLED = True
except ImportError:  # said when an export is asked for (write)
    INSTALLED = False

SCORER = "bedside_bench_rubric"


def inspect_model_name(model: str) -> str:
    """The model's name as Inspect writes it (its provider's record says)."""
    return providers.spec(providers.route(model)).inspect_model(model)


def write(
    path: Path,
    rows: Sequence[dict[str, Any]],
    summary: Summary,
    cases: Mapping[str, Case],
    *,
    run_name: str,
    run_id: str,
    usage: Mapping[str, Mapping[str, int]] | None = None,
    served: Mapping[str, str] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> None:
    """One run as an Inspect log: a sample per case (its input the case's prompt, its
    messages what the model was sent and said, its tokens from the raw answer when
    ``usage`` has them, its output's model the one the service says ``served`` it, as
    Inspect's own providers record it), the rubric score, the summary's figures as
    metrics, the run's ``provenance`` in the spec's metadata."""
    require()
    last, _ = last_rows(rows)
    answer_model = str(summary["answer_model"])
    samples = [
        _sample(
            case_id,
            last[case_id],
            cases[case_id],
            (served or {}).get(case_id) or answer_model,
            (usage or {}).get(case_id),
        )
        for case_id in sorted(last)
    ]
    log = _log(samples, summary, run_name, run_id, inspect_model_name(answer_model))
    if provenance is not None:
        log.eval.metadata = {**(log.eval.metadata or {}), "provenance": dict(provenance)}
    save(path, log)


def require() -> None:
    """inspect_ai is there (the ``[inspect]`` extra), else one line saying how to get it."""
    if not INSTALLED:
        from ..providers import install_hint

        raise ProviderUnavailable(
            f"--format inspect writes with inspect_ai's own log writer: {install_hint('inspect')}"
        )


def save(path: Path, log: EvalLog) -> None:
    """The log written at ``path`` by inspect_ai's own writer, whole or not at all."""
    # inspect_ai's writer writes where it is told: into a temporary file beside the
    # target, renamed over it only when whole, as every -o is (a folder, a symlink or a
    # device there is refused, not written through or replaced).
    with replacing(path) as tmp:
        try:
            write_eval_log(log, str(tmp), format="eval")
        except OSError as exc:
            raise StorageError.of(exc, path) from None
        except Exception as exc:  # the writer's own failure, its temporary name hidden
            detail = str(exc).replace(str(tmp), str(path))[:300]
            raise StorageError(f"cannot write {path}: inspect_ai's writer: {detail}") from None


def tokens(used: Mapping[str, int] | None) -> ModelUsage | None:
    """Inspect's reading of a reply's usage (as its OpenAI provider reads one): input
    without the cached part, which is its own figure."""
    if used is None:
        return None
    prompt, cached = used["prompt_tokens"], used["cached_tokens"]
    return ModelUsage(
        input_tokens=prompt - cached,
        output_tokens=used["completion_tokens"],
        total_tokens=prompt + used["completion_tokens"],
        input_tokens_cache_read=cached or None,
        reasoning_tokens=used["reasoning_tokens"] or None,
    )


def _sample(
    case_id: str,
    row: Mapping[str, Any],
    case: Case,
    answer_model: str,
    used: Mapping[str, int] | None,
) -> EvalSample:
    """One case as a sample: what a viewer lists is the case's prompt (the system prompt
    stays in its messages); an error row is a sample with that error. ``answer_model``:
    the model that served its answer, as its reply says, else the one asked for."""
    system = ChatMessageSystem(content=protocol.ANSWER_SYSTEM_MESSAGE)
    user = ChatMessageUser(content=case["prompt"])
    shared: dict[str, Any] = {
        "id": case_id,
        "epoch": 1,
        "input": case["prompt"],
        "target": [protocol.rubric_line(item) for item in case["rubric_items"]],
        "metadata": {"benchmark": case["benchmark"], "grading_method": case["grading_method"]},
    }
    if "error" in row:
        error = EvalError(message=str(row["error"]), traceback="", traceback_ansi="")
        return EvalSample(**shared, messages=[system, user], error=error)
    answer = str(row.get("answer") or "")
    verdicts = {d["item_id"]: d["matched"] for d in row.get("decisions") or []}
    score = Score(
        value=float(row["score"]),
        answer=answer,
        explanation="\n".join(
            f"{'met' if verdicts.get(item['item_id']) else 'not met'}: {protocol.rubric_line(item)}"
            for item in case["rubric_items"]
        ),
        metadata={
            "decisions": row.get("decisions"),
            "score_components": row.get("score_components"),
            "judge_model": row.get("judge_model"),
        },
    )
    found = tokens(used)
    output = ModelOutput.from_content(answer_model, answer)
    output.usage = found
    said = ChatMessageAssistant(content=answer, model=answer_model)
    return EvalSample(
        **shared,
        messages=[system, user, said],
        output=output,
        scores={"rubric": score},
        model_usage={} if found is None else {inspect_model_name(answer_model): found},
    )


def _log(
    samples: list[EvalSample], summary: Summary, run_name: str, run_id: str, model: str
) -> EvalLog:
    """The log around the samples: the run's fingerprint, the summary's figures as
    metrics, the answer model's tokens in all."""
    metrics = {
        name: EvalMetric(
            name=name, value=bench["mean"], metadata={"ci95": list(bench["ci95"]), "n": bench["n"]}
        )
        for name, bench in summary["benchmarks"].items()
    }
    metrics["overall"] = EvalMetric(
        name="overall",
        value=summary["overall_macro_mean"],
        metadata={"ci95": list(summary["overall_ci95"]), "macro": "mean of the benchmarks"},
    )
    started = str(summary["started_at"] or datetime.now(timezone.utc).isoformat())
    scored = int(summary["completed_cases"])
    return EvalLog(
        status="success",
        eval=EvalSpec(
            run_id=run_id,
            eval_id=run_id,
            created=started,
            task="bedside_bench",
            task_display_name=f"BedsideBench: {run_name}",
            dataset=EvalDataset(
                name="BedsideBench", samples=len(samples), sample_ids=[s.id for s in samples]
            ),
            model=model,
            config=EvalConfig(),
            metadata={
                "protocol_version": str(summary["protocol_version"]),
                "dataset_sha256": str(summary["dataset_sha256"]),
                "judge_model": str(summary["judge_model"]),
                "judge_temperature": protocol.JUDGE_TEMPERATURE,
                "batchbench_version": __version__,
                "bootstrap": f"{summary.get('bootstrap_samples', 10000)} resamples, seed 42",
            },
        ),
        results=EvalResults(
            total_samples=len(samples),
            completed_samples=scored,
            scores=[
                EvalScore(
                    name="rubric",
                    scorer=SCORER,
                    scored_samples=scored,
                    unscored_samples=int(summary["errors"]),
                    metrics=metrics,
                )
            ],
        ),
        stats=EvalStats(
            started_at=started,
            completed_at=str(summary["finished_at"] or started),
            model_usage=total(samples, model),
        ),
        samples=samples,
    )


def total(samples: Sequence[EvalSample], model: str) -> dict[str, ModelUsage]:
    """The answer model's tokens over every sample that has them (Inspect's stats)."""
    used = [s.model_usage[model] for s in samples if model in s.model_usage]
    if not used:
        return {}
    total = used[0]
    for more in used[1:]:
        total = total + more
    return {model: total}

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

SCORER = "bedside_bench_rubric"


def inspect_model_name(model: str) -> str:
    """The model's name as Inspect writes it (its provider's record says)."""
    return providers.spec(providers.route(model)).inspect_model(model)


def _total(samples: Sequence[Any], model: str) -> dict[str, Any]:
    """The answer model's tokens over every sample that has them (Inspect's stats)."""
    used = [s.model_usage[model] for s in samples if model in s.model_usage]
    if not used:
        return {}
    total = used[0]
    for more in used[1:]:
        total = total + more
    return {model: total}


def write(
    path: Path,
    rows: Sequence[dict[str, Any]],
    summary: Summary,
    cases: Mapping[str, Case],
    *,
    run_name: str,
    run_id: str,
    usage: Mapping[str, Mapping[str, int]] | None = None,
) -> None:
    """One run as an Inspect log: a sample per case (its input the case's prompt, its
    messages what the model was sent and said, its tokens from the raw answer when
    ``usage`` has them), the rubric score, the summary's figures as metrics."""
    try:
        from inspect_ai.log import (
            EvalConfig,
            EvalDataset,
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
    except ImportError:
        from ..providers import install_hint

        raise ProviderUnavailable(
            f"--format inspect writes with inspect_ai's own log writer: {install_hint('inspect')}"
        ) from None
    from inspect_ai.log import EvalError

    last, _ = last_rows(rows)
    answer_model = str(summary["answer_model"])
    model_name = inspect_model_name(answer_model)

    def tokens(case_id: str) -> ModelUsage | None:
        """Inspect's reading of a reply's usage (as its OpenAI provider reads one): input
        without the cached part, which is its own figure."""
        used = (usage or {}).get(case_id)
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

    samples = []
    for case_id in sorted(last):
        row, case = last[case_id], cases[case_id]
        system = ChatMessageSystem(content=protocol.ANSWER_SYSTEM_MESSAGE)
        user = ChatMessageUser(content=case["prompt"])
        target = [protocol.rubric_line(item) for item in case["rubric_items"]]
        metadata = {"benchmark": case["benchmark"], "grading_method": case["grading_method"]}
        if "error" in row:
            samples.append(
                EvalSample(
                    id=case_id,
                    epoch=1,
                    input=case["prompt"],
                    target=target,
                    messages=[system, user],
                    metadata=metadata,
                    error=EvalError(message=str(row["error"]), traceback="", traceback_ansi=""),
                )
            )
            continue
        answer = str(row.get("answer") or "")
        verdicts = {d["item_id"]: d["matched"] for d in row.get("decisions") or []}
        score = Score(
            value=float(row["score"]),
            answer=answer,
            explanation="\n".join(
                f"{'met' if verdicts.get(item['item_id']) else 'not met'}:"
                f" {protocol.rubric_line(item)}"
                for item in case["rubric_items"]
            ),
            metadata={
                "decisions": row.get("decisions"),
                "score_components": row.get("score_components"),
                "judge_model": row.get("judge_model"),
            },
        )
        output = ModelOutput.from_content(answer_model, answer)
        used = tokens(case_id)
        output.usage = used
        samples.append(
            EvalSample(
                id=case_id,
                epoch=1,
                input=case["prompt"],  # what a viewer lists: the case, not the system prompt
                target=target,
                messages=[system, user, ChatMessageAssistant(content=answer, model=answer_model)],
                output=output,
                scores={"rubric": score},
                metadata=metadata,
                model_usage={} if used is None else {model_name: used},
            )
        )
    metrics = {
        f"{name}": EvalMetric(
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
    finished = str(summary["finished_at"] or started)
    log = EvalLog(
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
            model=model_name,
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
            completed_samples=int(summary["completed_cases"]),
            scores=[
                EvalScore(
                    name="rubric",
                    scorer=SCORER,
                    scored_samples=int(summary["completed_cases"]),
                    unscored_samples=int(summary["errors"]),
                    metrics=metrics,
                )
            ],
        ),
        stats=EvalStats(
            started_at=started, completed_at=finished, model_usage=_total(samples, model_name)
        ),
        samples=samples,
    )
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

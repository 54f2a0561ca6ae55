"""The reporting checklists a clinical reviewer holds an evaluation to (#66.8), filled from
the run's own record: each item answered with the report section that answers it,
or "not applicable" / "not reported" with why.

A checklist is a record (its name, title, source, items), and an item a label, its
topic and the rule that answers it from :class:`Facts` — so the next checklist is one
record, as a provider is. What this build holds of each:

- **MI-CLEAR-LLM** (Park et al., Korean J Radiol 2024;25:865; the six items as the
  adherence study names them, Korean J Radiol 2025;26:304): every item.
- **CHART** (the CHART statement, BMJ Medicine 2025;4:e001632): the 12 items and the
  subitem labels the statement's abstract enumerates (1a … 12e, thirty of them), each
  under its topic as published; the topic is the statement's, the answer ours. The
  statement counts 39 subitems in its full checklist, whose wording this build does
  not carry: check the full checklist before submitting.
- **TRIPOD-LLM**: not carried (19 items and 50 subitems whose wording this build does
  not hold); asked for, it is one line saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..bench.protocol import JUDGE_TEMPERATURE
from .page_sources import Source

Status = Literal["answered", "not applicable", "not reported"]
Answer = tuple[Status, str, str]  # status, where (a section of the page), text
CHECKLISTS_MISSING = {  # asked for by name, refused in one line saying why
    "tripod-llm": "TRIPOD-LLM's 19 items and 50 subitems are not carried by this build"
    " (their wording was not available to it): chart and mi-clear-llm are",
}


@dataclass(frozen=True)
class Facts:
    """What the runs' record says, gathered once for every checklist."""

    runs: list[str]
    record: Mapping[str, Any]  # the page's record (``report --json``)
    summaries: Mapping[str, Mapping[str, Any]]  # run → its summary
    protocol: str
    dataset_sha256: str
    judge_passes: Mapping[str, int]  # run → judge passes per answer
    compared: bool  # more than one run on the page
    labelled: bool  # a calibration against physicians' labels on the page


@dataclass(frozen=True)
class Item:
    item: str
    topic: str
    answer: Callable[[Facts], Answer]


@dataclass(frozen=True)
class Checklist:
    name: str
    title: str
    source: str
    items: tuple[Item, ...]


def _said(status: Status, where: str, text: str) -> Callable[[Facts], Answer]:
    """An answer the record does not change."""
    return lambda f: (status, where, text)


def _authors(what: str) -> Callable[[Facts], Answer]:
    return _said("not reported", "", f"the authors' to write: {what}")


def _models(f: Facts, stage: str) -> str:
    served = [_served(run, rec)[stage == "judges"] for run, rec in f.record["provenance"].items()]
    return "; ".join(served)


def _per_run(each: Callable[[str, Mapping[str, Any]], list[str]]) -> Callable[[Facts], Answer]:
    """An answer from each run's provenance (``each``: its phrases); results files hold
    none, and say so."""

    def answer(f: Facts) -> Answer:
        if not f.record["provenance"]:
            return ("not reported", "", "results files only: no run's journal says what served")
        said = [text for run, rec in f.record["provenance"].items() for text in each(run, rec)]
        return ("answered", "#provenance", "; ".join(said))

    return answer


def _served(run: str, rec: Mapping[str, Any]) -> list[str]:
    return [
        f"{run} {stage}: {rec[stage]['requested']} asked on {rec[stage]['service']}, served"
        f" {', '.join(f'{m} ({n})' for m, n in rec[stage]['served'].items()) or 'not said'}"
        for stage in ("answers", "judges")
    ]


def _vendor(run: str, rec: Mapping[str, Any]) -> list[str]:
    v = rec["vendors"]
    same = {True: "same vendor", False: "different vendors", None: "vendor not known"}
    return [
        f"{run}: answers by {v['answers'] or 'unknown'}, judged by {v['judges'] or 'unknown'}"
        f" ({same[rec['same_vendor']]})"
    ]


def _parameter(run: str, rec: Mapping[str, Any]) -> list[str]:
    said = []
    for stage in ("answers", "judges"):
        p = rec[stage]["parameters"]
        t = p["temperature_requests"]
        said.append(
            f"{run} {stage}: temperature {p['temperature']} ({t['sent']} sent,"
            f" {t['not_sent']} without), reasoning effort {p['reasoning_effort']},"
            f" structured output {p['structured_output']}, max tokens {p['max_tokens']}"
        )
    return said


_identifiers = _per_run(_served)
_vendors = _per_run(_vendor)
_parameters = _per_run(_parameter)


def _route(f: Facts) -> Answer:
    if not f.record["provenance"]:
        return ("not reported", "", "results files only")
    services = sorted(
        {
            rec[s]["service"]
            for rec in f.record["provenance"].values()
            for s in ("answers", "judges")
        }
    )
    return (
        "answered",
        "#provenance",
        f"each service's batch API ({', '.join(services)}), one request per case, no"
        " conversation history, no tools or web access sent",
    )


_cutoff = _said(
    "not reported",
    "",
    "training data cut-off and any web access are the vendor's to state; the run sent no"
    " tools or retrieval",
)


def _prompts(f: Facts) -> Answer:
    prompts = f.record["prompts"]
    n = len(prompts.get("templates", []))
    files = sum(len(v) for v in prompts.get("request_files", {}).values())
    return (
        "answered",
        "#prompts",
        f"{n} templates verbatim with their SHA-256, and the SHA-256 of {files} request files",
    )


def _engineering(f: Facts) -> Answer:
    return (
        "not applicable",
        "#prompts",
        f"the prompts are the benchmark's protocol ({f.protocol}), fixed, not engineered"
        " or tuned for this evaluation",
    )


def _source(f: Facts) -> Answer:
    return (
        "answered",
        "#flow",
        f"BedsideBench cases, dataset digest {f.dataset_sha256}; the flow of cases says"
        " how many were selected and sent",
    )


def _dates(f: Facts) -> Answer:
    spans = [
        f"{run}: {rec['answers']['first_query']} to {rec['judges']['last_query']}"
        for run, rec in f.record["provenance"].items()
        if rec["answers"]["first_query"]
    ]
    if not spans:
        return ("not reported", "", "no query time recorded (results files only)")
    return ("answered", "#provenance", "queries (UTC) " + "; ".join(spans))


def _repeats(f: Facts) -> Answer:
    said = [
        f"{run}: {k} judge pass(es) per answer"
        for run, k in f.judge_passes.items()
        if run in f.record["provenance"]
    ] or ["judge passes not recorded (results files)"]
    return (
        "answered",
        "#provenance" if f.record["provenance"] else "#header",
        "each case asked once of the answer model (temperature as the protocol sets it);"
        f" {'; '.join(said)}; bootstrap {_bootstrap(f)}",
    )


def _bootstrap(f: Facts) -> str:
    first = next(iter(f.summaries.values()))
    return f"{first.get('bootstrap_samples')} resamples, seed {first.get('bootstrap_seed')}"


def _outcome(f: Facts) -> Answer:
    return (
        "answered",
        "#benchmarks",
        "the case score is the rubric's points met over the positive points, clipped to"
        f" [0, 1], per the protocol {f.protocol}; benchmarks averaged (macro mean)",
    )


def _evaluators(f: Facts) -> Answer:
    physicians = (
        "; physicians' labels calibrate the judge (see the calibration)" if f.labelled else ""
    )
    return (
        "answered",
        "#header",
        f"an LLM judge (temperature {JUDGE_TEMPERATURE}, JSON decisions per rubric item),"
        f" {_models(f, 'judges') if f.record['provenance'] else 'as each run names it'}"
        f"{physicians}",
    )


def _sample_size(f: Facts) -> Answer:
    n = [f"{run}: {s.get('completed_cases')} scored" for run, s in f.summaries.items()]
    where = "#comparison" if f.compared else "#leaderboard"
    mde = "; the comparison gives each paired difference's MDE at 80% power" if f.compared else ""
    return ("answered", where, "; ".join(n) + mde)


def _analysis(f: Facts) -> Answer:
    paired = (
        "; paired differences with bootstrap intervals, Holm-adjusted p-values"
        if f.compared
        else ""
    )
    return (
        "answered",
        "#benchmarks",
        f"means with percentile bootstrap 95% intervals ({_bootstrap(f)}){paired};"
        " endorsed harm with Wilson intervals",
    )


_flow = _said(
    "answered",
    "#flow",
    "cases in the dataset, sent, answered, judged, scored, each exclusion counted",
)


_main = _said(
    "answered",
    "#leaderboard",
    "each run's overall macro mean and per-benchmark means with intervals",
)


_harms = _said(
    "answered",
    "#harm",
    "endorsed harm (negative-points items met) per case and per item, the ten worst cases;"
    " failures grouped by cause",
)


def _protocol(f: Facts) -> Answer:
    plans = f.record["plan"]
    if not plans:
        return ("not reported", "", "no sealed analysis plan recorded (batchbench plan --seal)")
    verdict = "as planned" if all(p["as_planned"] for p in plans) else "with deviations"
    return ("answered", "#plan", f"sealed plan {plans[0]['sha256'][:12]}…, analysis {verdict}")


def _availability(f: Facts) -> Answer:
    if not any(f.record["prompts"].get("request_files", {}).values()):
        return ("answered", "#cases", "each case's row: its answer, verdicts and score")
    return (
        "answered",
        "#request-files",
        "results.jsonl and the summary per run, every service's raw reply file kept"
        " verbatim, every request file with its SHA-256",
    )


def _independence(f: Facts) -> Answer:
    return (
        "not reported",
        "",
        "whether the cases were in a model's training data cannot be told from the run;"
        f" the dataset is named by its digest {f.dataset_sha256}",
    )


_structure = _said(
    "answered",
    "#prompts",
    "a system message and one user message per case (answers); the judge a system message"
    " and the case, answer and rubric items in one user message, JSON asked",
)


def _llm_identity(f: Facts) -> Answer:
    status, where, text = _identifiers(f)
    dates = _dates(f)[2]
    return (status, where, f"{text}; {dates}; training cut-off and web access: the vendor's")


CHART = Checklist(
    "chart",
    "CHART (Chatbot Assessment Reporting Tool)",
    "CHART Collaborative, BMJ Medicine 2025;4:e001632 (subitem labels as its abstract"
    " enumerates them; answers batchbench's)",
    (
        Item("1a", "Title", _authors("the title")),
        Item("1b", "Abstract/summary", _authors("the abstract")),
        Item("2a", "Background", _authors("the background")),
        Item("2b", "Background", _authors("the background")),
        Item("3a", "Model identifiers", _identifiers),
        Item("3b", "Model identifiers", _vendors),
        Item("4a", "Model details", _parameters),
        Item("4b", "Model details", _route),
        Item("4c", "Model details", _cutoff),
        Item("5a", "Prompt engineering", _prompts),
        Item("5b", "Prompt engineering", _engineering),
        Item("6a", "Query strategy", _source),
        Item("6b", "Query strategy", _dates),
        Item("6c", "Query strategy", _route),
        Item("6d", "Query strategy", _repeats),
        Item("7a", "Performance evaluation", _outcome),
        Item("7b", "Performance evaluation", _evaluators),
        Item("8", "Sample size", _sample_size),
        Item("9a", "Data analysis", _analysis),
        Item("10a", "Results", _flow),
        Item("10b", "Results", _main),
        Item("10c", "Results", _harms),
        Item("11a", "Discussion", _authors("the discussion")),
        Item("11b", "Discussion", _authors("the discussion")),
        Item("11c", "Discussion", _authors("the discussion")),
        Item("12a", "Disclosures", _authors("competing interests")),
        Item("12b", "Funding", _authors("funding")),
        Item("12c", "Ethics", _authors("ethics approval, or why none was needed")),
        Item("12d", "Protocol", _protocol),
        Item("12e", "Data availability", _availability),
    ),
)

MI_CLEAR_LLM = Checklist(
    "mi-clear-llm",
    "MI-CLEAR-LLM",
    "Park et al., Korean J Radiol 2024;25:865 (items as named in Korean J Radiol 2025;26:304)",
    (
        Item("1", "Identification and specifications of the LLM used", _llm_identity),
        Item("2", "Stochasticity handling", _repeats),
        Item("3", "Prompt wording and syntax", _prompts),
        Item("4", "Prompt structuring", _structure),
        Item("5", "Prompt testing and optimization", _engineering),
        Item("6", "Independence of the test data", _independence),
    ),
)

CHECKLISTS: dict[str, Checklist] = {c.name: c for c in (CHART, MI_CLEAR_LLM)}


def filled(checklist: Checklist, facts: Facts) -> list[dict[str, str]]:
    """Each item as its row: ``item``, ``topic``, ``status``, ``where``, ``text``."""
    rows = []
    for item in checklist.items:
        status, where, text = item.answer(facts)
        rows.append(
            {"item": item.item, "topic": item.topic, "status": status, "where": where, "text": text}
        )
    return rows


def facts_of(sources: Sequence[Source], record: Mapping[str, Any], labelled: bool) -> Facts:
    """The facts the checklists read, from the page's sources and record."""
    sides = [s.side for s in sources]
    return Facts(
        runs=[s.name for s in sides],
        record=record,
        summaries={s.name: s.summary for s in sides},
        protocol=str(sides[0].protocol_version),
        dataset_sha256=str(sides[0].dataset_sha256),
        judge_passes={s.side.name: s.judge_passes for s in sources},
        compared=len(sides) > 1,
        labelled=labelled,
    )

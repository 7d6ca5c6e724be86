"""The evaluation's report: per metric and per tool, cold against warm, with paired intervals.

Every figure is a rate over the cases scored (both answers in hand): cold, warm, the difference
warm minus cold and its 95% paired bootstrap interval, resampling tasks (the sessions of one task
are not independent). The verdict is drawn from ``good`` (the right tool at a step whose calls
worked, the failure avoided at a call that failed): better when the whole interval is above zero,
worse when it is below, otherwise not distinguishable at this sample size. Any other metric whose
interval lies wholly on its bad side is named after the verdict.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kindling.eval.bootstrap import DEFAULT_RESAMPLES, Interval, paired_bootstrap
from kindling.eval.plan import EvalPlan
from kindling.eval.replay import Case
from kindling.eval.score import CALL, FAILED

__all__ = ["BETTER", "METRICS", "NOT_DISTINGUISHABLE", "PRIMARY", "WORSE", "ScoredCase", "build_report"]

BETTER = "better"
WORSE = "worse"
NOT_DISTINGUISHABLE = "not distinguishable"
PRIMARY = "good"
LEVEL = 0.95
#: Every metric: its label and whether more is better.
METRICS: dict[str, tuple[str, bool]] = {
    "good": ("right tool, or failure avoided", True),
    "right_tool": ("same tool", True),
    "valid_arguments": ("valid arguments", True),
    "key_arguments": ("key arguments equal", True),
    "known_failure": ("matches a known failure", False),
    "no_call": ("no call where one was due", False),
    "right_call": ("right call", True),
    "avoids_failure": ("avoids the failed call's error", True),
}
_PER_TOOL = ("right_tool", "key_arguments", "right_call", "avoids_failure")


@dataclass
class ScoredCase:
    """One case with both answers scored, and what its two requests cost."""

    case: Case
    cold: dict[str, bool]
    warm: dict[str, bool]
    warmed: bool
    cold_tokens: int
    warm_tokens: int
    cold_usage: int | None = None
    warm_usage: int | None = None


def _outcome(interval: Interval, higher_is_better: bool) -> str:
    side = interval.excludes_zero() * (1 if higher_is_better else -1)
    return BETTER if side > 0 else WORSE if side < 0 else NOT_DISTINGUISHABLE


def _row(metric: str, scored: Sequence[ScoredCase], seed: int) -> dict[str, Any] | None:
    rows = [s for s in scored if metric in s.cold and metric in s.warm]
    interval = paired_bootstrap(
        [float(s.cold[metric]) for s in rows],
        [float(s.warm[metric]) for s in rows],
        [s.case.group for s in rows],
        resamples=DEFAULT_RESAMPLES,
        level=LEVEL,
        seed=seed,
    )
    if interval is None:
        return None
    label, higher = METRICS[metric]
    return {
        "metric": metric,
        "label": label,
        "higher_is_better": higher,
        "cases": interval.cases,
        "tasks": interval.clusters,
        "cold": interval.cold,
        "warm": interval.warm,
        "difference": interval.difference,
        "ci_low": interval.low,
        "ci_high": interval.high,
        "outcome": _outcome(interval, higher),
    }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _tokens(scored: Sequence[ScoredCase], price: float | None) -> dict[str, Any]:
    cold = _mean([s.cold_tokens for s in scored])
    warm = _mean([s.warm_tokens for s in scored])
    estimated = None if cold is None or warm is None else warm - cold
    measured_pairs = [
        s.warm_usage - s.cold_usage for s in scored if s.cold_usage is not None and s.warm_usage is not None
    ]
    measured = _mean(measured_pairs) if len(measured_pairs) == len(scored) else None
    added = measured if measured is not None else estimated
    return {
        "estimated_cold_per_request": cold,
        "estimated_warm_per_request": warm,
        "estimated_added_per_request": estimated,
        "measured_added_per_request": measured,
        "added_per_request": added,
        "from": "usage" if measured is not None else "estimate",
        "price_per_mtok": price,
        "added_cost_per_request": None if price is None or added is None else added * price / 1e6,
    }


def _points(value: float) -> str:
    return f"{value * 100:+.1f}"


def _verdict(
    primary: dict[str, Any] | None, others: Sequence[dict[str, Any]], tokens: dict[str, Any], waiting: int
) -> dict[str, Any]:
    if primary is None:
        line = "Nothing scored yet"
        line += f": {waiting} cases wait for answers; run again to continue." if waiting else "."
        return {"outcome": None, "metric": PRIMARY, "line": line}
    outcome = primary["outcome"]
    span = f"{_points(primary['ci_low'])} to {_points(primary['ci_high'])}"
    figures = (
        f"{primary['label']} {primary['cold']:.1%} cold, {primary['warm']:.1%} warm, "
        f"{_points(primary['difference'])} points (95% interval {span}) over {primary['cases']} steps "
        f"of {primary['tasks']} tasks"
    )
    if outcome == BETTER:
        line = f"Warm is better: {figures}."
    elif outcome == WORSE:
        line = f"Warm is worse: {figures}."
    else:
        line = f"Cold and warm are not distinguishable at this sample size: {figures}."
    hurt = [row["label"] for row in others if row["metric"] != PRIMARY and row["outcome"] == WORSE]
    if hurt:
        line += f" Also worse warm: {', '.join(hurt)}."
    added = tokens.get("added_per_request")
    if added is not None:
        line += f" The warm-up adds {added:,.0f} prompt tokens per request"
        if tokens.get("added_cost_per_request") is not None:
            line += f" (${tokens['added_cost_per_request'] * 1000:,.4f} per 1,000 requests)"
        line += "."
    if waiting:
        line += f" {waiting} cases still wait for answers."
    return {"outcome": outcome, "metric": PRIMARY, "line": line}


def _schemas(plan: EvalPlan) -> dict[str, list[str]]:
    """Which tools' arguments were checked against a recorded definition, an inferred schema, or none."""
    found: dict[str, set[str]] = {"defined": set(), "inferred": set(), "none": set()}
    for catalog in plan.catalogs:
        for name, schema in catalog.schemas.items():
            kind = "none" if schema is None else "defined" if name in catalog.defined else "inferred"
            found[kind].add(name)
    return {kind: sorted(names) for kind, names in found.items()}


def build_report(
    scored: Sequence[ScoredCase],
    *,
    plan: EvalPlan,
    endpoint: dict[str, Any],
    requests: dict[str, Any],
    unanswered: int,
    rejected: int,
    no_schema: int,
    price_per_mtok: float | None,
    seed: int = 0,
) -> dict[str, Any]:
    """Return the report as JSON-ready data: ``metrics`` (one row per metric), ``tools`` (per
    expected tool), ``tokens``, ``cases``, ``requests``, ``schemas`` (tools by where their schema
    came from: ``defined``, ``inferred``, ``none``), ``sessions`` and the ``verdict``."""
    metrics = [row for metric in METRICS if (row := _row(metric, scored, seed)) is not None]
    by_tool: dict[str, list[ScoredCase]] = defaultdict(list)
    for item in scored:
        by_tool[item.case.tool].append(item)
    tools = []
    for tool in sorted(by_tool, key=lambda t: (-len(by_tool[t]), t)):
        rows = {m: row for m in _PER_TOOL if (row := _row(m, by_tool[tool], seed)) is not None}
        tools.append({"tool": tool, "cases": len(by_tool[tool]), "metrics": rows})
    tokens = _tokens(scored, price_per_mtok)
    primary = next((row for row in metrics if row["metric"] == PRIMARY), None)
    return {
        "endpoint": endpoint,
        "verdict": _verdict(primary, metrics, tokens, unanswered),
        "metrics": metrics,
        "tools": tools,
        "tokens": tokens,
        "cases": {
            "planned": len(plan.cases),
            "scored": len(scored),
            "calls": sum(1 for s in scored if s.case.kind == CALL),
            "failed_calls": sum(1 for s in scored if s.case.kind == FAILED),
            "warmed": sum(1 for s in scored if s.warmed),
            "unanswered": unanswered,
            "rejected": rejected,
            "answers_checked_without_schema": no_schema,
            "steps_left_out": dict(sorted(plan.skipped.items())),
        },
        "requests": requests,
        "schemas": _schemas(plan),
        "sessions": plan.counts,
        "templates": {str(fold): name for fold, name in sorted(plan.templates.items())},
        "read": plan.read.as_dict(),
        "interval": {"level": LEVEL, "resamples": DEFAULT_RESAMPLES, "resampled": "tasks", "seed": seed},
    }

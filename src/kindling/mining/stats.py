"""Failure rates by tool and by session length, with Wilson intervals so a difference can be judged.

``MiningStats`` is filled by ``kindling.mining.mine`` in the same pass that mines examples: the
hot loop only bumps one tally per (cohort, tool); totals per tool and per cohort are summed when
``as_dict`` is called. The JSON keys of ``as_dict`` are part of kindling's interface.

Cohorts by session length: short (< 20 messages), mid (20-99), marathon (>= 100).

Where a source records a reward (tau-bench, tau2-bench), task success is counted beside tool
failure: a session succeeded when its reward is 1.0 or more.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kindling.mining.tasktype import TaskType
from kindling.sessions.model import ReadReport

# (name, smallest message count, largest message count or None)
COHORTS: tuple[tuple[str, int, int | None], ...] = (
    ("short", 0, 19),
    ("mid", 20, 99),
    ("marathon", 100, None),
)
NO_TOOLS = "none"


def cohort_of(message_count: int) -> str:
    """Return the cohort name for a session of ``message_count`` messages."""
    if message_count < 20:
        return "short"
    if message_count < 100:
        return "mid"
    return "marathon"


def wilson_interval(failures: int, trials: int, z: float = 1.96) -> tuple[float, float] | None:
    """Return the Wilson score interval (95% by default) for ``failures`` out of ``trials``.

    Returns None when there are no trials. Unlike the normal approximation it stays inside
    [0, 1] and is honest for small counts and rates near 0 or 1.
    """
    if trials <= 0:
        return None
    p = failures / trials
    z2 = z * z
    denom = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


#: A session whose reward is at least this succeeded at its task.
SUCCESS_REWARD = 1.0


def _success(successes: int, rewarded: int) -> dict[str, Any]:
    interval = wilson_interval(successes, rewarded)
    return {
        "rewarded": rewarded,
        "successes": successes,
        "success_rate": round(successes / rewarded, 6) if rewarded else None,
        "success_ci_low": round(interval[0], 6) if interval else None,
        "success_ci_high": round(interval[1], 6) if interval else None,
    }


def _rate(failures: int, results: int) -> dict[str, Any]:
    interval = wilson_interval(failures, results)
    return {
        "failure_rate": round(failures / results, 6) if results else None,
        "ci_low": round(interval[0], 6) if interval else None,
        "ci_high": round(interval[1], 6) if interval else None,
    }


@dataclass
class MiningStats:
    """Counts from one pass over sessions.

    ``tally`` maps (cohort, tool) to ``[calls, results, failures, unknown]``: calls the agent
    made, results paired with them by id, results that failed, and results whose outcome is unknown.
    The failure rate of a tool or cohort is failures / results. ``cohort_rewarded`` counts the
    sessions of a cohort that carry a reward and ``cohort_successes`` those whose reward is 1.0 or
    more: the task success rate is successes / rewarded.
    """

    sessions: int = 0
    messages: int = 0
    tool_calls: int = 0
    results_paired: int = 0
    results_failed: int = 0
    results_unknown: int = 0
    calls_unanswered: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    task_types: Counter[str] = field(default_factory=Counter)
    cohort_sessions: Counter[str] = field(default_factory=Counter)
    cohort_messages: Counter[str] = field(default_factory=Counter)
    tally: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    cohort_rewarded: Counter[str] = field(default_factory=Counter)
    cohort_successes: Counter[str] = field(default_factory=Counter)

    def count_reward(self, cohort: str, reward: float) -> None:
        """Count a session of ``cohort`` that carries ``reward`` (a success when it is 1.0 or more)."""
        self.cohort_rewarded[cohort] += 1
        if reward >= SUCCESS_REWARD:
            self.cohort_successes[cohort] += 1

    def merge_report(self, report: ReadReport) -> None:
        """Add what a reader skipped (by reason) to this pass's skipped counts."""
        self.skipped.update(report.skipped)

    def _tools(self, cohort: str | None = None) -> dict[str, list[int]]:
        totals: dict[str, list[int]] = {}
        for (cohort_name, tool), counts in self.tally.items():
            if cohort is not None and cohort_name != cohort:
                continue
            into = totals.setdefault(tool, [0, 0, 0, 0])
            for i in range(4):
                into[i] += counts[i]
        return dict(sorted(totals.items(), key=lambda kv: (-kv[1][0], kv[0])))

    @staticmethod
    def _tool_rows(tools: dict[str, list[int]], *, intervals: bool) -> dict[str, dict[str, Any]]:
        rows: dict[str, dict[str, Any]] = {}
        for tool, (calls, results, failures, unknown) in tools.items():
            rate = _rate(failures, results)
            row: dict[str, Any] = {
                "calls": calls,
                "results": results,
                "failures": failures,
                "unknown": unknown,
            }
            row["failure_rate"] = rate["failure_rate"]
            if intervals:
                row["ci_low"], row["ci_high"] = rate["ci_low"], rate["ci_high"]
            rows[tool] = row
        return rows

    def cohort_rows(self) -> dict[str, dict[str, Any]]:
        """Return per-cohort sessions, messages, calls, failures, failure rate and Wilson interval,
        and task success (rewarded sessions, successes, success rate and its interval)."""
        out: dict[str, dict[str, Any]] = {}
        for name, low, high in COHORTS:
            tools = self._tools(name)
            calls = sum(t[0] for t in tools.values())
            results = sum(t[1] for t in tools.values())
            failures = sum(t[2] for t in tools.values())
            out[name] = {
                "min_messages": low,
                "max_messages": high,
                "sessions": self.cohort_sessions[name],
                "messages": self.cohort_messages[name],
                "calls": calls,
                "results": results,
                "failures": failures,
                **_rate(failures, results),
                **_success(self.cohort_successes[name], self.cohort_rewarded[name]),
                "tools": self._tool_rows(tools, intervals=True),
            }
        return out

    def as_dict(self) -> dict[str, Any]:
        """Return the stats with the documented JSON keys (``sessions`` ... ``cohorts``)."""
        cohorts = self.cohort_rows()
        task_types = {t.value: self.task_types[t.value] for t in TaskType}
        task_types[NO_TOOLS] = self.task_types[NO_TOOLS]
        return {
            "sessions": self.sessions,
            "messages": self.messages,
            "tool_calls": self.tool_calls,
            "results_paired": self.results_paired,
            "results_failed": self.results_failed,
            "results_unknown": self.results_unknown,
            "calls_unanswered": self.calls_unanswered,
            **{
                key: value
                for key, value in _success(
                    sum(self.cohort_successes.values()), sum(self.cohort_rewarded.values())
                ).items()
                if not key.startswith("success_ci")
            },
            "skipped": dict(sorted(self.skipped.items())),
            "tools": self._tool_rows(self._tools(), intervals=False),
            "task_types": task_types,
            "cohorts": cohorts,
            "comparison": compare_cohorts(cohorts, "marathon", "mid"),
        }


def compare_cohorts(cohorts: dict[str, dict[str, Any]], first: str, second: str) -> dict[str, Any]:
    """Say whether ``first``'s failure rate differs from ``second``'s beyond chance.

    Returns the two rates, their difference and ``significant``: True when the two Wilson 95%
    intervals do not overlap (a conservative test), None when either cohort has no results.
    """
    a, b = cohorts[first], cohorts[second]
    if a["failure_rate"] is None or b["failure_rate"] is None:
        return {"cohorts": [first, second], "difference": None, "significant": None}
    disjoint = a["ci_high"] < b["ci_low"] or b["ci_high"] < a["ci_low"]
    return {
        "cohorts": [first, second],
        "difference": round(a["failure_rate"] - b["failure_rate"], 6),
        "significant": disjoint,
    }

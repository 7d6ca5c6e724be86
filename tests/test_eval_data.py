"""``kindling eval`` on the development data (tau-bench and tau2-bench retail runs) with a fake model that
copies the most similar past example it is shown: the report matches a count made here from the raw
sessions, and a run of 50 held-out sessions goes through. Skipped when ../shared/data is absent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_models import CopiesExamples, ModelServer, read_context
from kindling.eval import Endpoint, EvalOptions, EvalPlan, plan_eval, run_eval
from kindling.sessions import iter_sessions
from kindling.sessions.model import Session

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"
SOURCES = [
    DATA / "tau-bench-avaljotsingh",
    DATA / "tau2-bench-bogoliubon",
    DATA / "tau2-bench-codesque16" / "_gemini-3-flash__base__all_",
    DATA / "tau2-bench-sierra",
]
pytestmark = pytest.mark.skipif(
    not all(path.exists() for path in SOURCES),
    reason="the development data (../shared/data/trajectories) is absent",
)


def _run(plan: EvalPlan, results: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with ModelServer(CopiesExamples()) as server:
        report = run_eval(
            plan, Endpoint(server.base_url, "fake-model"), api_key="k", results=results, concurrency=8
        )
        return report, list(server.requests)


def _agent_messages(session: Session) -> list[dict[str, Any]]:
    """The session as the replay shows it, built here from the raw messages: a simulated user's own
    calls and their results left out, empty messages left out."""
    user_calls = {c.id for m in session.messages for c in m.tool_calls if c.requestor != "assistant"}
    shown = []
    for message in session.messages:
        if message.role == "tool":
            if message.tool_call_id in user_calls:
                continue
            shown.append({"role": "tool", "content": message.content or "", "error": message.error})
            continue
        calls = [c for c in message.tool_calls if c.requestor == "assistant" and message.role == "assistant"]
        if not (message.content or calls):
            continue
        shown.append(
            {"role": message.role, "content": message.content or "", "calls": [c.name for c in calls]}
        )
    return shown


def _failed(result: dict[str, Any]) -> bool:
    # The retail tools' failures: an error flag (tau2-bench) or a result that starts with "Error".
    return bool(result["error"]) or result["content"].startswith("Error")


@pytest.fixture(scope="module")
def raw() -> list[Session]:
    return [session for source in SOURCES for session in iter_sessions(source)]


@pytest.fixture(scope="module")
def small(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[EvalPlan, dict[str, Any], list[dict[str, Any]]]]:
    # Personal data as recorded, so a request can be matched to its raw session here.
    # Two folds: two template builds instead of five, for a subset this small.
    with plan_eval(SOURCES, EvalOptions(sessions=8, seed=7, folds=2, keep_personal_data=True)) as plan:
        report, requests = _run(plan, tmp_path_factory.mktemp("small") / "r.jsonl")
        yield plan, report, requests


def test_the_report_matches_a_count_from_the_raw_sessions(
    small: tuple[EvalPlan, dict[str, Any], list[dict[str, Any]]], raw: list[Session]
) -> None:
    plan, report, requests = small
    copier = CopiesExamples()
    # Each replayed step was asked twice, cold (no past examples) and warm; pair them by conversation.
    asked: dict[str, dict[str, Any]] = {}
    for body in requests:
        context = read_context(body["messages"], [])
        reply = copier(context)
        key = json.dumps([[m["role"], m.get("content")] for m in context.proper])
        entry = asked.setdefault(key, {"proper": context.proper})
        entry["warm" if context.examples else "cold"] = reply.call[0] if reply.call else None
    shown = {s.id: _agent_messages(s) for s in raw}
    counts = {"calls": 0, "failed": 0, "cold_right": 0, "warm_right": 0, "cold_silent": 0, "warm_silent": 0}
    cold_avoided = 0
    steps_of: dict[str, list[int]] = {}
    for entry in asked.values():
        proper = entry["proper"]
        first_user = next(m["content"] for m in proper if m["role"] == "user")
        # The raw session whose shown messages begin with this conversation.
        matches = [
            sid
            for sid, messages in shown.items()
            if len(messages) > len(proper)
            and [m["content"] for m in messages[: len(proper)]] == [m.get("content") or "" for m in proper]
            and any(m["content"] == first_user for m in messages)
        ]
        assert len(matches) >= 1, first_user
        messages = shown[matches[0]]
        step = messages[len(proper)]
        assert step["role"] == "assistant" and step["calls"], step
        results = messages[len(proper) + 1 : len(proper) + 1 + len(step["calls"])]
        if any(_failed(r) for r in results):
            counts["failed"] += 1
            cold_avoided += entry.get("cold") is None  # no call cannot repeat the failure
            continue
        counts["calls"] += 1
        steps_of.setdefault(matches[0], []).append(len(proper))
        for side in ("cold", "warm"):
            counts[f"{side}_right"] += entry.get(side) in step["calls"]
            counts[f"{side}_silent"] += entry.get(side) is None
    metrics = {row["metric"]: row for row in report["metrics"]}
    assert metrics["right_tool"]["cases"] == counts["calls"] > 0
    assert metrics["right_tool"]["cold"] == pytest.approx(counts["cold_right"] / counts["calls"])
    assert metrics["right_tool"]["warm"] == pytest.approx(counts["warm_right"] / counts["calls"])
    assert metrics["no_call"]["cold"] == pytest.approx(counts["cold_silent"] / counts["calls"])
    assert metrics["no_call"]["warm"] == pytest.approx(counts["warm_silent"] / counts["calls"])
    assert report["cases"]["failed_calls"] == counts["failed"]
    if counts["failed"]:
        assert metrics["avoids_failure"]["cold"] == pytest.approx(cold_avoided / counts["failed"])
    # At most the first three steps that worked, of sessions that succeeded.
    assert all(len(positions) <= 3 for positions in steps_of.values())
    assert report["sessions"]["held_out_sessions"] == 8
    assert len(requests) == 2 * len(plan.cases)


def test_a_run_of_50_held_out_sessions(tmp_path: Path) -> None:
    with plan_eval(SOURCES, EvalOptions(sessions=50)) as plan:
        report, requests = _run(plan, tmp_path / "r.jsonl")
    assert report["sessions"]["held_out_sessions"] == 50 and report["sessions"]["folds_used"] == 5
    assert report["cases"]["scored"] == len(plan.cases) >= 100
    assert len(requests) == 2 * len(plan.cases)
    # Every request carries the session's tools with inferred schemas, and no e-mail as recorded.
    assert {t["function"]["name"] for t in requests[0]["tools"]} >= {
        "get_order_details",
        "find_user_id_by_email",
    }
    assert not any("@example.com" in json.dumps(body["messages"]) for body in requests)
    right_tool = next(row for row in report["metrics"] if row["metric"] == "right_tool")
    assert right_tool["cold"] == 0.0 and right_tool["warm"] > 0.1  # cold, the copier has nothing to copy
    assert report["verdict"]["outcome"] == "better"

"""Stats: cohort edges, Wilson intervals, per-tool and per-cohort failure rates, JSON keys."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kindling.mining import cohort_of, compute_stats, mine, wilson_interval
from kindling.mining.stats import compare_cohorts
from kindling.sessions.model import Message, Session, ToolCall

INTERFACE_KEYS = {
    "sessions",
    "messages",
    "tool_calls",
    "results_paired",
    "results_failed",
    "calls_unanswered",
    "skipped",
    "tools",
    "task_types",
    "cohorts",
}


def make_session(sid: str, total: int, outcomes: list[str], tool: str = "terminal") -> Session:
    """A session of exactly ``total`` messages whose calls return the given contents."""
    messages: list[Message] = [Message(role="user", content="go")]
    for i, content in enumerate(outcomes):
        messages.append(
            Message(role="assistant", tool_calls=(ToolCall(id=f"c{i}", name=tool, arguments={"i": i}),))
        )
        messages.append(Message(role="tool", content=content, tool_call_id=f"c{i}"))
    assert len(messages) <= total
    messages += [Message(role="assistant", content="...")] * (total - len(messages))
    return Session(id=sid, source="cli", messages=tuple(messages))


@pytest.mark.parametrize(
    ("count", "cohort"),
    [(0, "short"), (19, "short"), (20, "mid"), (99, "mid"), (100, "marathon"), (5000, "marathon")],
)
def test_cohort_edges(count: int, cohort: str) -> None:
    assert cohort_of(count) == cohort


def test_cohort_edges_in_stats() -> None:
    sessions = [make_session(f"s{n}", n, ["ok"]) for n in (19, 20, 99, 100)]
    cohorts = compute_stats(sessions).as_dict()["cohorts"]
    assert {name: row["sessions"] for name, row in cohorts.items()} == {"short": 1, "mid": 2, "marathon": 1}
    assert cohorts["mid"]["messages"] == 119
    assert (cohorts["short"]["min_messages"], cohorts["short"]["max_messages"]) == (0, 19)
    assert (cohorts["marathon"]["min_messages"], cohorts["marathon"]["max_messages"]) == (100, None)


def test_wilson_interval_known_values() -> None:
    low, high = wilson_interval(5, 10)  # type: ignore[misc]
    assert math.isclose(low, 0.2366, abs_tol=1e-4) and math.isclose(high, 0.7634, abs_tol=1e-4)
    low, high = wilson_interval(0, 10)  # type: ignore[misc]
    assert low == 0.0 and math.isclose(high, 0.2775, abs_tol=1e-4)
    low, high = wilson_interval(10, 10)  # type: ignore[misc]
    assert math.isclose(low, 0.7225, abs_tol=1e-4) and high == 1.0
    assert wilson_interval(0, 0) is None


def test_failure_rates_per_tool_and_cohort() -> None:
    fail = '{"exit_code": 1}'
    sessions = [
        make_session("m1", 30, ["ok", fail, fail, "ok"]),
        make_session("m2", 40, ["ok", "", fail], tool="read_file"),
        make_session("x1", 120, ["ok"] * 9 + [fail]),
    ]
    data = compute_stats(sessions).as_dict()
    assert set(data) >= INTERFACE_KEYS
    assert (data["sessions"], data["tool_calls"], data["results_paired"], data["results_failed"]) == (
        3,
        17,
        17,
        4,
    )
    assert data["tools"]["terminal"] == {
        "calls": 14,
        "results": 14,
        "failures": 3,
        "unknown": 0,
        "failure_rate": round(3 / 14, 6),
    }
    assert data["tools"]["read_file"]["unknown"] == 1
    mid = data["cohorts"]["mid"]
    assert (mid["sessions"], mid["calls"], mid["failures"]) == (2, 7, 3)
    assert mid["failure_rate"] == round(3 / 7, 6)
    low, high = wilson_interval(3, 7)  # type: ignore[misc]
    assert (mid["ci_low"], mid["ci_high"]) == (round(low, 6), round(high, 6))
    assert mid["tools"]["read_file"]["failure_rate"] == round(1 / 3, 6)
    marathon = data["cohorts"]["marathon"]
    assert marathon["failure_rate"] == 0.1 and marathon["tools"]["terminal"]["calls"] == 10
    assert data["cohorts"]["short"]["failure_rate"] is None
    assert data["task_types"]["terminal"] == 2 and data["task_types"]["file"] == 1
    assert data["comparison"]["cohorts"] == ["marathon", "mid"]
    assert data["comparison"]["significant"] is False  # 10 and 7 results: intervals overlap


def test_compare_cohorts_flags_a_real_difference() -> None:
    fail = "Error: nope"
    sessions = [make_session(f"m{i}", 60, [fail] * 10 + ["ok"] * 10) for i in range(10)]
    sessions += [make_session(f"x{i}", 150, ["ok"] * 19 + [fail]) for i in range(10)]
    data = mine(sessions, max_examples=0).stats.as_dict()
    assert data["comparison"]["significant"] is True
    assert data["comparison"]["difference"] == round(0.05 - 0.5, 6)
    empty = compare_cohorts(data["cohorts"], "short", "mid")
    assert empty["significant"] is None


def test_sessions_without_tools_and_unanswered_calls() -> None:
    chat = Session(
        id="c",
        source="cli",
        messages=(Message(role="user", content="hi"), Message(role="assistant", content="hello")),
    )
    open_call = Session(
        id="o",
        source="cli",
        messages=(
            Message(role="user", content="x"),
            Message(role="assistant", tool_calls=(ToolCall(id="a", name="terminal"),)),
        ),
    )
    data = compute_stats([chat, open_call]).as_dict()
    assert data["task_types"]["none"] == 1
    assert data["calls_unanswered"] == 1
    assert data["tools"]["terminal"] == {
        "calls": 1,
        "results": 0,
        "failures": 0,
        "unknown": 0,
        "failure_rate": None,
    }


@pytest.mark.parametrize("by_tool", [False, True])
def test_plot_of_no_sessions_still_draws(tmp_path: Path, by_tool: bool) -> None:
    import warnings

    from kindling.mining.plot import plot_failure_rates

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        target = plot_failure_rates(compute_stats([]).as_dict(), tmp_path / "empty.png", by_tool=by_tool)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_into_an_unwritable_place_is_a_store_error(tmp_path: Path) -> None:
    from kindling.errors import StoreError
    from kindling.mining.plot import plot_failure_rates

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="Cannot write"):
        plot_failure_rates(compute_stats([]).as_dict(), blocker / "sub" / "p.png")


def test_task_success_is_counted_beside_tool_failure_per_cohort() -> None:
    def rewarded(sid: str, total: int, reward: float | None) -> Session:
        session = make_session(sid, total, ["ok", "Error: no"])
        return Session(session.id, "tau2-bench", session.messages, reward=reward)

    sessions = [
        rewarded("a", 10, 1.0),
        rewarded("b", 10, 0.0),
        rewarded("c", 10, None),  # no reward: not in the success counts
        rewarded("d", 30, 1.0),
    ]
    data = compute_stats(sessions).as_dict()
    assert (data["rewarded"], data["successes"], data["success_rate"]) == (3, 2, round(2 / 3, 6))
    short, mid = data["cohorts"]["short"], data["cohorts"]["mid"]
    assert (short["rewarded"], short["successes"], short["success_rate"]) == (2, 1, 0.5)
    assert (short["success_ci_low"], short["success_ci_high"]) == tuple(
        round(x, 6) for x in wilson_interval(1, 2) or ()
    )
    assert (mid["rewarded"], mid["successes"]) == (1, 1)
    assert short["failure_rate"] == 0.5  # tool failure beside it, unchanged
    assert data["cohorts"]["marathon"]["success_rate"] is None
    # Shards merged (as worker processes mine them) give the same counts as one pass.
    from kindling.mining.config import MiningConfig
    from kindling.mining.patterns import finish, merge_partials, mine_partial

    config = MiningConfig()
    parts = [
        mine_partial(iter(part), min_messages=0, keep_examples=False, config=config)
        for part in (sessions[:1], sessions[1:])
    ]
    assert finish(merge_partials(parts), max_examples=0).stats.as_dict() == data


def test_no_reward_means_no_success_rate() -> None:
    data = compute_stats([make_session("a", 10, ["ok"])]).as_dict()
    assert (data["rewarded"], data["successes"], data["success_rate"]) == (0, 0, None)

"""The sample state.db: deterministic, realistic, safe to regenerate, read back by the Hermes reader."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from kindling.errors import StoreError
from kindling.sessions import (
    ReadReport,
    default_sample_path,
    generate_sample_db,
    is_sample_db,
    iter_sessions,
    sample_info,
    sample_task_types,
)
from kindling.sessions.sample import SAMPLE_VERSION, _plan_sessions, _SessionWriter
from kindling.sessions.sample_data import FAILURE_RATE

HERMES_TOOLS = {
    "terminal",
    "read_file",
    "write_file",
    "patch",
    "search_files",
    "execute_code",
    "web_search",
    "web_extract",
    "browser_navigate",
    "memory",
    "clarify",
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_sample_db(tmp_path_factory.mktemp("sample") / "state.db", sessions=600, seed=7)


def rows(path: Path) -> list[Any]:
    conn = sqlite3.connect(path)
    try:
        return (
            conn.execute("SELECT * FROM sessions ORDER BY id").fetchall()
            + conn.execute("SELECT * FROM messages ORDER BY id").fetchall()
        )
    finally:
        conn.close()


def failed(content: str | None) -> bool:
    """Judge a Hermes tool result the way a person reading it would."""
    data = orjson.loads(content or "{}")
    return bool(
        data.get("error")
        or data.get("success") is False
        or data.get("status") == "error"
        or data.get("exit_code") not in (None, 0)
    )


def length_class(count: int) -> str:
    return "short" if count < 20 else "mid" if count < 100 else "marathon"


def test_same_seed_same_rows_and_another_seed_differs(tmp_path: Path) -> None:
    one = generate_sample_db(tmp_path / "a.db", sessions=40, seed=3)
    two = generate_sample_db(tmp_path / "b.db", sessions=40, seed=3)
    other = generate_sample_db(tmp_path / "c.db", sessions=40, seed=4)
    assert rows(one) == rows(two)
    assert rows(one) != rows(other)
    assert sample_info(one) == {"version": SAMPLE_VERSION, "seed": "3", "sessions": "40"}


def test_reads_back_cleanly_with_realistic_shape(sample: Path) -> None:
    report = ReadReport()
    sessions = list(iter_sessions(sample, report=report))
    assert len(sessions) == 600 and report.skipped == {}
    lengths = Counter(length_class(len(s.messages)) for s in sessions)
    assert all(lengths[name] >= 60 for name in ("short", "mid", "marathon")), lengths
    assert {s.source for s in sessions} >= {"cli", "telegram", "discord"}
    assert {s.end_reason for s in sessions} >= {"completed", "user_exit", "error", "compression"}
    by_id = {s.id: s for s in sessions}
    children = [s for s in sessions if s.parent_id is not None]
    assert children and all(by_id[s.parent_id].end_reason == "compression" for s in children)
    tools = Counter(c.name for s in sessions for m in s.messages for c in m.tool_calls)
    assert set(tools) == HERMES_TOOLS
    assert all(s.messages[0].role == "user" and s.messages[0].content for s in sessions)
    # Every call is answered by exactly one result, so mining can pair all of them.
    assert report.tool_calls == report.tool_results == sum(tools.values())


def test_task_types_have_ground_truth_and_distinct_first_messages(sample: Path) -> None:
    truth = sample_task_types(sample)
    assert set(task for task, _ in truth.values()) == {"code", "file", "research", "terminal", "mixed"}
    firsts: dict[str, set[str]] = defaultdict(set)
    for session in iter_sessions(sample):
        firsts[truth[session.id][0]].add(session.messages[0].content or "")
    assert all(len(texts) >= 10 for texts in firsts.values())
    assert firsts["code"].isdisjoint(firsts["research"])


def test_failures_are_realistic_and_rarer_in_marathon_sessions(sample: Path) -> None:
    calls: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for session in iter_sessions(sample):
        size = length_class(len(session.messages))
        for message in session.messages:
            if message.role == "tool":
                calls[(message.name or "", size)].append(failed(message.content))
    everything = [f for outcomes in calls.values() for f in outcomes]
    assert 0.04 < sum(everything) / len(everything) < 0.25
    kinds = set()
    for session in iter_sessions(sample):
        for message in session.messages:
            if message.role == "tool" and failed(message.content):
                text = message.content or ""
                kinds.update(
                    k for k in ("Traceback", "command not found", '"exit_code":1', '"error"') if k in text
                )
    assert kinds == {"Traceback", "command not found", '"exit_code":1', '"error"'}
    compared = 0
    for tool in HERMES_TOOLS:
        mid, marathon = calls[(tool, "mid")], calls[(tool, "marathon")]
        if len(mid) >= 150 and len(marathon) >= 150 and sum(mid) >= 10:
            assert sum(marathon) / len(marathon) < sum(mid) / len(mid), tool
            compared += 1
    assert compared >= 4


def test_intended_outcomes_are_the_results_written() -> None:
    # A call meant to succeed gets a successful result and one meant to fail a failed one, for
    # every tool and every command (some commands, like pytest, are in both pools).
    rng = random.Random(11)
    writer = _SessionWriter(rng, _plan_sessions(rng, 1)[0])
    for tool in sorted(HERMES_TOOLS):
        for _ in range(300):
            # clarify cannot fail (its failure rate is 0): it only asks.
            for fail in (False, True) if FAILURE_RATE[tool] > 0 else (False,):
                result = writer._result(tool, writer._arguments(tool, fail), fail)
                assert failed(result) is fail, (tool, fail, result)


def test_compacted_rows_and_multimodal_contents(sample: Path) -> None:
    conn = sqlite3.connect(sample)
    try:
        inactive = conn.execute("SELECT count(*) FROM messages WHERE active = 0").fetchone()[0]
        total = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        # Read as bytes: SQLite's text functions stop at the NUL of "\x00json:".
        blobs = conn.execute("SELECT CAST(content AS BLOB) FROM messages WHERE active = 1").fetchall()
        sentinels = sum(1 for (blob,) in blobs if blob and blob[:6] in (b"\x00json:"[:6], b"\x01json:"[:6]))
        markers = {blob[:1] for (blob,) in blobs if blob and blob[1:6] == b"json:"}
    finally:
        conn.close()
    report = ReadReport()
    sessions = list(iter_sessions(sample, report=report))
    assert inactive > 0 and report.messages == total - inactive
    assert sentinels > 0 and markers == {b"\x00", b"\x01"}
    decoded = [m.content for s in sessions for m in s.messages if m.content and "[image]" in m.content]
    assert len(decoded) == sentinels
    assert not any(
        m.content and m.content.startswith(("\x00json:", "\x01json:")) for s in sessions for m in s.messages
    )


def test_regenerating_is_guarded(tmp_path: Path) -> None:
    target = generate_sample_db(tmp_path / "state.db", sessions=5)
    with pytest.raises(StoreError, match="already exists"):
        generate_sample_db(target, sessions=5)
    generate_sample_db(target, sessions=6, overwrite=True)
    assert sample_info(target) == {"version": SAMPLE_VERSION, "seed": "7", "sessions": "6"}
    real = tmp_path / "real.db"
    conn = sqlite3.connect(real)
    conn.execute("CREATE TABLE sessions (id TEXT)")
    conn.close()
    before = real.read_bytes()
    with pytest.raises(StoreError, match="not a kindling sample"):
        generate_sample_db(real, overwrite=True)
    assert real.read_bytes() == before and not is_sample_db(real)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_default_path_is_under_kindling_home(isolated_homes: Path) -> None:
    assert default_sample_path() == isolated_homes / "kindling" / "sample" / "state.db"
    assert generate_sample_db(sessions=3) == default_sample_path()
    with pytest.raises(ValueError, match="at least 1"):
        generate_sample_db(sessions=0)

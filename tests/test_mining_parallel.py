"""Parallel mining gives exactly the one-pass result, and a failing worker is one clear error.

``mine_source(db, workers=N)`` is compared field by field with ``mine(iter_sessions(db))`` on the
generated sample database, on SQLite and on the real PostgreSQL server; the merge itself is checked
against one pass on generated streams (sessions without a start time, ties in recency, any cut).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kindling.mining.parallel as parallel
from kindling.errors import KindlingError, SourceError
from kindling.mining import MiningConfig, MiningResult, mine, mine_source, mine_sources
from kindling.mining.patterns import finish, merge_partials, mine_partial
from kindling.sessions import ReadReport, generate_sample_db, iter_sessions
from kindling.sessions.model import Message, Session, ToolCall


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_sample_db(tmp_path_factory.mktemp("parallel") / "state.db", sessions=150, seed=11)


def one_pass(source: str | Path, **filters: Any) -> tuple[MiningResult, ReadReport]:
    report = ReadReport()
    return mine(iter_sessions(source, report=report), report=report, **filters), report


def in_workers(source: str | Path, workers: int, **filters: Any) -> tuple[MiningResult, ReadReport]:
    report = ReadReport()
    return mine_source(source, workers=workers, report=report, **filters), report


def assert_same(a: tuple[MiningResult, ReadReport], b: tuple[MiningResult, ReadReport]) -> None:
    (first, first_report), (second, second_report) = a, b
    # Examples in order with every field: counts, last_seen, results, contexts, representatives.
    assert [e.model_dump() for e in first.examples] == [e.model_dump() for e in second.examples]
    assert first.as_dict() == second.as_dict()  # stats, filtered, sessions_mined, distinct
    assert first_report.as_dict() == second_report.as_dict()
    assert first.stats.tally == second.stats.tally


def test_two_workers_equal_one_pass_on_sqlite(sample_db: Path) -> None:
    expected = one_pass(sample_db, max_examples=100_000)
    got = in_workers(sample_db, 2, max_examples=100_000)
    assert_same(expected, got)
    result = got[0]
    assert result.distinct == len(result.examples) > 50
    assert result.stats.sessions == 150 and result.sessions_mined > 0
    # Groups seen in several sessions really were merged across shards.
    assert max(e.count for e in result.examples) > 10


def test_default_cap_and_three_workers_equal_one_pass(sample_db: Path) -> None:
    assert_same(one_pass(sample_db), in_workers(sample_db, 3))


def test_filters_and_a_small_cap_equal_one_pass(sample_db: Path) -> None:
    filters: dict[str, Any] = {
        "min_messages": 5,
        "source_filter": ["cli", "tele*"],
        "skip_tools": ["read_file"],
        "max_examples": 7,
        "result_chars": 40,
        "context_chars": 30,
        "skip_zero_reward": False,
    }
    expected = one_pass(sample_db, **filters)
    got = in_workers(sample_db, 2, **filters)
    assert_same(expected, got)
    result = got[0]
    assert len(result.examples) == 7 and result.filtered["beyond_max_examples"] == result.distinct - 7
    assert result.filtered["source_filtered"] > 0 and result.filtered["trivial_tool"] > 0
    assert all(e.tool_name != "read_file" for e in result.examples)
    # Stats only (max_examples=0) too: the stats of everything read, no examples.
    assert_same(one_pass(sample_db, max_examples=0), in_workers(sample_db, 2, max_examples=0))


@pytest.mark.postgres
def test_two_workers_equal_one_pass_on_postgresql(sample_db: Path, pg_url: str) -> None:
    from test_stats_cli import _copy_to_postgres  # one copy helper for every PostgreSQL test

    _copy_to_postgres(sample_db, pg_url)
    expected = one_pass(pg_url, max_examples=100_000)
    assert expected[0].stats.sessions == 150
    assert_same(expected, in_workers(pg_url, 2, max_examples=100_000))
    filters: dict[str, Any] = {"min_messages": 30, "max_examples": 5, "skip_tools": ["terminal"]}
    assert_same(one_pass(pg_url, **filters), in_workers(pg_url, 3, **filters))


def test_several_sources_read_as_one_stream(sample_db: Path, tmp_path: Path) -> None:
    other = generate_sample_db(tmp_path / "other.db", sessions=40, seed=5)
    report = ReadReport()
    streams = [iter_sessions(sample_db, report=report), iter_sessions(other, report=report)]
    expected = mine((s for stream in streams for s in stream), report=report, max_examples=500)
    got_report = ReadReport()
    got = mine_sources([sample_db, other], workers=2, report=got_report, max_examples=500)
    assert_same((expected, report), (got, got_report))


def test_progress_counts_every_session(sample_db: Path) -> None:
    seen: list[int] = []
    result = mine_source(sample_db, workers=2, on_progress=seen.append)
    assert sum(seen) == result.stats.sessions == 150
    assert len(seen) >= 2  # from both workers, not one lump at the end


def test_forkserver_start_gives_the_same_result(sample_db: Path) -> None:
    assert_same(
        one_pass(sample_db, max_examples=50), in_workers_with(sample_db, "forkserver", max_examples=50)
    )


def in_workers_with(source: Path, method: str, **filters: Any) -> tuple[MiningResult, ReadReport]:
    report = ReadReport()
    return mine_source(source, workers=2, report=report, start_method=method, **filters), report


def test_start_method_is_fork_only_without_other_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        # As if this were the only thread (another test may have left one running).
        patch.setattr(parallel.threading, "active_count", lambda: 1)
        assert parallel._context(None).get_start_method() == "fork"
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert parallel._context(None).get_start_method() == "forkserver"
    finally:
        stop.set()
        thread.join()


# --------------------------------------------------------------------------- when it stays in one process


def _no_workers(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("worker processes were started")


def test_small_sources_max_sessions_and_other_formats_stay_in_one_process(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parallel, "_run", _no_workers)
    # ~11k messages: below MESSAGES_PER_WORKER, so automatic mode does not start workers.
    assert_same(one_pass(sample_db), (mine_source(sample_db, report=(r := ReadReport())), r))
    assert_same(one_pass(sample_db, max_sessions=7), in_workers(sample_db, 2, max_sessions=7))
    assert_same(one_pass(sample_db), in_workers(sample_db, 1))
    jsonl = tmp_path / "chat.jsonl"
    line = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    jsonl.write_bytes(b"\n".join(orjson.dumps(line) for _ in range(30)))
    assert_same(one_pass(jsonl, min_messages=1), in_workers(jsonl, 2, min_messages=1))


def test_automatic_mode_uses_workers_for_a_big_enough_source(
    sample_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[int] = []
    real_run = parallel._run

    def spy(shards: list[Any], concurrency: int, *args: Any) -> Any:
        started.append(len(shards))
        return real_run(shards, concurrency, *args)

    monkeypatch.setattr(parallel, "_run", spy)
    monkeypatch.setattr(parallel, "MESSAGES_PER_WORKER", 1000)
    monkeypatch.setattr(parallel, "default_workers", lambda: 2)
    assert_same(one_pass(sample_db), (mine_source(sample_db, report=(r := ReadReport())), r))
    assert started == [2]
    # Four cores but messages for only two workers: two shards, not four.
    monkeypatch.setattr(parallel, "default_workers", lambda: 4)
    monkeypatch.setattr(parallel, "MESSAGES_PER_WORKER", r.messages // 2 - 10)
    assert_same(one_pass(sample_db), (mine_source(sample_db, report=(r := ReadReport())), r))
    assert started == [2, 2]


def test_bad_arguments_fail_before_any_worker_starts(
    sample_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parallel, "_run", _no_workers)
    with pytest.raises(ValueError, match="workers"):
        mine_source(sample_db, workers=0)
    with pytest.raises(ValueError, match="max_examples"):
        mine_source(sample_db, workers=2, max_examples=-1)
    with pytest.raises(TypeError, match="min_mesages"):
        mine_source(sample_db, workers=2, min_mesages=3)
    with pytest.raises(SourceError, match="no such file"):
        mine_source(sample_db.parent / "missing.db", workers=2)


# --------------------------------------------------------------------------- failing workers


def _exits(*_args: Any, **_kwargs: Any) -> Any:
    os._exit(3)


def _raises_source_error(*_args: Any, **_kwargs: Any) -> Any:
    raise SourceError("Cannot finish reading x.db: disk I/O error.", path="x.db")


def _raises_bug(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError("boom")


@pytest.mark.timeout(60)
def test_a_worker_that_dies_is_a_clear_error_not_a_hang(
    sample_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fork: the child runs the patched function it inherited.
    monkeypatch.setattr(parallel, "mine_partial", _exits)
    with pytest.raises(KindlingError, match=r"stopped without a result \(exit code 3\)") as info:
        mine_source(sample_db, workers=2, start_method="fork")
    assert "state.db" in str(info.value)
    assert multiprocessing.active_children() == []


@pytest.mark.timeout(60)
def test_a_worker_error_surfaces_as_the_same_kindling_error(
    sample_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parallel, "mine_partial", _raises_source_error)
    with pytest.raises(SourceError, match="disk I/O error") as info:
        mine_source(sample_db, workers=2, start_method="fork")
    assert info.value.path == "x.db" and info.value.exit_code == 2
    monkeypatch.setattr(parallel, "mine_partial", _raises_bug)
    with pytest.raises(KindlingError, match=r"mining worker .*shard \d of 2.*RuntimeError: boom"):
        mine_source(sample_db, workers=2, start_method="fork")
    assert multiprocessing.active_children() == []


# --------------------------------------------------------------------------- the merge itself

TOOLS = (("terminal", {"command": "ls"}), ("terminal", {"command": "pwd"}), ("read_file", {"path": "a"}))


@st.composite
def streams(draw: st.DrawFn) -> list[Session]:
    sessions: list[Session] = []
    for i in range(draw(st.integers(0, 12))):
        messages = [Message("user", f"task {i}")]
        for j in range(draw(st.integers(0, 4))):
            tool, arguments = draw(st.sampled_from(TOOLS))
            call = ToolCall(f"c{j}", tool, arguments)
            messages.append(Message("assistant", None, (call,)))
            result = draw(st.sampled_from(["ok", "Error: no", f"out {i}.{j}", ""]))
            messages.append(Message("tool", result, tool_call_id=f"c{j}"))
        started = draw(st.sampled_from([None, 1.0, 2.0, 3.0]))
        sessions.append(
            Session(f"s{i}", draw(st.sampled_from(["cli", "cron"])), tuple(messages), started_at=started)
        )
    return sessions


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions=streams(), cuts=st.lists(st.integers(0, 12), max_size=3), cap=st.integers(0, 6))
def test_merged_shards_equal_one_pass(sessions: list[Session], cuts: list[int], cap: int) -> None:
    config = MiningConfig()
    expected = mine(iter(sessions), min_messages=0, max_examples=cap, config=config)
    edges = [0, *sorted(min(c, len(sessions)) for c in cuts), len(sessions)]
    parts = [
        mine_partial(iter(sessions[low:high]), min_messages=0, keep_examples=cap > 0, config=config)
        for low, high in itertools.pairwise(edges)
    ]
    got = finish(merge_partials(parts), max_examples=cap)
    assert [e.model_dump() for e in got.examples] == [e.model_dump() for e in expected.examples]
    assert got.as_dict() == expected.as_dict()


def test_merge_keeps_the_representative_one_pass_keeps() -> None:
    # Shard 2's newest occurrence is older than shard 1's, so one pass keeps shard 1's...
    # ...except that an occurrence from a session without a start time always takes over.
    def session(sid: str, started: float | None, output: str) -> Session:
        call = ToolCall("c", "terminal", {"command": "make"})
        messages = (
            Message("user", sid),
            Message("assistant", None, (call,)),
            Message("tool", output, tool_call_id="c"),
        )
        return Session(sid, "cli", messages, started_at=started)

    stream = [session("a", 5.0, "new"), session("b", None, "undated"), session("c", 1.0, "old")]
    config = MiningConfig()
    for cut in range(4):
        parts = [
            mine_partial(iter(stream[:cut]), min_messages=0, config=config),
            mine_partial(iter(stream[cut:]), min_messages=0, config=config),
        ]
        got = finish(merge_partials(parts), max_examples=5).examples
        assert [(e.result, e.session_id, e.count, e.last_seen) for e in got] == [("undated", "b", 3, 5.0)]


def test_ties_break_by_the_global_position_of_the_representative() -> None:
    # Same count and same start time: one pass ranks the later session's group first, so the
    # merge must number sessions from the start of the whole stream, not of each shard.
    def session(sid: str, command: str) -> Session:
        call = ToolCall("c", "terminal", {"command": command})
        messages = (
            Message("user", sid),
            Message("assistant", None, (call,)),
            Message("tool", "ok", tool_call_id="c"),
        )
        return Session(sid, "cli", messages, started_at=1.0)

    stream = [session("a", "ls"), session("b", "pwd")]
    config = MiningConfig()
    expected = mine(iter(stream), min_messages=0, config=config).examples
    parts = [mine_partial(iter(stream[i : i + 1]), min_messages=0, config=config) for i in range(2)]
    got = finish(merge_partials(parts), max_examples=5).examples
    assert [e.arguments["command"] for e in expected] == ["pwd", "ls"]
    assert [e.model_dump() for e in got] == [e.model_dump() for e in expected]


# --------------------------------------------------------------------------- callers: stats CLI and build


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    started: list[int] = []
    real_run = parallel._run

    def spy(shards: list[Any], concurrency: int, *args: Any) -> Any:
        started.append(len(shards))
        return real_run(shards, concurrency, *args)

    monkeypatch.setattr(parallel, "_run", spy)
    monkeypatch.setattr(parallel, "MESSAGES_PER_WORKER", 1000)
    monkeypatch.setattr(parallel, "default_workers", lambda: 2)
    return started


def test_stats_cli_output_is_the_same_in_workers(sample_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from kindling.cli.main import app
    from kindling.mining import compute_stats

    report = ReadReport()
    expected = compute_stats(iter_sessions(sample_db, report=report), report=report).as_dict()
    started = _count_runs(monkeypatch)
    result = CliRunner().invoke(app, ["stats", str(sample_db), "--json"])
    assert result.exit_code == 0, result.output
    assert started == [2]
    assert orjson.loads(result.stdout) == orjson.loads(orjson.dumps(expected))


def test_build_template_is_the_same_in_workers(sample_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kindling.templates.build import build_template_with_report
    from kindling.templates.store import open_store

    one = build_template_with_report("one", [sample_db], workers=1, max_examples=40, min_messages=10)
    started = _count_runs(monkeypatch)
    seen: list[int] = []
    two = build_template_with_report(
        "two", [sample_db], max_examples=40, min_messages=10, on_progress=seen.append
    )
    assert started == [2] and sum(seen) == 150
    assert [e.model_dump() for e in two.template.examples] == [e.model_dump() for e in one.template.examples]
    assert (
        two.as_dict()["read"] == one.as_dict()["read"] and two.as_dict()["mining"] == one.as_dict()["mining"]
    )
    assert (two.template.task_type, two.template.source_session_ids) == (
        one.template.task_type,
        one.template.source_session_ids,
    )
    assert open_store().get("two").examples == two.template.examples


def _sqlite_steps(monkeypatch: pytest.MonkeyPatch, read: Any) -> int:
    """Run ``read()`` counting the SQLite virtual machine's steps (in thousands) on every connection it opens."""
    import sqlite3

    steps = [0]
    connect = sqlite3.connect

    def counted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_progress_handler(lambda: steps.__setitem__(0, steps[0] + 1) or 0, 1000)
        return conn

    with monkeypatch.context() as patch:
        patch.setattr(sqlite3, "connect", counted)
        read()
    return steps[0]


def test_a_later_shard_is_read_without_scanning_the_earlier_rows(
    sample_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each page of a shard is bounded below by where the page starts, not by where the shard does:
    # SQLite uses one lower bound of an index range, and when it took the shard's, every page of the
    # second shard scanned from the shard's first row (issue 14: two workers ran slower than one).
    from kindling.sessions.hermes import read_hermes_sqlite, shard_bounds, shards_of

    _total, bounds = shard_bounds(sample_db, 2)
    first, second = shards_of(bounds)

    def read(shard: tuple[Any, Any]) -> int:
        report = ReadReport()
        return _sqlite_steps(monkeypatch, lambda: list(read_hermes_sqlite(sample_db, report, shard=shard)))

    whole = _sqlite_steps(monkeypatch, lambda: list(iter_sessions(sample_db)))
    early, late = read(first), read(second)
    assert late < 2 * early, (early, late, whole)
    assert early + late < 1.5 * whole, (early, late, whole)

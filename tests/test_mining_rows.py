"""Mining in row form (issue 14): the same results as the implementation before it, on every input.

``mine(iter_sessions(db))`` takes the Hermes reader's rows without building a Message per row. The
reference is the previous implementation kept verbatim in ``reference_mining.py`` (the reader's
assembly loop building Message objects, and the mining loop over them); both run over the same
source and must give identical results, read reports included: on the sample data, on generated
databases full of malformed and compacted rows, and on the development data.
"""

from __future__ import annotations

import itertools
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kindling.mining import mine
from kindling.mining.patterns import finish
from kindling.sessions import ReadReport, generate_sample_db, iter_sessions
from kindling.sessions.model import SessionStream, session_rows
from reference_mining import reference_assemble_sessions, reference_mine_partial

TRAJECTORIES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"


def reference(source: str | Path, monkeypatch: pytest.MonkeyPatch, **filters: Any) -> tuple[Any, Any]:
    """Mine ``source`` the way the previous implementation did: Message objects all the way."""
    with monkeypatch.context() as patch:
        patch.setattr(
            "kindling.sessions.hermes.assemble_rows",
            lambda rows, *args, **kwargs: session_rows(
                reference_assemble_sessions(_old_layout(rows), *args, **kwargs)
            ),
        )
        report = ReadReport()
        max_examples = filters.pop("max_examples", 100)
        # Streamed as mine() streams: with max_sessions the read stops early, report and all.
        sessions = (session for session in iter_sessions(source, report=report))
        partial = reference_mine_partial(sessions, keep_examples=max_examples > 0, **filters)
    result = finish(partial, max_examples=max_examples, report=report)
    return result.as_dict(), report.as_dict()


def _old_layout(rows: Any) -> Any:
    # The columns as the previous reader selected them: compacted came last.
    for row in rows:
        yield (*row[:6], *row[7:], row[6])


def current(source: str | Path, **filters: Any) -> tuple[Any, Any]:
    report = ReadReport()
    stream = iter_sessions(source, report=report)
    result = mine(stream, report=report, **filters)
    return result.as_dict(), report.as_dict()


def test_the_hermes_reader_hands_mining_its_rows(tmp_path: Path) -> None:
    path = generate_sample_db(tmp_path / "state.db", sessions=20, seed=2)
    stream = iter_sessions(path)
    assert isinstance(stream, SessionStream)
    # The same sessions either way.
    rows = [(session.id, [row[:4] for row in messages]) for session, messages in stream.rows()]
    objects = [
        (session.id, [(m.role, m.content, m.tool_calls, m.tool_call_id) for m in session.messages])
        for session in iter_sessions(path)
    ]
    assert rows == objects
    started = iter_sessions(path)
    next(started)
    with pytest.raises(ValueError, match="already been read"):
        started.rows()


@pytest.mark.parametrize("min_messages", [20, 0])
def test_sample_data_mines_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, min_messages: int
) -> None:
    path = generate_sample_db(tmp_path / "state.db", sessions=300, seed=5)
    assert current(path, min_messages=min_messages) == reference(path, monkeypatch, min_messages=min_messages)


# ------------------------------------------------------------------ generated Hermes databases

SUMMARY = "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted."
WRAPPED = (
    '<untrusted_tool_result source="web_extract">\nThe following content was retrieved from an external '
    'source.\n\n{"success": false}\n</untrusted_tool_result>'
)
TOOLS = ["terminal", "read_file", "web_extract", "clarify", "memory"]
texts = st.sampled_from(
    [
        "",
        "ok",
        "Please fix the parser",
        '{"exit_code": 1}',
        '{"success": true, "n": 1}',
        "Error: nope",
        "[1, 2]",
        "\x00json:" + orjson.dumps([{"type": "text", "text": "look"}]).decode(),
        "\x01json:{broken",
        SUMMARY,
        WRAPPED,
        "  ",
        "Traceback (most recent call last):",
    ]
)
call_ids = st.sampled_from(["c1", "c2", "c3", "call_0"])
arguments = st.sampled_from(
    ['{"command": "ls"}', '{"path": "a.py"}', "{}", "not json", '{"b": 1, "a": [2]}', "[1]"]
)
one_call = st.builds(
    lambda call_id, name, args, shape: (
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
        if shape == 0
        else {"id": call_id, "name": name, "arguments": args}
        if shape == 1
        else {"function": {"name": name, "arguments": args}}
        if shape == 2
        else {"id": call_id, "function": {"name": "", "arguments": args}}
    ),
    call_ids,
    st.sampled_from(TOOLS),
    arguments,
    st.integers(0, 3),
)
raw_calls = st.one_of(
    st.none(),
    st.lists(one_call, min_size=1, max_size=3).map(lambda calls: orjson.dumps(calls).decode()),
    st.sampled_from(["[", '{"id": "c1"}', "[]", "3"]),
)
rows = st.tuples(
    st.sampled_from(["s1", "s2", "s3", "zz", None]),
    st.sampled_from(["user", "assistant", "tool", "system", "developer", "robot"]),
    texts | st.none(),
    call_ids | st.none(),
    raw_calls,
    st.sampled_from([(1, 0), (1, 0), (1, 0), (0, 1), (0, 0)]),
)


def write_database(path: Path, messages: list[Any], *, compaction: bool = True) -> None:
    """Write ``messages`` to a Hermes-shaped database; without ``compaction``, as Hermes versions
    before in-place compaction (no active/compacted columns, every row live)."""
    conn = sqlite3.connect(path)
    flags = ", active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0" if compaction else ""
    conn.executescript(
        f"""
        CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, started_at REAL NOT NULL,
          ended_at REAL, end_reason TEXT, parent_session_id TEXT, model TEXT);
        CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT,
          tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, timestamp REAL, reasoning TEXT{flags});
        INSERT INTO sessions VALUES ('s1', 'cli', 3.0, NULL, 'compression', NULL, 'm');
        INSERT INTO sessions VALUES ('s2', 'telegram', 1.0, NULL, NULL, 's1', 'm');
        INSERT INTO sessions VALUES ('s3', 'cli', 2.0, NULL, 'error', 's2', NULL);
        INSERT INTO sessions VALUES ('s4', 'cron', 5.0, NULL, NULL, NULL, NULL);
        """
    )
    for index, (session, role, content, call_id, calls, (active, compacted)) in enumerate(messages):
        if not compaction:
            if not active:
                continue  # a row that would not be read anyway
            conn.execute(
                "INSERT INTO messages (id, session_id, role, content, tool_call_id, tool_calls, tool_name,"
                " timestamp) VALUES (?, ?, ?, ?, ?, ?, 'terminal', ?)",
                (index + 1, session, role, content, call_id, calls, float(index)),
            )
            continue
        conn.execute(
            "INSERT INTO messages (id, session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp,"
            " active, compacted) VALUES (?, ?, ?, ?, ?, ?, 'terminal', ?, ?, ?)",
            (index + 1, session, role, content, call_id, calls, float(index), active, compacted),
        )
    conn.commit()
    conn.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rows, max_size=40))
def test_generated_databases_mine_as_before(messages: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as monkeypatch:
        for compaction in (True, False):
            path = Path(folder) / f"state-{compaction}.db"
            write_database(path, messages, compaction=compaction)
            for filters in ({"min_messages": 0}, {"min_messages": 3, "max_sessions": 1}, {"max_examples": 0}):
                assert current(path, **filters) == reference(path, monkeypatch, **filters)


# ------------------------------------------------------------------------- development data


def development_sources() -> list[Path]:
    """Every source in the development data: its files and its folders of per-task files."""
    return sorted(entry for folder in TRAJECTORIES.iterdir() if folder.is_dir() for entry in folder.iterdir())


@pytest.mark.skipif(not TRAJECTORIES.is_dir(), reason=f"the development data is not at {TRAJECTORIES}")
def test_development_data_mines_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = development_sources()
    assert len(sources) >= 7
    for source in sources:
        expected = reference(source, monkeypatch, min_messages=0)
        assert expected[1]["sessions"] > 0, source
        assert current(source, min_messages=0) == expected, source


@pytest.mark.postgres
def test_postgresql_mines_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_url: str) -> None:
    from test_stats_cli import _copy_to_postgres  # one copy helper for every PostgreSQL test

    path = generate_sample_db(tmp_path / "state.db", sessions=120, seed=8)
    _copy_to_postgres(path, pg_url)
    assert current(pg_url, min_messages=0) == reference(pg_url, monkeypatch, min_messages=0)
    assert current(pg_url) == current(path)


def test_argument_texts_read_for_the_first_time_mine_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reader parses an argument text it has not seen in its own fast path: objects (short, and
    # longer than its cache keeps), and texts that are no object fall back to the general parser.
    long_text = orjson.dumps({"content": "x" * 5000, "path": "a.md"}).decode()
    messages: list[Any] = []
    for index, args in enumerate([long_text, '{"command": "ls"}', "[1]", "not json", long_text, "{}"]):
        call = orjson.dumps(
            [{"id": f"c{index}", "type": "function", "function": {"name": "terminal", "arguments": args}}]
        )
        messages.append(("s1", "assistant", None, None, call.decode(), (1, 0)))
        messages.append(("s1", "tool", '{"success": true}', f"c{index}", None, (1, 0)))
    path = tmp_path / "state.db"
    write_database(path, messages)
    assert current(path, min_messages=0) == reference(path, monkeypatch, min_messages=0)


def test_values_the_converter_would_read_differently_mine_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Mining reads content, tool_call_id and tool_calls through a converter (no GIL release per
    # column). Where a converted value would differ from the exact one (a BLOB content or call id,
    # an empty text, bytes that are not UTF-8), the page is read again exactly.
    sentinel = "\x00json:" + orjson.dumps([{"type": "text", "text": "look"}]).decode()
    call = orjson.dumps(
        [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]
    )
    messages: list[Any] = []
    for session in ("s1", "s2", "s4"):
        messages.append((session, "user", "Please fix the parser", None, None, (1, 0)))
        for _ in range(3):
            messages.append((session, "assistant", None, None, call.decode(), (1, 0)))
            messages.append((session, "tool", '{"success": true}', "c1", None, (1, 0)))
    path = tmp_path / "state.db"
    changes = {
        "content = CAST(? AS BLOB)": [(sentinel.encode(), 1), (b'{"success": true}', 3), (b"\xff\xfe", 5)],
        "tool_call_id = CAST(? AS BLOB)": [(b"c1", 9)],
        "content = ?": [("", 11), ("", 15)],
        "tool_call_id = ?": [("", 17)],
        "tool_calls = CAST(? AS TEXT)": [(b"[\xff]", 18)],
        "content = CAST(? AS TEXT)": [(b"ok \xff", 19)],
        # A role reads through its own converter: a BLOB would be a known role, an empty one unknown.
        "role = CAST(? AS BLOB)": [(b"tool", 3), (b"user", 8)],
        "role = ?": [("", 6), ("Assistant", 12), ("robot", 13)],
        "role = CAST(? AS TEXT)": [(b"to\xffl", 16)],
    }
    for change, rows in changes.items():
        for at in range(len(rows) + 1):
            # Each odd value alone, then all of that kind at once.
            write_database(path, messages)
            conn = sqlite3.connect(path)
            for value, row_id in rows[at : at + 1] if at < len(rows) else rows:
                conn.execute(f"UPDATE messages SET {change} WHERE id = ?", (value, row_id))
            conn.commit()
            conn.close()
            for filters in ({"min_messages": 0}, {"min_messages": 3, "max_sessions": 1}):
                assert current(path, **filters) == reference(path, monkeypatch, **filters), (change, at)
            path.unlink()


def test_session_ids_the_converter_would_read_differently_mine_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages of whole sessions between two non-empty texts read session_id through the converter
    # too; a page that can hold an empty text (which would read as None) or a BLOB (which would
    # read as text) reads it exactly: the first, the last, and one that starts at the empty text.
    monkeypatch.setattr("kindling.sessions.hermes._PAGE_ROWS", 3)
    call = orjson.dumps(
        [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]
    )
    path = tmp_path / "state.db"
    changes = {
        # s5 has a session row but no message with a text id: a BLOB id read as text would join it.
        "session_id = CAST(? AS BLOB)": [(b"s5", 10), (b"s6", 14)],
        "session_id = ?": [(None, 8)],
    }
    # Empty ids on fewer rows than a page (the first page holds them), then on more (a page starts there).
    for layout, (change, rows) in itertools.product(
        [("", "s1", "s2", "s3", "s4"), ("", "", "s1", "s2", "s3", "s4")], [("", []), *changes.items()]
    ):
        messages: list[Any] = []
        for session in layout:
            messages.append((session, "user", "Please fix the parser", None, None, (1, 0)))
            messages.append((session, "assistant", None, None, call.decode(), (1, 0)))
            messages.append((session, "tool", '{"success": true}', "c1", None, (1, 0)))
        write_database(path, messages)
        conn = sqlite3.connect(path)
        conn.execute("INSERT INTO sessions VALUES ('', 'cli', 4.0, NULL, NULL, NULL, 'm')")
        conn.execute("INSERT INTO sessions VALUES ('s5', 'cli', 6.0, NULL, NULL, NULL, 'm')")
        for value, row_id in rows:
            conn.execute(f"UPDATE messages SET {change} WHERE id = ?", (value, row_id))
        conn.commit()
        conn.close()
        for filters in ({"min_messages": 0}, {"min_messages": 3, "max_sessions": 2}):
            assert current(path, **filters) == reference(path, monkeypatch, **filters), (layout, change)
        path.unlink()

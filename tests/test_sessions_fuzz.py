"""Whatever a file holds, reading it never raises: bad pieces are counted, never fatal."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kindling.errors import FormatMismatchError, UnknownFormatError
from kindling.sessions import FORMATS, ReadReport, iter_sessions
from kindling.sessions.taubench import document_format

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
roles = st.sampled_from(
    ["system", "user", "assistant", "tool", "developer", "gpt", "human", "robot", None, 3]
)
messages = st.fixed_dictionaries(
    {"role": roles},
    optional={
        "content": json_values,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "id": st.text(max_size=3) | st.integers(-1000, 1000),
                    "name": st.text(max_size=6) | st.none(),
                    "arguments": json_values,
                    "requestor": st.sampled_from(["user", "assistant", 5]),
                    "function": st.fixed_dictionaries(
                        {},
                        optional={
                            "name": st.text(max_size=6),
                            "arguments": st.text(max_size=20) | json_values,
                        },
                    ),
                },
            ),
            max_size=3,
        )
        | json_values,
        "tool_call_id": st.text(max_size=3) | st.none(),
        "id": st.text(max_size=3),
        "error": json_values,
    },
)
turns = st.fixed_dictionaries(
    {
        "from": st.sampled_from(["system", "human", "gpt", "tool", "x"]),
        "value": st.text(max_size=80) | json_values,
    }
)


def records(fmt: str) -> st.SearchStrategy[Any]:
    if fmt in ("openai", "hermes-export"):
        return st.lists(
            st.fixed_dictionaries({"messages": st.lists(messages, max_size=6) | json_values}), max_size=3
        )
    if fmt == "sharegpt":
        return st.lists(
            st.fixed_dictionaries({"conversations": st.lists(turns, max_size=6) | json_values}), max_size=3
        )
    if fmt == "tau-bench":
        return st.lists(
            st.fixed_dictionaries({"traj": st.lists(messages, max_size=6)}, optional={"reward": json_values}),
            max_size=3,
        )
    return st.fixed_dictionaries(
        {
            "simulations": st.lists(
                st.fixed_dictionaries(
                    {"messages": st.lists(messages, max_size=6)}, optional={"id": json_values}
                ),
                max_size=3,
            )
        }
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    fmt=st.sampled_from([f for f in FORMATS if f not in ("hermes", "proxy")]),
    garbage=st.binary(max_size=30),
)
def test_any_content_reads_without_raising(data: st.DataObject, fmt: str, garbage: bytes) -> None:
    value = data.draw(records(fmt))
    if fmt in ("openai", "hermes-export", "sharegpt"):
        payload = b"".join(orjson.dumps(v) + b"\n" for v in value) + garbage
    else:
        payload = orjson.dumps(value) + garbage
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "input"
        path.write_bytes(payload)
        report = ReadReport()
        try:
            sessions = list(iter_sessions(path, fmt, report=report))
        except UnknownFormatError as exc:
            # A whole JSON document forced into a benchmark format it is not: one error, no stream
            # of skipped lines, and only when the document really holds no run of that format.
            assert fmt in ("tau-bench", "tau2-bench")
            assert document_format(orjson.loads(payload)) != fmt
            assert "\n" not in str(exc)
            return
        except FormatMismatchError as exc:
            # Forced, and nothing of it read: one error naming the format, never a silent 0.
            assert report.sessions == 0 and sum(report.skipped.values()) > 0
            assert f"could be read as {fmt}" in str(exc) and "\n" not in str(exc)
            return
    assert report.sessions == len(sessions)
    assert report.messages == sum(len(s.messages) for s in sessions)
    for session in sessions:
        known: set[str] = set()
        for message in session.messages:
            known.update(call.id for call in message.tool_calls)
            if message.role == "tool":
                assert message.tool_call_id in known  # every kept result answers a call made before it


cells = (
    st.none()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.binary(max_size=12)
)
call_json = st.lists(
    st.fixed_dictionaries(
        {"id": st.sampled_from(["a", "b", "c"]), "type": st.just("function")},
        optional={
            "function": st.fixed_dictionaries(
                {"name": st.sampled_from(["t", ""]), "arguments": st.text(max_size=10)}
            )
        },
    ),
    max_size=3,
).map(lambda calls: orjson.dumps(calls).decode())
rows = st.lists(
    st.tuples(
        st.sampled_from(["s1", "s2", "ghost", None, 7]),
        st.sampled_from(["user", "assistant", "tool", "session_meta"]) | cells,
        cells,
        st.sampled_from(["a", "b", "c", None]) | cells,
        call_json | cells,
        st.sampled_from([0, 1]),
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=rows)
def test_any_hermes_rows_read_without_raising(rows: list[tuple[Any, ...]]) -> None:
    import sqlite3

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.db"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL)")
        conn.execute(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, content TEXT, "
            "tool_call_id TEXT, tool_calls TEXT, timestamp REAL, active INTEGER)"
        )
        conn.executemany("INSERT INTO sessions VALUES (?, 'cli', 1.0)", [("s1",), ("s2",)])
        conn.executemany(
            "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, timestamp, active) "
            "VALUES (?, ?, ?, ?, ?, 1.0, ?)",
            rows,
        )
        conn.commit()
        conn.close()
        report = ReadReport()
        sessions = list(iter_sessions(path, report=report))
    assert [s.id for s in sessions] == ["s1", "s2"]
    assert report.messages + sum(report.skipped.values()) >= sum(1 for r in rows if r[5] == 1)

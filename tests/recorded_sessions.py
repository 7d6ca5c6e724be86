"""Write past sessions into a real Hermes ``state.db`` on disk (Hermes Agent's own schema).

Tests that need particular contents in a recorded session (a poisoned tool result, a secret in a
command) describe each session as turns and get a SQLite file kindling reads like any Hermes home::

    write_state_db(path, [
        session("s1", "Fix the failing test", [
            call("terminal", {"command": "pytest -q"}, "3 passed"),
        ]),
    ])

Each call becomes an assistant message with one tool call and the tool message answering it; the
session ends with a short assistant reply. Padding turns (``padding``) make sessions long enough for
mining's default minimum length.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT, model_config TEXT,
    system_prompt TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL,
    end_reason TEXT, message_count INTEGER DEFAULT 0, tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0, title TEXT
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT, reasoning TEXT,
    active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0
);
INSERT INTO schema_version VALUES (6);
"""


@dataclass
class Call:
    """One tool call and its result."""

    tool: str
    arguments: dict[str, Any]
    result: str
    thought: str | None = None


@dataclass
class RecordedSession:
    """One session: its opening request and its calls, in order."""

    id: str
    request: str
    calls: list[Call] = field(default_factory=list)
    reply: str = "Done."
    source: str = "cli"


def call(tool: str, arguments: dict[str, Any], result: str, thought: str | None = None) -> Call:
    """A tool call answered by ``result``."""
    return Call(tool, arguments, result, thought)


def session(session_id: str, request: str, calls: list[Call], reply: str = "Done.") -> RecordedSession:
    """A session opening with ``request``, then ``calls``."""
    return RecordedSession(session_id, request, calls, reply)


def padding(count: int) -> list[Call]:
    """Ordinary calls that work, to make a session long enough to be mined."""
    return [
        call("read_file", {"path": f"src/module_{i}.py"}, f"def f{i}():\n    return {i}\n")
        for i in range(count)
    ]


def write_state_db(path: Path, sessions: list[RecordedSession]) -> Path:
    """Write ``sessions`` into a new Hermes ``state.db`` at ``path``; return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    try:
        db.executescript(SCHEMA)
        clock = 1_700_000_000.0
        for number, recorded in enumerate(sessions):
            started = clock + number * 3600
            rows: list[tuple[Any, ...]] = [(recorded.id, "user", recorded.request, None, None, None, started)]
            for index, item in enumerate(recorded.calls):
                call_id = f"call_{number}_{index}"
                payload = [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": item.tool, "arguments": json.dumps(item.arguments)},
                    }
                ]
                at = started + 2 * index + 1
                rows.append((recorded.id, "assistant", item.thought, None, json.dumps(payload), None, at))
                rows.append((recorded.id, "tool", item.result, call_id, None, item.tool, at + 0.5))
            rows.append(
                (
                    recorded.id,
                    "assistant",
                    recorded.reply,
                    None,
                    None,
                    None,
                    started + 2 * len(recorded.calls) + 1,
                )
            )
            db.execute(
                "INSERT INTO sessions (id, source, model, started_at, ended_at, end_reason, message_count, "
                "tool_call_count, title) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    recorded.id,
                    recorded.source,
                    "fake-model",
                    started,
                    started + 2 * len(recorded.calls) + 2,
                    "completed",
                    len(rows),
                    len(recorded.calls),
                    recorded.request[:40],
                ),
            )
            db.executemany(
                "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        db.commit()
    finally:
        db.close()
    return path

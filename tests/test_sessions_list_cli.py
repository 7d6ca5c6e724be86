"""Finding a session: ``sessions --list``, ``latest`` wherever a session id goes, and a forced
``--format`` that reads nothing being an error rather than "0 sessions"."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from fake_openai import FakeOpenAI, text
from kindling.cli.main import app
from kindling.errors import FormatMismatchError, NotFoundError
from kindling.mining.listing import first_request, list_sessions
from kindling.sessions import (
    Message,
    Session,
    ToolCall,
    find_session,
    generate_sample_db,
    iter_sessions,
    resolve_session_id,
)

runner = CliRunner()


def chat_log(path: Path) -> Path:
    """Three OpenAI-format sessions; the middle one started last; s1 has one failed call of two."""

    def session(sid: str, created: int, request: str, results: list[str]) -> dict[str, object]:
        messages: list[dict[str, object]] = [
            {"role": "user", "content": "[CONTEXT COMPACTION — REFERENCE ONLY] earlier turns"},
            {"role": "user", "content": f"  {request}\n please  "},
        ]
        for number, result in enumerate(results):
            call = {
                "id": f"c{number}",
                "type": "function",
                "function": {"name": "terminal", "arguments": "{}"},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"c{number}", "content": result})
        return {"id": sid, "created": created, "messages": messages}

    rows = [
        session("s1", 1_700_000_000, "Fix the build", ["ok", "Error: command not found"]),
        session("s2", 1_700_000_900, "Tidy the README", ["done"]),
        session("s3", 1_700_000_500, "Run the tests", []),
    ]
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def test_list_shows_each_session_in_brief(tmp_path: Path) -> None:
    path = chat_log(tmp_path / "chats.jsonl")
    result = runner.invoke(app, ["sessions", str(path), "--list", "--json"])
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert data["skipped"] == {}
    assert [
        (row["id"], row["started_at"], row["source"], row["messages"], row["calls"], row["failures"])
        for row in data["sessions"]
    ] == [
        ("s1", 1_700_000_000.0, "openai", 6, 2, 1),
        ("s2", 1_700_000_900.0, "openai", 4, 1, 0),
        ("s3", 1_700_000_500.0, "openai", 2, 0, 0),
    ]
    # The first substantive request, on one line: a compaction summary is not a request.
    assert data["sessions"][0]["first_request"] == "Fix the build please"
    assert {row["path"] for row in data["sessions"]} == {str(path)}


def test_list_table_fits_80_columns_and_never_cuts_an_id(tmp_path: Path) -> None:
    db = generate_sample_db(tmp_path / "state.db", sessions=12)
    result = runner.invoke(app, ["sessions", str(db), "--list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "12 sessions"
    assert max(len(line) for line in lines) <= 80
    for session in iter_sessions(db):
        row = next(line for line in lines if line.startswith(session.id))
        assert row.split()[-3:] == [str(session.message_count), *row.split()[-2:]]
    # Each session's first request sits on the line under it.
    first = next(iter(iter_sessions(db)))
    at = lines.index(next(line for line in lines if line.startswith(first.id)))
    assert lines[at + 1].strip().rstrip("…") in (first_request(first) or "")


def test_listing_judges_failures_with_the_outcome_rules() -> None:
    calls = (
        ToolCall("a", "terminal", {}),
        ToolCall("b", "terminal", {}),
        ToolCall("u", "check", {}, None, "user"),
    )
    session = Session(
        "x",
        "tau2-bench",
        (
            Message("assistant", None, calls[:2]),
            Message("tool", "fine", tool_call_id="a", error=True),  # the source's flag decides
            Message("tool", "Traceback (most recent call last):", tool_call_id="b"),
            Message("user", None, calls[2:]),
            Message("tool", "Error: not the agent's", tool_call_id="u"),
        ),
    )
    (row,) = list_sessions([session])
    assert (row.calls, row.failures, row.first_request) == (2, 2, None)


def test_latest_is_the_session_that_started_last(tmp_path: Path) -> None:
    path = chat_log(tmp_path / "chats.jsonl")
    assert find_session(path, "latest").id == "s2"
    assert resolve_session_id(path, "latest") == "s2"
    assert resolve_session_id(path, "s3") == "s3"
    result = runner.invoke(app, ["sessions", str(path), "--show", "latest", "--json"])
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["id"] == "s2"
    # Across several sources too.
    other = tmp_path / "later.jsonl"
    other.write_bytes(orjson.dumps({"id": "n1", "created": 1_800_000_000, "messages": []}) + b"\n")
    result = runner.invoke(app, ["sessions", str(path), str(other), "--show", "latest", "--json"])
    assert orjson.loads(result.stdout)["id"] == "n1"
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b'{"id": "z", "messages": "not a list"}\n')
    with pytest.raises(NotFoundError, match="no latest one"):
        find_session(empty, "latest")


def test_review_accepts_latest(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    path = chat_log(tmp_path / "chats.jsonl")
    fake_openai.script = [text("Nothing to keep.")]
    args = ["review", str(path), "--session", "latest", "--base-url", fake_openai.base_url, "--model", "m"]
    result = runner.invoke(app, [*args, "--memory"])
    assert result.exit_code == 0, result.output
    sent = orjson.dumps(fake_openai.chat_requests()[0]["messages"]).decode()
    assert "Tidy the README" in sent and "Fix the build" not in sent


def test_a_forced_format_that_reads_nothing_is_an_error(tmp_path: Path) -> None:
    db = generate_sample_db(tmp_path / "state.db", sessions=5)
    for command in (["sessions"], ["stats"], ["sessions", "--list"]):
        result = runner.invoke(app, [command[0], str(db), "--format", "openai", *command[1:]])
        assert result.exit_code == 2, (command, result.output)
        assert result.output.count("\n") == 1
        assert result.output.startswith(f"Error: Nothing in {db} could be read as openai: 0 sessions, ")
        assert "looks like hermes" in result.output
    # Forced on what it is, or detected, a source reads as before.
    assert runner.invoke(app, ["sessions", str(db), "--format", "hermes"]).exit_code == 0
    path = chat_log(tmp_path / "chats.jsonl")
    with pytest.raises(FormatMismatchError, match="could be read as sharegpt"):
        list(iter_sessions(path, "sharegpt"))
    assert len(list(iter_sessions(path, "openai"))) == 3

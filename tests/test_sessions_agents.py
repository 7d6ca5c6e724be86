"""Coding agents' histories (Claude Code, Codex CLI, OpenHands, SWE-agent) on real recorded sessions.

The fixtures under tests/fixtures/<format>/ are sessions other people recorded (each folder's NOTICE
names the repository, path, commit and licence). Every count the reader reports is checked against
an independent count made here with plain ``json``; malformed lines are the only made-up input.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kindling.cli.main import app
from kindling.sessions import ReadReport, Session, detect_format, iter_sessions

FIXTURES = Path(__file__).parent / "fixtures"
CLAUDE = FIXTURES / "claude-code"
KIRILL = (
    CLAUDE / "projects/-Users-kirilldubovitskiy-projects-handy-cli/400429ba-c1e1-4ef5-a7ec-fe40608df53b.jsonl"
)
CODEX = FIXTURES / "codex"
CODEX_LEGACY = FIXTURES / "codex-legacy"
runner = CliRunner()


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _failed_calls(sessions: list[Session]) -> int:
    return sum(1 for s in sessions for m in s.messages if m.role == "tool" and m.error)


def _read(source: Path, format: str | None = None) -> tuple[list[Session], ReadReport]:
    report = ReadReport()
    return list(iter_sessions(source, format, report=report)), report


# ------------------------------------------------------------------------- independent counts


def _count_claude(directory: Path) -> dict[str, Any]:
    sessions = calls = results = failures = compactions = notes = 0
    for path in sorted(directory.rglob("*.jsonl")):
        main_ids: set[str] = set()
        seen_calls: set[str] = set()
        for record in _lines(path):
            if record.get("type") not in ("user", "assistant"):
                continue
            if record.get("isSidechain"):
                sessions += record.get("parentUuid") is None  # a sub-agent starts here
            else:
                main_ids.add(record["sessionId"])
            content = record["message"]["content"]
            if record.get("isCompactSummary"):
                compactions += 1
                continue
            if isinstance(content, str):
                notes += content.startswith("[Request interrupted") or bool(record.get("isMeta"))
                continue
            for block in content:
                if block.get("type") == "tool_use":
                    calls += 1
                    seen_calls.add(block["id"])
                elif block.get("type") == "tool_result" and block["tool_use_id"] in seen_calls:
                    results += 1
                    failures += block.get("is_error") is True
                elif block.get("type") == "text" and record["type"] == "user":
                    notes += block["text"].startswith("[Request interrupted")
        sessions += len(main_ids)
    skipped = {"compaction_summary": compactions, "agent_note": notes}
    return {
        "sessions": sessions,
        "calls": calls,
        "results": results,
        "failures": failures,
        "skipped": skipped,
    }


def _count_codex(directory: Path) -> dict[str, Any]:
    sessions = calls = results = failures = notes = 0
    for path in sorted(directory.rglob("rollout-*.jsonl")):
        sessions += 1
        for record in _lines(path):
            if "payload" in record and record["type"] != "response_item":
                continue  # the current layout's other records; the older layout has bare items
            item = record.get("payload", record)
            kind = item.get("type")
            if kind in ("function_call", "custom_tool_call", "local_shell_call"):
                calls += 1
            elif kind in ("function_call_output", "custom_tool_call_output"):
                results += 1
                output = item["output"]
                if output.startswith("{"):
                    failures += json.loads(output)["metadata"]["exit_code"] != 0
                else:
                    failures += output.startswith("failed in sandbox")
            elif kind == "message" and item["role"] == "user":
                notes += item["content"][0]["text"].startswith("<environment_context>")
    return {
        "sessions": sessions,
        "calls": calls,
        "results": results,
        "failures": failures,
        "skipped": {"agent_note": notes},
    }


def _count_openhands(directory: Path) -> dict[str, Any]:
    sessions = calls = results = failures = 0
    for path in sorted(directory.glob("*.json")):
        sessions += 1
        call_ids: set[int] = set()
        for event in json.loads(path.read_text()):
            if "action" in event and "tool_call_metadata" in event:
                calls += 1
                call_ids.add(event["id"])
            elif "observation" in event and event.get("cause") in call_ids:
                call_ids.discard(event["cause"])
                results += 1
                code = event.get("extras", {}).get("metadata", {}).get("exit_code", 0)
                failures += event["observation"] in ("error", "user_rejected") or code != 0
    return {"sessions": sessions, "calls": calls, "results": results, "failures": failures, "skipped": {}}


def _count_swe_agent(directory: Path) -> dict[str, Any]:
    sessions = calls = results = 0
    for path in sorted(directory.glob("*.traj")):
        sessions += 1
        waiting = False
        for entry in json.loads(path.read_text())["history"]:
            if entry["role"] == "assistant":
                made = len(entry.get("tool_calls") or []) or bool(entry.get("action", "").strip())
                calls += made
                waiting = not entry.get("tool_calls") and made > 0
            elif entry["role"] == "tool" or (entry["role"] == "user" and waiting):
                results += 1
                waiting = False
    return {"sessions": sessions, "calls": calls, "results": results, "failures": 0, "skipped": {}}


@pytest.mark.parametrize(
    ("folder", "fmt", "count"),
    [
        (CLAUDE, "claude-code", _count_claude),
        (CODEX, "codex", _count_codex),
        (CODEX_LEGACY, "codex", _count_codex),
        (FIXTURES / "openhands", "openhands", _count_openhands),
        (FIXTURES / "swe-agent", "swe-agent", _count_swe_agent),
    ],
    ids=["claude-code", "codex", "codex-legacy", "openhands", "swe-agent"],
)
def test_counts_match_an_independent_count(folder: Path, fmt: str, count: Any) -> None:
    expected = count(folder)
    sessions, report = _read(folder)
    assert detect_format(folder) == fmt
    assert {s.source for s in sessions} == {fmt}
    assert report.sessions == len(sessions) == expected["sessions"]
    assert report.tool_calls == expected["calls"]
    assert report.tool_results == expected["results"]
    assert _failed_calls(sessions) == expected["failures"]
    assert dict(report.skipped) == {k: v for k, v in expected["skipped"].items() if v}
    # Every file read on its own gives the same sessions.
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "NOTICE"):
        assert detect_format(path) == fmt, path


def test_the_fixtures_hold_what_the_tests_need() -> None:
    # Failures, sub-agents and compaction are really in the data the counts above run on.
    claude, codex = _count_claude(CLAUDE), _count_codex(CODEX)
    assert claude["failures"] >= 1 and claude["skipped"]["compaction_summary"] == 1
    assert codex["failures"] >= 3
    assert _count_openhands(FIXTURES / "openhands")["calls"] >= 5


# ---------------------------------------------------------------------------------- Claude Code


def test_claude_code_sub_agents_are_sessions_linked_to_their_parent() -> None:
    sessions, _ = _read(KIRILL)
    main, *agents = sessions
    assert main.id == "400429ba-c1e1-4ef5-a7ec-fe40608df53b" and main.parent_id is None
    assert len(agents) == 2 and all(agent.parent_id == main.id for agent in agents)
    roots = [r for r in _lines(KIRILL) if r.get("isSidechain") and r.get("parentUuid") is None]
    assert [agent.messages[0].content for agent in agents] == [r["message"]["content"] for r in roots]
    # The Task call that started each sub-agent is in the parent, answered there.
    tasks = [c for m in main.messages for c in m.tool_calls if c.name == "Task"]
    assert len(tasks) == 2
    assert main.cwd == "/Users/kirilldubovitskiy/projects/handy-cli"
    assert main.model == "claude-opus-4-20250514"


def test_claude_code_compaction_and_notes_are_never_requests() -> None:
    sessions, report = _read(KIRILL)
    requests = [m.content or "" for s in sessions for m in s.messages if m.role == "user"]
    assert not any(text.startswith("This session is being continued") for text in requests)
    assert not any(
        "<system-reminder>" in text or text.startswith("[Request interrupted") for text in requests
    )
    assert report.skipped["compaction_summary"] == 1
    # Both halves of the compacted session are one session, in file order.
    main = sessions[0]
    texts = [m.content for m in main.messages if m.role == "user"]
    assert texts[0].startswith("implement what is requested in CLAUDE.md")
    assert any(text.startswith("It seems it has been stuck") for text in texts)  # after the compaction


def test_claude_code_thinking_is_reasoning_and_split_messages_are_one() -> None:
    sessions, _ = _read(KIRILL)
    main = sessions[0]
    thoughts = [m for m in main.messages if m.reasoning]
    raw = [r for r in _lines(KIRILL) if not r.get("isSidechain") and r["type"] == "assistant"]
    thinking = [b["thinking"] for r in raw for b in r["message"]["content"] if b["type"] == "thinking"]
    assert thinking and [t for m in thoughts for t in m.reasoning.split("\n") if t] == [
        line for t in thinking for line in t.split("\n") if line
    ]
    assistant_ids = {r["message"]["id"] for r in raw}
    assert len([m for m in main.messages if m.role == "assistant"]) == len(assistant_ids)
    # A failed Bash result is judged failed from its is_error flag.
    failed = [m for m in main.messages if m.error]
    assert [m.name for m in failed] == ["Bash"]


def test_claude_code_summaries_become_the_title_and_a_resumed_file_holds_two_sessions() -> None:
    path = (
        CLAUDE / "projects/-Users-steve-Develop-slopus-happy-cli/1bf1ead3-1c75-46a4-8d6b-5ab1af247819.jsonl"
    )
    sessions, _ = _read(path)
    ids = {r["sessionId"] for r in _lines(path) if "sessionId" in r}
    assert {s.id for s in sessions} == ids
    titled = [s for s in sessions if s.metadata.get("title")]
    summaries = [r["summary"] for r in _lines(path) if r["type"] == "summary"]
    assert titled and titled[0].metadata["title"] in summaries
    assert all(not (m.content or "").startswith(tuple(summaries)) for s in sessions for m in s.messages)


def test_a_claude_home_is_read_from_its_projects(tmp_path: Path) -> None:
    home = tmp_path / ".claude"
    shutil.copytree(CLAUDE / "projects", home / "projects")
    (home / "settings.json").write_text("{}")
    (home / "history.jsonl").write_text('{"display": "not a session"}\n')
    sessions, report = _read(home)
    expected = _count_claude(CLAUDE)
    assert len(sessions) == expected["sessions"] and report.skipped.get("file_without_sessions") is None


# --------------------------------------------------------------------------------------- Codex


def test_codex_both_layouts_keep_id_cwd_and_model() -> None:
    (current,), _ = _read(CODEX)
    meta = _lines(next(CODEX.rglob("*.jsonl")))[0]["payload"]
    assert current.id == meta["id"] and current.cwd == meta["cwd"]
    assert current.model == "gpt-5-codex"
    (legacy,), _ = _read(CODEX_LEGACY)
    header = _lines(next(CODEX_LEGACY.rglob("*.jsonl")))[0]
    assert legacy.id == header["id"] and legacy.metadata["git_branch"] == header["git"]["branch"]
    calls = [c for m in current.messages for c in m.tool_calls]
    assert {c.name for c in calls} == {"shell"} and all(
        isinstance(c.arguments["command"], list) for c in calls
    )
    # A shell output is read as its text; its exit code says whether it worked.
    outputs = [m for m in current.messages if m.role == "tool"]
    assert not any(m.content and m.content.startswith('{"output"') for m in outputs)
    assert all(m.error is not None for m in outputs)


def test_a_codex_home_is_read_from_its_sessions(tmp_path: Path) -> None:
    home = tmp_path / ".codex"
    shutil.copytree(CODEX / "sessions", home / "sessions")
    shutil.copytree(CODEX_LEGACY / "sessions", home / "archived_sessions")
    (home / "history.jsonl").write_text('{"session_id": "x", "ts": 1, "text": "hi"}\n')
    sessions, _ = _read(home)
    assert detect_format(home) == "codex" and len(sessions) == 2


# ------------------------------------------------------------------------------- bad lines


@pytest.mark.parametrize("source", [KIRILL, next(CODEX.rglob("*.jsonl"))], ids=["claude-code", "codex"])
def test_malformed_lines_are_counted_by_reason_and_skipped(source: Path, tmp_path: Path) -> None:
    clean_sessions, clean = _read(source)
    damaged = tmp_path / source.name
    lines = source.read_bytes().splitlines(keepends=True)
    damaged.write_bytes(
        b"".join(lines[:3])
        + b"{not json\n"
        + b"[1, 2]\n"
        + b"\xff\xfe\n"
        + b"".join(lines[3:])
        + b'{"type": "us'
    )
    sessions, report = _read(damaged)
    assert report.skipped - clean.skipped == {
        "malformed_json": 1,
        "not_an_object": 1,
        "invalid_utf8": 1,
        "truncated_record": 1,
    }
    assert [s.id for s in sessions] == [s.id for s in clean_sessions]
    assert report.tool_calls == clean.tool_calls and report.tool_results == clean.tool_results


# ------------------------------------------------------------------------------ end to end


@pytest.mark.parametrize(
    "folder",
    [CLAUDE, CODEX, CODEX_LEGACY, FIXTURES / "openhands", FIXTURES / "swe-agent"],
    ids=["claude-code", "codex", "codex-legacy", "openhands", "swe-agent"],
)
def test_sessions_stats_build_and_warm_on_each_format(folder: Path, isolated_homes: Path) -> None:
    listed = runner.invoke(app, ["sessions", str(folder), "--json"])
    assert listed.exit_code == 0, listed.output
    counted = json.loads(listed.output)
    stats = runner.invoke(app, ["stats", str(folder), "--json"])
    assert stats.exit_code == 0, stats.output
    data = json.loads(stats.output)
    assert data["sessions"] == counted["sessions"] and data["tool_calls"] == counted["tool_calls"]
    built = runner.invoke(app, ["build", "agent", str(folder), "--min-messages", "2", "--json"])
    assert built.exit_code == 0, built.output
    template = json.loads(built.output)["template"]
    assert template["examples"]
    warmed = runner.invoke(app, ["warm", "--auto", "--task", "fix the failing test", "--json"])
    assert warmed.exit_code == 0, warmed.output
    assert json.loads(warmed.output)["template"] == "agent"


def test_sessions_without_data_suggests_the_sample_and_the_agent_homes(
    isolated_homes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(isolated_homes))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    bare = runner.invoke(app, ["sessions"])
    assert bare.exit_code == 2
    assert "kindling sample" in bare.output and "kindling sessions PATH" in bare.output
    shutil.copytree(CLAUDE / "projects", isolated_homes / ".claude" / "projects")
    found = runner.invoke(app, ["sessions"])
    assert found.exit_code == 2
    assert f"kindling sessions {isolated_homes / '.claude'}" in " ".join(found.output.split())


def test_a_plain_list_of_openai_messages_is_a_session(tmp_path: Path) -> None:
    # An OpenAI-format conversation taken from a real run (OpenHands' basic trajectory, above),
    # written as the plain message list an OpenAI client keeps, as a document and as JSONL.
    (session,), _ = _read(FIXTURES / "openhands" / "basic.json")
    messages = [m.as_dict() for m in session.messages]
    document = tmp_path / "chat.json"
    document.write_text(json.dumps(messages, indent=2))
    lines = tmp_path / "chats.jsonl"
    lines.write_text(json.dumps(messages) + "\n" + json.dumps(messages[:2]) + "\n")
    (read,), report = _read(document)
    assert detect_format(document) == "openai" and report.tool_calls == 2 and report.tool_results == 1
    assert [m.as_dict() for m in read.messages] == messages
    read_lines, report = _read(lines)
    assert detect_format(lines) == "openai" and len(read_lines) == 2 and report.skipped == {}


def test_a_folder_is_read_with_its_subfolders(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "swe-agent", tmp_path / "runs" / "a" / "b")
    shutil.copytree(FIXTURES / "openhands", tmp_path / "runs" / "c")
    sessions, _ = _read(tmp_path / "runs")
    assert sorted({s.source for s in sessions}) == ["openhands", "swe-agent"] and len(sessions) == 6
    result = runner.invoke(app, ["sessions", str(tmp_path / "runs"), "--json"])
    assert json.loads(result.output)["sources"][0]["format"] == "openhands+swe-agent"


def test_make_run_uses_the_coding_agents_sessions_when_hermes_has_none(tmp_path: Path) -> None:
    import os
    import subprocess

    root = Path(__file__).parent.parent
    home = tmp_path / "home"
    shutil.copytree(CLAUDE / "projects", home / ".claude" / "projects")
    shutil.copytree(CODEX / "sessions", home / ".codex" / "sessions")
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "KINDLING_HERMES_HOME")
        },
        "HOME": str(home),
        "HERMES_HOME": str(tmp_path / "hermes"),
        "KINDLING_HOME": str(tmp_path / "kindling"),
        "COLUMNS": "100",
    }
    # -o: the virtual environment is taken as installed (the test runs inside it).
    done = subprocess.run(
        ["make", "-s", "-o", ".venv/.run-installed", "run", "TASK=fix the failing test"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert "No Hermes sessions" in first and str(home / ".claude") in first and str(home / ".codex") in first
    assert "bundled sample" not in done.stdout
    assert (tmp_path / "kindling" / "templates").is_dir()

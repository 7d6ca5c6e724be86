"""``kindling sessions`` and ``kindling sample`` through Typer's CliRunner."""

from __future__ import annotations

import contextlib
import sqlite3
from collections import Counter
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kindling.cli.main import app
from kindling.sessions import ReadReport, generate_sample_db, iter_sessions, sample_info
from kindling.sessions.sample import SAMPLE_VERSION

runner = CliRunner()


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_sample_db(tmp_path_factory.mktemp("cli") / "state.db", sessions=30, seed=11)


def test_sessions_json_counts_match_the_reader(sample_db: Path, tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_bytes(
        orjson.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x"}]})
        + b"\n{oops\n"
    )
    result = runner.invoke(app, ["sessions", str(sample_db), str(chat), "--json"])
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    report = ReadReport()
    list(iter_sessions(sample_db, report=report))
    first, second = data["sources"]
    assert {
        k: first[k]
        for k in ("sessions", "messages", "tool_calls", "tool_results", "user_tool_calls", "skipped")
    } == report.as_dict()
    assert (first["format"], second["format"]) == ("hermes", "openai")
    assert second["skipped"] == {"orphan_tool_result": 1, "malformed_json": 1}
    assert data["sessions"] == report.sessions + 1
    assert data["messages"] == report.messages + 1
    assert data["skipped"] == dict(
        sorted((report.skipped + Counter({"malformed_json": 1, "orphan_tool_result": 1})).items())
    )


def test_simulated_user_calls_are_not_counted_as_the_agents(tmp_path: Path) -> None:
    results = tmp_path / "tau2.json"
    call = {"id": "u1", "name": "toggle_airplane_mode", "arguments": {}, "requestor": "user"}
    agent_call = {"id": "a1", "name": "get_customer", "arguments": {"phone": "1"}, "requestor": "assistant"}
    messages = [
        {"role": "user", "content": "I'll toggle it.", "tool_calls": [call]},
        {"role": "tool", "id": "u1", "content": "OFF", "requestor": "user", "error": False},
        {"role": "assistant", "content": None, "tool_calls": [agent_call]},
        {"role": "tool", "id": "a1", "content": "{}", "requestor": "assistant", "error": False},
    ]
    results.write_bytes(
        orjson.dumps({"info": {}, "tasks": [], "simulations": [{"id": "s1", "messages": messages}]})
    )
    data = orjson.loads(runner.invoke(app, ["sessions", str(results), "--json"]).stdout)
    assert (data["tool_calls"], data["tool_results"], data["user_tool_calls"]) == (1, 1, 1)
    assert data["sources"][0]["user_tool_calls"] == 1
    table = runner.invoke(app, ["sessions", str(results)], env={"COLUMNS": "200"})
    assert "Tool calls made by a simulated user (not the agent's): 1" in table.stdout


def test_sessions_table_for_people(sample_db: Path) -> None:
    result = runner.invoke(app, ["sessions", str(sample_db)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Session sources" in result.stdout and "hermes" in result.stdout
    assert "30" in result.stdout
    # The sample has nothing malformed: only Hermes's compaction summaries are left out, and said so.
    report = ReadReport()
    list(iter_sessions(sample_db, report=report))
    assert set(report.skipped) <= {"compaction_summary"}
    for reason, count in report.skipped.items():
        assert f"{reason}: {count}" in result.stdout


def test_sessions_defaults_to_hermes_home(sample_db: Path, isolated_homes: Path) -> None:
    home = isolated_homes / "hermes"
    home.mkdir(parents=True)
    (home / "state.db").write_bytes(sample_db.read_bytes())
    result = runner.invoke(app, ["sessions", "--json"])
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["sessions"] == 30


def test_show_prints_one_session_readably(sample_db: Path) -> None:
    session = next(s for s in iter_sessions(sample_db) if any(m.tool_calls for m in s.messages))
    result = runner.invoke(app, ["sessions", str(sample_db), "--show", session.id], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"Session {session.id}" in result.stdout
    call = next(c for m in session.messages for c in m.tool_calls)
    assert f"→ {call.name}(" in result.stdout and f"id={call.id}" in result.stdout
    as_json = runner.invoke(app, ["sessions", str(sample_db), "--show", session.id, "--json"])
    data = orjson.loads(as_json.stdout)
    assert data["id"] == session.id and len(data["messages"]) == session.message_count
    assert data["messages"][0]["role"] == "user"


def test_show_unknown_id_is_one_error_line(sample_db: Path) -> None:
    result = runner.invoke(app, ["sessions", str(sample_db), "--show", "nope"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [f"Error: No session 'nope' in {sample_db}."]


def test_unopenable_sources_exit_2_with_one_line(tmp_path: Path) -> None:
    corrupt = tmp_path / "state.db"
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\x00\xff" * 400)
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    for args, expected in (
        ([str(tmp_path / "missing.db")], "no such file"),
        ([str(corrupt)], "not a valid SQLite database"),
        ([str(empty_dir)], "not a Hermes home"),
        ([str(corrupt), "--format", "yaml"], "Unknown format 'yaml'"),
    ):
        result = runner.invoke(app, ["sessions", *args])
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and expected in lines[0], lines
        assert "Traceback" not in result.output


def test_sample_writes_keeps_and_forces(tmp_path: Path) -> None:
    target = tmp_path / "s" / "state.db"
    first = runner.invoke(app, ["sample", str(target), "--sessions", "12", "--seed", "2"])
    assert first.exit_code == 0, first.output
    assert first.stdout.strip() == str(target)
    assert "Wrote 12 sample sessions" in first.stderr
    kept = runner.invoke(app, ["sample", str(target), "--sessions", "50", "--json"])
    assert orjson.loads(kept.stdout) == {"path": str(target), "created": False, "sessions": 12, "seed": 2}
    forced = runner.invoke(app, ["sample", str(target), "--sessions", "5", "--force", "--quiet"])
    assert forced.exit_code == 0 and forced.stdout.strip() == str(target) and forced.stderr == ""
    assert sum(1 for _ in iter_sessions(target)) == 5


def test_sample_of_an_older_version_is_written_again(tmp_path: Path) -> None:
    # `make run` keeps its sample between runs: one an older kindling wrote is replaced, keeping
    # its sessions and seed, so the demo shows what this version generates.
    target = tmp_path / "state.db"
    assert runner.invoke(app, ["sample", str(target), "--sessions", "6", "--seed", "3"]).exit_code == 0
    with contextlib.closing(sqlite3.connect(target)) as conn, conn:
        conn.execute("UPDATE kindling_sample SET value = '1' WHERE key = 'version'")
    again = runner.invoke(app, ["sample", str(target), "--sessions", "50", "--json"])
    assert again.exit_code == 0, again.output
    assert orjson.loads(again.stdout) == {"path": str(target), "created": True, "sessions": 6, "seed": 3}
    assert sample_info(target) == {"version": SAMPLE_VERSION, "seed": "3", "sessions": "6"}
    said = runner.invoke(app, ["sample", str(target)])
    assert "kept it" in said.stderr
    with contextlib.closing(sqlite3.connect(target)) as conn, conn:
        conn.execute("UPDATE kindling_sample SET value = '1' WHERE key = 'version'")
    said = runner.invoke(app, ["sample", str(target)])
    assert (
        "older kindling (sample version 1)" in said.stderr
        and sample_info(target)["version"] == SAMPLE_VERSION
    )


def test_sample_never_overwrites_a_real_database(tmp_path: Path) -> None:
    real = tmp_path / "state.db"
    sqlite3.connect(real).execute("CREATE TABLE sessions (id TEXT)").connection.close()
    for extra in ([], ["--force"]):
        result = runner.invoke(app, ["sample", str(real), *extra])
        assert result.exit_code == 1
        assert "not a kindling sample" in result.stderr


def test_sample_default_path(isolated_homes: Path) -> None:
    result = runner.invoke(app, ["sample", "--sessions", "2", "--quiet"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(isolated_homes / "kindling" / "sample" / "state.db")


def test_help_explains_commands() -> None:
    for command in ("sessions", "sample"):
        result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0
        assert "Examples" in result.stdout


def test_sessions_table_breaks_long_paths_between_names_at_80_columns(
    sample_db: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "recorded-runs" / "customer-service" / "november-batch" / "agent-traces"
    folder.mkdir(parents=True)
    source = folder / "hermes-state.db"
    source.write_bytes(sample_db.read_bytes())
    result = runner.invoke(app, ["sessions", str(source), str(source)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    # Every folder and file name shows whole on some line: none is split mid-word.
    for name in ("recorded-runs", "customer-service", "november-batch", "agent-traces", "hermes-state.db"):
        assert any(name in line for line in lines), (name, result.output)


def test_break_path_breaks_only_after_slashes() -> None:
    from kindling.cli.common import break_path

    path = "/tmp/some/really/long/directory/path/for/testing/output/state.db"
    broken = break_path(path, 20)
    assert broken.replace("\n", "") == path
    assert all(len(line) <= 20 for line in broken.splitlines())
    assert all(line.endswith("/") for line in broken.splitlines()[:-1])
    assert break_path("short.db", 20) == "short.db"
    # A name wider than the column breaks after its own separators, never mid-word.
    name = "a-single-very-long-file-name.jsonl"
    assert break_path(name, 10).splitlines() == ["a-single-", "very-long-", "file-name.", "jsonl"]
    assert break_path("averyveryverylongname", 10) == "averyveryverylongname"  # nothing to break at


def test_sessions_table_never_splits_a_long_results_file_name_mid_word(
    sample_db: Path, tmp_path: Path
) -> None:
    # tau-bench results files have names far wider than the column (61 characters here).
    folder = tmp_path / "tau-bench-avaljotsingh"
    folder.mkdir()
    source = folder / "tool-calling-none-0.1_range_0-100_user-none-llm_06232025.db"
    source.write_bytes(sample_db.read_bytes())
    result = runner.invoke(app, ["sessions", str(source)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    for word in ("tau-", "bench-", "avaljotsingh/", "calling-", "none-", "range_", "06232025."):
        assert any(word in line for line in lines), (word, result.output)

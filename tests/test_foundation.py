"""The package skeleton: public API, config, errors, atomic files, the fake LLM server."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from typer.testing import CliRunner

import kindling
from fake_openai import FakeOpenAI, text, tool_call
from kindling import config
from kindling.cli.main import app
from kindling.errors import ConfigError, KindlingError, SourceError
from kindling.fileio import file_lock, write_atomic


def test_homes_follow_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KINDLING_HOME", str(tmp_path / "k"))
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "h"))
    assert config.kindling_home() == tmp_path / "k"
    assert config.hermes_state_db() == tmp_path / "h" / "state.db"
    monkeypatch.setenv("KINDLING_HERMES_HOME", str(tmp_path / "kh"))
    assert config.hermes_home() == tmp_path / "kh"


def test_env_flag_rejects_garbage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KINDLING_X", "maybe")
    with pytest.raises(ConfigError, match="KINDLING_X"):
        config.env_flag("KINDLING_X")


def test_errors_share_one_base() -> None:
    err = SourceError("Cannot open x: no such file.", path="x")
    assert isinstance(err, KindlingError)
    assert str(err) == "Cannot open x: no such file."
    assert err.exit_code == 2


def test_write_atomic_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "f.json"
    write_atomic(target, "one")
    with file_lock(target):
        write_atomic(target, b"two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_cli_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"kindling {kindling.__version__}"


def test_fake_openai_replays_script(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [
        tool_call("memory", {"action": "add"}, "call_1"),
        {"fault": "status", "status": 500},
    ]
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="k", max_retries=0)
    first = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert first.choices[0].message.tool_calls[0].id == "call_1"  # type: ignore[index]
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
    fake_openai.default = text("bye")
    third = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "3"}])
    assert third.choices[0].message.content == "bye"
    assert [r["messages"][0]["content"] for r in fake_openai.chat_requests()] == ["hi", "again", "3"]


@pytest.mark.postgres
def test_pg_url_is_a_fresh_database(pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)


def test_help_paragraphs_rewrap_to_the_terminal() -> None:
    # Docstring line breaks must not survive into --help: a narrow terminal would show ragged lines.
    result = CliRunner().invoke(app, ["stats", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "judged ok, failed or unknown by the outcome rules" in " ".join(result.output.split())
    paragraph = next(line for line in result.output.splitlines() if "judged ok" in line)
    assert "Sessions are grouped by length" in paragraph

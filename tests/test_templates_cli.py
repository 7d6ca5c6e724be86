"""CLI: kindling build, templates list/show/delete/export/import/path, warm, inject."""

from __future__ import annotations

import itertools
import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kindling.cli.main import app
from kindling.config import templates_dir
from kindling.sessions import generate_sample_db
from kindling.templates import JsonDirStore, Template, open_store
from kindling.templates.model import LEGACY_KEYS
from kindling.warmup import validate_conversation

runner = CliRunner()


def run(*args: str, input: str | None = None) -> Any:
    return runner.invoke(app, list(args), input=input)


@pytest.fixture
def sample_db(tmp_path: Path) -> Path:
    return generate_sample_db(tmp_path / "state.db", sessions=60, seed=3)


@pytest.fixture
def built(sample_db: Path) -> Path:
    result = run("build", "sample", str(sample_db), "--tag", "demo", "--tag", "python", "--json")
    assert result.exit_code == 0, result.output
    return sample_db


def test_build_from_sample_data(built: Path) -> None:
    store = JsonDirStore(templates_dir())
    template = store.get("sample")
    assert template.tags == ["demo", "python"]
    assert template.examples
    assert template.task_type in {"code", "file", "research", "terminal", "mixed"}
    assert template.source_session_ids
    # Building again makes version 2 and keeps version 1.
    result = run("build", "sample", str(built), "--task-type", "code", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["template"]["version"] == 2
    assert data["read"]["sessions"] == 60
    assert store.versions("sample") == [1, 2]
    assert store.get("sample").task_type == "code"


def test_build_defaults_to_hermes_state_db(sample_db: Path, isolated_homes: Path) -> None:
    hermes = isolated_homes / "hermes"
    hermes.mkdir(parents=True)
    sample_db.rename(hermes / "state.db")
    result = run("build", "default")
    assert result.exit_code == 0, result.output
    assert "Saved template default v1" in result.output


def test_build_errors_are_one_clear_line(sample_db: Path, tmp_path: Path) -> None:
    result = run("build", "../evil", str(sample_db))
    assert result.exit_code == 2
    assert "Error:" in result.output and "letters, digits" in result.output
    result = run("build", "x", str(tmp_path / "missing.db"))
    assert result.exit_code != 0
    assert "Error:" in result.output
    result = run("build", "typo", str(sample_db), "--task-type", "cooking")
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.output.startswith("Error:") and "task_type must be one of" in result.output
    assert "Traceback" not in result.output
    assert not JsonDirStore(templates_dir()).exists("typo")
    result = run("build", "nothing", str(sample_db), "--min-messages", "100000")
    assert result.exit_code == 1
    assert "No examples" in result.output


def test_templates_list_show_path(built: Path) -> None:
    result = run("templates", "list", "--json")
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    assert [t["name"] for t in listed["templates"]] == ["sample"]
    assert listed["problems"] == []
    table = run("templates", "list")
    assert "sample" in table.output
    shown = json.loads(run("templates", "show", "sample", "--json").output)
    assert shown["versions"] == [1]
    assert len(shown["examples"]) == listed["templates"][0]["examples"]
    assert "examples" in run("templates", "show", "sample").output
    assert run("templates", "path").output.strip() == str(templates_dir())
    assert json.loads(run("templates", "path", "--json").output)["kind"] == "json"
    missing = run("templates", "show", "nope")
    assert missing.exit_code == 1
    assert "does not exist" in missing.output


def test_bare_templates_lists_them(built: Path) -> None:
    assert run("templates").output == run("templates", "list").output
    assert json.loads(run("templates", "--json").output) == json.loads(
        run("templates", "list", "--json").output
    )
    assert "Usage" in run("templates", "--help").output
    # Options of the bare listing belong after a command's name when there is one.
    misplaced = run("templates", "--json", "show", "sample")
    assert misplaced.exit_code == 1 and "after the command" in misplaced.output


def test_list_never_cuts_a_value_at_80_columns(sample_db: Path) -> None:
    name = "customer-support-refunds-and-exchanges"
    assert run("build", name, str(sample_db), "--tag", "support", "--tag", "billing").exit_code == 0
    for columns in ("80", "200"):
        result = runner.invoke(app, ["templates", "list"], env={"COLUMNS": columns})
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert "…" not in result.output and max(len(line) for line in lines) <= int(columns)
        updated = JsonDirStore(templates_dir()).get(name).updated_at
        for value in (name, "support, billing", updated):
            assert any(value in line for line in lines), (columns, value, result.output)


def test_show_prints_every_example_whole_at_80_columns(built: Path) -> None:
    """Arguments used to wrap a few characters a line in a five-column table, and were cut at 80."""
    result = runner.invoke(app, ["templates", "show", "sample"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    examples = json.loads(run("templates", "show", "sample", "--json").output)["examples"]
    lines = result.output.splitlines()
    shown = [line.split("arguments", 1)[1].strip() for line in lines if line.startswith("   arguments ")]
    assert len(shown) == len(examples)
    for line, example in zip(shown, examples, strict=True):
        # Each example's arguments are on one line, as JSON a reader can copy.
        assert json.loads(line) == example["arguments"]
    requests = [line.split("request", 1)[1].strip() for line in lines if line.startswith("   request ")]
    assert requests == [e["context"] or "-" for e in examples]


def test_building_over_a_corrupt_file_says_so_and_keeps_a_copy(built: Path) -> None:
    (templates_dir() / "sample.json").write_text("{half")
    result = run("build", "sample", str(built))
    assert result.exit_code == 0, result.output
    assert "not valid JSON" in result.stderr and "A copy was kept at" in result.stderr
    kept = list((templates_dir() / "sample.versions").glob("corrupt-*.json"))
    assert [p.read_text() for p in kept] == ["{half"]


def test_templates_list_reports_corrupt_files(built: Path) -> None:
    (templates_dir() / "broken.json").write_text("{not json")
    result = run("templates", "list", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert [t["name"] for t in data["templates"]] == ["sample"]
    assert data["problems"][0]["location"].endswith("broken.json")


def test_a_corrupt_template_is_reported_once_by_list_and_by_auto_warm(built: Path) -> None:
    (templates_dir() / "broken.json").write_text("{not json")
    # A real process: under pytest the log goes to pytest's handler, on a terminal to stderr.
    for args in (["templates", "list"], ["warm", "--auto", "--task", "run the tests", "--json"]):
        done = subprocess.run(
            [sys.executable, "-m", "kindling", *args], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.count("broken.json") == 1, done.stderr
        assert done.stderr.startswith("Skipped") and "not valid JSON" in done.stderr
        assert done.stderr.count("\n") == 1  # one line, not wrapped
    assert json.loads(done.stdout)["template"] == "sample"


@pytest.mark.parametrize("fmt", ["warm_sessions", "session-templates"])
def test_export_legacy_and_import_back(built: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"{fmt}.json"
    result = run("templates", "export", "sample", "--format", fmt, "--output", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    top, example_keys = LEGACY_KEYS[fmt]
    assert tuple(data) == top
    assert all(tuple(e) == example_keys for e in data["examples"])
    stdout = run("templates", "export", "sample", "--format", fmt)
    assert json.loads(stdout.output) == data
    imported = run("templates", "import", str(out), "--name", "copy", "--json")
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.output)["imported"][0]["name"] == "copy"
    assert len(JsonDirStore(templates_dir()).get("copy").examples) == len(data["examples"])


def test_import_skips_bad_files_and_imports_the_rest(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps({"name": "good", "examples": [{"tool_name": "t", "result": "r", "success": True}]})
    )
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    unsafe = tmp_path / "unsafe.json"
    unsafe.write_text(json.dumps({"name": "../../etc", "examples": []}))
    missing = tmp_path / "missing.json"
    result = run("templates", "import", str(good), str(bad), str(unsafe), str(missing), "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [r["name"] for r in data["imported"]] == ["good"]
    errors = {Path(r["file"]).name: r["error"] for r in data["failed"]}
    assert sorted(errors) == ["bad.json", "missing.json", "unsafe.json"]
    assert errors["missing.json"] == f"Cannot read {missing}: No such file or directory."
    assert "not valid JSON" in errors["bad.json"]
    assert "letters, digits" in errors["unsafe.json"]


def test_warm_at_80_columns_keeps_every_call_and_result_copyable_json(built: Path) -> None:
    result = runner.invoke(
        app, ["warm", "sample", "--task", "fix the failing parser test", "--no-record"], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    calls = [line for line in lines if line.startswith("→ ")]
    assert calls and any(len(line) > 80 for line in lines)  # long values stay on one line
    for line in calls:  # → name({arguments})  [id]
        json.loads(line[line.index("(") + 1 : line.rindex(")  [")])
    after_tool = [lines[i + 1] for i, line in enumerate(lines[:-1]) if line == "tool"]
    assert after_tool
    for line in after_tool:
        if line.startswith("{"):
            json.loads(line)


def test_delete(built: Path) -> None:
    assert run("templates", "delete", "sample").exit_code == 1  # no confirmation on empty stdin
    assert run("templates", "delete", "sample", "--yes").exit_code == 0
    assert json.loads(run("templates", "list", "--json").output)["templates"] == []
    assert run("templates", "delete", "sample", "--yes").exit_code == 1


def test_warm_prints_the_conversation_and_json(built: Path) -> None:
    text = run("warm", "sample", "--task", "fix the failing parser test", "--budget", "800")
    assert text.exit_code == 0, text.output
    assert "Template sample v1" in text.output
    assert "→" in text.output
    result = run("warm", "--auto", "--task", "fix the failing parser test", "--budget", "800", "--json")
    data = json.loads(result.output)
    assert data["template"] == "sample"
    assert 0 < data["estimated_tokens"] <= 800
    validate_conversation(data["messages"], strict_ids=True)
    assert JsonDirStore(templates_dir()).get("sample").usage_count == 2
    run("warm", "sample", "--task", "x", "--no-record", "--json")
    assert JsonDirStore(templates_dir()).get("sample").usage_count == 2


def test_warm_closed_style_and_anthropic_format(built: Path) -> None:
    data = json.loads(
        run(
            "warm",
            "sample",
            "--task",
            "search the web",
            "--style",
            "closed",
            "--format",
            "anthropic",
            "--json",
        ).output
    )
    roles = [m["role"] for m in data["messages"]]
    assert roles[0] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles))
    bad = run("warm", "sample", "--task", "x", "--style", "pairs")
    assert bad.exit_code == 1
    assert "style" in bad.output
    both = run("warm", "sample", "--auto", "--task", "x")
    assert both.exit_code == 1


def test_inject_reads_stdin(built: Path) -> None:
    conversation = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing parser test"},
    ]
    result = run("inject", "--auto", "--budget", "600", input=json.dumps(conversation))
    assert result.exit_code == 0, result.output
    merged = json.loads(result.output)
    assert merged[0] == conversation[0]
    assert merged[-1] == conversation[-1]
    assert len(merged) > 2
    validate_conversation(merged)
    wrapped = run("inject", "sample", input=json.dumps({"model": "m", "messages": conversation}))
    assert json.loads(wrapped.output)["model"] == "m"
    anthropic = json.loads(
        run("inject", "sample", "--format", "anthropic", input=json.dumps(conversation)).output
    )
    assert anthropic["system"] == "You are a coding agent."
    broken = run("inject", "sample", input="{nope")
    assert broken.exit_code == 1
    assert "not valid JSON" in broken.output
    unanswered = [{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "t"}}]}]
    assert "never answered" in run("inject", "sample", input=json.dumps(unanswered)).output


def test_inject_on_a_terminal_says_what_it_needs_instead_of_waiting(built: Path) -> None:
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kindling", "inject", "sample"],
            stdin=secondary,
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        os.close(primary)
        os.close(secondary)
    assert done.returncode == 1
    assert "reads the conversation on stdin" in done.stderr


def test_store_option_uses_sqlite(sample_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    assert run("build", "sql", str(sample_db), "--store", str(db)).exit_code == 0
    assert [t.name for t in open_store(db).list()] == ["sql"]
    data = json.loads(run("templates", "path", "--store", str(db), "--json").output)
    assert data == {"kind": "sql", "location": str(db)}
    open_store(db).save(Template(name="extra"))
    listed = json.loads(run("templates", "list", "--store", str(db), "--json").output)
    assert [t["name"] for t in listed["templates"]] == ["extra", "sql"]


@pytest.mark.postgres
def test_build_and_warm_on_postgresql(sample_db: Path, pg_url: str) -> None:
    assert run("build", "pg", str(sample_db), "--store", pg_url, "--tag", "sql").exit_code == 0
    data = json.loads(run("warm", "--auto", "--task", "run the tests", "--store", pg_url, "--json").output)
    assert data["template"] == "pg"
    validate_conversation(data["messages"], strict_ids=True)
    shown = json.loads(run("templates", "show", "pg", "--store", pg_url, "--json").output)
    assert shown["usage_count"] == 1
    assert shown["tags"] == ["sql"]
    assert json.loads(run("templates", "path", "--store", pg_url, "--json").output)["kind"] == "sql"


def test_build_reports_skips_as_words_not_a_dict(sample_db: Path, tmp_path: Path) -> None:
    # A ShareGPT line that is not JSON is skipped and named in the summary line.
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"conversations": [{"from": "human", "value": "hi"}]}\nnot json\n', encoding="utf-8")
    result = run("build", "skips", str(sample_db), str(chat))
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("Read "))
    assert "skipped " in line and "{" not in line and "'" not in line

"""``kindling cron`` through Typer's CliRunner: a thin client over the same stores and tick."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from fake_openai import FakeOpenAI, text
from kindling.cli.main import app
from kindling.cron.jobs import JsonJobStore, SqlJobStore, default_jobs_path

runner = CliRunner()


def _invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["cron", *args])
    return result.exit_code, result.output


def _add(fake: FakeOpenAI, name: str = "report", *extra: str) -> dict[str, Any]:
    code, out = _invoke(
        "add",
        "every 1h",
        "--name",
        name,
        "--prompt",
        "Write the report.",
        "--model",
        "fake-model",
        "--base-url",
        fake.base_url,
        "--context-length",
        "100000",
        "--json",
        *extra,
    )
    assert code == 0, out
    return json.loads(out)


def _add_then_shrink_the_window(fake: FakeOpenAI) -> None:
    """Add job 'small' while its endpoint reports a large window, then shrink the window under it."""
    fake.models = [{"id": "tiny", "context_length": 128_000}]
    code, out = _invoke(
        "add", "every 1d", "--name", "small", "--prompt", "x", "--model", "tiny", "--base-url", fake.base_url
    )
    assert code == 0, out
    fake.models = [{"id": "tiny", "context_length": 2048}]


def _make_due(ref: str, store: JsonJobStore | SqlJobStore | None = None) -> None:
    store = store or JsonJobStore()
    store.update(ref, {"next_run_at": datetime.now(timezone.utc) - timedelta(minutes=1)})


def test_add_list_pause_resume_remove(fake_openai: FakeOpenAI) -> None:
    job = _add(fake_openai)
    assert job["kind"] == "prompt" and job["schedule"] == "every 1h"
    assert default_jobs_path().exists()

    code, out = _invoke("list", "--json")
    assert code == 0
    assert [j["name"] for j in json.loads(out)] == ["report"]
    code, out = _invoke("list")
    assert code == 0 and "report" in out and "UTC" in out

    assert _invoke("pause", "report")[0] == 0
    assert JsonJobStore().get("report").enabled is False
    code, out = _invoke("list")
    assert "paused" in out
    code, out = _invoke("resume", job["id"])
    assert code == 0 and "Resumed" in out
    assert JsonJobStore().get("report").enabled is True

    code, out = _invoke("remove", "report")
    assert code == 0 and "Removed" in out
    assert json.loads(_invoke("list", "--json")[1]) == []


def test_tick_runs_due_jobs_and_prints_json(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [text("Tick output here.")]
    job = _add(fake_openai)
    code, out = _invoke("tick", "--json")
    assert code == 0 and json.loads(out)["runs"] == []
    _make_due(job["id"])
    code, out = _invoke("tick", "--json")
    assert code == 0, out
    [run] = json.loads(out)["runs"]
    assert run["status"] == "ok" and run["job_id"] == job["id"]
    assert "Tick output here." in Path(run["output"]).read_text(encoding="utf-8")
    code, out = _invoke("tick")
    assert code == 0 and "No jobs due." in out


def test_run_now_prints_the_result_and_fails_on_blocked(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [text("Manual run.")]
    _add(fake_openai)
    code, out = _invoke("run", "report")
    assert code == 0, out
    assert "report" in out and "ok" in out
    _add_then_shrink_the_window(fake_openai)
    code, out = _invoke("run", "small", "--json")
    assert code == 1
    assert json.loads(out)["status"] == "blocked"


def test_status_and_path(fake_openai: FakeOpenAI) -> None:
    _add(fake_openai)
    code, out = _invoke("status", "--json")
    assert code == 0
    status = json.loads(out)
    assert status["jobs"] == 1 and status["next"]["name"] == "report"
    code, out = _invoke("status")
    assert code == 0 and "next: report" in out
    code, out = _invoke("path", "--json")
    assert code == 0
    paths = json.loads(out)
    assert paths["jobs"] == str(default_jobs_path())
    assert paths["output"].endswith("cron/output")


def test_daemon_with_max_ticks(fake_openai: FakeOpenAI) -> None:
    job = _add(fake_openai)
    _make_due(job["id"])
    code, out = _invoke("daemon", "--interval", "1", "--max-ticks", "1")
    assert code == 0, out
    assert "report" in out and "ok" in out
    assert JsonJobStore().get(job["id"]).last_status == "ok"


def test_sqlite_store_through_db_option(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    db = str(tmp_path / "jobs.db")
    _add(fake_openai, "sqljob", "--db", db)
    assert not default_jobs_path().exists()
    store = SqlJobStore(db)
    assert store.get("sqljob").kind == "prompt"
    _make_due("sqljob", store)
    code, out = _invoke("tick", "--db", db, "--json")
    assert code == 0, out
    assert [r["name"] for r in json.loads(out)["runs"]] == ["sqljob"]


def test_build_template_and_review_jobs_are_added_with_their_settings(tmp_path: Path) -> None:
    code, out = _invoke(
        "add", "0 3 * * *", "--name", "rebuild", "--kind", "build-template", "--template", "web-research",
        "--source", str(tmp_path / "state.db"), "--json",
    )  # fmt: skip
    assert code == 0, out
    assert json.loads(out)["args"]["template"] == "web-research"
    code, out = _invoke(
        "add", "every 1d", "--name", "nightly-review", "--kind", "review", "--json",
        "--model", "m", "--base-url", "http://127.0.0.1:9", "--context-length", "100000",
    )  # fmt: skip
    assert code == 0, out
    assert json.loads(out)["args"]["session_id"] == "latest"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["add", "whenever", "--name", "x", "--prompt", "p"], "not understood"),
        (["add", "every 1h", "--name", "../x", "--prompt", "p"], "not allowed"),
        (["add", "every 1h", "--name", "x"], "needs a prompt"),
        (["add", "every 1h", "--name", "x", "--kind", "shell"], "not one of"),
        (["add", "every 1h", "--name", "x", "--kind", "build-template"], "Template name"),
        (["add", "every 1h", "--name", "x", "--prompt", "p", "--deliver", "bogus://x"], "Apprise"),
        (["remove", "missing"], "No job"),
        (["run", "missing"], "No job"),
        (["pause", "missing"], "No job"),
    ],
)
def test_bad_input_gives_one_clear_line(args: list[str], fragment: str) -> None:
    code, out = _invoke(*args)
    assert code != 0
    assert fragment in out
    assert "Traceback" not in out


def test_list_prints_errors_that_look_like_markup_as_text(fake_openai: FakeOpenAI) -> None:
    # Errors quote endpoint replies; a '[/INST]' in one must not be read as Rich markup.
    job = _add(fake_openai)
    JsonJobStore().update(job["id"], {"last_status": "error", "last_error": "model said [/INST] [bold]"})
    code, out = _invoke("list")
    assert code == 0, out
    assert "[/INST]" in out and "[bold]" in out


def test_a_run_that_never_finished_reads_unfinished(fake_openai: FakeOpenAI) -> None:
    # What a claim leaves when its process is killed mid-run: a start time and no result.
    job = _add(fake_openai)
    JsonJobStore().update(job["id"], {"last_run_at": datetime.now(timezone.utc), "last_status": None})
    code, out = _invoke("list")
    assert code == 0 and "unfinished" in out
    code, out = _invoke("status")
    assert code == 0
    assert "report at" in out and "unfinished" in out
    assert "never finished" in out


def test_corrupt_jobs_file_is_reported_and_left_alone() -> None:
    path = default_jobs_path()
    path.parent.mkdir(parents=True)
    path.write_text("{broken", encoding="utf-8")
    code, out = _invoke("list")
    assert code == 1 and "not valid JSON" in out
    assert path.read_text(encoding="utf-8") == "{broken"


@pytest.mark.parametrize(
    "command", ["add", "list", "remove", "pause", "resume", "run", "tick", "status", "daemon", "path"]
)
def test_every_command_has_help(command: str) -> None:
    code, out = _invoke(command, "--help")
    assert code == 0
    assert "Usage" in out and len(out) > 200


def test_add_refuses_a_model_under_the_context_minimum(fake_openai: FakeOpenAI) -> None:
    # From kindling's own table (gpt-4 has 8,192 tokens): refused with the run's own message.
    code, out = _invoke(
        "add",
        "every 1d",
        "--name",
        "old",
        "--prompt",
        "x",
        "--model",
        "openai/gpt-4",
        "--base-url",
        "http://127.0.0.1:9",
    )
    assert code != 0
    assert "8,192-token context window" in out and "64,000" in out
    # Reported by the endpoint.
    fake_openai.models = [{"id": "tiny", "context_length": 2048}]
    small = [
        "add",
        "every 1d",
        "--name",
        "small",
        "--prompt",
        "x",
        "--model",
        "tiny",
        "--base-url",
        fake_openai.base_url,
    ]
    code, out = _invoke(*small)
    assert code != 0 and "2,048-token" in out
    assert not default_jobs_path().exists(), "a refused job must not be stored"
    # The override the message suggests works.
    code, out = _invoke(*small, "--context-length", "100000")
    assert code == 0, out


def test_add_refuses_a_prompt_or_review_job_without_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KINDLING_CRON_MODEL", raising=False)
    monkeypatch.delenv("KINDLING_CRON_BASE_URL", raising=False)
    code, out = _invoke("add", "every 1d", "--name", "p", "--prompt", "x")
    assert code != 0 and "needs a model and a base URL" in out
    code, out = _invoke("add", "every 1d", "--name", "r", "--kind", "review")
    assert code != 0 and "needs a model and a base URL" in out
    assert not default_jobs_path().exists()


def test_add_stores_relative_sources_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = _invoke(
        "add",
        "every 1d",
        "--name",
        "b",
        "--kind",
        "build-template",
        "--template",
        "main",
        "--source",
        "runs/state.db",
        "--source",
        "postgresql://u:pw@h/db",
        "--template-store",
        "t.db",
        "--json",
    )
    assert code == 0, out
    args = json.loads(out)["args"]
    assert args["sources"] == [str(tmp_path / "runs" / "state.db"), "postgresql://u:pw@h/db"]
    assert args["store"] == str(tmp_path / "t.db")
    assert JsonJobStore().get("b").args == args


def test_edit_changes_only_what_is_given_and_checks_again(fake_openai: FakeOpenAI) -> None:
    job = _add(fake_openai)
    store = JsonJobStore()
    before = store.get("report")
    code, out = _invoke("edit", "report", "--model", "other-model", "--json")
    assert code == 0, out
    edited = json.loads(out)
    assert edited["id"] == job["id"] and edited["model"] == "other-model"
    after = store.get("report")
    # Untouched settings and the schedule stay as they were.
    assert (
        after.model == "other-model"
        and after.prompt == "Write the report."
        and after.context_length == 100000
    )
    assert after.next_run_at == before.next_run_at and after.created_at == before.created_at

    code, out = _invoke("edit", "report", "--schedule", "every 2h", "--json")
    assert code == 0, out
    rescheduled = store.get("report")
    assert rescheduled.schedule == "every 2h" and rescheduled.next_run_at != before.next_run_at

    code, out = _invoke("edit", "report", "--schedule", "not a schedule")
    assert code != 0 and store.get("report").schedule == "every 2h"
    code, out = _invoke("edit", "report")
    assert code != 0 and "at least one setting" in out
    code, out = _invoke("edit", "nope", "--model", "x")
    assert code != 0 and "No job 'nope'" in out


def test_edit_fixes_a_job_the_context_guard_blocks(fake_openai: FakeOpenAI) -> None:
    _add_then_shrink_the_window(fake_openai)
    code, out = _invoke("edit", "small", "--prompt", "y")
    assert code != 0 and "context length" in out
    assert JsonJobStore().get("small").prompt == "x"
    code, out = _invoke("edit", "small", "--context-length", "200000")
    assert code == 0, out
    assert JsonJobStore().get("small").context_length == 200000


def test_read_only_commands_create_nothing(tmp_path: Path, isolated_homes: Path) -> None:
    home = isolated_homes / "kindling"
    for args in (("list",), ("status",), ("path",), ("list", "--json"), ("status", "--json")):
        code, out = _invoke(*args)
        assert code == 0, (args, out)
    assert not home.exists(), sorted(str(p) for p in home.rglob("*"))
    missing = tmp_path / "jobs.db"
    for args in (("list", "--db", str(missing)), ("status", "--db", str(missing))):
        code, out = _invoke(*args)
        assert code != 0 and "No job database" in out, out
    code, out = _invoke("path", "--db", str(missing), "--json")
    assert code == 0 and json.loads(out)["jobs"] == str(missing)
    assert not missing.exists() and not list(tmp_path.iterdir())


@pytest.mark.postgres
def test_read_only_commands_migrate_no_database(tmp_path: Path, pg_url: str) -> None:
    # Another program's SQLite file and an empty PostgreSQL database get no jobs table from a read.
    foreign = tmp_path / "state.db"
    with contextlib.closing(sqlite3.connect(foreign)) as conn:
        conn.execute("CREATE TABLE sessions (id TEXT)")
    for db in (str(foreign), pg_url):
        for command in ("list", "status"):
            code, out = _invoke(command, "--db", db)
            assert code != 0 and "No jobs in" in out and "cron add" in out, (command, db, out)
    with contextlib.closing(sqlite3.connect(foreign)) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["sessions"]
    engine = sa.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            assert sa.inspect(conn).get_table_names() == []
    finally:
        engine.dispose()
    # Once a job is added there, the same commands read it.
    SqlJobStore(pg_url).engine.dispose()
    code, out = _invoke("list", "--db", pg_url, "--json")
    assert code == 0 and json.loads(out) == [], out


def test_list_at_80_columns_puts_long_errors_under_the_table(fake_openai: FakeOpenAI) -> None:
    job = _add(fake_openai, "nightly-report")
    error = "Connection error: cannot reach http://127.0.0.1:9/v1/chat/completions after 3 retries " * 2
    JsonJobStore().update(
        job["id"], {"last_status": "error", "last_error": error, "last_run_at": job["created_at"]}
    )
    result = runner.invoke(app, ["cron", "list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    jobs = lines[: next(i for i, line in enumerate(lines) if "times in UTC" in line)]
    assert "nightly-report" in "\n".join(jobs)
    after = " ".join(" ".join(lines[len(jobs) :]).split())
    assert "last error of nightly-report: Connection error" in after and "after 3 retries" in after


def test_list_never_cuts_or_wraps_a_value() -> None:
    """At 80 columns "ok 11-27" was cut to "ok 11-2" and schedules wrapped: every value stays whole."""
    ids = []
    for name, schedule in (("nightly-template-rebuild", "0 2 * * 1-5"), ("one-off", "2026-12-01T09:00:00")):
        code, out = _invoke(
            "add", schedule, "--name", name, "--kind", "build-template", "--template", "main", "--json"
        )
        assert code == 0, out
        ids.append(json.loads(out)["id"])
    finished = datetime(2026, 11, 27, 15, 4, tzinfo=timezone.utc)
    JsonJobStore().update(ids[0], {"last_status": "ok", "last_run_at": finished})
    for columns in (60, 80, 200):
        result = runner.invoke(app, ["cron", "list"], env={"COLUMNS": str(columns)})
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert max(len(line) for line in lines) <= columns
        for value in (
            "nightly-template-rebuild",
            "0 2 * * 1-5",
            "2026-12-01T09:00:00",
            "ok 11-27 15:04",
            "build-template",
            *ids,
        ):
            assert any(value in line for line in lines), (columns, value, result.output)
    wide = runner.invoke(app, ["cron", "list"], env={"COLUMNS": "200"}).output.splitlines()
    row = next(line for line in wide if "nightly-template-rebuild" in line)
    assert "0 2 * * 1-5" in row and "ok 11-27 15:04" in row  # a table when it fits

"""Job stores: the JSON file and SQL (SQLite file, real PostgreSQL) behave the same."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from kindling.cron.jobs import (
    Job,
    JobStore,
    JsonJobStore,
    SqlJobStore,
    default_jobs_path,
    make_job,
    open_job_store,
)
from kindling.errors import ConfigError, InvalidNameError, NotFoundError, ScheduleError, StoreError

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=timezone.utc)


@pytest.fixture(params=["json", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStore]:
    if request.param == "json":
        yield JsonJobStore(tmp_path / "jobs.json")
    elif request.param == "sqlite":
        yield SqlJobStore(tmp_path / "jobs.db")
    else:
        sql = SqlJobStore(request.getfixturevalue("pg_url"))
        yield sql
        sql.engine.dispose()


def _prompt_job(name: str = "daily", schedule: str = "every 1h", **fields: Any) -> Job:
    return make_job(name, "prompt", schedule, now=NOW, prompt="Say hi.", **fields)


def test_add_get_list_remove_round_trip(store: JobStore) -> None:
    job = _prompt_job(model="openai/gpt-4o", skills=["a-skill"], deliver="json://127.0.0.1:1/x")
    store.add(job)
    again = store.get(job.id)
    assert again == job
    assert store.get("daily") == job
    assert [j.id for j in store.list()] == [job.id]
    removed = store.remove("daily")
    assert removed.id == job.id
    assert store.list() == []
    with pytest.raises(NotFoundError):
        store.get(job.id)
    with pytest.raises(NotFoundError):
        store.remove(job.id)


def test_duplicate_names_are_refused(store: JobStore) -> None:
    store.add(_prompt_job())
    with pytest.raises(InvalidNameError, match="already exists"):
        store.add(_prompt_job())
    assert len(store.list()) == 1


def test_update_changes_fields_and_keeps_the_rest(store: JobStore) -> None:
    job = store.add(_prompt_job())
    paused = store.update(job.name, {"enabled": False})
    assert paused.enabled is False
    assert store.get(job.id).enabled is False
    assert store.get(job.id).prompt == "Say hi."
    with pytest.raises(NotFoundError):
        store.update("nope", {"enabled": True})


def test_due_returns_enabled_jobs_at_or_before_now(store: JobStore) -> None:
    early = store.add(_prompt_job("early", "every 30m"))
    store.add(_prompt_job("late", "every 2h"))
    paused = store.add(_prompt_job("paused", "every 30m"))
    store.update(paused.id, {"enabled": False})
    at = NOW + timedelta(minutes=30)
    assert [j.id for j in store.due(at)] == [early.id]
    assert {j.name for j in store.due(NOW + timedelta(hours=3))} == {"early", "late"}
    assert store.due(NOW) == []


def test_claim_is_compare_and_set_on_the_slot(store: JobStore) -> None:
    job = store.add(_prompt_job())
    slot = job.next_run_at
    assert slot is not None
    changes = {"next_run_at": slot + timedelta(hours=1), "last_run_at": slot}
    won = store.claim(job, changes)
    assert won is not None
    assert won.next_run_at == slot + timedelta(hours=1)
    # A second tick holding the same stale snapshot loses the slot.
    assert store.claim(job, changes) is None
    assert store.get(job.id).next_run_at == slot + timedelta(hours=1)


def test_claim_applies_to_the_stored_job_not_a_stale_snapshot(store: JobStore) -> None:
    # A tick reads the due jobs once, then runs them one by one: by the time a later job is
    # claimed, its prompt may have been edited and a manual run recorded. Neither may be undone.
    job = store.add(_prompt_job())
    snapshot = store.due(NOW + timedelta(hours=1))[0]
    store.update(job.id, {"prompt": "Say bye.", "last_status": "error", "last_error": "manual run"})
    assert snapshot.next_run_at is not None
    claimed = store.claim(snapshot, {"next_run_at": snapshot.next_run_at + timedelta(hours=1)})
    assert claimed is not None
    assert claimed.prompt == "Say bye."
    saved = store.get(job.id)
    assert (saved.prompt, saved.last_status, saved.last_error) == ("Say bye.", "error", "manual run")
    assert saved.next_run_at == snapshot.next_run_at + timedelta(hours=1)


def test_a_job_made_unreadable_after_due_is_not_claimed(tmp_path: Path) -> None:
    # A hand edit between a tick's due() and its claim: the claim declines instead of raising,
    # so the tick goes on with the other jobs.
    path = tmp_path / "jobs.json"
    store = JsonJobStore(path)
    job = store.add(_prompt_job())
    [snapshot] = store.due(NOW + timedelta(hours=1))
    data = json.loads(path.read_text(encoding="utf-8"))
    data["jobs"][0]["kind"] = "shell"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert store.claim(snapshot, {"next_run_at": None}) is None
    assert json.loads(path.read_text(encoding="utf-8"))["jobs"][0]["kind"] == "shell"
    assert store.list() == [] and job.id in store.skipped[0]


def test_claim_loses_against_a_pause(store: JobStore) -> None:
    job = store.add(_prompt_job())
    store.update(job.id, {"enabled": False})
    assert store.claim(job, {"next_run_at": None}) is None


def test_concurrent_claims_have_exactly_one_winner(store: JobStore) -> None:
    job = store.add(_prompt_job())
    assert job.next_run_at is not None
    changes = {"next_run_at": job.next_run_at + timedelta(hours=1)}
    winners: list[object] = []
    barrier = threading.Barrier(6)

    def claim() -> None:
        barrier.wait()
        winners.append(store.claim(job, changes))

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(1 for w in winners if w is not None) == 1


def test_tick_lock_is_exclusive_across_store_objects(store: JobStore) -> None:
    # A second store object on the same state stands in for another process or machine.
    other: JobStore
    if isinstance(store, SqlJobStore):
        other = SqlJobStore(store.target)
    else:
        assert isinstance(store, JsonJobStore)
        other = JsonJobStore(store.path)
    with store.tick_lock() as first:
        assert first is True
        with other.tick_lock() as second:
            assert second is False
    with other.tick_lock() as after:
        assert after is True
    if isinstance(other, SqlJobStore):
        other.engine.dispose()


def test_make_job_defaults_and_validation() -> None:
    once = make_job("once", "prompt", "30m", now=NOW, prompt="x")
    assert once.repeat.times == 1
    assert once.next_run_at == NOW + timedelta(minutes=30)
    forever = make_job("loop", "prompt", "every 5m", now=NOW, prompt="x")
    assert forever.repeat.times is None
    assert make_job("n", "prompt", "every 5m", now=NOW, prompt="x", repeat=3).repeat.times == 3
    with pytest.raises(ScheduleError, match="in the past"):
        make_job("n", "prompt", "2025-11-21T10:00:00Z", now=NOW, prompt="x")  # the year is a typo
    late = make_job("n", "prompt", "2026-11-21T09:59:30Z", now=NOW, prompt="x")  # seconds ago: fine
    assert late.next_run_at == NOW - timedelta(seconds=30)
    with pytest.raises(ConfigError, match="runs once"):
        make_job("n", "prompt", "30m", now=NOW, prompt="x", repeat=3)
    assert make_job("n", "prompt", "30m", now=NOW, prompt="x", repeat=1).repeat.times == 1
    with pytest.raises(ConfigError, match="needs a prompt"):
        make_job("n", "prompt", "every 5m", prompt="  ")
    with pytest.raises(ConfigError, match="not one of"):
        make_job("n", "shell", "every 5m")
    with pytest.raises(ScheduleError):
        make_job("n", "prompt", "whenever", prompt="x")
    with pytest.raises(InvalidNameError):
        make_job("build", "build-template", "every 1d", args={"template": "../escape"})
    with pytest.raises(ConfigError, match="Apprise"):
        make_job("n", "prompt", "every 5m", prompt="x", deliver="nosuchscheme://nowhere")
    assert make_job("n", "prompt", "every 5m", prompt="x", deliver="json://127.0.0.1:9/x").deliver.startswith(
        "json"
    )
    with pytest.raises(ConfigError, match="Unknown job setting"):
        make_job("n", "prompt", "every 5m", prompt="x", promt="typo")
    with pytest.raises(ConfigError, match="context_length"):
        make_job("n", "prompt", "every 5m", prompt="x", context_length=0)
    # Numbers past 64 bits cannot be stored: a clear error, not an encoder traceback.
    with pytest.raises(ConfigError, match="context_length"):
        make_job("n", "prompt", "every 5m", prompt="x", context_length=10**23)
    with pytest.raises(ConfigError, match="repeat"):
        make_job("n", "prompt", "every 5m", prompt="x", repeat=10**23)


@pytest.mark.parametrize("name", ["../up", "a/b", ".hidden", "", "x" * 65, "spa ce", "a..b"])
def test_unsafe_job_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidNameError):
        make_job(name, "prompt", "every 5m", prompt="x")


def test_unsafe_skill_names_are_refused() -> None:
    with pytest.raises(InvalidNameError, match="Skill name"):
        make_job("ok", "prompt", "every 5m", prompt="x", skills=["../../etc/passwd"])


def test_json_store_keeps_malformed_entries_and_reports_them(tmp_path: Path) -> None:
    path = tmp_path / "jobs.json"
    good = _prompt_job("good")
    bad_name = {**_prompt_job("other").to_dict(), "id": "../../etc"}
    path.write_text(
        json.dumps({"version": 1, "jobs": [good.to_dict(), {"name": "no-kind"}, bad_name, 42]}),
        encoding="utf-8",
    )
    store = JsonJobStore(path)
    assert [j.name for j in store.list()] == ["good"]
    assert len(store.skipped) == 3
    assert any("kind" in reason for reason in store.skipped)
    # Writing through the store keeps the entries it could not read: nothing is lost.
    store.update("good", {"enabled": False})
    kept = json.loads(path.read_text(encoding="utf-8"))["jobs"]
    assert len(kept) == 4
    assert {"name": "no-kind"} in kept and 42 in kept


def test_json_store_keeps_unknown_keys_of_readable_jobs(tmp_path: Path) -> None:
    path = tmp_path / "jobs.json"
    entry = {**_prompt_job("good").to_dict(), "owner": "ops-team"}
    path.write_text(json.dumps({"jobs": [entry]}), encoding="utf-8")
    store = JsonJobStore(path)
    store.update("good", {"enabled": False})
    [kept] = json.loads(path.read_text(encoding="utf-8"))["jobs"]
    assert kept["owner"] == "ops-team" and kept["enabled"] is False


def test_json_store_refuses_to_touch_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "jobs.json"
    path.write_text("{not json", encoding="utf-8")
    store = JsonJobStore(path)
    with pytest.raises(StoreError, match="not valid JSON"):
        store.list()
    with pytest.raises(StoreError):
        store.add(_prompt_job())
    assert path.read_text(encoding="utf-8") == "{not json"


def test_json_writes_are_atomic_and_leave_no_temp_files(tmp_path: Path) -> None:
    store = JsonJobStore(tmp_path / "jobs.json")
    for index in range(5):
        store.add(_prompt_job(f"job{index}"))
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
    assert (tmp_path / "jobs.json").stat().st_mode & 0o777 == 0o600  # delivery URLs hold tokens
    assert len(json.loads((tmp_path / "jobs.json").read_text(encoding="utf-8"))["jobs"]) == 5


def test_sql_store_reports_unreadable_rows(tmp_path: Path) -> None:
    import sqlalchemy as sa

    store = SqlJobStore(tmp_path / "jobs.db")
    store.add(_prompt_job("good"))
    with store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO kindling_cron_jobs (id, name, kind, enabled, next_run_at, created_at, data) "
                "VALUES ('broken', 'broken', 'prompt', 1, NULL, '2026', '{\"oops\": true}')"
            )
        )
    assert [j.name for j in store.list()] == ["good"]
    assert store.skipped and "broken" in store.skipped[0]


def test_open_job_store_picks_the_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = open_job_store()
    assert isinstance(default, JsonJobStore)
    assert default.path == default_jobs_path()
    assert isinstance(open_job_store(tmp_path / "mine.json"), JsonJobStore)
    assert isinstance(open_job_store(tmp_path / "jobs.db"), SqlJobStore)
    assert isinstance(open_job_store(f"sqlite:///{tmp_path / 'url.db'}"), SqlJobStore)
    monkeypatch.setenv("KINDLING_CRON_DB", str(tmp_path / "env.db"))
    chosen = open_job_store()
    assert isinstance(chosen, SqlJobStore)
    assert str(tmp_path / "env.db") in chosen.location


@pytest.mark.postgres
def test_postgres_store_hides_the_password_in_its_location(pg_url: str) -> None:
    url = pg_url.replace("postgres@", "postgres:secret@")
    store = SqlJobStore(url)
    assert "secret" not in store.location
    store.engine.dispose()


def test_sqlite_update_racing_a_claim_never_writes_the_old_slot_back(tmp_path: Path) -> None:
    # Force the interleaving a manual run's result and a tick's claim can meet in: the update
    # has read the row, the claim commits, then the update writes. It must not resurrect the old
    # next_run_at, or the claimed slot runs a second time.
    import sqlalchemy as sa

    store = SqlJobStore(tmp_path / "jobs.db")
    rival = SqlJobStore(tmp_path / "jobs.db")
    job = store.add(_prompt_job())
    assert job.next_run_at is not None
    moved = job.next_run_at + timedelta(hours=1)
    fired: list[bool] = []

    def claim_in_between(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if (
            not fired
            and statement.lstrip().upper().startswith("SELECT")
            and "kindling_cron_jobs" in statement
        ):
            fired.append(True)
            assert rival.claim(job, {"next_run_at": moved}) is not None

    sa.event.listen(store.engine, "after_cursor_execute", claim_in_between)
    try:
        updated = store.update(job.id, {"last_status": "ok"})
    finally:
        sa.event.remove(store.engine, "after_cursor_execute", claim_in_between)
    assert fired
    saved = store.get(job.id)
    assert saved.next_run_at == moved
    assert saved.last_status == "ok"
    assert updated.next_run_at == moved
    rival.engine.dispose()
    store.engine.dispose()

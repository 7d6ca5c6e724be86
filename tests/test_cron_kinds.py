"""The build-template and review job kinds, run by a tick against a real sample state.db."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI, text
from kindling.cron.jobs import JsonJobStore, make_job, output_root
from kindling.cron.scheduler import tick
from kindling.sessions import generate_sample_db, iter_sessions
from kindling.templates import open_store

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=timezone.utc)
LATER = NOW + timedelta(days=1, seconds=1)


@pytest.fixture
def sample_db(tmp_path: Path) -> Path:
    return generate_sample_db(tmp_path / "state.db", sessions=40, seed=7)


def test_build_template_job_rebuilds_only_when_something_changed(sample_db: Path, tmp_path: Path) -> None:
    store = JsonJobStore()
    templates_dir = tmp_path / "templates"
    job = store.add(
        make_job(
            "rebuild",
            "build-template",
            "every 1d",
            now=NOW,
            args={"template": "sample-work", "sources": [str(sample_db)], "store": str(templates_dir)},
        )
    )
    [run] = tick(store, now=LATER).runs
    assert run.status == "ok", run.error
    first = open_store(templates_dir).get("sample-work")
    assert first.examples
    [output] = sorted((output_root() / job.id).glob("*.md"))
    assert "Built template sample-work" in output.read_text(encoding="utf-8")

    open_store(templates_dir).save(first.model_copy(update={"description": "Nightly work", "tags": ["ops"]}))
    described = open_store(templates_dir).get("sample-work")

    [again] = tick(store, now=LATER + timedelta(days=1)).runs
    assert again.status == "ok", again.error
    same = open_store(templates_dir).get("sample-work")
    assert same.version == described.version
    assert "is unchanged" in Path(str(again.output)).read_text(encoding="utf-8")

    generate_sample_db(sample_db, sessions=60, seed=8, overwrite=True)  # new sessions arrived
    [third] = tick(store, now=LATER + timedelta(days=2)).runs
    assert third.status == "ok", third.error
    rebuilt = open_store(templates_dir).get("sample-work")
    assert rebuilt.version > described.version
    # The job sets no description or tags, so the rebuild keeps the template's own.
    assert rebuilt.description == "Nightly work" and list(rebuilt.tags) == ["ops"]


@pytest.mark.postgres
def test_build_template_job_from_hermes_on_postgres_keeps_the_password_out_of_its_output(
    sample_db: Path, pg_url: str, tmp_path: Path
) -> None:
    from test_stats_cli import _copy_to_postgres  # one copy helper for every PostgreSQL test

    _copy_to_postgres(sample_db, pg_url)
    # The server trusts local connections, so any password works; it must still never be shown.
    source = pg_url.replace("postgres@", "postgres:s3cret-pw@", 1)
    store = JsonJobStore()
    job = store.add(
        make_job(
            "rebuild",
            "build-template",
            "every 1d",
            now=NOW,
            args={"template": "pg-work", "sources": [source], "store": str(tmp_path / "templates")},
        )
    )
    [run] = tick(store, now=LATER).runs
    assert run.status == "ok", run.error
    assert open_store(tmp_path / "templates").get("pg-work").examples
    [output] = sorted((output_root() / job.id).glob("*.md"))
    body = output.read_text(encoding="utf-8")
    assert "Built template pg-work" in body and "127.0.0.1" in body
    assert "s3cret-pw" not in body


def test_build_template_job_with_an_unreadable_source_records_the_error(tmp_path: Path) -> None:
    store = JsonJobStore()
    job = store.add(
        make_job(
            "rebuild",
            "build-template",
            "every 1d",
            now=NOW,
            args={"template": "t", "sources": [str(tmp_path / "missing.db")], "store": str(tmp_path / "tpl")},
        )
    )
    [run] = tick(store, now=LATER).runs
    assert run.status == "error"
    assert "missing.db" in (run.error or "")
    assert store.get(job.id).last_status == "error"


def test_review_job_reviews_the_latest_session(sample_db: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.models = [{"id": "fake-model", "context_length": 128_000}]
    fake_openai.script = [text("Nothing durable in this session.")]
    store = JsonJobStore()
    job = store.add(
        make_job(
            "nightly-review",
            "review",
            "every 1d",
            now=NOW,
            model="fake-model",
            base_url=fake_openai.base_url,
            args={"source": str(sample_db), "session_id": "latest"},
        )
    )
    [run] = tick(store, now=LATER).runs
    assert run.status == "ok", run.error
    assert len(fake_openai.chat_requests()) == 1
    output = (output_root() / job.id).glob("*.md")
    body = next(output).read_text(encoding="utf-8")
    newest = max(iter_sessions(sample_db), key=lambda s: s.started_at or 0)
    assert f"Reviewed session {newest.id}." in body
    assert "nothing to save" in body


def test_review_job_on_a_small_model_is_blocked(sample_db: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.models = [{"id": "tiny", "context_length": 4096}]
    store = JsonJobStore()
    store.add(
        make_job(
            "nightly-review",
            "review",
            "every 1d",
            now=NOW,
            model="tiny",
            base_url=fake_openai.base_url,
            args={"source": str(sample_db)},
        )
    )
    [run] = tick(store, now=LATER).runs
    assert run.status == "blocked"
    assert fake_openai.chat_requests() == []


def test_review_job_for_a_missing_session_is_an_error(sample_db: Path, fake_openai: FakeOpenAI) -> None:
    store = JsonJobStore()
    store.add(
        make_job(
            "review-one",
            "review",
            "every 1d",
            now=NOW,
            model="fake-model",
            base_url=fake_openai.base_url,
            context_length=100_000,
            args={"source": str(sample_db), "session_id": "no-such-session"},
        )
    )
    [run] = tick(store, now=LATER).runs
    assert run.status == "error"
    assert "no-such-session" in (run.error or "")

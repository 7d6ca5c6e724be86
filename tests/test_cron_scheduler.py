"""The tick end to end: prompt jobs against the fake OpenAI server, output, delivery, guards, crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fake_openai import FakeOpenAI, text
from kindling.cron.jobs import Job, JobStore, JsonJobStore, SqlJobStore, make_job, output_root
from kindling.cron.scheduler import resume_changes, run_daemon, run_job_now, scheduler_status, tick

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=timezone.utc)
LATER = NOW + timedelta(hours=1, seconds=1)


class Receiver:
    """A loopback HTTP server standing in for a notification service (Apprise json:// posts here)."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                receiver.posts.append({"path": self.path, "body": json.loads(body or b"null")})
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def store(tmp_path: Path) -> JsonJobStore:
    return JsonJobStore()


def _add_prompt_job(store: JobStore, fake: FakeOpenAI, name: str = "report", **fields: Any) -> Job:
    settings: dict[str, Any] = {"prompt": "Write the status report.", "model": "fake-model"}
    settings["base_url"] = fake.base_url
    settings.update(fields)
    schedule = settings.pop("schedule", "every 1h")
    return store.add(make_job(name, "prompt", schedule, now=NOW, **settings))


def _outputs(job: Job) -> list[Path]:
    directory = output_root() / job.id
    return sorted(directory.glob("*.md")) if directory.exists() else []


def test_prompt_job_runs_saves_and_delivers(
    store: JsonJobStore, fake_openai: FakeOpenAI, receiver: Receiver
) -> None:
    fake_openai.models = [{"id": "fake-model", "context_length": 128_000}]
    fake_openai.script = [text("All systems nominal.")]
    job = _add_prompt_job(
        store, fake_openai, deliver=receiver.url, provider="openai", prompt="Ask Claude too."
    )

    result = tick(store, now=LATER)

    assert not result.locked
    [run] = result.runs
    assert run.status == "ok", run.error
    assert run.delivered and not run.silent
    assert any("anthropic" in w for w in run.warnings)  # provider mismatch is a warning, not an error
    [sent] = fake_openai.chat_requests()
    prompt = sent["messages"][0]["content"]
    assert (
        prompt.index("MODEL: fake-model") < prompt.index("[Scheduled job]") < prompt.index("Ask Claude too.")
    )
    assert "PROVIDER: openai" in prompt and "RUNTIME: cloud" in prompt
    [output] = _outputs(job)
    assert "All systems nominal." in output.read_text(encoding="utf-8")
    [post] = receiver.posts
    assert post["path"] == "/hook"
    assert "All systems nominal." in post["body"]["message"]
    saved = store.get(job.id)
    assert saved.last_status == "ok" and saved.last_error is None
    assert saved.last_output == str(output)
    assert saved.next_run_at == NOW + timedelta(hours=2)
    assert saved.repeat.completed == 1
    # Same slot again: nothing to do.
    assert tick(store, now=LATER).runs == []
    assert len(fake_openai.chat_requests()) == 1


def test_silent_response_is_saved_but_not_delivered(
    store: JsonJobStore, fake_openai: FakeOpenAI, receiver: Receiver
) -> None:
    fake_openai.script = [text("[SILENT] nothing changed since yesterday")]
    job = _add_prompt_job(store, fake_openai, deliver=receiver.url, context_length=100_000)
    [run] = tick(store, now=LATER).runs
    assert run.status == "ok"
    assert run.silent and not run.delivered
    assert receiver.posts == []
    [output] = _outputs(job)
    assert "[SILENT] nothing changed" in output.read_text(encoding="utf-8")
    assert store.get(job.id).last_status == "ok"


def test_model_under_the_context_minimum_is_blocked_recorded_and_not_run(
    store: JsonJobStore, fake_openai: FakeOpenAI
) -> None:
    fake_openai.models = [{"id": "tiny", "context_length": 8192}]
    job = _add_prompt_job(store, fake_openai, model="tiny")
    [run] = tick(store, now=LATER).runs
    assert run.status == "blocked"
    assert "8,192" in (run.error or "")
    assert fake_openai.chat_requests() == []
    saved = store.get(job.id)
    assert saved.last_status == "blocked"
    assert "64,000" in (saved.last_error or "")
    assert saved.next_run_at == NOW + timedelta(hours=2)  # the slot is used up, not retried in a loop


def test_context_override_lets_a_small_model_run(store: JsonJobStore, fake_openai: FakeOpenAI) -> None:
    fake_openai.models = [{"id": "tiny", "context_length": 8192}]
    _add_prompt_job(store, fake_openai, model="tiny", context_length=8192)
    [run] = tick(store, now=LATER).runs
    assert run.status == "ok"
    assert len(fake_openai.chat_requests()) == 1


def test_one_failing_job_does_not_stop_the_others(store: JsonJobStore, fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [{"fault": "status", "status": 400}, text("second is fine")]
    broken = _add_prompt_job(store, fake_openai, "broken", context_length=100_000, args={"max_retries": 0})
    fine = _add_prompt_job(store, fake_openai, "fine", context_length=100_000)
    # A job whose settings cannot run at all (no model anywhere) is recorded as an error too.
    nomodel = _add_prompt_job(store, fake_openai, "nomodel", model="", base_url="", context_length=100_000)
    runs = {r.name: r for r in tick(store, now=LATER).runs}
    assert runs["broken"].status == "error" and runs["broken"].error
    assert runs["fine"].status == "ok"
    assert runs["nomodel"].status == "error" and "model" in (runs["nomodel"].error or "")
    assert store.get(broken.id).last_status == "error"
    assert store.get(fine.id).last_status == "ok"
    assert store.get(nomodel.id).last_status == "error"
    assert "400" in _outputs(broken)[0].read_text(encoding="utf-8")


def test_errors_are_delivered_too_so_failures_are_not_silent(
    store: JsonJobStore, fake_openai: FakeOpenAI, receiver: Receiver
) -> None:
    fake_openai.script = [{"fault": "status", "status": 401}]
    _add_prompt_job(store, fake_openai, deliver=receiver.url, context_length=100_000, args={"max_retries": 0})
    [run] = tick(store, now=LATER).runs
    assert run.status == "error" and run.delivered
    [post] = receiver.posts
    assert "(error)" in post["body"]["title"]
    assert "401" in post["body"]["message"]


def test_failed_delivery_keeps_the_output_and_warns(
    store: JsonJobStore, fake_openai: FakeOpenAI, receiver: Receiver
) -> None:
    receiver.status = 500
    job = _add_prompt_job(store, fake_openai, deliver=receiver.url, context_length=100_000)
    [run] = tick(store, now=LATER).runs
    assert run.status == "ok" and not run.delivered
    assert any("Delivery failed" in w for w in run.warnings)
    assert len(receiver.posts) >= 1
    assert _outputs(job)
    assert any("Delivery failed" in w for w in store.get(job.id).last_warnings)


def test_once_job_runs_once_and_repeat_limits_recurring_jobs(
    store: JsonJobStore, fake_openai: FakeOpenAI
) -> None:
    once = _add_prompt_job(store, fake_openai, "once", schedule="30m", context_length=100_000)
    twice = _add_prompt_job(
        store, fake_openai, "twice", schedule="every 1h", repeat=2, context_length=100_000
    )
    assert [r.name for r in tick(store, now=LATER).runs] == ["once", "twice"]
    assert store.get(once.id).next_run_at is None
    assert [r.name for r in tick(store, now=LATER + timedelta(hours=1)).runs] == ["twice"]
    assert store.get(twice.id).next_run_at is None
    assert store.get(twice.id).repeat.completed == 2
    assert tick(store, now=LATER + timedelta(days=5)).runs == []


def test_paused_jobs_are_skipped_and_resume_reschedules(store: JsonJobStore, fake_openai: FakeOpenAI) -> None:
    job = _add_prompt_job(store, fake_openai, context_length=100_000)
    store.update(job.id, {"enabled": False})
    assert tick(store, now=LATER).runs == []
    resumed = store.update(job.id, resume_changes(store.get(job.id), now=LATER))
    assert resumed.enabled and resumed.next_run_at == LATER + timedelta(hours=1)


def test_run_now_leaves_the_schedule_alone(store: JsonJobStore, fake_openai: FakeOpenAI) -> None:
    job = _add_prompt_job(store, fake_openai, context_length=100_000)
    run = run_job_now(store, job.name)
    assert run.status == "ok"
    saved = store.get(job.id)
    assert saved.next_run_at == job.next_run_at
    assert saved.repeat.completed == 0
    assert saved.last_status == "ok"


def test_a_held_tick_lock_makes_the_tick_do_nothing(store: JsonJobStore, fake_openai: FakeOpenAI) -> None:
    _add_prompt_job(store, fake_openai, context_length=100_000)
    with JsonJobStore().tick_lock() as held:
        assert held
        result = tick(store, now=LATER)
        assert result.locked and result.runs == []
        assert scheduler_status(store, now=LATER)["tick_running"] is True
    assert fake_openai.chat_requests() == []
    assert len(tick(store, now=LATER).runs) == 1


def test_unknown_kind_in_a_hand_edited_file_is_reported_not_fatal(
    store: JsonJobStore, fake_openai: FakeOpenAI
) -> None:
    good = _add_prompt_job(store, fake_openai, context_length=100_000)
    data = json.loads(store.path.read_text(encoding="utf-8"))
    data["jobs"].append({**good.to_dict(), "id": "weird", "name": "weird", "kind": "shell"})
    store.path.write_text(json.dumps(data), encoding="utf-8")
    result = tick(store, now=LATER)
    assert [r.name for r in result.runs] == [good.name]
    assert any("weird" in reason for reason in result.unreadable)


def test_a_hand_broken_schedule_is_reported_once_and_the_job_disabled(
    store: JsonJobStore, fake_openai: FakeOpenAI
) -> None:
    job = _add_prompt_job(store, fake_openai, context_length=100_000)
    data = json.loads(store.path.read_text(encoding="utf-8"))
    data["jobs"][0]["schedule"] = "every blue moon"
    store.path.write_text(json.dumps(data), encoding="utf-8")
    [run] = tick(store, now=LATER).runs
    assert run.status == "error" and "every blue moon" in (run.error or "")
    saved = store.get(job.id)
    assert saved.enabled is False and saved.next_run_at is None
    assert saved.last_status == "error"
    assert tick(store, now=LATER + timedelta(hours=5)).runs == []
    assert fake_openai.chat_requests() == []


def test_a_cron_expression_with_no_next_date_does_not_stop_the_other_jobs(
    store: JsonJobStore, fake_openai: FakeOpenAI
) -> None:
    # "0 0 30 2 *" parses (croniter accepts it) but has no next date: computing the job's next slot
    # fails. That job is reported and disabled; the job due after it still runs.
    never = _add_prompt_job(store, fake_openai, "never", context_length=100_000)
    fine = _add_prompt_job(store, fake_openai, "fine", context_length=100_000)
    data = json.loads(store.path.read_text(encoding="utf-8"))
    data["jobs"][0]["schedule"] = "0 0 30 2 *"
    store.path.write_text(json.dumps(data), encoding="utf-8")
    runs = {r.name: r for r in tick(store, now=LATER).runs}
    assert runs["fine"].status == "ok"
    assert runs["never"].status == "error" and "0 0 30 2 *" in (runs["never"].error or "")
    assert store.get(never.id).enabled is False
    assert store.get(fine.id).last_status == "ok"
    assert len(fake_openai.chat_requests()) == 1


def test_status_summarises_the_store(store: JsonJobStore, fake_openai: FakeOpenAI) -> None:
    fake_openai.models = [{"id": "tiny", "context_length": 1000}]
    _add_prompt_job(store, fake_openai, "small", model="tiny")
    _add_prompt_job(store, fake_openai, "later", schedule="every 3h", context_length=100_000)
    tick(store, now=LATER)
    status = scheduler_status(store, now=LATER)
    assert status["jobs"] == 2 and status["enabled"] == 2
    assert status["next"]["name"] == "small"
    assert status["last_run"]["name"] == "small"
    assert [f["name"] for f in status["failing"]] == ["small"]
    assert status["tick_running"] is False


def test_daemon_process_stops_cleanly_on_sigterm(store: JsonJobStore) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kindling", "cron", "daemon", "--interval", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        deadline = time.monotonic() + 20
        while not JsonJobStore().path.with_name("jobs.json.tick.lock").exists():
            assert time.monotonic() < deadline, "the daemon never ticked"
            assert proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "ticking" in err


def test_daemon_ticks_until_told_to_stop(store: JsonJobStore, fake_openai: FakeOpenAI) -> None:
    job = _add_prompt_job(store, fake_openai, context_length=100_000)
    store.update(job.id, {"next_run_at": datetime.now(timezone.utc) - timedelta(minutes=1)})
    seen: list[int] = []
    count = run_daemon(store, interval=0.01, max_ticks=3, on_tick=lambda r: seen.append(len(r.runs)))
    assert count == 3
    assert seen == [1, 0, 0]
    stop = threading.Event()
    stop.set()
    assert run_daemon(store, interval=0.01, stop=stop) == 0


# --- crash safety and concurrent ticks, in real processes ------------------------------------------------


def _make_due(store: JobStore, job: Job) -> datetime:
    slot = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=5)
    store.update(job.id, {"next_run_at": slot})
    return slot


def _tick_process(*extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kindling", "cron", "tick", "--json", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def _crash_mid_run_then_tick(store: JobStore, fake: FakeOpenAI, *extra: str) -> None:
    fake.script = [{"fault": "delay", "seconds": 30}, text("too late")]
    job = _add_prompt_job(store, fake, context_length=100_000)
    slot = _make_due(store, job)
    # An earlier run went well: a crashed run must not go on showing its "ok".
    store.update(job.id, {"last_status": "ok", "last_run_at": slot - timedelta(hours=1)})
    proc = _tick_process(*extra)
    try:
        deadline = time.monotonic() + 30
        while not fake.chat_requests():
            assert time.monotonic() < deadline, "the tick never reached the model"
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
    finally:
        proc.kill()  # the process dies mid-run, as if it crashed
        proc.wait(timeout=10)

    crashed = store.get(job.id)
    assert crashed.next_run_at is not None and crashed.next_run_at > slot  # advanced before running
    assert crashed.repeat.completed == 1
    assert crashed.last_status is None  # never finished
    assert crashed.last_run_at is not None and crashed.last_run_at >= slot
    fake.script = []
    # The next tick: the lock died with the process (the server may take a moment to notice the
    # dropped PostgreSQL connection), and the slot stays used.
    deadline = time.monotonic() + 10
    result = tick(store)
    while result.locked and time.monotonic() < deadline:
        time.sleep(0.1)
        result = tick(store)
    assert not result.locked
    assert result.runs == []
    assert len(fake.chat_requests()) == 1
    assert _outputs(job) == []
    [unfinished] = scheduler_status(store)["unfinished"]
    assert unfinished["id"] == job.id


def test_a_job_that_kills_its_process_mid_run_is_not_rerun_for_the_same_slot(
    store: JsonJobStore, fake_openai: FakeOpenAI
) -> None:
    _crash_mid_run_then_tick(store, fake_openai)


@pytest.mark.postgres
def test_a_crash_mid_run_with_postgres_state_releases_the_lock_and_keeps_the_slot(
    pg_url: str, fake_openai: FakeOpenAI
) -> None:
    store = SqlJobStore(pg_url)
    try:
        _crash_mid_run_then_tick(store, fake_openai, "--db", pg_url)
    finally:
        store.engine.dispose()


def _two_ticks_run_each_job_once(store: JobStore, fake: FakeOpenAI, *extra: str) -> None:
    jobs = [_add_prompt_job(store, fake, f"job{i}", context_length=100_000) for i in range(3)]
    for job in jobs:
        _make_due(store, job)
    # The first reply waits until one tick has exited: the tick holding the lock is stuck on it, so
    # the other surely meets the held lock (no timing involved).
    gate = threading.Event()
    fake.script = [{"fault": "wait", "until": gate}] + [text(f"reply {index}") for index in range(3)]
    procs = [_tick_process(*extra), _tick_process(*extra)]
    deadline = time.monotonic() + 60
    while all(proc.poll() is None for proc in procs) and time.monotonic() < deadline:
        time.sleep(0.02)
    gate.set()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    ran = sorted(run["job_id"] for result in results for run in result["runs"])
    assert ran == sorted(job.id for job in jobs)
    # They did meet: one found the other's tick lock held and stood down.
    assert [result["locked"] for result in results].count(True) == 1
    assert len(fake.chat_requests()) == 3
    for job in jobs:
        saved = store.get(job.id)
        assert saved.repeat.completed == 1
        assert saved.last_status == "ok"
        assert len(_outputs(job)) == 1


def test_two_ticks_started_together_run_each_job_once_with_file_state(
    store: JsonJobStore, fake_openai: FakeOpenAI
) -> None:
    _two_ticks_run_each_job_once(store, fake_openai)


@pytest.mark.postgres
def test_two_ticks_started_together_run_each_job_once_with_postgres_state(
    pg_url: str, fake_openai: FakeOpenAI
) -> None:
    store = SqlJobStore(pg_url)
    try:
        _two_ticks_run_each_job_once(store, fake_openai, "--db", pg_url)
    finally:
        store.engine.dispose()


def test_unknown_context_window_runs_anyway_with_a_note(store: JsonJobStore, fake_openai: FakeOpenAI) -> None:
    fake_openai.models = [{"id": "homebrew-7b", "object": "model"}]
    job = _add_prompt_job(store, fake_openai, model="homebrew-7b")
    [run] = tick(store, now=LATER).runs
    assert run.status == "ok"
    assert any("unknown" in w for w in run.warnings)
    assert len(fake_openai.chat_requests()) == 1
    assert "unknown" in _outputs(job)[0].read_text(encoding="utf-8")

"""The tick: run every due job once, crash-safe, with one tick at a time per store.

A tick

1. takes the store's tick lock without waiting (a file lock for file state, a PostgreSQL advisory
   lock for PostgreSQL state); if another tick holds it, this one does nothing;
2. for each due job, *claims* the slot: advances and saves ``next_run_at`` (and the repeat count)
   with a compare-and-set **before** running, so a crash mid-run never re-fires the same slot and a
   racing tick elsewhere cannot win the same slot;
3. runs the job, saves its output to ``cron/output/<job>/<timestamp>.md``, delivers it unless it
   starts with ``[SILENT]`` or the job delivers ``local``, and records the status.

One failing job never stops the others: each run is caught and recorded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kindling.cron.delivery import LOCAL, deliver, is_silent, render_output, save_output
from kindling.cron.jobs import Job, JobStore, edited_job, open_job_store
from kindling.cron.runners import RUNNERS, RunOutcome, check_job
from kindling.cron.schedule import as_utc, first_run, next_run_after, parse_schedule, utcnow
from kindling.errors import KindlingError

log = logging.getLogger("kindling.cron")

DAEMON_INTERVAL = 60.0


@dataclass
class JobRun:
    """What happened to one job in a tick or a manual run."""

    job_id: str
    name: str
    status: str
    started_at: datetime
    finished_at: datetime
    error: str | None = None
    output: str | None = None
    delivered: bool = False
    silent: bool = False
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the run as JSON-ready data."""
        data = asdict(self)
        data["started_at"] = self.started_at.isoformat()
        data["finished_at"] = self.finished_at.isoformat()
        return data


@dataclass
class TickResult:
    """The outcome of one tick: the runs, or ``locked=True`` when another tick held the lock."""

    at: datetime
    locked: bool = False
    runs: list[JobRun] = field(default_factory=list)
    lost_claims: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the tick as JSON-ready data."""
        return {
            "at": self.at.isoformat(),
            "locked": self.locked,
            "runs": [r.to_dict() for r in self.runs],
            "lost_claims": self.lost_claims,
            "unreadable": self.unreadable,
        }


def claim_changes(job: Job, now: datetime) -> dict[str, Any]:
    """Return the changes that claim ``job``'s current slot: next run, repeat count, last run time.

    A schedule that no longer parses or never fires again (a hand-edited file; ``0 0 30 2 *``) claims
    the slot and disables the job, so a broken job is reported once instead of failing every tick.
    """
    completed = job.repeat.completed + 1
    # The previous run's status is cleared with the claim: if this run is killed before it records
    # its own, the job reads "unfinished" instead of wearing the last run's "ok".
    changes: dict[str, Any] = {
        "last_run_at": now,
        "last_status": None,
        "last_error": None,
        "last_warnings": [],
        "repeat": {"times": job.repeat.times, "completed": completed},
    }
    try:
        schedule = parse_schedule(job.schedule, now=now)
        upcoming = next_run_after(schedule, job.next_run_at or now, now=now)
    except KindlingError:
        changes.update(next_run_at=None, enabled=False)
        return changes
    finished = job.repeat.times is not None and completed >= job.repeat.times
    changes["next_run_at"] = None if finished else upcoming
    return changes


def schedule_error(job: Job, *, now: datetime | None = None) -> str | None:
    """Return why ``job``'s schedule cannot be used (it does not parse, or never fires again), or None."""
    at = as_utc(now) if now is not None else utcnow()
    try:
        next_run_after(parse_schedule(job.schedule, now=at), job.next_run_at or at, now=at)
    except KindlingError as exc:
        return str(exc)
    return None


def _run_kind(job: Job) -> RunOutcome:
    problem = schedule_error(job)
    if problem:
        return RunOutcome("error", error=problem)
    runner = RUNNERS.get(job.kind)
    if runner is None:
        return RunOutcome("error", error=f"Unknown job kind {job.kind!r}.")
    try:
        return runner(job)
    except KindlingError as exc:
        return RunOutcome("error", error=str(exc))
    except Exception as exc:  # a bug in one job must not stop the tick; record it loudly
        log.exception("Job %s (%s) crashed", job.name, job.id)
        return RunOutcome("error", error=f"{type(exc).__name__}: {exc}")


def execute_job(store: JobStore, job: Job, *, output_dir: Path | None = None) -> JobRun:
    """Run ``job`` now (no claiming), save and deliver its output, record the result; return the run."""
    started = utcnow()
    outcome = _run_kind(job)
    finished = utcnow()
    warnings = list(outcome.warnings)
    body = outcome.response
    if outcome.error:
        body = (body + "\n\n" if body else "") + f"**{outcome.status}:** {outcome.error}"
    silent = outcome.status == "ok" and is_silent(outcome.response)
    output: Path | None = None
    try:
        output = save_output(
            job, started, render_output(job, started, outcome.status, body, warnings), root=output_dir
        )
    except KindlingError as exc:
        warnings.append(f"Output not saved: {exc}")
    delivered = False
    if job.deliver and job.deliver != LOCAL and not silent:
        try:
            deliver(job.deliver, title=f"kindling: {job.name} ({outcome.status})", body=body or "(empty)")
            delivered = True
        except KindlingError as exc:
            warnings.append(f"Delivery failed: {exc}")
    for warning in warnings:
        log.warning("Job %s: %s", job.name, warning)
    record = {
        "last_run_at": started,
        "last_status": outcome.status,
        "last_error": outcome.error,
        "last_output": str(output) if output else None,
        "last_warnings": warnings,
    }
    try:
        store.update(job.id, record)
    except KindlingError as exc:  # removed while running, or the store went away: say so, keep going
        log.warning("Job %s: result not recorded: %s", job.name, exc)
        warnings.append(f"Result not recorded: {exc}")
    return JobRun(
        job_id=job.id,
        name=job.name,
        status=outcome.status,
        started_at=started,
        finished_at=finished,
        error=outcome.error,
        output=str(output) if output else None,
        delivered=delivered,
        silent=silent,
        warnings=warnings,
    )


def tick(
    store: JobStore | None = None, *, now: datetime | None = None, output_dir: Path | None = None
) -> TickResult:
    """Run every job due at ``now`` (default: the current time) once; return what happened.

    Returns ``locked=True`` without running anything when another tick holds the store's lock.
    Raises StoreError only when the store itself cannot be read.
    """
    store = store or open_job_store()
    at = as_utc(now) if now is not None else utcnow()
    result = TickResult(at=at)
    with store.tick_lock() as acquired:
        if not acquired:
            result.locked = True
            return result
        due = store.due(at)
        result.unreadable = list(store.skipped)
        for job in due:
            claimed = store.claim(job, claim_changes(job, at))
            if claimed is None:
                result.lost_claims.append(job.id)
                continue
            result.runs.append(execute_job(store, claimed, output_dir=output_dir))
    return result


def run_job_now(store: JobStore, ref: str, *, output_dir: Path | None = None) -> JobRun:
    """Run one job immediately, whatever its schedule; its next scheduled run is unchanged.

    Raises NotFoundError when there is no such job.
    """
    return execute_job(store, store.get(ref), output_dir=output_dir)


def add_job(store: JobStore, job: Job) -> list[str]:
    """Store a new job after checking it can ever run (:func:`check_job`); return its warnings.

    Raises ConfigError, ModelContextError or InvalidNameError, and then stores nothing.
    """
    warnings = check_job(job)
    store.add(job)
    return warnings


def edit_job(
    store: JobStore, ref: str, changes: Mapping[str, Any], *, now: datetime | None = None
) -> tuple[Job, list[str]]:
    """Change a stored job (see :func:`edited_job`) after the same checks as a new job.

    Returns the saved job and its warnings. Raises NotFoundError, or what make_job and check_job
    raise, and then changes nothing.
    """
    job = edited_job(store.get(ref), changes, now=now)
    warnings = check_job(job)
    saved = store.update(ref, job.model_dump(exclude={"id", "created_at"}))
    return saved, warnings


def resume_changes(job: Job, *, now: datetime | None = None) -> dict[str, Any]:
    """Return the changes that resume a paused job: enabled, and a future next run for recurring jobs."""
    at = as_utc(now) if now is not None else utcnow()
    schedule = parse_schedule(job.schedule, now=at)
    changes: dict[str, Any] = {"enabled": True}
    if job.repeat.exhausted:
        return changes
    if schedule.recurring and (job.next_run_at is None or job.next_run_at < at):
        changes["next_run_at"] = first_run(schedule, now=at)
    return changes


def run_daemon(
    store: JobStore | None = None,
    *,
    interval: float = DAEMON_INTERVAL,
    stop: threading.Event | None = None,
    max_ticks: int | None = None,
    on_tick: Callable[[TickResult], None] | None = None,
) -> int:
    """Tick every ``interval`` seconds until ``stop`` is set or ``max_ticks`` ticks ran; return the count.

    A tick that fails (the store is briefly unreachable) is logged and the daemon keeps going.
    """
    store = store or open_job_store()
    stop = stop or threading.Event()
    ticks = 0
    while not stop.is_set():
        try:
            result = tick(store)
            if on_tick is not None:
                on_tick(result)
        except KindlingError as exc:
            log.error("Tick failed: %s", exc)
        ticks += 1
        if max_ticks is not None and ticks >= max_ticks:
            break
        stop.wait(interval)
    return ticks


def scheduler_status(store: JobStore | None = None, *, now: datetime | None = None) -> dict[str, Any]:
    """Return a summary of the store: counts, the next due job, the last run, failing jobs, lock state.

    ``unfinished`` lists jobs whose last run started but never recorded a result while no tick is
    running: the process running them was killed or crashed (the slot is not re-run).
    """
    store = store or open_job_store()
    at = as_utc(now) if now is not None else utcnow()
    jobs = store.list()
    pending = [j for j in jobs if j.enabled and j.next_run_at is not None]
    upcoming = min(pending, key=lambda j: j.next_run_at or at, default=None)
    ran = [j for j in jobs if j.last_run_at is not None]
    last = max(ran, key=lambda j: j.last_run_at or at, default=None)
    tick_running = store.tick_running()
    return {
        "store": store.location,
        "jobs": len(jobs),
        "enabled": sum(1 for j in jobs if j.enabled),
        "paused": sum(1 for j in jobs if not j.enabled),
        "finished": sum(1 for j in jobs if j.enabled and j.next_run_at is None),
        "due_now": sum(1 for j in pending if j.next_run_at is not None and j.next_run_at <= at),
        "next": {"id": upcoming.id, "name": upcoming.name, "at": upcoming.next_run_at} if upcoming else None,
        "last_run": (
            {"id": last.id, "name": last.name, "at": last.last_run_at, "status": last.last_status}
            if last
            else None
        ),
        "failing": [
            {"id": j.id, "name": j.name, "status": j.last_status, "error": j.last_error}
            for j in jobs
            if j.last_status in ("error", "blocked")
        ],
        "unfinished": (
            []
            if tick_running
            else [{"id": j.id, "name": j.name, "at": j.last_run_at} for j in ran if j.last_status is None]
        ),
        "unreadable": list(store.skipped),
        "tick_running": tick_running,
    }

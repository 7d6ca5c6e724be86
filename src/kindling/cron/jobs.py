"""Scheduled jobs and where they live: a JSON file (default) or SQL (SQLite or PostgreSQL).

Both stores share one interface (:class:`JobStore`). The scheduler never trusts process memory for
safety: a job is *claimed* with a compare-and-set on its ``next_run_at`` (under a file lock, or with a
conditional UPDATE), so two ticks that race for the same slot cannot both win it.

A JSON file edited by hand may hold entries kindling cannot read: they are reported in
``store.skipped`` with a reason, left untouched, and written back unchanged, never dropped.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

import orjson
import sqlalchemy as sa
from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy.engine import Connection, Engine

from kindling.config import kindling_home
from kindling.db import (
    apply_migrations,
    create_engine,
    holds_table,
    is_url,
    missing_sqlite_file,
    normalize_url,
    redact_url,
    translate_errors,
)
from kindling.errors import ConfigError, InvalidNameError, NotFoundError, ScheduleError, StoreError
from kindling.fileio import file_lock, write_atomic

JobKind = Literal["build-template", "review", "prompt"]
JobStatus = Literal["ok", "error", "skipped", "blocked"]
JOB_KINDS: tuple[str, ...] = ("build-template", "review", "prompt")

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_TICK_LOCK_KEY = "kindling.cron.tick"
_MAX_COUNT = 10**12
_PAST_GRACE = timedelta(minutes=1)
# SQL writes are compare-and-set on the stored row; one retried this many times when it changed.
_CAS_ATTEMPTS = 5


def cron_dir() -> Path:
    """Return the scheduler's state directory, ``$KINDLING_HOME/cron``."""
    return kindling_home() / "cron"


def default_jobs_path() -> Path:
    """Return the default job file, ``$KINDLING_HOME/cron/jobs.json``."""
    return cron_dir() / "jobs.json"


def output_root() -> Path:
    """Return where job output is saved, ``$KINDLING_HOME/cron/output``."""
    return cron_dir() / "output"


def validate_name(value: str, kind: str = "job name") -> str:
    """Return ``value`` when it is safe as a file name (letters, digits, ``._-``, at most 64).

    Raises InvalidNameError otherwise.
    """
    if not isinstance(value, str) or not _SAFE_NAME.match(value) or ".." in value:
        raise InvalidNameError(
            f"{kind.capitalize()} {value!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit.",
            name=str(value),
            kind=kind,
        )
    return value


def new_job_id() -> str:
    """Return a fresh job id (12 hex characters)."""
    return uuid.uuid4().hex[:12]


def iso(value: datetime) -> str:
    """Render a datetime as fixed-width UTC ISO text, so text order is time order (SQL compares it)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Repeat(BaseModel):
    """How many times a job runs (``times``; None = forever) and how many runs it has started."""

    model_config = ConfigDict(extra="forbid")

    # Bounded so every count fits the 64-bit integers JSON and SQL store.
    times: int | None = Field(default=None, ge=1, le=_MAX_COUNT)
    completed: int = Field(default=0, ge=0, le=_MAX_COUNT)

    @property
    def exhausted(self) -> bool:
        """True when the job has started all the runs it was allowed."""
        return self.times is not None and self.completed >= self.times


class Job(BaseModel):
    """One scheduled job. ``args`` holds kind-specific settings (see docs/cron.md)."""

    # Unknown keys in a hand-edited file are kept and written back, never dropped.
    model_config = ConfigDict(extra="allow")

    id: str = Field(default_factory=new_job_id)
    name: str
    kind: JobKind
    schedule: str
    enabled: bool = True
    repeat: Repeat = Field(default_factory=Repeat)
    next_run_at: datetime | None = None
    last_run_at: datetime | None = None
    last_status: JobStatus | None = None
    last_error: str | None = None
    last_output: str | None = None
    last_warnings: list[str] = Field(default_factory=list)
    deliver: str = "local"
    prompt: str = ""
    skills: list[str] = Field(default_factory=list)
    model: str = ""
    provider: str = ""
    base_url: str = ""
    api_key_env: str = ""
    context_length: int | None = Field(default=None, ge=1, le=_MAX_COUNT)
    args: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        return validate_name(value, "job id")

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        return validate_name(value, "job name")

    @field_validator("skills")
    @classmethod
    def _check_skills(cls, value: list[str]) -> list[str]:
        return [validate_name(skill, "skill name") for skill in value]

    @field_validator("next_run_at", "last_run_at", "created_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)

    def to_dict(self) -> dict[str, Any]:
        """Return the job as JSON-ready data (datetimes as ISO text)."""
        return self.model_dump(mode="json")


def parse_job(data: Any) -> Job:
    """Validate one stored job. Raises StoreError naming the first problem when it is malformed."""
    try:
        return Job.model_validate(data)
    except InvalidNameError:
        raise
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "job"
        raise StoreError(f"{where}: {first.get('msg', 'invalid')}") from None


class JobStore(ABC):
    """Where jobs live. Every method re-reads the state, so several processes can share one store."""

    location: str
    skipped: list[str]

    @abstractmethod
    def list(self) -> list[Job]:
        """Return every readable job, oldest first; unreadable ones are reported in ``skipped``."""

    @abstractmethod
    def add(self, job: Job) -> Job:
        """Store a new job and return it. Raises InvalidNameError when its name is taken."""

    @abstractmethod
    def remove(self, ref: str) -> Job:
        """Delete a job by id or name and return it. Raises NotFoundError."""

    @abstractmethod
    def update(self, ref: str, changes: Mapping[str, Any]) -> Job:
        """Apply ``changes`` (field -> value) to a job atomically and return it. Raises NotFoundError."""

    @abstractmethod
    def claim(self, job: Job, changes: Mapping[str, Any]) -> Job | None:
        """Apply ``changes`` only if the job still has the ``next_run_at`` and ``enabled`` seen in ``job``.

        Returns the updated job, or None when another tick changed it first (the slot is taken).
        """

    @abstractmethod
    def tick_lock(self) -> contextlib.AbstractContextManager[bool]:
        """Hold the store's tick lock without waiting; the block receives False when it is held elsewhere."""

    def tick_running(self) -> bool:
        """True when a tick holds the lock now. Creates no file or directory when none is running."""
        with self.tick_lock() as free:
            return not free

    def get(self, ref: str) -> Job:
        """Return a job by id or name. Raises NotFoundError."""
        jobs = self.list()
        for job in jobs:
            if job.id == ref:
                return job
        for job in jobs:
            if job.name == ref:
                return job
        raise NotFoundError(f"No job {ref!r} in {self.location}.", kind="job", name=ref)

    def due(self, now: datetime) -> builtins.list[Job]:
        """Return enabled jobs whose ``next_run_at`` is at or before ``now``, earliest first."""
        jobs = [j for j in self.list() if j.enabled and j.next_run_at is not None and j.next_run_at <= now]
        return sorted(jobs, key=lambda j: (j.next_run_at or now, j.created_at))


def _absolute_path(value: Any) -> Any:
    """A relative file path as an absolute one (a job runs from wherever the daemon was started)."""
    if not isinstance(value, str) or not value or is_url(value):
        return value
    return os.path.abspath(os.path.expanduser(value))


def _absolute_sources(args: dict[str, Any]) -> dict[str, Any]:
    if isinstance(args.get("sources"), list):
        args["sources"] = [_absolute_path(source) for source in args["sources"]]
    for key in ("source", "store"):
        if args.get(key):
            args[key] = _absolute_path(args[key])
    return args


def _apply(job: Job, changes: Mapping[str, Any]) -> Job:
    data = job.model_dump()
    data.update(changes)
    return Job.model_validate(data)


def _find(entries: list[Any], ref: str) -> int | None:
    for key in ("id", "name"):
        for index, entry in enumerate(entries):
            if isinstance(entry, dict) and entry.get(key) == ref:
                return index
    return None


@contextlib.contextmanager
def _try_file_lock(path: Path) -> Iterator[bool]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"Cannot create {path.parent}: {exc.strerror or exc}.", path=path) from exc
    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


class JsonJobStore(JobStore):
    """Jobs in one JSON file, written atomically under a file lock."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_jobs_path()
        self.location = str(self.path)
        self.skipped = []

    def _read_entries(self) -> list[Any]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"Cannot read {self.path}: {exc.strerror or exc}.", path=self.path) from exc
        if not raw.strip():
            return []
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            # Never overwrite a file we cannot read: the user's jobs would be lost.
            raise StoreError(
                f"{self.path} is not valid JSON ({exc}); fix or move it.", path=self.path
            ) from exc
        entries = data.get("jobs") if isinstance(data, dict) else data
        if not isinstance(entries, list):
            raise StoreError(f"{self.path} has no 'jobs' list; fix or move it.", path=self.path)
        return entries

    def _write_entries(self, entries: list[Any]) -> None:
        payload = orjson.dumps({"version": 1, "jobs": entries}, option=orjson.OPT_INDENT_2)
        # 0600: delivery URLs carry tokens (bot tokens, webhook secrets).
        write_atomic(self.path, payload + b"\n", mode=0o600)

    def _parse_all(self, entries: list[Any]) -> list[Job]:
        jobs: list[Job] = []
        skipped: list[str] = []
        for index, entry in enumerate(entries):
            try:
                jobs.append(parse_job(entry))
            except (StoreError, InvalidNameError) as exc:
                label = entry.get("id") if isinstance(entry, dict) else None
                skipped.append(f"entry {index}{f' ({label})' if label else ''}: {exc}")
        self.skipped = skipped
        return jobs

    def list(self) -> list[Job]:
        """Return every readable job in file order; unreadable entries are reported in ``skipped``."""
        return self._parse_all(self._read_entries())

    def add(self, job: Job) -> Job:
        """Append a new job. Raises InvalidNameError when its id or name is taken."""
        with file_lock(self.path):
            entries = self._read_entries()
            for existing in self._parse_all(entries):
                if existing.name == job.name or existing.id == job.id:
                    raise InvalidNameError(
                        f"A job named {job.name!r} already exists in {self.path}.", name=job.name, kind="job"
                    )
            entries.append(job.to_dict())
            self._write_entries(entries)
        return job

    def remove(self, ref: str) -> Job:
        """Delete a job by id or name and return it. Raises NotFoundError."""
        with file_lock(self.path):
            entries = self._read_entries()
            index = _find(entries, ref)
            if index is None:
                raise NotFoundError(f"No job {ref!r} in {self.path}.", kind="job", name=ref)
            removed = entries.pop(index)
            self._write_entries(entries)
        try:
            return parse_job(removed)
        except (StoreError, InvalidNameError):
            return Job.model_construct(**removed)

    def update(self, ref: str, changes: Mapping[str, Any]) -> Job:
        """Apply ``changes`` to a job under the file lock and return it. Raises NotFoundError."""
        with file_lock(self.path):
            entries = self._read_entries()
            index = _find(entries, ref)
            if index is None:
                raise NotFoundError(f"No job {ref!r} in {self.path}.", kind="job", name=ref)
            job = _apply(parse_job(entries[index]), changes)
            entries[index] = job.to_dict()
            self._write_entries(entries)
        return job

    def claim(self, job: Job, changes: Mapping[str, Any]) -> Job | None:
        """Compare-and-set on ``next_run_at``/``enabled`` under the file lock; None when the slot is gone."""
        with file_lock(self.path):
            entries = self._read_entries()
            index = _find(entries, job.id)
            if index is None:
                return None
            try:
                current = parse_job(entries[index])
            except (StoreError, InvalidNameError):
                return None  # hand-edited into something unreadable since due(); list() reports it
            if current.next_run_at != job.next_run_at or not current.enabled:
                return None
            claimed = _apply(current, changes)
            entries[index] = claimed.to_dict()
            self._write_entries(entries)
        return claimed

    def tick_lock(self) -> contextlib.AbstractContextManager[bool]:
        """A non-blocking file lock on ``jobs.json.tick.lock``."""
        return _try_file_lock(self._tick_lock_path)

    @property
    def _tick_lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".tick.lock")

    def tick_running(self) -> bool:
        """True when a tick holds the lock now; a tick creates the lock file, so no file means none."""
        return self._tick_lock_path.exists() and super().tick_running()


_metadata = sa.MetaData()
_jobs_table = sa.Table(
    "kindling_cron_jobs",
    _metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("next_run_at", sa.String(40), nullable=True, index=True),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("data", sa.Text, nullable=False),
)


def m001_initial(conn: Connection) -> None:
    """Create the job table."""
    _jobs_table.create(conn, checkfirst=True)


MIGRATIONS = (m001_initial,)


def _row_values(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "name": job.name,
        "kind": job.kind,
        "enabled": job.enabled,
        "next_run_at": iso(job.next_run_at) if job.next_run_at else None,
        "created_at": iso(job.created_at),
        "data": orjson.dumps(job.to_dict()).decode("utf-8"),
    }


class SqlJobStore(JobStore):
    """Jobs in a SQL table (SQLite file or PostgreSQL); claims are conditional UPDATEs."""

    def __init__(self, target: str | Path, *, engine: Engine | None = None) -> None:
        self.target = target
        self.location = redact_url(target)
        self.skipped = []
        self.engine = engine or create_engine(target)
        with translate_errors(target, "migrate"):
            apply_migrations(self.engine, "cron", MIGRATIONS)

    @property
    def is_postgres(self) -> bool:
        """True when the jobs live in PostgreSQL (ticks then lock with an advisory lock)."""
        return self.engine.dialect.name == "postgresql"

    def _parse_rows(self, rows: list[Any]) -> list[Job]:
        jobs: list[Job] = []
        skipped: list[str] = []
        for row in rows:
            try:
                jobs.append(parse_job(orjson.loads(row.data)))
            except (StoreError, InvalidNameError, orjson.JSONDecodeError) as exc:
                skipped.append(f"row {row.id}: {exc}")
        self.skipped = skipped
        return jobs

    def list(self) -> list[Job]:
        """Return every readable job, oldest first; unreadable rows are reported in ``skipped``."""
        with translate_errors(self.target, "read"), self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(_jobs_table).order_by(_jobs_table.c.created_at, _jobs_table.c.id)
            ).all()
        return self._parse_rows(list(rows))

    def due(self, now: datetime) -> builtins.list[Job]:
        """Return enabled jobs due at ``now``, selected in SQL."""
        table = _jobs_table
        query = (
            sa.select(table)
            .where(
                table.c.enabled.is_(True), table.c.next_run_at.is_not(None), table.c.next_run_at <= iso(now)
            )
            .order_by(table.c.next_run_at, table.c.created_at)
        )
        with translate_errors(self.target, "read"), self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return self._parse_rows(list(rows))

    def add(self, job: Job) -> Job:
        """Insert a new job. Raises InvalidNameError when its id or name is taken."""
        try:
            with self.engine.begin() as conn:
                conn.execute(_jobs_table.insert().values(**_row_values(job)))
        except sa.exc.IntegrityError:
            raise InvalidNameError(
                f"A job named {job.name!r} already exists in {self.location}.", name=job.name, kind="job"
            ) from None
        except sa.exc.SQLAlchemyError as exc:
            with translate_errors(self.target, "write"):
                raise exc
        return job

    def _locate(self, conn: Connection, ref: str, *, lock: bool = False) -> Any:
        for column in (_jobs_table.c.id, _jobs_table.c.name):
            query = sa.select(_jobs_table).where(column == ref)
            if lock:
                query = query.with_for_update()
            row = conn.execute(query).first()
            if row is not None:
                return row
        raise NotFoundError(f"No job {ref!r} in {self.location}.", kind="job", name=ref)

    def remove(self, ref: str) -> Job:
        """Delete a job by id or name and return it. Raises NotFoundError."""
        with translate_errors(self.target, "write"), self.engine.begin() as conn:
            row = self._locate(conn, ref, lock=True)
            conn.execute(_jobs_table.delete().where(_jobs_table.c.id == row.id))
        return Job.model_validate(orjson.loads(row.data))

    def _write_if_unchanged(self, conn: Connection, row: Any, job: Job) -> bool:
        # Compare-and-set on the whole stored row: SQLite reads outside the write transaction, so
        # a row read here may be stale by the time it is written; then nothing is written.
        table = _jobs_table
        result = conn.execute(
            table.update().where(table.c.id == row.id, table.c.data == row.data).values(**_row_values(job))
        )
        return result.rowcount == 1

    def update(self, ref: str, changes: Mapping[str, Any]) -> Job:
        """Apply ``changes`` to a job atomically (compare-and-set, retried) and return it.

        Raises NotFoundError, or StoreError when the job kept changing under every attempt.
        """
        for _attempt in range(_CAS_ATTEMPTS):
            with translate_errors(self.target, "write"), self.engine.begin() as conn:
                row = self._locate(conn, ref, lock=True)
                job = _apply(parse_job(orjson.loads(row.data)), changes)
                if self._write_if_unchanged(conn, row, job):
                    return job
        raise StoreError(f"Job {ref!r} in {self.location} kept changing during the update; try again.")

    def claim(self, job: Job, changes: Mapping[str, Any]) -> Job | None:
        """Conditional UPDATE on the ``next_run_at`` seen; None when another tick won the slot.

        The changes apply to the job as it is stored now, not to ``job``: a tick's snapshot can be
        minutes old by the time a slot is claimed, and writing it back would undo edits and results
        recorded meanwhile. The whole stored row is part of the condition, so a concurrent edit
        makes the UPDATE miss and the claim is tried again on the fresh row.
        """
        if job.next_run_at is None:
            return None
        slot = iso(job.next_run_at)
        table = _jobs_table
        for _attempt in range(_CAS_ATTEMPTS):
            with translate_errors(self.target, "write"), self.engine.begin() as conn:
                row = conn.execute(sa.select(table).where(table.c.id == job.id)).first()
                if row is None or row.next_run_at != slot or not row.enabled:
                    return None
                try:
                    claimed = _apply(parse_job(orjson.loads(row.data)), changes)
                except (StoreError, InvalidNameError, orjson.JSONDecodeError):
                    return None  # became unreadable since due() read it; list() reports it
                # ``data`` is the job itself (the other columns index it): unchanged data, same slot.
                if self._write_if_unchanged(conn, row, claimed):
                    return claimed
        return None

    @contextlib.contextmanager
    def _advisory_lock(self) -> Iterator[bool]:
        # A dedicated connection holds the session-level lock; if this process dies the server
        # drops the connection and the lock with it, so a crash never wedges the scheduler.
        with translate_errors(self.target, "lock"):
            conn = self.engine.connect()
        try:
            with translate_errors(self.target, "lock"):
                got = bool(
                    conn.execute(
                        sa.text("SELECT pg_try_advisory_lock(hashtext(:key))"), {"key": _TICK_LOCK_KEY}
                    ).scalar()
                )
                conn.commit()
            try:
                yield got
            finally:
                if got:
                    with contextlib.suppress(sa.exc.SQLAlchemyError):
                        conn.execute(
                            sa.text("SELECT pg_advisory_unlock(hashtext(:key))"), {"key": _TICK_LOCK_KEY}
                        )
                        conn.commit()
        finally:
            conn.close()

    def tick_lock(self) -> contextlib.AbstractContextManager[bool]:
        """A PostgreSQL advisory lock, or a file lock beside the SQLite file."""
        if self.is_postgres:
            return self._advisory_lock()
        url = normalize_url(self.target)
        db_path = Path(url[len("sqlite:///") :]) if url.startswith("sqlite:///") else cron_dir() / "sql"
        return _try_file_lock(db_path.with_name(db_path.name + ".tick.lock"))


def open_job_store(target: str | Path | None = None, *, create: bool = True) -> JobStore:
    """Open the job store named by ``target``.

    With ``create=False`` (read-only commands) a SQLite file that does not exist is not created, and
    a database without the jobs table is not migrated: NotFoundError says so instead. A missing JSON file simply holds no jobs.

    None uses ``$KINDLING_CRON_DB`` when set, else ``$KINDLING_HOME/cron/jobs.json``. A ``.json`` path
    is a JSON file; any other path (e.g. ``jobs.db``) or a ``sqlite://`` / ``postgresql://`` URL is SQL.
    Raises StoreError when the database cannot be opened.
    """
    if target is None or str(target) == "":
        target = os.environ.get("KINDLING_CRON_DB") or None
    if target is None:
        return JsonJobStore()
    if not is_url(target) and str(target).endswith(".json"):
        return JsonJobStore(target)
    missing = None if create else missing_sqlite_file(target)
    if missing is not None:
        raise NotFoundError(
            f"No job database at {missing} yet; `kindling cron add --db {missing}` creates it.",
            kind="job store",
            name=str(missing),
        )
    if not create and not holds_table(target, _jobs_table.name):
        # An empty PostgreSQL database, or another program's SQLite file: a read leaves it be.
        where = redact_url(target)
        raise NotFoundError(
            f"No jobs in {where} yet; `kindling cron add --db {where}` creates the table.",
            kind="job store",
            name=where,
        )
    return SqlJobStore(target)


EDITABLE_FIELDS: tuple[str, ...] = (
    "name",
    "schedule",
    "repeat",
    "prompt",
    "skills",
    "model",
    "provider",
    "base_url",
    "api_key_env",
    "context_length",
    "deliver",
    "args",
)


def edited_job(job: Job, changes: Mapping[str, Any], *, now: datetime | None = None) -> Job:
    """Return ``job`` with ``changes`` applied, validated as strictly as a new job.

    ``changes`` may hold any of EDITABLE_FIELDS; ``repeat`` is a run count (None = forever) and
    ``args`` is merged into the job's args. A new schedule or repeat count gets a new next run; the
    job keeps its id, history and runs so far. Raises ConfigError, ScheduleError or InvalidNameError
    like :func:`make_job`.
    """
    unknown = sorted(set(changes) - set(EDITABLE_FIELDS))
    if unknown:
        raise ConfigError(f"Cannot edit job setting(s): {', '.join(unknown)}.")
    fields: dict[str, Any] = {
        key: getattr(job, key) for key in EDITABLE_FIELDS if key not in ("repeat", "args")
    }
    fields.update({key: value for key, value in changes.items() if key not in ("repeat", "args")})
    args = {**job.args, **dict(changes.get("args") or {})}
    reschedule = "schedule" in changes or "repeat" in changes
    times = changes.get("repeat", job.repeat.times)
    name, schedule = fields.pop("name"), fields.pop("schedule")
    # An unchanged schedule is checked as of when the job was made: a one-off time that has since
    # passed is the job's history, not a typo.
    fresh = make_job(
        name, job.kind, schedule, now=now if reschedule else job.created_at, repeat=times, args=args, **fields
    )
    data = job.model_dump()
    data.update(fresh.model_dump(include={*EDITABLE_FIELDS} - {"repeat"}))
    data["repeat"] = {"times": fresh.repeat.times, "completed": job.repeat.completed}
    if reschedule:
        data["next_run_at"] = fresh.next_run_at
    return Job.model_validate(data)


def make_job(
    name: str,
    kind: str,
    schedule: str,
    *,
    now: datetime | None = None,
    repeat: int | None = None,
    **fields: Any,
) -> Job:
    """Build a new, validated job whose first run follows from ``schedule`` (not yet stored).

    One-off schedules run once unless ``repeat`` says otherwise. Relative source and store paths in
    ``args`` are stored absolute. Raises ScheduleError for a bad
    schedule or a one-off time already past, InvalidNameError for an unsafe name and ConfigError for missing kind settings or a
    delivery URL Apprise does not understand.
    """
    from kindling.cron.schedule import as_utc, first_run, parse_schedule

    if kind not in JOB_KINDS:
        raise ConfigError(f"Job kind {kind!r} is not one of {', '.join(JOB_KINDS)}.")
    validate_name(name, "job name")
    parsed = parse_schedule(schedule, now=now)
    added_at = now if now is not None else datetime.now(timezone.utc)
    if parsed.run_at is not None and parsed.run_at < as_utc(added_at) - _PAST_GRACE:
        # A one-off time already gone is a typo (a year, a zone) far more often than "run now".
        raise ScheduleError(
            f"Schedule {parsed.expression!r} is in the past ({parsed.run_at:%Y-%m-%d %H:%M} UTC); "
            "give a future time, or a delay such as '1m' to run it soon.",
            expression=parsed.expression,
        )
    unknown = sorted(set(fields) - set(Job.model_fields))
    if unknown:
        raise ConfigError(f"Unknown job setting(s): {', '.join(unknown)}.")
    args = _absolute_sources(dict(fields.pop("args", None) or {}))
    if kind == "prompt" and not str(fields.get("prompt") or "").strip():
        raise ConfigError("A prompt job needs a prompt.")
    if kind == "build-template":
        validate_name(str(args.get("template") or ""), "template name")
    if fields.get("deliver"):
        from kindling.cron.apprise_urls import check_delivery_url

        check_delivery_url(str(fields["deliver"]))
    if repeat is not None and repeat > 1 and not parsed.recurring:
        # A one-off slot has no second run: a silent single run would surprise whoever asked for more.
        raise ConfigError(
            f"Schedule {parsed.expression!r} runs once, so it cannot repeat {repeat} times; give the "
            "repeat count with an interval ('every 30m') or a cron expression."
        )
    times = repeat if repeat is not None else (None if parsed.recurring else 1)
    try:
        # Validated as one document, so an error names its full place ("repeat.times").
        return Job.model_validate(
            {
                **fields,
                "name": name,
                "kind": kind,
                "schedule": parsed.expression,
                "next_run_at": first_run(parsed, now=now),
                "repeat": {"times": times},
                "args": args,
            }
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "job"
        raise ConfigError(f"Invalid job setting {where}: {first.get('msg', 'invalid')}.") from None

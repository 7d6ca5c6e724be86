"""Schedule expressions: when a job first runs and when it runs next, always in UTC.

Four forms are understood::

    "30m" / "2h" / "1d"      once, after a delay from now
    "every 30m"              an interval, first run one interval from now
    "0 9 * * 1-5"            a 5-field cron expression (croniter)
    "2026-12-01T09:00:00Z"   once, at an ISO timestamp (a naive timestamp is read as UTC)

Anything else raises ScheduleError with a sentence saying what would work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Literal

from croniter import croniter

from kindling.errors import ScheduleError

ScheduleKind = Literal["once", "interval", "cron"]

_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400}
_UNIT_ALIASES = {
    "m": "m",
    "min": "m",
    "mins": "m",
    "minute": "m",
    "minutes": "m",
    "h": "h",
    "hr": "h",
    "hrs": "h",
    "hour": "h",
    "hours": "h",
    "d": "d",
    "day": "d",
    "days": "d",
}
_MAX_SECONDS = 3650 * 86400  # ten years
_DURATION = re.compile(r"^\s*(\d+)\s*([a-zA-Z]+)\s*$")
_HELP = (
    'use a delay ("30m", "2h", "1d"), an interval ("every 30m"), a 5-field cron expression '
    '("0 9 * * *") or an ISO timestamp ("2026-12-01T09:00:00Z")'
)


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: its kind, the text it came from and what it needs to compute run times.

    ``run_at`` is set for ``once`` schedules, ``interval_seconds`` for ``interval`` and ``cron``
    for ``cron`` schedules.
    """

    kind: ScheduleKind
    expression: str
    run_at: datetime | None = None
    interval_seconds: int | None = None
    cron: str | None = None

    @property
    def recurring(self) -> bool:
        """True for schedules that run more than once (interval and cron)."""
        return self.kind != "once"

    def describe(self) -> str:
        """Return a short human description, e.g. ``every 30m`` or ``once at 2026-12-01 09:00 UTC``."""
        if self.kind == "once" and self.run_at is not None:
            return f"once at {self.run_at:%Y-%m-%d %H:%M} UTC"
        if self.kind == "interval" and self.interval_seconds is not None:
            return f"every {format_duration(self.interval_seconds)}"
        return f"cron {self.cron}"


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(timezone.utc)


def as_utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime; a naive value is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def format_duration(seconds: int) -> str:
    """Render a whole number of seconds in the largest unit that divides it (``90m``, ``2h``, ``1d``)."""
    for unit in ("d", "h", "m"):
        size = _UNIT_SECONDS[unit]
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def parse_duration(text: str) -> int:
    """Parse ``"30m"``, ``"2h"``, ``"1d"`` (and long unit names) into seconds.

    Raises ScheduleError for anything else, including zero and more than ten years.
    """
    match = _DURATION.match(text)
    unit = _UNIT_ALIASES.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise ScheduleError(
            f"{text.strip()!r} is not a duration; use a number and m, h or d, like 30m, 2h or 1d.",
            expression=text,
        )
    seconds = int(match.group(1)) * _UNIT_SECONDS[unit]
    if seconds <= 0:
        raise ScheduleError(f"{text.strip()!r} is zero; a duration must be at least 1m.", expression=text)
    if seconds > _MAX_SECONDS:
        # Past this, run times overflow Python's datetime (year 9999) instead of failing cleanly.
        raise ScheduleError(
            f"{text.strip()!r} is too long; a duration must be at most {_MAX_SECONDS // 86400}d.",
            expression=text,
        )
    return seconds


def _parse_timestamp(text: str) -> datetime | None:
    candidate = text.strip()
    # Python 3.10's fromisoformat does not accept a trailing "Z".
    if candidate.endswith(("Z", "z")):
        candidate = candidate[:-1] + "+00:00"
    if not re.match(r"^\d{4}-\d{2}-\d{2}", candidate):
        return None
    try:
        return as_utc(datetime.fromisoformat(candidate))
    except ValueError:
        return None


def parse_schedule(expression: str, *, now: datetime | None = None) -> Schedule:
    """Parse a schedule expression; delays are measured from ``now`` (default: the current time).

    Returns a Schedule. Raises ScheduleError with a clear sentence for anything not understood.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise ScheduleError(f"An empty schedule is not understood; {_HELP}.", expression=str(expression))
    text = " ".join(expression.split())
    start = as_utc(now) if now is not None else utcnow()
    lowered = text.lower()
    if lowered.startswith("every "):
        try:
            seconds = parse_duration(text[len("every ") :])
        except ScheduleError as exc:
            raise ScheduleError(f"Schedule {text!r}: {exc}", expression=text) from None
        return Schedule(kind="interval", expression=text, interval_seconds=seconds)
    if _DURATION.match(text):
        seconds = parse_duration(text)
        return Schedule(kind="once", expression=text, run_at=start + timedelta(seconds=seconds))
    stamp = _parse_timestamp(text)
    if stamp is not None:
        return Schedule(kind="once", expression=text, run_at=stamp)
    fields = text.split(" ")
    if len(fields) == 5 and croniter.is_valid(text):
        return Schedule(kind="cron", expression=text, cron=text)
    if len(fields) == 5:
        raise ScheduleError(f"{text!r} is not a valid cron expression; {_HELP}.", expression=text)
    raise ScheduleError(f"Schedule {text!r} is not understood; {_HELP}.", expression=text)


def first_run(schedule: Schedule, *, now: datetime | None = None) -> datetime:
    """Return when a newly added job with this schedule first runs (UTC)."""
    start = as_utc(now) if now is not None else utcnow()
    if schedule.kind == "once":
        assert schedule.run_at is not None
        return schedule.run_at
    if schedule.kind == "interval":
        assert schedule.interval_seconds is not None
        return start + timedelta(seconds=schedule.interval_seconds)
    return _cron_next(schedule, start)


def next_run_after(schedule: Schedule, due: datetime, *, now: datetime | None = None) -> datetime | None:
    """Return the run after the slot ``due``, skipping slots already in the past; None for ``once``.

    A scheduler that was down for a day runs a recurring job once, not once per missed slot.
    """
    current = as_utc(now) if now is not None else utcnow()
    due = as_utc(due)
    if schedule.kind == "once":
        return None
    if schedule.kind == "interval":
        assert schedule.interval_seconds is not None
        step = timedelta(seconds=schedule.interval_seconds)
        candidate = due + step
        if candidate <= current:
            missed = (current - candidate) // step + 1
            candidate += step * missed
        return candidate
    return _cron_next(schedule, max(due, current))


def _cron_next(schedule: Schedule, after: datetime) -> datetime:
    assert schedule.cron is not None
    try:
        value = croniter(schedule.cron, after).get_next(datetime)
    except (ValueError, KeyError) as exc:  # croniter raises these for expressions with no next time
        raise ScheduleError(
            f"Cron expression {schedule.cron!r} has no next run time: {exc}.", expression=schedule.cron
        ) from exc
    return as_utc(value)

"""Schedule expressions: every accepted form, run-time arithmetic in UTC, and clear errors."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from kindling.cron.schedule import (
    as_utc,
    first_run,
    format_duration,
    next_run_after,
    parse_duration,
    parse_schedule,
)
from kindling.errors import ScheduleError

NOW = datetime(2026, 11, 21, 10, 7, 30, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800), ("2h", 7200), ("1d", 86400), ("90 minutes", 5400), ("3 hours", 10800), ("2days", 172800)],
)
def test_delay_runs_once_after_the_delay(text: str, seconds: int) -> None:
    schedule = parse_schedule(text, now=NOW)
    assert schedule.kind == "once"
    assert not schedule.recurring
    assert schedule.run_at == NOW + timedelta(seconds=seconds)
    assert first_run(schedule, now=NOW) == NOW + timedelta(seconds=seconds)
    assert next_run_after(schedule, schedule.run_at, now=NOW) is None


def test_interval_first_run_is_one_interval_away_and_then_steps() -> None:
    schedule = parse_schedule("every 30m", now=NOW)
    assert schedule.kind == "interval"
    assert schedule.interval_seconds == 1800
    assert schedule.describe() == "every 30m"
    first = first_run(schedule, now=NOW)
    assert first == NOW + timedelta(minutes=30)
    assert next_run_after(schedule, first, now=first) == first + timedelta(minutes=30)


def test_interval_after_downtime_skips_missed_slots_and_stays_on_the_grid() -> None:
    schedule = parse_schedule("every 1h")
    due = datetime(2026, 11, 21, 0, 0, tzinfo=timezone.utc)
    later = datetime(2026, 11, 21, 5, 20, tzinfo=timezone.utc)
    assert next_run_after(schedule, due, now=later) == datetime(2026, 11, 21, 6, 0, tzinfo=timezone.utc)


def test_cron_expression_next_runs_in_utc() -> None:
    schedule = parse_schedule("0 9 * * 1-5")
    assert schedule.kind == "cron"
    assert schedule.recurring
    # 2026-11-21 is a Saturday: the next weekday 09:00 is Monday the 23rd.
    assert first_run(schedule, now=NOW) == datetime(2026, 11, 23, 9, 0, tzinfo=timezone.utc)
    monday = datetime(2026, 11, 23, 9, 0, tzinfo=timezone.utc)
    assert next_run_after(schedule, monday, now=monday) == datetime(2026, 11, 24, 9, 0, tzinfo=timezone.utc)


def test_cron_every_five_minutes_and_extra_spaces() -> None:
    schedule = parse_schedule("  */5   *  * * * ")
    assert schedule.expression == "*/5 * * * *"
    assert first_run(schedule, now=NOW) == datetime(2026, 11, 21, 10, 10, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01T09:00:00Z", datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)),
        ("2026-12-01T09:00:00+02:00", datetime(2026, 12, 1, 7, 0, tzinfo=timezone.utc)),
        ("2026-12-01T09:00", datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)),
        ("2026-12-01", datetime(2026, 12, 1, 0, 0, tzinfo=timezone.utc)),
    ],
)
def test_iso_timestamp_runs_once_at_that_time_in_utc(text: str, expected: datetime) -> None:
    schedule = parse_schedule(text, now=NOW)
    assert schedule.kind == "once"
    assert schedule.run_at == expected
    assert schedule.run_at.tzinfo is not None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "soon",
        "0m",
        "every 0h",
        "every",
        "every day",
        "30x",
        "-5m",
        "61 * * * *",
        "* * * *",
        "0 0 * * * *",
        "2026-13-45T99:00",
        "tomorrow at 9",
        "999999999d",
        "every 99999999d",
        "every 9999999999999999999999d",
    ],
)
def test_bad_schedules_raise_a_clear_schedule_error(text: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(text, now=NOW)
    message = str(info.value)
    assert "30m" in message or "duration" in message or "cron" in message
    assert info.value.exit_code == 2


def test_parse_duration_and_format_duration_round_trip() -> None:
    for seconds in (60, 1800, 3600, 7200, 86400, 5400):
        assert parse_duration(format_duration(seconds)) == seconds
    assert format_duration(90) == "90s"


def test_as_utc_treats_naive_as_utc_and_converts_aware() -> None:
    naive = datetime(2026, 1, 1, 12, 0)
    assert as_utc(naive) == datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    aware = datetime(2026, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=-5)))
    assert as_utc(aware) == datetime(2026, 1, 1, 17, 0, tzinfo=timezone.utc)


def test_a_cron_expression_that_never_fires_fails_when_its_first_run_is_computed() -> None:
    schedule = parse_schedule("0 0 30 2 *")  # February 30th: valid syntax, no date
    with pytest.raises(ScheduleError, match="no next run time"):
        first_run(schedule, now=NOW)

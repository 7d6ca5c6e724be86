"""The load benchmark runs (``--quick``) on SQLite and PostgreSQL and prints its figures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "confirm_load.py"


@pytest.mark.postgres
def test_confirm_load_quick_prints_figures(pg_url: str) -> None:
    admin = pg_url.rpartition("/")[0] + "/postgres"
    result = subprocess.run(
        [sys.executable, str(BENCH), "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"KINDLING_TEST_PG": admin, "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for backend in ("sqlite", "postgresql"):
        line = re.search(
            rf"confirm_load {backend}: .*rps=([\d.]+) p50_ms=([\d.]+) p99_ms=([\d.]+) "
            r"accepted=(\d+) lost=0 errors=0 audit=ok",
            result.stdout,
        )
        assert line, result.stdout
        assert float(line.group(1)) > 0 and int(line.group(4)) > 0
        assert re.search(rf"confirm_load {backend}: ratio .* = [\d.]+", result.stdout)
        waiters = re.search(
            rf"confirm_load {backend}: one client's loop alone [\d.]+ cycles/s, beside 256 idle long polls "
            r"[\d.]+ cycles/s: ratio ([\d.]+)x .* woken_waiters=0 errors=0",
            result.stdout,
        )
        assert waiters and float(waiters.group(1)) > 0, result.stdout
    assert "nothing lost" in result.stdout

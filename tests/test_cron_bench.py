"""The scheduler benchmark still runs and prints its figures (so the script cannot rot)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "cron.py"


def test_cron_bench_quick_prints_its_ratios() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "baseline: one atomic output write" in done.stdout
    for store in ("json", "sqlite"):
        line = next(line for line in done.stdout.splitlines() if line.startswith(f"{store} store:"))
        assert re.search(r"20 due jobs, [\d.]+ ms/job = [\d.]+x baseline", line), line

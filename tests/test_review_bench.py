"""The review-overhead bench still runs and prints its figures (so the script cannot rot)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_review_overhead_bench_quick_prints_figures() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "review_overhead.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "turns per variant: 30" in out
    for label in (
        "median turn without review",
        "median turn with spawn_review",
        "added to the turn (difference of medians)",
        "median spawn_review call alone",
    ):
        assert re.search(rf"{re.escape(label)}: -?\d+\.\d{{3}} ms", out), label
    assert re.search(r"ratio with/without: \d+\.\d\dx", out)
    assert "reviews that failed: 0" in out

"""The proxy bench still runs and prints its figures (so the script cannot rot)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_proxy_bench_quick_prints_figures() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "proxy.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "non-streaming calls per target: 60 (15 conversations of 4)" in out
    for label in ("bare forwarder added latency", "kindling proxy added latency"):
        assert re.search(rf"{label}: p50 -?\d+\.\d{{3}} ms, p99 -?\d+\.\d{{3}} ms", out), label
    assert re.search(r"proxy added p50 / bare forwarder added p50: -?\d+\.\d\dx", out)
    assert re.search(r"time to first chunk proxy/direct: \d+\.\d{3}x", out)
    assert re.search(r"throughput proxy/direct: \d+\.\d\dx", out)
    # Every conversation was warmed and recorded, and nothing was left behind or dropped.
    found = re.search(r"proxy: conversations (\d+), warmed (\d+), .* pending (\d+), dropped (\d+)", out)
    assert found is not None, out
    conversations, warmed, pending, dropped = map(int, found.groups())
    assert conversations > 0 and warmed == conversations and pending == 0 and dropped == 0

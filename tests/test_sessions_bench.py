"""The reader benchmark still runs and prints its figures (at small sizes), so it cannot rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "read_sessions.py"


def test_read_sessions_bench_quick_prints_its_ratios() -> None:
    result = subprocess.run(
        # --quick's 50 sessions against 300 instead of 1,000: the same code paths and printed figures,
        # with half the time spent generating and reading the large database.
        [
            sys.executable,
            str(BENCH),
            *("--small", "50", "--large", "300", "--repeat", "1", "--rounds", "1", "--copies", "2"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"peak memory reading 50 sessions \([\d,]+ messages\): [\d.]+ MB", out), out
    assert re.search(r"memory ratio 300/50 sessions: [\d.]+x", out), out
    assert re.search(r"plain SELECT: [\d,]+ messages/s", out), out
    ratio = re.search(r"reader speed vs plain SELECT: ([\d.]+)x", out)
    assert ratio is not None and 0 < float(ratio.group(1)) < 10, out
    # Each coding agent's format, against json.loads over the same files.
    for label in ("claude-code", "codex ", "codex (older layout)", "openhands", "swe-agent", "openai-agents"):
        line = next((line for line in out.splitlines() if line.startswith(label)), None)
        assert line is not None, out
        assert re.search(r"ratio [\d.]+x \(rounds [\d.]+-[\d.]+x", line), line

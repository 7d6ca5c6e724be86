"""bench/mining.py --quick runs end to end and prints its figures, so the script cannot rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_quick_prints_figures(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mining.py"), "--quick", "--cache", str(tmp_path)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "warning" not in out
    for kind in ("baseline", "reader", "mining"):
        assert len(re.findall(rf"^  {kind}\s+[\d,]+ msg/s .* peak\s+[\d.]+ MB$", out, re.M)) == 2, out
    ratios = [float(x) for x in re.findall(r"ratio mining/baseline: ([\d.]+)x", out)]
    assert len(ratios) == 2 and all(r > 0 for r in ratios)
    peaks = [float(x) for x in re.findall(r"distinct kept: peak\s+([\d.]+) MB", out)]
    assert len(peaks) == 3 and peaks[2] > peaks[1]
    accuracy = re.search(r"accuracy vs tool-call type: ([\d.]+)% of (\d+) sessions", out)
    assert accuracy is not None and float(accuracy.group(1)) > 50
    assert sorted(re.sub(r".*-s(\d+)-.*", r"\1", p.name) for p in tmp_path.glob("*.db")) == ["120", "60"]

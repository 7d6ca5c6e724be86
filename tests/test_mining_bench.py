"""bench/mining.py --quick runs end to end and prints its figures, so the script cannot rot."""

from __future__ import annotations

import re
import shutil
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
    # The one-process figure against the anchor's raw scan, when the anchors are there (CI has them).
    anchors = ROOT.parent / "shared" / "anchors" / "anchor_mining.py"
    against = re.findall(r"ratio mining/anchor raw \(one process\): ([\d.]+)x \(target >= 0.5x\)", out)
    assert len(against) == (2 if anchors.is_file() else 0), out
    assert all(float(r) > 0 for r in against)
    if anchors.is_file():
        assert re.search(r"mining peak memory as the database doubles: [\d.]+ MB -> [\d.]+ MB", out)
    for kind in ("baseline", "reader", "mining"):
        assert len(re.findall(rf"^  {kind}\s+[\d,]+ msg/s .* peak\s+[\d.]+ MB$", out, re.M)) == 2, out
    ratios = [float(x) for x in re.findall(r"ratio mining/baseline \(one process\): ([\d.]+)x", out)]
    assert len(ratios) == 2 and all(r > 0 for r in ratios)
    # The parallel figure is labelled as such, against the same baseline, with every process's memory.
    parallel = re.findall(r"ratio parallel/baseline \(2 workers\): ([\d.]+)x \(target >= 0.5x\)", out)
    assert len(parallel) == 2 and all(float(r) > 0 for r in parallel)
    lines = re.findall(
        r"^  parallel\s+[\d,]+ msg/s .* peak\s+([\d.]+) MB \+ workers 2 x ([\d.]+) MB$", out, re.M
    )
    assert len(lines) == 2 and all(float(a) > 0 and float(b) > 0 for a, b in lines)
    assert len(re.findall(r"parallel peak memory, all processes: at most [\d.]+ MB", out)) == 2
    peaks = [float(x) for x in re.findall(r"distinct kept: peak\s+([\d.]+) MB", out)]
    assert len(peaks) == 3 and peaks[2] > peaks[1]
    accuracy = re.search(r"accuracy vs tool-call type: ([\d.]+)% of (\d+) sessions", out)
    assert accuracy is not None and float(accuracy.group(1)) > 50
    assert sorted(re.sub(r".*-s(\d+)-.*", r"\1", p.name) for p in tmp_path.glob("hermes-*.db")) == [
        "120",
        "60",
    ]


def test_bench_counts_instructions_against_the_anchor(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "mining.py"),
            "--quick",
            "--anchor-only",
            "--instructions",
            "--cache",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    anchors = ROOT.parent / "shared" / "anchors" / "anchor_mining.py"
    if not anchors.is_file():
        assert "the instruction counts are left out" in out, out
        return
    if shutil.which("valgrind") is None:
        assert "valgrind is not installed" in out, out
        return
    counts = {
        kind: int(n.replace(",", ""))
        for kind, n in re.findall(r"^    (anchor raw|mining)\s+([\d,]+) instructions/msg", out, re.M)
    }
    assert set(counts) == {"anchor raw", "mining"}, out
    # Imports are subtracted: what is left is each one's own work, and mining does more than a scan.
    assert 0 < counts["anchor raw"] < counts["mining"], out
    ratio = re.search(r"ratio mining/anchor raw in instructions \(one process\): ([\d.]+)x", out)
    assert ratio is not None and 0 < float(ratio.group(1)) < 1, out

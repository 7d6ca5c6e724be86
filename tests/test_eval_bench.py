"""The evaluation benchmark runs (``--quick``) and prints its figures, so the script cannot rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_eval_bench_prints_the_parts_the_whole_and_the_ratio() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "eval_run.py"), "--quick"], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert re.search(r"held out 10, steps \d+, requests \d+", out), out
    for label in (
        "plan \\(read, split, fold templates, warm-ups\\)",
        "ask and score",
        "whole run",
        "baseline",
    ):
        assert re.search(rf"{label}.* \d+\.\d+ s", out), (label, out)
    assert re.search(r"whole run / baseline: \d+\.\d+x", out), out
    assert re.search(r"^(Warm is|Cold and warm)", out, re.MULTILINE), out

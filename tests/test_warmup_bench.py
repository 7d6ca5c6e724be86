"""The warm-up benchmarks run (``--quick``) and print their figures, so the scripts cannot rot."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def run_bench(name: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH / name), "--quick"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_selection_bench_prints_recall_for_every_rule() -> None:
    out = run_bench("selection.py")
    for rule in ("kindling", "first-N", "most-frequent", "one-per-tool"):
        match = re.search(rf"{rule}\s+mean tool recall (\d\.\d+)\s+precision (\d\.\d+)", out)
        assert match, out
        assert 0.0 <= float(match.group(1)) <= 1.0
        assert 0.0 < float(match.group(2)) <= 1.0
    assert re.search(r"kindling / first-N: \d+\.\d+x tool recall", out), out
    for smaller in (2, 4):
        sweep = re.search(rf"at most {smaller} examples, mean tool recall: (.*)", out)
        assert sweep, out
        values = dict(re.findall(r"([a-zA-Z-]+) (\d\.\d+)", sweep.group(1)))
        assert set(values) == {"kindling", "first-N", "most-frequent", "one-per-tool"}, out


def test_warmup_bench_prints_median_and_ratio() -> None:
    out = run_bench("warmup.py")
    # Both kinds of template are timed: with past tasks (today's build) and a legacy one.
    assert re.search(r"template with past tasks .*: [1-9]\d* past tasks", out), out
    assert "template without past tasks" in out, out
    warm = re.findall(r"choose \+ build \+ inject: median (\d+\.\d+) ms", out)
    dump = re.findall(r"json\.dumps of the output: median (\d+\.\d+) ms", out)
    assert len(warm) == len(dump) == 2, out
    assert all(float(value) > 0 for value in warm + dump)
    assert len(re.findall(r"ratio \(warm-up / json\.dumps\): \d+\.\d+x", out)) == 2, out


DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"


def test_selection_real_bench_prints_both_truths_for_every_method() -> None:
    if not DATA.is_dir():
        pytest.skip(f"the development data is not at {DATA}")
    done = subprocess.run(
        [sys.executable, str(BENCH / "selection_real.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: a target not met, still a full report
    out = done.stdout
    for slots in (8, 3):
        assert f"at most {slots} examples" in out, out
    for method in ("kindling", "kindling@turn0", "first-N", "one-per-tool", "random", "oracle"):
        rows = re.findall(rf"^  {method}\s+((?:\d\.\d+\s+){{6}})(\d+)\s+(\d\.\d+)", out, re.MULTILINE)
        assert len(rows) == 2, out
        for values, _tokens, share in rows:
            assert all(0.0 <= float(v) <= 1.0 for v in values.split())
            if method == "kindling":
                assert float(share) == 0.0  # no other customer's identifier reaches a warm-up
    assert re.search(r"kindling / best simple rule \([\w-]+\): \d+\.\d+x F1", out), out
    ceilings = re.findall(r"task-blind ceiling: (\d\.\d+) F1, kindling ([+-]\d\.\d+)", out)
    assert len(ceilings) == 2, out
    assert all(0.0 < float(ceiling) <= 1.0 for ceiling, _ in ceilings)


def test_the_task_blind_ceiling_is_the_best_fixed_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    bench = importlib.import_module("selection_real")
    # One list for both tasks: "a" alone scores 1 and 2/3 (recall 1/2); "a, b" 2/3 and 1; "b" 0 and 2/3.
    f1, shown = bench.task_blind_ceiling([{"a"}, {"a", "b"}], 2)
    assert shown == ["a"]  # the tie with "a, b" and "a, a" goes to the shorter list
    assert f1 == pytest.approx((1.0 + 2 / 3) / 2)
    # A tool one task in three needs is left out: showing it costs the other two more.
    f1, shown = bench.task_blind_ceiling([{"a"}, {"a"}, {"a", "c"}], 2)
    assert shown == ["a"] and f1 == pytest.approx((1 + 1 + 2 / 3) / 3)
    # Both tools, and the one every task needs twice: the third task's precision is then 2/3, not 1/2.
    f1, shown = bench.task_blind_ceiling([{"a", "b"}, {"a", "b"}, {"a"}], 3)
    assert shown == ["a", "a", "b"] and f1 == pytest.approx((1 + 1 + 0.8) / 3)
    assert bench.task_blind_ceiling([set()], 3) == (0.0, [])

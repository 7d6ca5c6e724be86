"""The warm-up benchmarks run (``--quick``) and print their figures, so the scripts cannot rot."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    # Choosing a template without a name: the big template always, many real ones when the data is there.
    assert re.search(
        r"one template from \d+ generated sessions .*median \d+\.\d+ ms .*first call \d+ ms", out
    ), out
    many = re.search(r"(\d+) templates: median \d+\.\d+ ms = (\d+\.\d+)x the one-template store", out)
    if (Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories").is_dir():
        assert many and int(many.group(1)) > 1 and float(many.group(2)) > 0, out
    else:
        assert "skipped, no recorded runs" in out, out


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
    assert "all together:" in out, out
    for method in (
        "kindling",
        "kindling@turn0",
        "general list",
        "first-N",
        "one-per-tool",
        "random",
        "oracle",
    ):
        rows = re.findall(
            rf"^  {re.escape(method)}\s+((?:\d\.\d+\s+){{12}})(\d+)\s+(\d\.\d+)$", out, re.MULTILINE
        )
        assert len(rows) == 1, out
        values, _tokens, share = rows[0]
        assert all(0.0 <= float(v) <= 1.0 for v in values.split())
        if method == "kindling":
            assert float(share) == 0.0  # no other customer's identifier reaches a warm-up
    assert re.search(r"^  ceiling\s+(\d\.\d+ ){4}", out, re.MULTILINE), out
    for slots in (2, 3, 4, 8):
        check = re.search(
            rf"at {slots}: kindling (\d\.\d+) F1, \d+\.\d+x the best simple rule \([\w-]+ \d\.\d+\), "
            rf"([+-]\d\.\d+) against the ceiling (\d\.\d+) .*: (met|NOT met)$",
            out,
            re.MULTILINE,
        )
        assert check, out
        assert float(check.group(1)) - float(check.group(3)) == pytest.approx(
            float(check.group(2)), abs=0.0011
        )


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


def _tau2_run(sim_id: str, task_id: str, tool: str) -> dict[str, Any]:
    # One successful tau2-bench run: the customer asks, the agent calls ``tool`` once and it works.
    return {
        "id": sim_id,
        "task_id": task_id,
        "trial": 0,
        "termination_reason": "user_stop",
        "reward_info": {"reward": 1.0},
        "messages": [
            {"role": "assistant", "content": "Hi! How can I help?"},
            {"role": "user", "content": f"Please {tool.replace('_', ' ')} for order number {task_id}."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "name": tool, "arguments": {"order": task_id}, "requestor": "assistant"}
                ],
            },
            {
                "role": "tool",
                "id": "c1",
                "content": '{"done": true}',
                "requestor": "assistant",
                "error": False,
            },
            {"role": "assistant", "content": "Done."},
        ],
    }


def test_selection_real_bench_reads_run_files_placed_directly_in_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    bench = importlib.import_module("selection_real")
    tools = ("track_order", "cancel_order", "return_item")
    simulations = [_tau2_run(f"s{i}", str(i), tools[i % 3]) for i in range(12)]
    (tmp_path / "results.json").write_text(json.dumps({"simulations": simulations}))
    (tmp_path / "README.md").write_text("not a run file\n")  # beside the runs, and not read as one
    code = bench.main(["--data", str(tmp_path), "--folds", "2"])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    assert "12 runs from 1 sources in 1 sets" in out, out
    assert re.search(r"set \S+: 12 runs, 12 held-out tasks", out), out
    assert all(f"at {slots}: kindling" in out for slots in (2, 3, 4, 8)), out


def test_selection_real_bench_refuses_a_folder_without_enough_tasks_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    bench = importlib.import_module("selection_real")
    (tmp_path / "README.md").write_text("no runs here\n")
    assert bench.main(["--data", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "0 runs, 0 tasks with a successful run; a 5-fold split by task needs at least 5" in out
    (tmp_path / "one.json").write_text(json.dumps({"simulations": [_tau2_run("s0", "0", "track_order")]}))
    assert bench.main(["--data", str(tmp_path)]) == 2
    assert "1 runs, 1 tasks with a successful run" in capsys.readouterr().out

"""Benchmark: a whole ``kindling eval`` of 50 held-out sessions of the development data, end to end.

The sessions are the tau-bench and tau2-bench retail runs under ../shared/data/trajectories; the
model is the loopback fake that copies the most similar past example (tests/fake_models.py), asked
through the official openai client, so the figure is kindling's own cost: reading, splitting,
building five fold templates, warming, asking and scoring. It prints the time of each part and of
the whole run (the target: under a minute), and the ratio of the whole to a baseline measured in
the same run: one ``kindling build`` of every session (mining them all once into one template).
``--quick`` evaluates 10 sessions of the repository's own synthetic sessions instead.

    .venv/bin/python bench/eval_run.py
    .venv/bin/python bench/eval_run.py --quick
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))  # the loopback fake model lives with the tests

DATA = ROOT.parent / "shared" / "data" / "trajectories"
SOURCES = [
    DATA / "tau-bench-avaljotsingh",
    DATA / "tau2-bench-bogoliubon",
    DATA / "tau2-bench-codesque16" / "_gemini-3-flash__base__all_",
    DATA / "tau2-bench-sierra",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 sessions of the synthetic test sessions")
    parser.add_argument("--sessions", type=int, default=50)
    args = parser.parse_args()

    from fake_models import CopiesExamples, ModelServer
    from kindling.eval import Endpoint, EvalOptions, plan_eval, run_eval
    from kindling.sessions import iter_sessions
    from kindling.templates.build import template_from_sessions

    work = Path(tempfile.mkdtemp(prefix="kindling-bench-eval-"))
    options: dict[str, object] = {"sessions": 10 if args.quick else args.sessions}
    if args.quick or not all(path.exists() for path in SOURCES):
        from eval_support import write_sessions

        if not args.quick:
            print("the development data is absent: using the synthetic sessions")
        sources = [write_sessions(work / "travel.jsonl")]
        options["min_messages"] = 1
    else:
        sources = SOURCES

    started = time.perf_counter()
    sessions = [session for source in sources for session in iter_sessions(source)]
    filters = {"min_messages": options["min_messages"]} if "min_messages" in options else {}
    template_from_sessions("baseline", sessions, **filters)  # type: ignore[arg-type]
    baseline = time.perf_counter() - started

    with ModelServer(CopiesExamples()) as server:
        started = time.perf_counter()
        with plan_eval(sources, EvalOptions(**options)) as plan:  # type: ignore[arg-type]
            planned = time.perf_counter() - started
            report = run_eval(
                plan,
                Endpoint(server.base_url, "fake-model"),
                api_key="k",
                results=work / "r.jsonl",
                concurrency=8,
            )
        total = time.perf_counter() - started
    asked = total - planned
    print(
        f"sessions read {report['sessions']['sessions_read']}, held out {report['sessions']['held_out_sessions']}, "
        f"steps {report['cases']['scored']}, requests {report['requests']['sent_this_run']}"
    )
    print(f"plan (read, split, fold templates, warm-ups) {planned:.2f} s")
    print(f"ask and score {asked:.2f} s")
    print(f"whole run {total:.2f} s (target: under 60 s)")
    print(f"baseline: one build of every session {baseline:.2f} s")
    print(f"whole run / baseline: {total / baseline:.2f}x")
    print(report["verdict"]["line"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

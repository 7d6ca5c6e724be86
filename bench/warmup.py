"""Benchmark: choose + build + inject, next to ``json.dumps`` of the output, on the two kinds of template.

* **With past tasks** (what ``kindling build`` makes today): kindling's own build of a generated
  Hermes-style database (``generate_sample_db``; 2,000 sessions, about 1,800 past tasks). A warm-up
  scores the task against the past tasks (similarity and the per-tool word models) and picks
  examples by that.
* **Without past tasks** (a legacy file): 1,000 examples mined from the same kind of database and
  varied until there are enough; a warm-up ranks them by BM25 relevance and variety.

For each of a set of task texts, one warm-up is: choose the examples, build the messages, inject
them into a short conversation. The baseline is ``json.dumps`` of that same merged conversation, the
least any caller does with it. It prints the median time of each (milliseconds) and the ratio; the
first call, which builds the models or the index (cached per template), is printed separately.
``--quick`` uses small templates and few repeats and finishes in a few seconds.

    .venv/bin/python bench/warmup.py
    .venv/bin/python bench/warmup.py --quick
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FULL_EXAMPLES = 1000
QUICK_EXAMPLES = 200
FULL_SESSIONS = 2000
QUICK_SESSIONS = 200
TASKS = (
    "Fix the failing test in the parser module",
    "Search the web for the latest BM25 benchmarks and summarise them",
    "Find all TODO comments under src and list them in a file",
    "Run the test suite and show me what failed",
    "Scrape the pricing table from the vendor site and save it as CSV",
    "Refactor the config loader to read environment variables",
    "Check disk usage on the server and clean old logs",
    "Compare two libraries for rate limiting: cost, features, maintenance",
)


def build_examples(count: int) -> list[Any]:
    """Return ``count`` examples: mined from a generated database, varied until there are enough."""
    from kindling.mining import mine
    from kindling.mining.model import Example
    from kindling.sessions import generate_sample_db, iter_sessions

    with tempfile.TemporaryDirectory() as tmp:
        db = generate_sample_db(Path(tmp) / "state.db", sessions=200, seed=11)
        seeds = mine(iter_sessions(db), min_messages=0, max_examples=count).examples
    if not seeds:
        raise SystemExit("the generated database gave no examples")
    examples: list[Example] = []
    round_ = 0
    while len(examples) < count:
        for seed in seeds:
            if len(examples) == count:
                break
            arguments = dict(seed.arguments)
            if round_:
                arguments["variant"] = round_  # a distinct call, as a real template would hold
            examples.append(
                seed.model_copy(update={"arguments": arguments, "session_id": f"{seed.session_id}-{round_}"})
            )
        round_ += 1
    return examples


def with_past_tasks(sessions: int) -> Any:
    """Return kindling's own build (examples and past tasks) of a generated database of ``sessions``."""
    from kindling.sessions import generate_sample_db, iter_sessions
    from kindling.templates.build import template_from_sessions

    with tempfile.TemporaryDirectory() as tmp:
        db = generate_sample_db(Path(tmp) / "state.db", sessions=sessions, seed=11)
        return template_from_sessions("bench", iter_sessions(db), min_messages=0)


def measure(template: Any, budget: int, repeats: int) -> dict[str, Any]:
    """Time warm-ups of every task on ``template``: the first call, then medians of warm-up and dumps."""
    from kindling.warmup import inject, validate_conversation, warm_conversation

    system = {"role": "system", "content": "You are a capable agent with tools."}

    def warm_once(task: str) -> list[dict[str, Any]]:
        result = warm_conversation(template, task, budget=budget)
        return inject([system, {"role": "user", "content": task}], result.messages)

    started = time.perf_counter()
    first = warm_once(TASKS[0])
    cold_ms = (time.perf_counter() - started) * 1000
    validate_conversation(first, strict_ids=True)
    warm_times: list[float] = []
    dump_times: list[float] = []
    for _ in range(repeats):
        for task in TASKS:
            t0 = time.perf_counter()
            merged = warm_once(task)
            t1 = time.perf_counter()
            json.dumps(merged)
            t2 = time.perf_counter()
            warm_times.append((t1 - t0) * 1000)
            dump_times.append((t2 - t1) * 1000)
    return {
        "cold": cold_ms,
        "warm": statistics.median(warm_times),
        "dump": statistics.median(dump_times),
        "injected": len(first) - 2,
    }


def report(figures: dict[str, Any], first_call: str) -> None:
    print(f"    choose + build + inject: median {figures['warm']:.3f} ms")
    print(f"    json.dumps of the output: median {figures['dump']:.3f} ms")
    print(f"    ratio (warm-up / json.dumps): {figures['warm'] / figures['dump']:.1f}x")
    print(f"    first call incl. {first_call}: {figures['cold']:.1f} ms (cached per template)")
    print(f"    warm messages injected for the first task: {figures['injected']}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small templates; runs in a few seconds")
    parser.add_argument(
        "--examples", type=int, default=None, help="examples in the template without past tasks"
    )
    parser.add_argument(
        "--sessions", type=int, default=None, help="generated sessions the other template is built from"
    )
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per task")
    parser.add_argument("--budget", type=int, default=2000, help="token budget (default 2000)")
    args = parser.parse_args(argv)

    from kindling.templates import Template

    size = args.examples or (QUICK_EXAMPLES if args.quick else FULL_EXAMPLES)
    sessions = args.sessions or (QUICK_SESSIONS if args.quick else FULL_SESSIONS)
    repeats = args.repeats or (5 if args.quick else 50)
    past = with_past_tasks(sessions)
    legacy = Template(name="bench-legacy", examples=build_examples(size))
    print(
        f"kindling warm-up benchmark ({'quick' if args.quick else 'full'}): budget {args.budget} tokens, "
        f"{len(TASKS)} tasks x {repeats} runs"
    )
    print(
        f"  template with past tasks (kindling build of {sessions} generated sessions): "
        f"{len(past.episodes)} past tasks, {len(past.examples)} examples"
    )
    report(measure(past, args.budget, repeats), "fitting the word models and the similarity index")
    print(f"  template without past tasks (a legacy file): {size} examples, ranked by BM25")
    report(measure(legacy, args.budget, repeats), "building the BM25 index")
    return 0


if __name__ == "__main__":
    sys.exit(main())

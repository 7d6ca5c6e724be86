"""Benchmark: choose + build + inject from a 1,000-example template, next to ``json.dumps`` of the output.

The template is built deterministically from the tools, requests and results of a generated
Hermes-style database (``generate_sample_db``), repeated with variations until it holds the
requested number of examples. For each of a set of task texts, one warm-up is: choose the examples
(BM25 + diversity + budget), build the messages, inject them into a short conversation. The
baseline is ``json.dumps`` of that same merged conversation, the least any caller does with it.

It prints the median time of each (milliseconds) and the ratio. The BM25 index is built once per
template content and cached (the first call's cost is printed separately). ``--quick`` uses a small
template and few repeats and finishes in a few seconds.

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


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small template; runs in a few seconds")
    parser.add_argument("--examples", type=int, default=None, help="examples in the template")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per task")
    parser.add_argument("--budget", type=int, default=2000, help="token budget (default 2000)")
    args = parser.parse_args(argv)

    from kindling.templates import Template
    from kindling.warmup import inject, validate_conversation, warm_conversation

    size = args.examples or (QUICK_EXAMPLES if args.quick else FULL_EXAMPLES)
    repeats = args.repeats or (5 if args.quick else 50)
    template = Template(name="bench", examples=build_examples(size))
    conversation = [
        {"role": "system", "content": "You are a capable agent with tools."},
        {"role": "user", "content": "placeholder"},
    ]

    def warm_once(task: str) -> list[dict[str, Any]]:
        result = warm_conversation(template, task, budget=args.budget)
        return inject([conversation[0], {"role": "user", "content": task}], result.messages)

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
    warm_ms = statistics.median(warm_times)
    dump_ms = statistics.median(dump_times)
    print(
        f"kindling warm-up benchmark ({'quick' if args.quick else 'full'}): template of {size} examples, "
        f"budget {args.budget} tokens, {len(TASKS)} tasks x {repeats} runs"
    )
    print(f"  choose + build + inject: median {warm_ms:.3f} ms")
    print(f"  json.dumps of the output: median {dump_ms:.3f} ms")
    print(f"  ratio (warm-up / json.dumps): {warm_ms / dump_ms:.1f}x")
    print(f"  first call incl. building the BM25 index: {cold_ms:.1f} ms (cached per template content)")
    print(f"  warm messages injected for the first task: {len(first) - 2}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

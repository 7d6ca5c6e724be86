"""How much does spawning a background review add to the caller's turn?

Target: under 1 ms (median) against the same turn without a review.

Each turn does the caller's own end-of-turn work (serialising a 60-message conversation, as an
agent does when it saves its session); the measured variant then calls ``spawn_review`` before
returning, exactly where an agent would. Turns with and without a review alternate, so drift
hits both alike. The review itself runs against the loopback fake OpenAI server and is joined
outside the timed region, so reviews never pile up. Prints the medians, the added time and the
ratio with/without, measured in the same run.

    python bench/review_overhead.py           # 300 turns of each
    python bench/review_overhead.py --quick   # 30 turns of each, a few seconds
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the loopback fake server lives with the tests
sys.path.insert(0, str(ROOT / "src"))

from fake_openai import FakeOpenAI, text  # noqa: E402
from kindling.agent import Runtime  # noqa: E402
from kindling.review import ReviewExecutor, ReviewHandle, spawn_review  # noqa: E402


def _conversation(size: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful coding agent. " * 40}]
    for i in range(size):
        messages.append(
            {"role": "user", "content": f"Step {i}: please run the tests and fix what fails. " * 3}
        )
        messages.append({"role": "assistant", "content": f"Done with step {i}; all tests pass now. " * 3})
    return messages


def _turn(conversation: list[dict[str, Any]]) -> str:
    """The caller's own end-of-turn work, identical in both variants."""
    return json.dumps(conversation)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="30 turns of each variant instead of 300")
    parser.add_argument("--turns", type=int, default=None, help="turns of each variant (overrides --quick)")
    args = parser.parse_args(argv)
    turns = args.turns or (30 if args.quick else 300)

    os.environ["HERMES_HOME"] = tempfile.mkdtemp(prefix="kindling-bench-")
    server = FakeOpenAI()
    server.default = text("Nothing to save.")
    server.start()
    try:
        runtime = Runtime(model="bench", base_url=server.base_url, timeout=10.0, max_retries=0)
        executor = ReviewExecutor()
        conversation = _conversation(30)
        # Warm up: imports (openai, yaml) and the first connection happen before any timing.
        spawn_review(conversation, runtime, executor=executor).join(30)

        baseline: list[float] = []
        with_review: list[float] = []
        spawn_only: list[float] = []
        failures = 0
        for turn in range(turns):
            # Alternate which variant goes first so warm caches favour neither.
            for variant in ("base", "review") if turn % 2 == 0 else ("review", "base"):
                if variant == "base":
                    started = time.perf_counter()
                    _turn(conversation)
                    baseline.append(time.perf_counter() - started)
                    continue
                started = time.perf_counter()
                _turn(conversation)
                before_spawn = time.perf_counter()
                handle: ReviewHandle = spawn_review(conversation, runtime, executor=executor, key="bench")
                ended = time.perf_counter()
                with_review.append(ended - started)
                spawn_only.append(ended - before_spawn)
                outcome = handle.join(30)  # outside the timed region
                if outcome is None or outcome.error:
                    failures += 1
    finally:
        server.stop()

    base_ms = statistics.median(baseline) * 1000
    with_ms = statistics.median(with_review) * 1000
    added_ms = with_ms - base_ms
    spawn_ms = statistics.median(spawn_only) * 1000
    print(f"turns per variant: {turns}")
    print(f"median turn without review: {base_ms:.3f} ms")
    print(f"median turn with spawn_review: {with_ms:.3f} ms")
    print(f"added to the turn (difference of medians): {added_ms:.3f} ms (target < 1 ms)")
    print(f"median spawn_review call alone: {spawn_ms:.3f} ms")
    print(f"ratio with/without: {with_ms / base_ms:.2f}x")
    print(f"reviews that failed: {failures}")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

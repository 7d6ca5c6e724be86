"""Benchmark: does warm-up pick the tools a new task needs, on kindling's generated sample sessions?

The companion of ``bench/selection_real.py`` (recorded runs of real agents), on data of another
kind: a generated Hermes-style database (``generate_sample_db``), where every session whose agent
made tool calls is a task, its first substantive user message the query, the tools its agent
called the truth. A deterministic 20% of sessions is held out; a template is built from the rest
with kindling's own build (episodes and per-tool coverage). For each held-out task the same rules
as the real-data bench choose examples under the same budget and rendering:

* kindling      - ``warm_conversation``: similar past tasks and per-tool evidence decide;
* first-N       - the template's examples in stored order (the prototypes' rule);
* most-frequent - the examples by how often each call was seen;
* one-per-tool  - one example of each tool, the most used tools first;
* oracle        - one example of each tool the task used.

It prints mean tool recall (the share of the task's tools, among those the template knows, that
the chosen examples show, out of at most the number of examples allowed), precision (the share of
chosen examples whose tool the task used) and F1, at warm-up's default of 8 examples, and the same
at 2, 3 and 4; and, at 8, the share of the examples shown that are calls the task itself made (the
same tool with the same arguments): how close the examples come, beyond their tools. ``--quick`` uses a small database and finishes in a few seconds.

    .venv/bin/python bench/selection.py
    .venv/bin/python bench/selection.py --quick --verbose
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

FULL_SESSIONS = 400
QUICK_SESSIONS = 80
HOLD_OUT_EVERY = 5  # every 5th session is held out: 20%
SEED = 7
SWEEP = (2, 3, 4)
RULES = ("kindling", "first-N", "most-frequent", "one-per-tool", "oracle")


Call = tuple[str, bytes]  # a tool and its canonical arguments


def load_tasks(db: Path) -> tuple[list[Any], list[tuple[str, set[str], str]], dict[str, set[Call]]]:
    """Return (training sessions, held-out tasks as (query, tools used, session id), each held-out
    task's calls)."""
    from kindling.mining.passes import canonical_key
    from kindling.mining.tasktype import opening_request
    from kindling.sessions import iter_sessions

    train: list[Any] = []
    held_out: list[tuple[str, set[str], str]] = []
    made: dict[str, set[Call]] = {}
    for index, session in enumerate(iter_sessions(db)):
        if index % HOLD_OUT_EVERY != 0:
            train.append(session)
            continue
        task = opening_request(session)
        calls = [c for m in session.messages for c in m.tool_calls if c.requestor == "assistant"]
        if task and calls:
            held_out.append((task, {c.name for c in calls}, session.id))
            made[session.id] = {(c.name, canonical_key(c.arguments, c.raw_arguments)) for c in calls}
    return train, held_out, made


def score(shown: list[str], used: set[str], slots: int) -> tuple[float, float, float]:
    """Return (recall out of at most ``slots`` tools, precision per example, F1)."""
    if not shown:
        return (0.0, 0.0, 0.0)
    hits = len(set(shown) & used)
    recall = hits / min(len(used), slots)
    precision = sum(tool in used for tool in shown) / len(shown)
    f1 = 2 * recall * precision / (recall + precision) if recall + precision else 0.0
    return (recall, precision, f1)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small database; runs in a few seconds")
    parser.add_argument("--sessions", type=int, default=None, help="sessions in the generated database")
    parser.add_argument("--budget", type=int, default=2000, help="token budget per task (default 2000)")
    parser.add_argument(
        "--max-examples", type=int, default=8, help="examples per task (default 8, warm-up's default)"
    )
    parser.add_argument("--verbose", action="store_true", help="print every held-out task")
    args = parser.parse_args(argv)

    import orjson

    from kindling.mining.passes import canonical_key
    from kindling.sessions import generate_sample_db
    from kindling.templates.build import template_from_sessions
    from kindling.warmup.build import Shown, build_conversation
    from kindling.warmup.select import fill_budget
    from kindling.warmup.warm import warm_conversation

    sessions = args.sessions or (QUICK_SESSIONS if args.quick else FULL_SESSIONS)
    with tempfile.TemporaryDirectory() as tmp:
        db = generate_sample_db(Path(tmp) / "state.db", sessions=sessions, seed=SEED)
        train, held_out, made = load_tasks(db)
    template = template_from_sessions("bench", train)
    examples = template.examples
    known = {e.tool_name for e in examples}
    uses: Counter[str] = Counter()
    first_of: dict[str, int] = {}
    for i, example in enumerate(examples):
        uses[example.tool_name] += max(1, example.count)
        first_of.setdefault(example.tool_name, i)
    by_use = sorted(uses, key=lambda t: (-uses[t], t))
    frequent = sorted(range(len(examples)), key=lambda i: (-examples[i].count, i))

    def shown_calls(rule: str, task: str, used: set[str], slots: int) -> list[Call]:
        return [
            (c["function"]["name"], canonical_key(orjson.loads(c["function"]["arguments"]), None))
            for m in conversation(rule, task, used, slots)
            for c in m.get("tool_calls") or ()
        ]

    def shown(rule: str, task: str, used: set[str], slots: int) -> list[str]:
        return [
            c["function"]["name"]
            for m in conversation(rule, task, used, slots)
            for c in m.get("tool_calls") or ()
        ]

    def conversation(rule: str, task: str, used: set[str], slots: int) -> list[dict[str, Any]]:
        if rule == "kindling":
            return warm_conversation(template, task, budget=args.budget, max_examples=slots).messages
        if rule == "first-N":
            order = list(range(len(examples)))
        elif rule == "most-frequent":
            order = frequent
        elif rule == "one-per-tool":
            order = [first_of[t] for t in by_use]
        else:
            order = [first_of[t] for t in by_use if t in used]
        selection = fill_budget([Shown(examples[i]) for i in order], budget=args.budget, max_examples=slots)
        return build_conversation(
            selection.shown, budget=args.budget, example_tokens=selection.example_tokens
        )

    def measure(slots: int, verbose: bool = False) -> dict[str, tuple[float, float, float]]:
        scores: dict[str, list[tuple[float, float, float]]] = {rule: [] for rule in RULES}
        for task, used_all, session_id in held_out:
            used = used_all & known
            if not used:
                continue
            for rule in RULES:
                scores[rule].append(score(shown(rule, task, used, slots), used, slots))
            if verbose:
                row = "  ".join(f"{rule} {values[-1][2]:.2f}" for rule, values in scores.items())
                print(f"{session_id[:12]:12}  used={','.join(sorted(used)):40.40}  {row}  | {task[:50]!r}")
        return {
            rule: tuple(statistics.fmean(v[i] for v in values) if values else 0.0 for i in range(3))  # type: ignore[misc]
            for rule, values in scores.items()
        }

    means = measure(args.max_examples, args.verbose)
    tasks = sum(1 for _, used, _ in held_out if used & known)
    print(
        f"kindling selection benchmark ({'quick' if args.quick else 'full'}): {sessions} sessions, "
        f"{len(train)} to build from ({len(template.episodes)} past tasks), {tasks} held-out tasks, "
        f"template of {len(examples)} examples over {len(known)} tools, budget {args.budget} tokens, "
        f"at most {args.max_examples} examples; query: the first substantive user message"
    )
    if not tasks:
        print("no held-out task used a tool the template knows; nothing to measure")
        return 1
    used_per_task = statistics.fmean(len(used & known) for _, used, _ in held_out if used & known)
    print(f"  a held-out task used {used_per_task:.1f} of the template's tools on average")
    for rule, (recall, precision, f1) in means.items():
        print(f"  {rule:14} mean tool recall {recall:.3f}   precision {precision:.3f}   F1 {f1:.3f}")
    simple = [r for r in RULES if r not in ("kindling", "oracle")]
    best = max(simple, key=lambda r: (means[r][2], r))
    for baseline in simple:
        ratio = means["kindling"][0] / means[baseline][0] if means[baseline][0] else float("inf")
        print(f"  kindling / {baseline}: {ratio:.2f}x tool recall")
    print(f"  kindling / best simple rule ({best}): {means['kindling'][2] / means[best][2]:.2f}x F1")
    same: dict[str, list[float]] = {rule: [] for rule in RULES if rule != "oracle"}
    for task, used_all, session_id in held_out:
        used = used_all & known
        if not used:
            continue
        for rule, shares in same.items():
            calls = shown_calls(rule, task, used, args.max_examples)
            if calls:
                shares.append(sum(call in made[session_id] for call in calls) / len(calls))
    row = "  ".join(f"{rule} {statistics.fmean(v) if v else 0.0:.3f}" for rule, v in same.items())
    print(f"  examples that are calls the task itself made (same tool and arguments): {row}")
    for smaller in SWEEP:
        if smaller >= args.max_examples:
            continue
        sweep = measure(smaller)
        row = "  ".join(f"{rule} {values[0]:.3f}" for rule, values in sweep.items() if rule != "oracle")
        print(f"  at most {smaller} examples, mean tool recall: {row}")
        row = "  ".join(f"{rule} {values[2]:.3f}" for rule, values in sweep.items())
        print(f"  at most {smaller} examples, F1: {row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: does kindling's selection pick the tools a new task really needs?

Tasks come from a generated Hermes-style database (``generate_sample_db``): every session whose
agent made tool calls is a task, its first user message the task text, the tools its agent called
the truth. A deterministic share of sessions is held out; a template is mined from the rest. For
each held-out task, three rules choose examples under the same token budget:

* kindling     - BM25 relevance to the task text, diverse across tools, filling the budget;
* first-N      - the prototypes' rule: the template's examples in the order they were mined
                 (oldest session first), whatever the task;
* most-frequent - the template's examples by how often each call was seen;
* one-per-tool - most-frequent made diverse (round robin over tools), with no relevance at all:
                 the control that shows what relevance adds beyond covering many tools.

It prints the mean tool recall of each rule (the share of the task's tools, among those the
template knows, that the chosen examples cover), its precision (the share of the chosen examples
whose tool the task really used: recall alone rewards showing every tool) and kindling's recall
as a ratio to each baseline, at warm-up's default of 8 examples and again at 2 and 4, where there is no room to cover every tool
and relevance has to do the choosing.
``--quick`` uses a small database and finishes in a few seconds.

    .venv/bin/python bench/selection.py
    .venv/bin/python bench/selection.py --quick --verbose
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

FULL_SESSIONS = 400
QUICK_SESSIONS = 80
HOLD_OUT_EVERY = 5  # every 5th session is held out: 20%
SEED = 7
SWEEP = (2, 4)  # smaller example counts also measured, where relevance must do the choosing


def load_tasks(db: Path) -> tuple[list[Any], list[tuple[str, set[str], str]]]:
    """Return (training sessions, held-out tasks as (task text, tools used, session id))."""
    from kindling.sessions import iter_sessions

    train: list[Any] = []
    held_out: list[tuple[str, set[str], str]] = []
    for index, session in enumerate(iter_sessions(db)):
        if index % HOLD_OUT_EVERY != 0:
            train.append(session)
            continue
        task = next((m.content for m in session.messages if m.role == "user" and m.content), None)
        tools = {c.name for m in session.messages for c in m.tool_calls if c.requestor == "assistant"}
        if task and tools:
            held_out.append((task, tools, session.id))
    return train, held_out


def recall(chosen: set[str], used: set[str]) -> float | None:
    """Share of ``used`` covered by ``chosen``; None when there is nothing to recall."""
    return len(chosen & used) / len(used) if used else None


def precision(chosen_tools: list[str], used: set[str]) -> float | None:
    """Share of the chosen examples whose tool the task really used; None when nothing was chosen."""
    return sum(tool in used for tool in chosen_tools) / len(chosen_tools) if chosen_tools else None


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

    from kindling.mining import mine
    from kindling.sessions import generate_sample_db
    from kindling.templates import Template
    from kindling.warmup.select import ExampleIndex, rank_examples, select_examples

    sessions = args.sessions or (QUICK_SESSIONS if args.quick else FULL_SESSIONS)
    with tempfile.TemporaryDirectory() as tmp:
        db = generate_sample_db(Path(tmp) / "state.db", sessions=sessions, seed=SEED)
        train, held_out = load_tasks(db)
    result = mine(train)
    examples = result.examples
    template = Template(name="bench", examples=examples)
    known = {e.tool_name for e in examples}
    index = ExampleIndex(examples)
    session_order = {s.id: i for i, s in enumerate(train)}
    first_n = sorted(
        range(len(examples)),
        key=lambda i: (session_order.get(examples[i].session_id, 0), examples[i].position),
    )
    frequent = sorted(range(len(examples)), key=lambda i: (-examples[i].count, i))
    one_per_tool = rank_examples(examples, "")  # no task words: frequency order, diverse over tools

    orders: dict[str, list[int] | None] = {
        "kindling": None,
        "first-N": first_n,
        "most-frequent": frequent,
        "one-per-tool": one_per_tool,
    }

    def measure(
        max_examples: int, verbose: bool = False
    ) -> tuple[dict[str, list[float]], dict[str, list[int]], dict[str, list[float]]]:
        rules: dict[str, list[float]] = {name: [] for name in orders}
        precisions: dict[str, list[float]] = {name: [] for name in orders}
        sizes: dict[str, list[int]] = {name: [] for name in orders}
        for task, used_all, session_id in held_out:
            used = used_all & known
            if not used:
                continue
            for name, order in orders.items():
                chosen = select_examples(
                    template.examples,
                    task,
                    budget=args.budget,
                    max_examples=max_examples,
                    index=index,
                    order=order,
                ).examples
                value = recall({e.tool_name for e in chosen}, used)
                assert value is not None
                rules[name].append(value)
                sizes[name].append(len(chosen))
                share = precision([e.tool_name for e in chosen], used)
                if share is not None:
                    precisions[name].append(share)
            if verbose:
                row = "  ".join(f"{name} {values[-1]:.2f}" for name, values in rules.items())
                print(f"{session_id[:12]:12}  used={','.join(sorted(used)):40.40}  {row}  | {task[:60]!r}")
        return rules, sizes, precisions

    rules, sizes, precisions = measure(args.max_examples, args.verbose)
    tasks = len(rules["kindling"])
    print(
        f"kindling selection benchmark ({'quick' if args.quick else 'full'}): {sessions} sessions, "
        f"{len(train)} to mine, {tasks} held-out tasks, template of {len(examples)} examples "
        f"over {len(known)} tools, budget {args.budget} tokens, at most {args.max_examples} examples"
    )
    if not tasks:
        print("no held-out task used a tool the template knows; nothing to measure")
        return 1
    used_per_task = statistics.fmean(len(used & known) for _, used, _ in held_out if used & known)
    print(f"  a held-out task used {used_per_task:.1f} of the template's tools on average")
    means = {name: statistics.fmean(values) for name, values in rules.items()}
    for name in rules:
        print(
            f"  {name:14} mean tool recall {means[name]:.3f}   "
            f"precision {statistics.fmean(precisions[name]) if precisions[name] else 0.0:.3f}   "
            f"(examples chosen: median {statistics.median(sizes[name]):.0f})"
        )
    for baseline in ("first-N", "most-frequent", "one-per-tool"):
        ratio = means["kindling"] / means[baseline] if means[baseline] else float("inf")
        print(f"  kindling / {baseline}: {ratio:.2f}x tool recall")
    # With room for one example of nearly every tool, covering tools is most of the score; fewer
    # slots show what relevance adds on its own.
    for smaller in SWEEP:
        if smaller >= args.max_examples:
            continue
        sweep = {name: statistics.fmean(values) for name, values in measure(smaller)[0].items()}
        row = "  ".join(f"{name} {value:.3f}" for name, value in sweep.items())
        print(f"  at most {smaller} examples, mean tool recall: {row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

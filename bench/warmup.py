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

Then **choosing a template** (``warm()`` without a name, over a template store on disk, in one
long-running process): each case runs in a fresh process that has imported kindling but warmed
nothing; the first call (which reads the store and summarises its templates, then fits the chosen
one's models) is timed apart from the median of the calls after it. The baseline is the same
warm-up over a store holding **one** template, in the same run:

* **100 templates**, distinct, each built from 30 runs drawn (with its own seed) from real
  agents' recorded runs (``--data``, default ``../shared/data/trajectories``; skipped with the
  reason when absent); the one-template store holds the first of them.
* **one big template** built from 4,000 generated Hermes-style sessions (``--big-sessions``).

Targets: 100 templates at most 3x the one-template time after the first call, and the first call
at most 1 s; the big template at most 50 ms a call after the first, and the first at most 1 s.

    .venv/bin/python bench/warmup.py
    .venv/bin/python bench/warmup.py --quick
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FULL_EXAMPLES = 1000
QUICK_EXAMPLES = 200
FULL_SESSIONS = 2000
QUICK_SESSIONS = 200
DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "trajectories"
MANY = 100
QUICK_MANY = 10
RUNS_PER_TEMPLATE = 30
BIG_SESSIONS = 4000
QUICK_BIG_SESSIONS = 400
RETAIL_TASKS = (
    "I want to return the running shoes from my last order, they are too small",
    "Please cancel my pending order, I ordered it by mistake",
    "Can you change the shipping address of my order to 12 Main St, Springfield",
    "I'd like to exchange my mechanical keyboard for one with a different switch type",
    "What is the status of my order? My email is jo.doe@example.org",
    "Update the default address on my account",
    "Modify the items of my pending order: I want the larger size of the t-shirt",
    "How much would I get back if I returned the laptop?",
)
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


def real_runs(data: Path) -> list[Any]:
    """Every recorded run under ``data`` (each file or folder in each of its folders), in a fixed order."""
    from kindling.sessions import iter_sessions

    runs: list[Any] = []
    for folder in sorted(p for p in data.iterdir() if p.is_dir()):
        for source in sorted(folder.iterdir()):
            runs.extend(iter_sessions(source))
    return runs


def many_templates(data: Path, count: int, where: Path) -> tuple[Path, Path]:
    """Save ``count`` distinct templates from real runs into one store, the first also into another."""
    from kindling.templates import JsonDirStore
    from kindling.templates.build import template_from_sessions

    runs = real_runs(data)
    one, many = where / "one", where / "many"
    for number in range(count):
        chosen = random.Random(number).sample(runs, min(RUNS_PER_TEMPLATE, len(runs)))
        template = template_from_sessions(f"runs-{number:03d}", chosen, min_messages=0)
        JsonDirStore(many).save(template)
        if number == 0:
            JsonDirStore(one).save(template)
    return one, many


def big_template(sessions: int, where: Path) -> tuple[Path, int, float]:
    """Save one template built from ``sessions`` generated Hermes-style sessions; its store, past
    tasks and file size (MB)."""
    from kindling.sessions import generate_sample_db, iter_sessions
    from kindling.templates import JsonDirStore
    from kindling.templates.build import template_from_sessions

    db = generate_sample_db(where / "big.db", sessions=sessions, seed=11)
    template = template_from_sessions("big", iter_sessions(db))  # as `kindling build` keeps them
    store = where / "big"
    JsonDirStore(store).save(template)
    return store, len(template.episodes), (store / "big.json").stat().st_size / 1e6


def time_store(store: Path, tasks: list[str], repeats: int) -> dict[str, Any]:
    """In a fresh process: the first ``warm()`` without a name over ``store``, then the median of the rest."""
    done = subprocess.run(
        [sys.executable, __file__, "--time-store", str(store), "--repeats", str(repeats)],
        input=json.dumps(tasks),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"timing {store} failed:\n{done.stderr[-2000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _time_store_here(store: str, repeats: int) -> int:
    # The child of time_store: kindling imported (as in a long-running process), nothing warmed yet.
    import kindling.warmup  # noqa: F401
    from kindling.templates import JsonDirStore
    from kindling.warmup import warm

    tasks = json.loads(sys.stdin.read())
    opened = JsonDirStore(store)
    started = time.perf_counter()
    first = warm(None, tasks[0], store=opened, record_use=False)
    cold = time.perf_counter() - started
    times: list[float] = []
    chosen: set[str] = {first.template.name}
    for task in tasks:  # each task's template is warmed once (its models fitted), then timed
        chosen.add(warm(None, task, store=opened, record_use=False).template.name)
    for _ in range(repeats):
        for task in tasks:
            started = time.perf_counter()
            chosen.add(warm(None, task, store=opened, record_use=False).template.name)
            times.append(time.perf_counter() - started)
    print(json.dumps({"first": cold, "median": statistics.median(times), "chosen": len(chosen)}))
    return 0


def report_choice(label: str, figures: dict[str, Any], base: dict[str, Any], target: float | None) -> None:
    ratio = figures["median"] / base["median"]
    verdict = "" if target is None else f" (target {target:g}x: {'met' if ratio <= target else 'NOT met'})"
    first = "met" if figures["first"] <= 1.0 else "NOT met"
    print(
        f"    {label}: median {figures['median'] * 1000:.2f} ms = {ratio:.2f}x the one-template store{verdict}; "
        f"first call {figures['first'] * 1000:.0f} ms = {figures['first'] / base['first']:.1f}x its first "
        f"(target 1 s: {first}); {figures['chosen']} templates chosen"
    )


def choosing(args: argparse.Namespace) -> None:
    """Time warm() without a name over 1 and many real templates, and over one big template."""
    repeats = 3 if args.quick else 20
    count = QUICK_MANY if args.quick else MANY
    sessions = args.big_sessions or (QUICK_BIG_SESSIONS if args.quick else BIG_SESSIONS)
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        print("  choosing a template: warm() without a name over a store on disk, one long-running process")
        base: dict[str, Any] | None = None
        if args.data.is_dir():
            one, many = many_templates(args.data, count, where)
            tasks = list(RETAIL_TASKS)
            base = time_store(one, tasks, repeats)
            print(
                f"    one template ({RUNS_PER_TEMPLATE} real runs): median {base['median'] * 1000:.2f} ms, "
                f"first call {base['first'] * 1000:.0f} ms (the baseline)"
            )
            report_choice(f"{count} templates", time_store(many, tasks, repeats), base, 3.0)
        else:
            print(f"    {count} templates from real runs: skipped, no recorded runs at {args.data} (--data)")
        store, past, size = big_template(sessions, where)
        tasks = list(TASKS)
        figures = time_store(store, tasks, repeats)
        print(
            f"    one template from {sessions} generated sessions ({past} past tasks, a {size:.1f} MB file): "
            f"median {figures['median'] * 1000:.2f} ms (target 50 ms: "
            f"{'met' if figures['median'] <= 0.05 else 'NOT met'})"
            + (f" = {figures['median'] / base['median']:.2f}x the one-template store" if base else "")
            + f"; first call {figures['first'] * 1000:.0f} ms (target 1 s: "
            f"{'met' if figures['first'] <= 1.0 else 'NOT met'})"
        )


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
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="recorded runs for the 100 templates")
    parser.add_argument(
        "--big-sessions", type=int, default=None, help="generated sessions of the big template"
    )
    parser.add_argument("--time-store", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.time_store:
        return _time_store_here(args.time_store, args.repeats or 3)

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
    choosing(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

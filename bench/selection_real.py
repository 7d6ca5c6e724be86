"""Benchmark: does warm-up show the tools a new task needs, on real agents' recorded runs?

Data: the development data (``../shared/data/trajectories``: tau-bench and tau2-bench retail runs
of seven agents in four sets; see its SOURCES.md), read with kindling's own readers. Every set (a
folder of run files; the run files directly in the folder are one more) is measured on its own, then
all of them together. Split **by task**: all runs
of a task are on one side (the same task recurs across files; v1 task i is tau2 task i; tasks
whose expected actions are identical, such as tau2's twin tasks, count as one; task ids come from
the readers, which recover the real task of the ToolOrchestra file from its action checks). A
fixed-seed k-fold split over tasks holds every task out once; a template is built from the
successful runs of the other folds with kindling's own build (episodes, per-tool coverage,
personal-data scrubbing on), its lessons from all of their runs, as `kindling build` learns them.

For every run of a held-out task, the query is the new task as described, the same way a past
task is known in a template: the benchmark's instruction where the format has one (tau-bench's
``instruction``, tau2's user scenario), else the run's first substantive user message. Beside it,
kindling is also asked with only what its agent had at turn zero: the first substantive user
message (``kindling@turn0``; a customer's opening line often does not yet say what the task will
need). Each method chooses examples under the same token budget and the same rendering
(``fill_budget``, ``build_conversation``):

* kindling      - ``warm_conversation``: similar past tasks and per-tool evidence decide tools and examples;
* kindling@turn0 - the same, asked with the first substantive user message only;
* general list  - ``warm_conversation`` with no task: the one list of examples that served the
  template's past tasks best (what kindling falls back to when the task says little);
* first-N       - the template's examples in stored order;
* one-per-tool  - one example of each tool, the most used tools first (calls in the template);
* random        - examples drawn at random (seeded by the task);
* oracle        - one example of each tool the task needs (truth a), the most used first.

Scores of the tools in the injected examples, per held-out task (mean over its runs, then over
tasks), against (a) the tools used (successfully) by at least half of the task's successful runs
and (b) the task's expected actions in the run's own file's task definition:
recall (the share of the task's tools shown, out of at most the number of examples allowed, the
most any choice can show), precision (the share of injected examples whose tool the task needs),
F1. Also the estimated tokens injected and the share of injected examples that contain an
identifier of another session's customer (values of user_id, order_id, email, payment_method_id,
first/last name and zip in each session's own call arguments, searched in the injected text;
independent of the scrubber). Ties are broken by tool name and example order everywhere.
Beside them, a task-blind ceiling: the best mean F1 one fixed list of examples reaches on every
held-out task, chosen knowing their tools (``task_blind_ceiling``); what kindling scores above it
came from the task's text. At 2, 3, 4 and 8 examples, per set and all together, the targets: kindling's
F1 at least the best simple rule's and at least the ceiling minus 0.01, its recall not below the
rule's, and no other customer's identifier in what it shows.

Lessons (``evaluate_lessons``, on the same folds; kindling's warm-up shows them by default, so the
table above is with lessons): of the held-out runs' failed calls whose tool and error class
(``kindling.mining.lessons.error_class``) occur among the failed calls of the training side's runs,
the share whose task's warm-up showed a lesson for that tool and class (target >= 0.8 at the default
8 examples); the lessons' share of the warm-up's estimated tokens (mean and largest; <= 0.25); and
kindling's examples F1 (truth a) without and with lessons (drop <= 0.01).

    .venv/bin/python bench/selection_real.py            # 5 folds per set and all together, then the lessons
    .venv/bin/python bench/selection_real.py --quick    # all together only, 2 folds over 20 tasks
    .venv/bin/python bench/selection_real.py --lessons  # the lessons' figures only
    .venv/bin/python bench/selection_real.py --data DIR # other runs: files in DIR, or a folder per set

With ``--data``, the run files directly in DIR (``.json``, ``.jsonl``) and everything in each of
its folders are read; a folder with too few tasks that have a successful run for the split is
refused with one line saying so (exit code 2).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SEED = 20261122
FOLDS = 5
SETTINGS = (2, 3, 4, 8)
BUDGET = 2000
METHODS = ("kindling", "kindling@turn0", "general list", "first-N", "one-per-tool", "random", "oracle")
SIMPLE = ("first-N", "one-per-tool", "random")
CEILING_MARGIN = 0.01  # kindling may trail the task-blind ceiling by at most this much F1
IDENTIFIER_KEYS = frozenset(
    {"user_id", "order_id", "email", "payment_method_id", "first_name", "last_name", "zip"}
)
MIN_IDENTIFIER = 4
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
_TOKEN = re.compile(r"[\w@.#+-]+")


# ------------------------------------------------------------------------------------- data


class Run:
    """One recorded run: its session, task group, success, query and truths."""

    def __init__(self, session: Any, file: str, data_set: str = "") -> None:
        from kindling.mining.tasktype import opening_request

        self.session = session
        self.file = file
        self.set = data_set
        self.task = str(session.metadata.get("task_id"))
        self.group = self.task
        self.success = session.reward is not None and session.reward >= 1.0
        self.opening = opening_request(session)
        instruction = session.metadata.get("instruction")
        described = instruction.strip() if isinstance(instruction, str) else ""
        self.query = described or self.opening
        expected = session.metadata.get("expected_actions") or []
        self.expected = [
            a for a in expected if isinstance(a, dict) and a.get("requestor", "assistant") == "assistant"
        ]
        self.identifiers = _identifiers(session)


def _identifiers(session: Any) -> set[str]:
    found: set[str] = set()
    for message in session.messages:
        for call in message.tool_calls:
            if call.requestor != "assistant":
                continue
            for key, value in call.arguments.items():
                if key in IDENTIFIER_KEYS and isinstance(value, (str, int)):
                    text = str(value).strip().lstrip("#").lower()
                    if len(text) >= MIN_IDENTIFIER:
                        found.add(text)
    return found


def _tools_that_worked(session: Any) -> set[str]:
    from kindling.mining import load_mining_config
    from kindling.mining.outcome import OutcomeClassifier

    classify = OutcomeClassifier(load_mining_config().rules()).classify
    names: dict[str, str] = {}
    worked: set[str] = set()
    for message in session.messages:
        for call in message.tool_calls:
            if call.requestor == "assistant":
                names[call.id] = call.name
        if message.role == "tool" and message.tool_call_id in names:
            name = names[message.tool_call_id]
            if classify(name, message.content, message.error).ok:
                worked.add(name)
    return worked


# A run file directly in the data folder; a README or SOURCES.md beside the runs is not one.
RUN_FILES = (".json", ".jsonl")


def load_runs(data: Path) -> tuple[list[Run], dict[str, int]]:
    """Return every run under ``data`` and the runs per source.

    The sources are the run files directly in ``data`` and every file or folder in each of its
    folders (one folder per set, as in the development data), each read by kindling's readers.
    """
    from kindling.sessions import iter_sessions

    sources = [
        (data.name, p.name, p) for p in sorted(data.iterdir()) if p.is_file() and p.suffix in RUN_FILES
    ]
    for folder in sorted(p for p in data.iterdir() if p.is_dir()):
        sources.extend(
            (folder.name, f"{folder.name}/{source.name}", source) for source in sorted(folder.iterdir())
        )
    runs: list[Run] = []
    per_source: dict[str, int] = {}
    for data_set, label, source in sources:
        count = 0
        for session in iter_sessions(source):
            runs.append(Run(session, source.name, data_set))
            count += 1
        per_source[label] = count
    _merge_identical_tasks(runs)
    return runs, per_source


def _merge_identical_tasks(runs: list[Run]) -> None:
    """Tasks whose expected actions are identical (twins) become one group (union-find)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    by_actions: dict[str, str] = {}
    for run in runs:
        if not run.expected:
            continue
        key = json.dumps(
            [(a.get("name"), a.get("arguments")) for a in run.expected], sort_keys=True, default=str
        )
        other = by_actions.setdefault(key, run.task)
        a, b = find(other), find(run.task)
        if a != b:
            parent[max(a, b, key=_task_order)] = min(a, b, key=_task_order)
    for run in runs:
        run.group = find(run.task)


def _task_order(task: str) -> tuple[int, str]:
    return (int(task), task) if task.isdigit() else (1 << 30, task)


# ------------------------------------------------------------------------------------- scoring


def score(shown: Sequence[str], truth: set[str], slots: int) -> tuple[float, float, float] | None:
    """Return (recall, precision, F1) as ``bench/selection.py`` scores them; None when there is no truth."""
    from selection import score as scored  # this folder's sibling benchmark: one definition of the scores

    return scored(list(shown), truth, slots) if truth else None


def shown_examples(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Return (tool, example text) per injected call: the call, its result and its request."""
    results = {
        m.get("tool_call_id"): str(m.get("content") or "") for m in messages if m.get("role") == "tool"
    }
    out: list[tuple[str, str]] = []
    request = ""
    for message in messages:
        if message.get("role") == "user":
            request = str(message.get("content") or "")
        for call in message.get("tool_calls") or ():
            function = call["function"]
            text = f"{request}\n{function['arguments']}\n{results.get(call['id'], '')}"
            out.append((function["name"], text))
    return out


def leaks(text: str, identifiers: dict[str, set[int]], own: set[str]) -> bool:
    """True when ``text`` holds an identifier of a session other than the query's own customer."""
    for token in _TOKEN.findall(text.lower()):
        token = token.strip(".,;:!?#").lstrip("#")
        if token in identifiers and token not in own:
            return True
    return False


# ------------------------------------------------------------------------------------- methods


def _ordered_by_use(template: Any) -> list[str]:
    uses: Counter[str] = Counter()
    for example in template.examples:
        uses[example.tool_name] += max(1, example.count)
    return sorted(uses, key=lambda t: (-uses[t], t))


def choose(
    method: str, template: Any, run: Run, truth: set[str], slots: int, context: dict[str, Any]
) -> list[dict[str, Any]]:
    """Return the injected messages of ``method`` for ``run`` at ``slots`` examples."""
    from kindling.warmup.build import Shown, build_conversation
    from kindling.warmup.select import fill_budget
    from kindling.warmup.warm import warm_conversation

    if method == "kindling":
        return warm_conversation(template, run.query, budget=BUDGET, max_examples=slots).messages
    if method == "kindling@turn0":
        return warm_conversation(template, run.opening, budget=BUDGET, max_examples=slots).messages
    if method == "general list":
        return warm_conversation(template, "", budget=BUDGET, max_examples=slots).messages
    examples = template.examples
    if method == "first-N":
        order = list(range(len(examples)))
    elif method == "one-per-tool":
        first = context["first_of_tool"]
        order = [first[t] for t in context["by_use"]]
    elif method == "random":
        rng = random.Random(f"{SEED}:{run.group}:{run.session.id}")
        order = rng.sample(range(len(examples)), len(examples))
    else:  # oracle
        first = context["first_of_tool"]
        order = [first[t] for t in context["by_use"] if t in truth]
    selection = fill_budget([Shown(examples[i]) for i in order], budget=BUDGET, max_examples=slots)
    return build_conversation(selection.shown, budget=BUDGET, example_tokens=selection.example_tokens)


# ------------------------------------------------------------------------------------- main


CEILING_TOOLS = 7  # the task-blind ceiling tries every list of the tools most held-out tasks need


def task_blind_ceiling(truths: Sequence[set[str]], slots: int) -> tuple[float, list[str]]:
    """Return the best mean F1 any one fixed list of at most ``slots`` examples reaches over
    ``truths`` (one per held-out task), and that list.

    It is chosen knowing every held-out task's tools, so no method that is blind to the task can
    do better with these tools: what a method scores above it came from the task's text. Lists are
    drawn (with repeats) from the ``CEILING_TOOLS`` tools the most tasks need; ties go to the
    shorter list, then by tool names.
    """
    from selection import score as scored_by  # as ``score``, without its check per call: no truth is empty

    scored = [t for t in truths if t]
    needed = Counter(tool for truth in scored for tool in truth)
    tools = sorted(needed, key=lambda t: (-needed[t], t))[:CEILING_TOOLS]
    best: tuple[float, list[str]] = (0.0, [])
    for n in range(1, slots + 1):
        for combination in itertools.combinations_with_replacement(tools, n):
            shown = list(combination)
            f1 = statistics.fmean(scored_by(shown, truth, slots)[2] for truth in scored)
            if f1 > best[0] + 1e-12:
                best = (f1, shown)
    return best


def folds_of(groups: Sequence[str], k: int) -> list[set[str]]:
    """Return ``k`` folds of task groups, shuffled with the fixed seed (every group in one fold)."""
    order = sorted(groups, key=_task_order)
    random.Random(SEED).shuffle(order)
    return [set(order[i::k]) for i in range(k)]


def _tasks(
    runs: list[Run], groups_limit: int | None
) -> tuple[dict[str, list[Run]], dict[str, set[str]], list[str]]:
    """Return the runs per task, each task's truth (a): the tools at least half of its successful
    runs used, and the tasks to hold out in order (every ``len // groups_limit``-th with a limit)."""
    by_group: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_group[run.group].append(run)
    truth: dict[str, set[str]] = {}
    for group, members in by_group.items():
        used = [_tools_that_worked(r.session) for r in members if r.success]
        if used:
            tools = set().union(*used)
            truth[group] = {t for t in tools if 2 * sum(t in u for u in used) >= len(used)}
    groups = sorted(truth, key=_task_order)
    if groups_limit is not None:
        groups = groups[:: max(1, len(groups) // groups_limit)][:groups_limit]
    return by_group, truth, groups


def evaluate(runs: list[Run], k: int, groups_limit: int | None, verbose: bool) -> dict[str, Any]:
    """Run the k-fold benchmark; return the per-setting, per-method means and the counts."""
    from kindling.templates.build import template_from_sessions
    from kindling.warmup.tokens import estimate_conversation_tokens

    by_group, truth, groups = _tasks(runs, groups_limit)
    identifiers: dict[str, set[int]] = defaultdict(set)
    for index, run in enumerate(runs):
        for value in run.identifiers:
            identifiers[value].add(index)
    own_of = {id(r): r.identifiers for r in runs}
    # results[slots][method][metric] -> per-task means
    results: dict[int, dict[str, dict[str, list[float]]]] = {
        s: {m: defaultdict(list) for m in METHODS} for s in SETTINGS
    }
    counts = {"tasks": 0, "queries": 0, "templates": []}
    held_out: list[set[str]] = []  # the truth of every held-out task scored, for the ceiling
    for fold in folds_of(groups, k):
        train = [r.session for r in runs if r.group not in fold and r.success]
        template = template_from_sessions("bench", train, min_messages=0)
        # Lessons from every training run, failed ones too, as `kindling build` learns them.
        everything = [r.session for r in runs if r.group not in fold]
        learned = template_from_sessions("lessons", everything, min_messages=0).lessons
        template = template.model_copy(update={"lessons": learned})
        counts["templates"].append((len(template.examples), len(template.episodes)))
        context = {
            "by_use": _ordered_by_use(template),
            "first_of_tool": {},
        }
        for i, example in enumerate(template.examples):
            context["first_of_tool"].setdefault(example.tool_name, i)
        for group in sorted(fold, key=_task_order):
            members = [r for r in by_group[group] if r.query and r.opening]
            if not members:
                continue
            counts["tasks"] += 1
            counts["queries"] += len(members)
            held_out.append(truth[group])
            for slots in SETTINGS:
                per: dict[str, dict[str, list[float]]] = {m: defaultdict(list) for m in METHODS}
                for run in members:
                    expected = {a.get("name") for a in run.expected if a.get("name")}
                    for method in METHODS:
                        messages = choose(method, template, run, truth[group], slots, context)
                        shown = shown_examples(messages)
                        tools = [tool for tool, _ in shown]
                        a = score(tools, truth[group], slots)
                        if a is not None:
                            for name, value in zip(("recall", "precision", "f1"), a, strict=True):
                                per[method][name].append(value)
                        b = score(tools, expected, slots)  # type: ignore[arg-type]
                        if b is not None:
                            per[method]["recall_b"].append(b[0])
                            per[method]["precision_b"].append(b[1])
                            per[method]["f1_b"].append(b[2])
                        per[method]["tokens"].append(estimate_conversation_tokens(messages))
                        per[method]["examples"].append(len(shown))
                        if shown:
                            own = own_of[id(run)]
                            share = sum(leaks(text, identifiers, own) for _, text in shown) / len(shown)
                            per[method]["leaks"].append(share)
                for method, metrics in per.items():
                    for name, values in metrics.items():
                        results[slots][method][name].append(statistics.fmean(values))
                if verbose and slots == SETTINGS[-1]:
                    row = "  ".join(
                        f"{m} {statistics.fmean(per[m]['f1']):.2f}" for m in METHODS if per[m]["f1"]
                    )
                    print(f"  task {group:>4} truth={','.join(sorted(truth[group]))[:70]:70} {row}")
    ceiling = {slots: task_blind_ceiling(held_out, slots) for slots in SETTINGS}
    return {"results": results, "counts": counts, "ceiling": ceiling}


def report(outcome: dict[str, Any], label: str, runs: int) -> bool:
    """Print one set's table and its target checks; return True when every target is met."""
    results, counts = outcome["results"], outcome["counts"]
    sizes = ", ".join(f"{e} ex/{p} tasks" for e, p in counts["templates"])
    print(
        f"\n{label}: {runs} runs, {counts['tasks']} held-out tasks ({counts['queries']} queries); "
        f"templates per fold: {sizes}"
    )
    means = {
        slots: {
            m: {n: statistics.fmean(v) if v else 0.0 for n, v in results[slots][m].items()} for m in METHODS
        }
        for slots in SETTINGS
    }
    at = "/".join(str(slots) for slots in SETTINGS)
    print(
        f"  {'method':15} {'F1 (a) at ' + at:27} {'recall (a) at ' + at:27} {'F1 (b) at ' + at:27} "
        f"tokens at {SETTINGS[-1]}  ids"
    )

    def row(metric: str, method: str) -> str:
        return " ".join(f"{means[slots][method].get(metric, 0.0):.3f}" for slots in SETTINGS)

    for method in METHODS:
        ids = max(means[slots][method].get("leaks", 0.0) for slots in SETTINGS)
        print(
            f"  {method:15} {row('f1', method):27} {row('recall', method):27} {row('f1_b', method):27} "
            f"{means[SETTINGS[-1]][method].get('tokens', 0.0):12.0f}  {ids:.4f}"
        )
    ceilings = " ".join(f"{outcome['ceiling'][slots][0]:.3f}" for slots in SETTINGS)
    print(
        f"  {'ceiling':15} {ceilings:27} (task-blind: the best one list for these tasks, chosen knowing their tools)"
    )
    met = True
    for slots in SETTINGS:
        mean = means[slots]
        best = max(SIMPLE, key=lambda m: (mean[m]["f1"], m))
        ceiling, fixed = outcome["ceiling"][slots]
        f1, recall = mean["kindling"]["f1"], mean["kindling"]["recall"]
        ok_rule = f1 >= mean[best]["f1"] - 1e-9
        ok_ceiling = f1 >= ceiling - CEILING_MARGIN - 1e-9
        ok_recall = recall >= mean[best]["recall"] - 1e-9
        ok_ids = mean["kindling"].get("leaks", 0.0) == 0.0
        met = met and ok_rule and ok_ceiling and ok_recall and ok_ids
        ratio = f1 / mean[best]["f1"] if mean[best]["f1"] else float("inf")
        listed = ", ".join(f"{tool} x{n}" if n > 1 else tool for tool, n in Counter(fixed).items())
        verdict = "met" if ok_rule and ok_ceiling and ok_recall and ok_ids else "NOT met"
        print(
            f"  at {slots}: kindling {f1:.3f} F1, {ratio:.2f}x the best simple rule ({best} {mean[best]['f1']:.3f}), "
            f"{f1 - ceiling:+.3f} against the ceiling {ceiling:.3f} ({listed}); recall {recall:.3f} vs "
            f"{mean[best]['recall']:.3f}; ids {mean['kindling'].get('leaks', 0.0):.4f}: {verdict}"
        )
    return met


# ------------------------------------------------------------------------------------- lessons


LESSON_TARGET = 0.8  # the share of known failures whose lesson the task's warm-up shows
LESSON_SHARE_TARGET = 0.25  # the most of a warm-up's tokens its lessons may take
LESSON_F1_DROP = 0.01  # the most the examples' F1 may drop with lessons


def _failures(session: Any) -> list[tuple[str, str]]:
    """Return (tool, error class) of every failed call the agent made in ``session``."""
    from kindling.mining import load_mining_config
    from kindling.mining.lessons import error_class, paired_calls
    from kindling.mining.model import OutcomeStatus
    from kindling.mining.outcome import OutcomeClassifier

    classify = OutcomeClassifier(load_mining_config().rules())
    return [
        (call.name, error_class(call.result))
        for call in paired_calls(session, classify)
        if call.status is OutcomeStatus.FAILED
    ]


def evaluate_lessons(runs: list[Run], k: int, groups_limit: int | None) -> dict[str, Any]:
    """Run the lessons' part of the k-fold split (the same folds as ``evaluate``).

    Per setting: of the held-out runs' failed calls whose tool and error class occur among the
    training side's failed calls, the share whose task's warm-up (kindling, the task as described,
    the default budget) showed a lesson for that tool and class; the lessons' share of the warm-up's
    tokens (mean and largest); kindling's examples F1 (truth a) with and without lessons.
    """
    from kindling.mining.lessons import LESSONS_INTRO
    from kindling.templates.build import template_from_sessions
    from kindling.warmup.tokens import estimate_conversation_tokens, estimate_message_tokens
    from kindling.warmup.warm import warm_conversation

    by_group, truth, groups = _tasks(runs, groups_limit)
    failures = {id(run): _failures(run.session) for run in runs}
    out: dict[int, dict[str, list[float]]] = {s: defaultdict(list) for s in SETTINGS}
    counts = {"failures": 0, "known": 0, "lessons": []}
    for fold in folds_of(groups, k):
        train = [r for r in runs if r.group not in fold]
        # Examples from the successful runs, as the table above; lessons from every run, as
        # `kindling build` learns them (a failure and what worked next teach in a failed task too).
        template = template_from_sessions("bench", [r.session for r in train if r.success], min_messages=0)
        learned = template_from_sessions("lessons", [r.session for r in train], min_messages=0).lessons
        template = template.model_copy(update={"lessons": learned})
        counts["lessons"].append(len(template.lessons))
        seen = {failure for r in train for failure in failures[id(r)]}
        for group in sorted(fold, key=_task_order):
            members = [r for r in by_group[group] if r.query and r.opening]
            if not members:
                continue
            # F1 as the table above has it: the mean over the task's runs, then over tasks.
            per_task: dict[int, dict[str, list[float]]] = {s: defaultdict(list) for s in SETTINGS}
            for run in members:
                known = [f for f in failures[id(run)] if f in seen]
                counts["failures"] += len(failures[id(run)])
                counts["known"] += len(known)
                for slots in SETTINGS:
                    with_lessons = warm_conversation(template, run.query, budget=BUDGET, max_examples=slots)
                    without = warm_conversation(
                        template, run.query, budget=BUDGET, max_examples=slots, lessons=False
                    )
                    shown = {(x["tool"], x["error_class"]) for x in with_lessons.lessons}
                    for failure in known:
                        out[slots]["shown"].append(float(failure in shown))
                    total = estimate_conversation_tokens(with_lessons.messages)
                    block = sum(
                        estimate_message_tokens(m)
                        for m in with_lessons.messages
                        if str(m.get("content") or "").startswith(LESSONS_INTRO)
                    )
                    out[slots]["share"].append(block / total if total else 0.0)
                    for label, result in (("f1_with", with_lessons), ("f1_without", without)):
                        tools = [tool for tool, _ in shown_examples(result.messages)]
                        scored = score(tools, truth[group], slots)
                        if scored is not None:
                            per_task[slots][label].append(scored[2])
            for slots in SETTINGS:
                for label, values in per_task[slots].items():
                    out[slots][label].append(statistics.fmean(values))
    return {"results": out, "counts": counts}


def report_lessons(outcome: dict[str, Any]) -> bool:
    """Print the lessons' figures per setting; return True when every target is met."""
    counts = outcome["counts"]
    print(
        f"\n  lessons: {counts['failures']} failed calls in the held-out runs, {counts['known']} of a tool "
        f"and error class the training side met; lessons per fold's template: "
        f"{', '.join(str(n) for n in counts['lessons'])}"
    )
    from kindling.warmup.select import DEFAULT_MAX_EXAMPLES

    print("  examples  lesson shown  lessons' share of tokens (mean, max)  F1 without  F1 with   drop")
    met = True
    for slots in SETTINGS:
        v = outcome["results"][slots]
        shown = statistics.fmean(v["shown"]) if v["shown"] else float("nan")  # nan: no known failure
        share, largest = statistics.fmean(v["share"]), max(v["share"])
        f1_without, f1_with = statistics.fmean(v["f1_without"]), statistics.fmean(v["f1_with"])
        drop = f1_without - f1_with
        # The share of failures shown is a target at the default setting; the others at every one.
        ok_shown = not v["shown"] or shown >= LESSON_TARGET or slots != DEFAULT_MAX_EXAMPLES
        ok = ok_shown and largest <= LESSON_SHARE_TARGET + 1e-9 and drop <= LESSON_F1_DROP + 1e-9
        met = met and ok
        print(
            f"  {slots:8}  {shown:12.3f}  {share:18.3f} {largest:8.3f}           {f1_without:10.3f} "
            f"{f1_with:8.3f} {drop:+7.3f}   {'met' if ok else 'NOT met'}"
        )
    print(
        f"  targets: lesson shown >= {LESSON_TARGET} at the default {DEFAULT_MAX_EXAMPLES} examples; at every "
        f"setting the lessons' share <= {LESSON_SHARE_TARGET} and the F1 drop <= {LESSON_F1_DROP}"
    )
    return met


def data_sets(runs: list[Run], quick: bool) -> list[tuple[str, list[Run]]]:
    """Return the sets to measure, each with its runs: every set on its own, then all together
    (only all together when there is one set, or for ``--quick``)."""
    labels = sorted({run.set for run in runs})
    together = ("all together" if len(labels) > 1 else f"set {labels[0]}" if labels else "all", runs)
    if quick or len(labels) <= 1:
        return [together]
    return [(f"set {label}", [run for run in runs if run.set == label]) for label in labels] + [together]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark on the development data and print its tables; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the trajectories folder")
    parser.add_argument("--folds", type=int, default=FOLDS)
    parser.add_argument(
        "--quick", action="store_true", help="all together only, 2 folds over 20 tasks (a smoke run)"
    )
    parser.add_argument("--verbose", action="store_true", help="print every held-out task")
    parser.add_argument(
        "--lessons", action="store_true", help="only the lessons' figures (shown, share of tokens, F1 drop)"
    )
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"no development data at {args.data}")
        return 2
    started = time.perf_counter()
    runs, per_source = load_runs(args.data)
    k = 2 if args.quick else args.folds
    tasks = {run.group for run in runs if run.success}
    if len(tasks) < k:
        print(
            f"{args.data}: {len(runs)} runs, {len(tasks)} tasks with a successful run; a {k}-fold split "
            f"by task needs at least {k} (run files directly in the folder, or one folder per set of them)"
        )
        return 2
    sets = data_sets(runs, args.quick)
    print(
        f"kindling selection on real traces: {len(runs)} runs from {len(per_source)} sources in "
        f"{len({run.set for run in runs})} sets, {k}-fold split by task (seed {SEED}), budget {BUDGET} tokens"
    )
    print(
        "  query: the task as described (the benchmark's instruction where the format has one, else "
        "the first substantive user message); kindling@turn0: the first substantive user message only;\n"
        "  general list: kindling with no task. F1 and recall per held-out task against (a) the tools the "
        "successful runs used, (b) the expected actions; ids: the share of shown examples with another "
        "customer's identifier"
    )
    met = True
    for label, members in sets:
        _merge_identical_tasks(members)  # within the set: another set's task ids may mean other tasks
        groups = {run.group for run in members if run.success}
        if len(groups) < k:
            print(
                f"\n{label}: {len(members)} runs, {len(groups)} tasks with a successful run; too few for a {k}-fold split"
            )
            continue
        limit = 20 if args.quick else None
        if not args.lessons:
            outcome = evaluate(members, k, limit, args.verbose)
            met = report(outcome, label, len(members)) and met
        print(f"\n{label}: lessons")
        met = report_lessons(evaluate_lessons(members, k, limit)) and met
    print(f"\n{time.perf_counter() - started:.0f} s; every target {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

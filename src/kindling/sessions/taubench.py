"""Benchmark runs: tau-bench and tau2-bench, found by their shape wherever they sit in a JSON document.

A tau-bench (v1) run is ``{task_id, trial, reward, info, traj}`` with OpenAI-format messages in
``traj``; a results file is a list of them. A tau2-bench simulation is ``{id, task_id, messages,
reward_info, termination_reason, ...}`` whose calls are ``{id, name, arguments: {...}, requestor}``
(possibly parallel) and whose results are ``{role: "tool", id, content, error}``. Simulations are
found in every place real files keep them:

- ``{"info", "tasks", "simulations": [...]}``: a tau2-bench results file;
- ``{"task_results": [{"task_id", "trajectory": <simulation>}, ...]}``: an evaluation wrapper;
- a simulation alone in a file, with its ``task`` beside it (``{"task_id", "task", "run_info",
  "reward_info", "messages"}``, one ``task_<id>.json`` per run) or without;
- a list of simulations;
- tau2's run directory: ``results.json`` (run info and tasks) with ``simulations/<id>.json``.

A source may be one file or a directory of such files (``index.json`` and other JSON files that
hold no run are counted as ``file_without_sessions``). A JSON document of no known shape is one
``UnknownFormatError``, never a stream of skipped lines.

Every session keeps what a benchmark knows about its task in ``Session.metadata``: ``task_id``
(the task actually run), ``labelled_task_id`` (as the file names it), ``task_match``,
``instruction``, ``expected_actions`` and ``trial``; ``reward`` holds the benchmark's reward (1.0 is
success). A tau2 file's ``task_id`` labels can be wrong: the task run is recovered by matching the
run's ``reward_info.action_checks`` against the file's task definitions (see ``_resolve_task``).
tau2's simulated user can call tools too (``requestor: "user"``): those calls stay on the user's
message with ``requestor="user"``, so nothing that counts the agent's calls ever counts them.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from kindling.errors import SourceError, UnknownFormatError
from kindling.sessions.convert import content_text, messages_from_dicts, normalize_role, parse_arguments
from kindling.sessions.files import epoch, probe, read_document
from kindling.sessions.model import Message, ReadReport, Session, ToolCall
from kindling.sessions.skips import (
    FILE_WITHOUT_SESSIONS,
    MALFORMED_MESSAGE,
    MALFORMED_RECORD,
    MALFORMED_TOOL_CALL,
    MALFORMED_TOOL_CALLS,
    ORPHAN_TOOL_RESULT,
    TOOL_CALL_WITHOUT_NAME,
    UNKNOWN_ROLE,
    UNREADABLE_FILE,
)

TAU_BENCH = "tau-bench"
TAU2_BENCH = "tau2-bench"

#: File names a directory source is read from.
DOCUMENT_SUFFIXES = (".json", ".json.gz")
# Keys that, next to "messages", make an object a tau2-bench simulation rather than a chat log.
_SIMULATION_KEYS = ("reward_info", "termination_reason", "run_info")
# tau2-bench user scenario instructions, in the order a person reads them.
_INSTRUCTION_PARTS = ("reason_for_call", "known_info", "unknown_info", "task_instructions")

# Values of Session.metadata["task_match"].
TASK_AGREES = "agrees"  # the run's expected actions are its labelled task's
TASK_RECOVERED = "recovered"  # they are another task's: task_id names that one
TASK_AMBIGUOUS = "ambiguous"  # they fit several tasks (twins), none the label: the first is taken
TASK_UNCHECKED = "unchecked"  # nothing to check the label against


# ------------------------------------------------------------------------------------------ shapes


def _is_simulation(value: Any) -> bool:
    # Alone (not in a list of simulations), an object with messages needs a simulation's own keys
    # too, or every OpenAI chat log would be one.
    return _has_messages(value) and any(key in value for key in _SIMULATION_KEYS)


def _has_messages(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("messages"), list)


def _is_tau_run(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("traj"), list)


def document_format(document: Any) -> str | None:
    """Return ``"tau-bench"`` or ``"tau2-bench"`` when ``document`` holds runs of that benchmark, else None."""
    if isinstance(document, list):
        first = next((item for item in document if isinstance(item, dict)), None)
        if _is_tau_run(first):
            return TAU_BENCH
        if _is_simulation(first):
            return TAU2_BENCH
        return None
    if not isinstance(document, dict):
        return None
    if isinstance(document.get("simulations"), list):
        return TAU2_BENCH
    results = document.get("task_results")
    if isinstance(results, list) and any(
        isinstance(item, dict) and isinstance(item.get("trajectory"), dict) for item in results
    ):
        return TAU2_BENCH
    if _is_simulation(document):
        return TAU2_BENCH
    if _is_tau_run(document):
        return TAU_BENCH
    return None


def is_run_directory_results(document: Any, path: Path) -> bool:
    """Whether ``document`` (read from ``path``) is tau2's ``results.json`` with ``simulations/`` beside it."""
    return (
        isinstance(document, dict)
        and "simulations" not in document
        and isinstance(document.get("tasks"), list)
        and (path.parent / "simulations").is_dir()
    )


def describe_document(document: Any) -> str:
    """A short description of a JSON document's shape, for error messages."""
    if isinstance(document, dict):
        keys = sorted(str(key) for key in document)
        shown = ", ".join(keys[:8]) + (", ..." if len(keys) > 8 else "")
        return f"a JSON object with keys {shown}" if keys else "an empty JSON object"
    if isinstance(document, list):
        return f"a JSON array of {len(document)} items" if document else "an empty JSON array"
    return f"a JSON {type(document).__name__} value"


def document_files(directory: Path) -> list[Path]:
    """The JSON files of a directory source, in natural name order (``task_2`` before ``task_10``)."""
    # The names first (a folder of session folders holds no document of its own: nothing to build).
    with os.scandir(directory) as listing:
        files = [
            directory / entry.name
            for entry in listing
            if entry.name.endswith(DOCUMENT_SUFFIXES) and not entry.name.startswith(".") and entry.is_file()
        ]
    return sorted(files, key=_natural_key)


def _natural_key(path: Path) -> tuple[Any, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name))


# ---------------------------------------------------------------------------------------- readers


def read_tau_bench(path: Path, report: ReadReport) -> Iterator[Session]:
    """Stream sessions from tau-bench (v1) results: a file, or a directory of result files.

    Raises SourceError when the source cannot be opened and UnknownFormatError when a file
    given on its own holds no tau-bench run.
    """
    return _read(path, report, TAU_BENCH)


def read_tau2_bench(path: Path, report: ReadReport) -> Iterator[Session]:
    """Stream sessions from tau2-bench runs in any of their shapes (see the module docstring).

    Raises SourceError when the source cannot be opened and UnknownFormatError when a file
    given on its own holds no tau2-bench simulation.
    """
    return _read(path, report, TAU2_BENCH)


def _read(path: Path, report: ReadReport, fmt: str) -> Iterator[Session]:
    if path.is_dir():
        return _directory(path, report, fmt)
    probe(path)
    # Parsed now, not when the stream starts: a document of another shape is one error up front.
    document = read_document(path, report)
    if document is None:
        return iter(())
    if document_format(document) != fmt and not (
        fmt == TAU2_BENCH and is_run_directory_results(document, path)
    ):
        raise UnknownFormatError(
            f"Cannot read {path} as {fmt}: it is {describe_document(document)}, "
            f"which holds no {fmt} {'run' if fmt == TAU_BENCH else 'simulation'}.",
            path=path,
        )
    return _document_sessions(document, path, report, fmt)


def _directory(directory: Path, report: ReadReport, fmt: str) -> Iterator[Session]:
    for path in document_files(directory):
        try:
            document = read_document(path, report)
        except SourceError:
            report.skip(UNREADABLE_FILE)
            continue
        if document is None:
            continue  # counted by read_document
        if document_format(document) != fmt:
            report.skip(FILE_WITHOUT_SESSIONS)
            continue
        yield from _document_sessions(document, path, report, fmt)


def _document_sessions(document: Any, path: Path, report: ReadReport, fmt: str) -> Iterator[Session]:
    if fmt == TAU_BENCH:
        runs = document if isinstance(document, list) else [document]
        for index, run in enumerate(runs):
            session = _tau_run(run, index, report)
            if session is not None:
                yield session
        return
    yield from _tau2_document(document, path, report)


# -------------------------------------------------------------------------------------- tau-bench


def _tau_run(item: Any, index: int, report: ReadReport) -> Session | None:
    if not _is_tau_run(item):
        report.skip(MALFORMED_RECORD)
        return None
    task_id, trial = item.get("task_id"), item.get("trial")
    session_id = f"tau-bench:{task_id if task_id is not None else index}:{trial if trial is not None else 0}"
    reward = _reward(item.get("reward"))
    info: dict[str, Any] = item["info"] if isinstance(item.get("info"), dict) else {}
    task: dict[str, Any] = info["task"] if isinstance(info.get("task"), dict) else {}
    instruction = task.get("instruction")
    actions = task.get("actions")
    label = None if task_id is None else str(task_id)
    messages = messages_from_dicts(item["traj"], report, session_id=session_id)
    return Session(
        session_id,
        TAU_BENCH,
        _flag_errors(messages),
        end_reason=None if reward is None else ("success" if reward >= 1.0 else "failure"),
        reward=reward,
        metadata={
            "benchmark": TAU_BENCH,
            "task_id": label,
            "labelled_task_id": label,
            "task_match": TASK_UNCHECKED,
            "trial": trial,
            "instruction": instruction if isinstance(instruction, str) else None,
            "expected_actions": _actions(actions, arguments_key="kwargs")
            if isinstance(actions, list)
            else None,
        },
    )


# ------------------------------------------------------------------------------------- tau2-bench


@dataclasses.dataclass(frozen=True)
class _Run:
    """One simulation and what its document says around it."""

    simulation: Any
    label: Any = None  # the task id the wrapper gives, when the simulation has none
    model: str | None = None


def _tau2_document(document: Any, path: Path, report: ReadReport) -> Iterator[Session]:
    tasks: list[Any] = []
    runs: Iterator[_Run]
    if isinstance(document, list):
        runs = (_Run(item) for item in document)
    elif isinstance(document.get("simulations"), list) or is_run_directory_results(document, path):
        tasks = document.get("tasks") if isinstance(document.get("tasks"), list) else []
        model = _agent_model(document.get("info"))
        simulations = document.get("simulations")
        if not isinstance(simulations, list):
            # tau2-bench's directory format: results.json holds the run info and the tasks, and each
            # simulation is its own file in simulations/ next to it.
            simulations = _simulation_files(path.parent / "simulations", report)
        runs = (_Run(item, model=model) for item in simulations)
    elif isinstance(document.get("task_results"), list):
        config = document.get("config") if isinstance(document.get("config"), dict) else {}
        model = config.get("agent_llm") if isinstance(config.get("agent_llm"), str) else None
        runs = (
            _Run(item.get("trajectory"), item.get("task_id"), model) if isinstance(item, dict) else _Run(None)
            for item in document["task_results"]
        )
    else:  # one simulation, perhaps with its task beside it
        task = document.get("task")
        tasks = [task] if isinstance(task, dict) else []
        runs = iter([_Run(document, document.get("task_id"))])
    task_index = _task_index(tasks)
    for index, run in enumerate(runs):
        if not _has_messages(run.simulation):
            report.skip(MALFORMED_RECORD)
            continue
        yield _tau2_session(run, f"{path.name}:{index}", task_index, report)


def _tau2_session(run: _Run, fallback_id: str, tasks: _TaskIndex, report: ReadReport) -> Session:
    sim = run.simulation
    info = sim.get("run_info") if isinstance(sim.get("run_info"), dict) else {}
    session_id = str(sim.get("id") or info.get("simulation_id") or fallback_id)
    reward_info = sim.get("reward_info") if isinstance(sim.get("reward_info"), dict) else {}
    label = sim.get("task_id", run.label)
    label = None if label is None else str(label)
    task_id, match, candidates = _resolve_task(label, reward_info.get("action_checks"), tasks)
    task = tasks.by_id.get(task_id) if task_id is not None else None
    expected: list[dict[str, Any]] | None
    if task is not None:
        expected = _actions(_task_actions(task))
    else:
        checks = reward_info.get("action_checks")
        expected = _actions(_checked_actions(checks)) if isinstance(checks, list) else None
    termination = sim.get("termination_reason", info.get("termination_reason"))
    started = epoch(sim.get("start_time")) or epoch(info.get("timestamp")) or epoch(sim.get("timestamp"))
    ended = epoch(sim.get("end_time"))
    duration = info.get("duration_sec")
    if ended is None and started is not None and isinstance(duration, (int, float)) and duration > 0:
        ended = started + float(duration)
    metadata: dict[str, Any] = {
        "benchmark": TAU2_BENCH,
        "task_id": task_id,
        "labelled_task_id": label,
        "task_match": match,
        "trial": sim.get("trial"),
        "instruction": _instruction(task) if task is not None else None,
        "expected_actions": expected,
    }
    if len(candidates) > 1:
        metadata["task_candidates"] = list(candidates)
    return Session(
        session_id,
        TAU2_BENCH,
        tau2_messages(sim["messages"], report, session_id),
        started,
        ended,
        termination if isinstance(termination, str) else None,
        run.model,
        None,
        _reward(reward_info.get("reward")),
        metadata,
    )


@dataclasses.dataclass(frozen=True)
class _TaskIndex:
    by_id: Mapping[str, Mapping[str, Any]]
    by_actions: Mapping[bytes, tuple[str, ...]]


def _task_index(tasks: Sequence[Any]) -> _TaskIndex:
    by_id: dict[str, Mapping[str, Any]] = {}
    by_actions: dict[bytes, list[str]] = {}
    for task in tasks:
        if not isinstance(task, dict) or task.get("id") is None:
            continue
        task_id = str(task["id"])
        by_id[task_id] = task
        by_actions.setdefault(_actions_key(_task_actions(task)), []).append(task_id)
    return _TaskIndex(by_id, {key: tuple(ids) for key, ids in by_actions.items()})


def _resolve_task(
    label: str | None, checks: Any, tasks: _TaskIndex
) -> tuple[str | None, str, tuple[str, ...]]:
    """Return ``(task_id, task_match, candidates)`` for a run labelled ``label``.

    The run's ``action_checks`` list the actions it was scored against, which are its task's
    expected actions. The tasks of the file whose expected actions are exactly those (names and
    arguments, in order) are the candidates: the label wins when it is one of them; one other
    candidate is the task recovered; several (twin tasks with the same actions) are ambiguous and
    the first in id order is taken. A run with no checks (``null``) is scored on no action, so it
    fits the tasks that expect none.
    """
    if not tasks.by_id or not (checks is None or isinstance(checks, list)):
        return label, TASK_UNCHECKED, ()
    expected = _checked_actions(checks) if isinstance(checks, list) else []
    candidates = tuple(sorted(tasks.by_actions.get(_actions_key(expected), ()), key=_id_order))
    if label is not None and label in candidates:
        return label, TASK_AGREES, candidates
    if len(candidates) == 1:
        return candidates[0], TASK_RECOVERED, candidates
    if candidates:
        return candidates[0], TASK_AMBIGUOUS, candidates
    return label, TASK_UNCHECKED, ()


def _id_order(task_id: str) -> tuple[int, int | str]:
    return (0, int(task_id)) if task_id.isdigit() else (1, task_id)


def _task_actions(task: Mapping[str, Any]) -> list[Any]:
    criteria = task.get("evaluation_criteria")
    actions = criteria.get("actions") if isinstance(criteria, dict) else None
    return actions if isinstance(actions, list) else []


def _checked_actions(checks: list[Any]) -> list[Any]:
    return [
        check.get("action")
        for check in checks
        if isinstance(check, dict) and isinstance(check.get("action"), dict)
    ]


def _actions_key(actions: Sequence[Any]) -> bytes:
    return orjson.dumps(
        [
            [action.get("name"), action.get("arguments") or {}]
            for action in actions
            if isinstance(action, dict)
        ],
        option=orjson.OPT_SORT_KEYS,
        default=str,
    )


def _actions(actions: Sequence[Any], *, arguments_key: str = "arguments") -> list[dict[str, Any]]:
    """Expected actions as ``{"name", "arguments"}`` (plus ``requestor`` when it is not the agent)."""
    out: list[dict[str, Any]] = []
    for action in actions:
        if not isinstance(action, dict) or not isinstance(action.get("name"), str):
            continue
        arguments = action.get(arguments_key)
        entry: dict[str, Any] = {
            "name": action["name"],
            "arguments": arguments if isinstance(arguments, dict) else {},
        }
        requestor = action.get("requestor")
        if isinstance(requestor, str) and requestor != "assistant":
            entry["requestor"] = requestor
        out.append(entry)
    return out


def _instruction(task: Mapping[str, Any]) -> str | None:
    scenario = task.get("user_scenario")
    instructions = scenario.get("instructions") if isinstance(scenario, dict) else None
    if isinstance(instructions, str):
        return instructions
    if not isinstance(instructions, dict):
        return None
    parts = [instructions.get(key) for key in _INSTRUCTION_PARTS]
    text = "\n".join(part.strip() for part in parts if isinstance(part, str) and part.strip())
    return text or None


def _simulation_files(directory: Path, report: ReadReport) -> Iterator[Any]:
    """Yield each ``simulations/*.json`` document in name order, one file in memory at a time."""
    for sim_path in document_files(directory):
        try:
            document = read_document(sim_path, report)
        except SourceError:
            report.skip(UNREADABLE_FILE)
            continue
        if document is not None:
            yield document


def _agent_model(info: Any) -> str | None:
    if isinstance(info, dict) and isinstance(info.get("agent_info"), dict):
        llm = info["agent_info"].get("llm")
        return llm if isinstance(llm, str) else None
    return None


def _reward(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _flag_errors(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """Set ``error`` on tool results the source did not flag, by tau's own convention.

    tau-bench (and tau2 files stripped of the flag) return a failed call's exception as a result
    starting with ``Error``; tau2 sets ``error: true`` on exactly those.
    """
    if not any(message.role == "tool" and message.error is None for message in messages):
        return messages
    return tuple(
        dataclasses.replace(message, error=(message.content or "").startswith("Error"))
        if message.role == "tool" and message.error is None
        else message
        for message in messages
    )


def tau2_messages(items: list[Any], report: ReadReport, session_id: str) -> tuple[Message, ...]:
    """Convert tau2-bench messages, keeping parallel calls and user-side calls apart from the agent's."""
    names: dict[str, str] = {}
    out: list[Message] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            report.skip(MALFORMED_MESSAGE)
            continue
        if item.get("role") == "tool" and isinstance(item.get("tool_messages"), list):
            nested = item["tool_messages"]  # a multi-tool message: one result per call
        else:
            nested = [item]
        for sub_index, message in enumerate(nested):
            converted = _tau2_message(message, report, f"{session_id}:{index}:{sub_index}", names)
            if converted is not None:
                out.append(converted)
    return _flag_errors(tuple(out))


def _tau2_message(item: Any, report: ReadReport, prefix: str, names: dict[str, str]) -> Message | None:
    if not isinstance(item, dict):
        report.skip(MALFORMED_MESSAGE)
        return None
    role = normalize_role(item.get("role"))
    if role is None:
        report.skip(UNKNOWN_ROLE)
        return None
    content = content_text(item.get("content"))
    error = item.get("error") if isinstance(item.get("error"), bool) else None
    stamp = epoch(item.get("timestamp"))
    if role == "tool":
        call_id = item.get("id") or item.get("tool_call_id")
        if call_id is None or str(call_id) not in names:
            report.skip(ORPHAN_TOOL_RESULT)
            return None
        return Message("tool", content, (), str(call_id), names[str(call_id)], error, stamp)
    calls: list[ToolCall] = []
    raw_calls = item.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        report.skip(MALFORMED_TOOL_CALLS)
        raw_calls = ()
    default_requestor = "user" if role == "user" else "assistant"
    for number, call in enumerate(raw_calls):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call.get("name"):
            report.skip(TOOL_CALL_WITHOUT_NAME if isinstance(call, dict) else MALFORMED_TOOL_CALL)
            continue
        arguments, raw = parse_arguments(call.get("arguments"))
        call_id = str(call.get("id") or f"{prefix}:{number}")
        who = call.get("requestor")
        requestor: str = who if isinstance(who, str) and who else default_requestor
        names[call_id] = call["name"]
        calls.append(ToolCall(call_id, call["name"], arguments, raw, requestor))
    return Message(role, content, tuple(calls), None, None, error, stamp)

"""Benchmark result files: tau-bench and tau2-bench.

Both are single JSON documents, parsed whole (benchmark runs are thousands of trajectories, not
millions). tau-bench is an array of ``{task_id, trial, reward, info, traj}`` where ``traj`` holds
OpenAI-format messages. tau2-bench is ``{info, tasks, simulations: [...]}``; its calls are
``{id, name, arguments: {...}, requestor}`` and may be parallel, its results are
``{role: "tool", id, content, error}`` linked to the call by ``id``. tau2's simulated user can call
tools too (``requestor: "user"``): those calls stay on the user's message with
``requestor="user"``, so nothing that counts the agent's (assistant) calls ever counts them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kindling.errors import SourceError
from kindling.sessions.convert import content_text, messages_from_dicts, normalize_role, parse_arguments
from kindling.sessions.files import epoch, probe, read_document
from kindling.sessions.model import Message, ReadReport, Session, ToolCall


def _reward(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


# -------------------------------------------------------------------------------------- tau-bench


def read_tau_bench(path: Path, report: ReadReport) -> Iterator[Session]:
    """Stream sessions from a tau-bench results file (reward 1.0 is success).

    Raises SourceError when the file cannot be opened.
    """
    probe(path)
    return _tau_bench(path, report)


def _tau_bench(path: Path, report: ReadReport) -> Iterator[Session]:
    document = read_document(path, report)
    if document is None:
        return
    if isinstance(document, dict):
        document = [document]
    if not isinstance(document, list):
        report.skip("malformed_record")
        return
    for index, item in enumerate(document):
        if not isinstance(item, dict) or not isinstance(item.get("traj"), list):
            report.skip("malformed_record")
            continue
        task_id, trial = item.get("task_id"), item.get("trial")
        session_id = (
            f"tau-bench:{task_id if task_id is not None else index}:{trial if trial is not None else 0}"
        )
        reward = _reward(item.get("reward"))
        yield Session(
            session_id,
            "tau-bench",
            messages_from_dicts(item["traj"], report, session_id=session_id),
            end_reason=None if reward is None else ("success" if reward >= 1.0 else "failure"),
            reward=reward,
            metadata={"task_id": task_id, "trial": trial},
        )


# ------------------------------------------------------------------------------------- tau2-bench


def read_tau2_bench(path: Path, report: ReadReport) -> Iterator[Session]:
    """Stream sessions from a tau2-bench results file (one session per simulation).

    Raises SourceError when the file cannot be opened.
    """
    probe(path)
    return _tau2_bench(path, report)


def _tau2_bench(path: Path, report: ReadReport) -> Iterator[Session]:
    document = read_document(path, report)
    if document is None:
        return
    simulations = document.get("simulations") if isinstance(document, dict) else None
    if simulations is None and isinstance(document, dict) and (path.parent / "simulations").is_dir():
        # tau2-bench's directory format: results.json holds the run info, and each simulation is
        # its own file in simulations/ next to it.
        simulations = _simulation_files(path.parent / "simulations", report)
    if not isinstance(simulations, (list, Iterator)):
        report.skip("malformed_record")
        return
    model = _agent_model(document.get("info"))
    for index, sim in enumerate(simulations):
        if not isinstance(sim, dict) or not isinstance(sim.get("messages"), list):
            report.skip("malformed_record")
            continue
        session_id = str(sim.get("id") or f"{path.name}:{index}")
        reward_info = sim.get("reward_info")
        reward = _reward(reward_info.get("reward")) if isinstance(reward_info, dict) else None
        yield Session(
            session_id,
            "tau2-bench",
            tau2_messages(sim["messages"], report, session_id),
            epoch(sim.get("start_time")),
            epoch(sim.get("end_time")),
            sim.get("termination_reason") if isinstance(sim.get("termination_reason"), str) else None,
            model,
            None,
            reward,
            {"task_id": sim.get("task_id"), "trial": sim.get("trial")},
        )


def _simulation_files(directory: Path, report: ReadReport) -> Iterator[Any]:
    """Yield each ``simulations/*.json`` document in name order, one file in memory at a time."""
    for sim_path in sorted(directory.glob("*.json")):
        try:
            document = read_document(sim_path, report)
        except SourceError:
            report.skip("unreadable_file")
            continue
        if document is not None:
            yield document


def _agent_model(info: Any) -> str | None:
    if isinstance(info, dict) and isinstance(info.get("agent_info"), dict):
        llm = info["agent_info"].get("llm")
        return llm if isinstance(llm, str) else None
    return None


def tau2_messages(items: list[Any], report: ReadReport, session_id: str) -> tuple[Message, ...]:
    """Convert tau2-bench messages, keeping parallel calls and user-side calls apart from the agent's."""
    names: dict[str, str] = {}
    out: list[Message] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            report.skip("malformed_message")
            continue
        if item.get("role") == "tool" and isinstance(item.get("tool_messages"), list):
            nested = item["tool_messages"]  # a multi-tool message: one result per call
        else:
            nested = [item]
        for sub_index, message in enumerate(nested):
            converted = _tau2_message(message, report, f"{session_id}:{index}:{sub_index}", names)
            if converted is not None:
                out.append(converted)
    return tuple(out)


def _tau2_message(item: Any, report: ReadReport, prefix: str, names: dict[str, str]) -> Message | None:
    if not isinstance(item, dict):
        report.skip("malformed_message")
        return None
    role = normalize_role(item.get("role"))
    if role is None:
        report.skip("unknown_role")
        return None
    content = content_text(item.get("content"))
    error = item.get("error") if isinstance(item.get("error"), bool) else None
    stamp = epoch(item.get("timestamp"))
    if role == "tool":
        call_id = item.get("id") or item.get("tool_call_id")
        if call_id is None or str(call_id) not in names:
            report.skip("orphan_tool_result")
            return None
        return Message("tool", content, (), str(call_id), names[str(call_id)], error, stamp)
    calls: list[ToolCall] = []
    raw_calls = item.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        report.skip("malformed_tool_calls")
        raw_calls = ()
    default_requestor = "user" if role == "user" else "assistant"
    for number, call in enumerate(raw_calls):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call.get("name"):
            report.skip("tool_call_without_name" if isinstance(call, dict) else "malformed_tool_call")
            continue
        arguments, raw = parse_arguments(call.get("arguments"))
        call_id = str(call.get("id") or f"{prefix}:{number}")
        who = call.get("requestor")
        requestor: str = who if isinstance(who, str) and who else default_requestor
        names[call_id] = call["name"]
        calls.append(ToolCall(call_id, call["name"], arguments, raw, requestor))
    return Message(role, content, tuple(calls), None, None, error, stamp)

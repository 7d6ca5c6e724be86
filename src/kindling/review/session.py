"""Review a stored session: read it, turn it into OpenAI messages, run the review on it.

Used by ``kindling review`` and by the scheduler's review jobs. The conversion keeps the tool
protocol valid, because a strict endpoint rejects a history with an unanswered call or an
orphan result: a result with no matching call is dropped (and counted), and a call whose result
was never recorded is answered with a placeholder saying so.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from kindling.agent.loop import Runtime
from kindling.review.loop import DEFAULT_MAX_ITERATIONS, ReviewOutcome, run_review
from kindling.review.memory import MemoryStore, Provenance
from kindling.review.protocol import ConversionReport, repair_tool_protocol
from kindling.review.skills import SkillStore
from kindling.sessions.model import Session

logger = logging.getLogger(__name__)


def session_messages(session: Session, report: ConversionReport | None = None) -> list[dict[str, Any]]:
    """Return ``session`` as OpenAI chat messages with a valid tool-call protocol.

    What had to be repaired (orphan results dropped, unanswered calls answered) is counted in
    ``report``.
    """
    messages: list[dict[str, Any]] = []
    for message in session.messages:
        if message.role == "tool":
            messages.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content or ""}
            )
            continue
        entry: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.role == "assistant" and message.tool_calls:
            entry["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.raw_arguments
                        if call.raw_arguments is not None
                        else json.dumps(dict(call.arguments), ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ]
        elif message.content is None:
            entry["content"] = ""
        messages.append(entry)
    return repair_tool_protocol(messages, report)


def load_session(source: str | Path, session_id: str, format: str | None = None) -> Session:
    """Return session ``session_id`` from ``source``; raise NotFoundError or SourceError.

    A Hermes database (SQLite or PostgreSQL) is asked for the one session rather than read
    whole, so reviewing one session of a large ``state.db`` stays quick.
    """
    from kindling.sessions import find_session

    return find_session(source, session_id, format)


def review_session(
    source: str | Path,
    session_id: str,
    *,
    runtime: Runtime,
    review_memory: bool = True,
    review_skills: bool = True,
    format: str | None = None,
    memory_store: MemoryStore | None = None,
    skill_store: SkillStore | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> ReviewOutcome:
    """Review one stored session in the calling thread and return the outcome.

    Endpoint and tool failures come back in ``outcome.error``. Raises NotFoundError when the
    session does not exist and SourceError when the source cannot be read.
    """
    return review_stored(
        load_session(source, session_id, format),
        runtime=runtime,
        review_memory=review_memory,
        review_skills=review_skills,
        memory_store=memory_store,
        skill_store=skill_store,
        max_iterations=max_iterations,
    )


def review_stored(
    session: Session,
    *,
    runtime: Runtime,
    review_memory: bool = True,
    review_skills: bool = True,
    memory_store: MemoryStore | None = None,
    skill_store: SkillStore | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> ReviewOutcome:
    """Review an already-loaded ``session`` in the calling thread and return the outcome.

    The session's own system prompt leads the request: its first system message, or else a
    ``system_prompt`` kept in its metadata (Hermes keeps it on the session row, not as a
    message). Raises nothing for endpoint or tool failures (``outcome.error``).
    """
    report = ConversionReport()
    snapshot = session_messages(session, report)
    for note in report.notes:
        logger.warning("Session %s: %s.", session.id, note)
    metadata = session.metadata
    stored_prompt = metadata.get("system_prompt")
    provenance = Provenance(
        write_origin="session_review",
        execution_context="kindling review",
        session_id=session.id,
        parent_session_id=session.parent_id or "",
        # Hermes's sessions.source column *is* the platform (cli, telegram, cron, ...).
        platform=str(metadata.get("platform") or metadata.get("source") or session.source or ""),
        task_id=str(metadata.get("task_id") or ""),
    )
    return run_review(
        snapshot,
        runtime,
        review_memory=review_memory,
        review_skills=review_skills,
        system_prompt=stored_prompt if isinstance(stored_prompt, str) and stored_prompt else None,
        memory_store=memory_store,
        skill_store=skill_store,
        provenance=provenance,
        max_iterations=max_iterations,
    )

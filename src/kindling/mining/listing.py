"""One line per session for finding a session id: when it started, how long it is, how it went.

A pure core: ``list_sessions`` turns sessions into ``SessionListing`` rows with no I/O of its own,
judging tool results with the same outcome rules as ``kindling stats``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from kindling.mining.model import OutcomeStatus
from kindling.mining.outcome import OutcomeClassifier, default_classifier
from kindling.sessions.model import Session

#: How many characters of the first request a listing keeps.
REQUEST_CHARS = 200
# Text a harness puts in a user message that is not the person's request (Hermes' compaction summary).
_NOT_A_REQUEST = ("[CONTEXT COMPACTION",)
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class SessionListing:
    """One session in brief: ``calls`` are the agent's, ``failures`` its calls whose result failed."""

    id: str
    started_at: float | None
    source: str
    messages: int
    calls: int
    failures: int
    first_request: str | None

    def as_dict(self) -> dict[str, Any]:
        """Return the row with the documented JSON keys."""
        return asdict(self)


def first_request(session: Session, limit: int = REQUEST_CHARS) -> str | None:
    """Return the session's first substantive user message on one line (at most ``limit`` characters)."""
    for message in session.messages:
        if message.role != "user" or not message.content:
            continue
        text = _SPACE.sub(" ", message.content).strip()
        if not text or text.startswith(_NOT_A_REQUEST):
            continue
        return text if len(text) <= limit else text[: limit - 1] + "…"
    return None


def list_sessions(
    sessions: Iterable[Session], *, classifier: OutcomeClassifier | None = None
) -> Iterator[SessionListing]:
    """Yield one ``SessionListing`` per session, in the order read.

    Raises ConfigError when no ``classifier`` is given and the user's mining config is invalid.
    """
    judge = classifier if classifier is not None else default_classifier()
    for session in sessions:
        names: dict[str, str] = {}
        failures = 0
        for message in session.messages:
            for call in message.tool_calls:
                if call.requestor == "assistant":
                    names[call.id] = call.name
            if message.role == "tool" and message.tool_call_id in names:
                outcome = judge.classify(names.pop(message.tool_call_id), message.content, message.error)
                if outcome.status is OutcomeStatus.FAILED:
                    failures += 1
        calls = sum(
            1 for message in session.messages for call in message.tool_calls if call.requestor == "assistant"
        )
        yield SessionListing(
            session.id,
            session.started_at,
            session.source,
            len(session.messages),
            calls,
            failures,
            first_request(session),
        )

"""What mining produces: the outcome of a tool call and the examples worth keeping.

``Example`` is the unit every later layer works with: templates store examples, warm-up selects
and renders them. It is a pydantic model because it crosses storage boundaries (JSON files, SQL).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class OutcomeStatus(str, Enum):
    """Whether a tool call worked."""

    OK = "ok"
    FAILED = "failed"
    UNKNOWN = "unknown"


class Outcome(BaseModel):
    """The status of one tool call and the rule that decided it (e.g. ``"json_success_false"``)."""

    model_config = ConfigDict(frozen=True)

    status: OutcomeStatus
    rule: str = ""

    @property
    def ok(self) -> bool:
        """True when the call worked."""
        return self.status is OutcomeStatus.OK

    @property
    def failed(self) -> bool:
        """True when the call failed."""
        return self.status is OutcomeStatus.FAILED


class Example(BaseModel):
    """One successful tool call mined from past sessions, with the request that led to it.

    ``result`` is the real tool result (truncated with a visible marker when long; never a
    placeholder). ``count`` is how many times the same tool was called with the same canonical
    arguments; ``last_seen`` is the newest session start time (epoch seconds) it was seen in.

    Provenance: ``source`` and ``session_id`` say where it was seen, ``tenant`` whose experience it
    is (None: a source without tenants), ``verified`` whether the call is one kindling's proxy
    relayed from the model itself (None: the source cannot say; False: a client's history trusted
    as it was sent).
    """

    model_config = ConfigDict(extra="ignore")

    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    result: str = ""
    outcome: OutcomeStatus = OutcomeStatus.OK
    context: str = ""
    session_id: str = ""
    source: str = ""
    position: int = 0
    count: int = 1
    last_seen: float | None = None
    tenant: str | None = None
    verified: bool | None = None


class LessonCall(BaseModel):
    """One call of a lesson: the tool, its arguments as the agent sent them, and its result (short)."""

    model_config = ConfigDict(extra="ignore")

    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    result: str = ""


class LessonPair(BaseModel):
    """A failed call and the next call that worked in the same turn (``fix``; None when none did).

    Provenance as an ``Example``'s: ``source`` and ``session_id`` say where it was seen,
    ``position`` is the failed call's message index, ``tenant`` whose experience it is and
    ``verified`` whether kindling's proxy relayed the calls from the model itself.
    """

    model_config = ConfigDict(extra="ignore")

    failed: LessonCall
    fix: LessonCall | None = None
    session_id: str = ""
    source: str = ""
    position: int = 0
    tenant: str | None = None
    verified: bool | None = None


class Lesson(BaseModel):
    """What past sessions learned from one kind of failure: a tool and an error class.

    ``error_class`` is the error text with its values normalised (``kindling.mining.lessons.
    error_class``); ``sessions`` counts the sessions it happened in, ``fixed`` those in which a
    later call of the same turn worked. ``pairs`` keeps one or two scrubbed examples, those with a
    fix first.
    """

    model_config = ConfigDict(extra="ignore")

    tool_name: str
    error_class: str
    sessions: int = 1
    fixed: int = 0
    pairs: list[LessonPair] = Field(default_factory=list)

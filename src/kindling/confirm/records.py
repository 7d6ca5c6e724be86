"""The records the confirmation store hands out: requests, submit outcomes, tokens, rules, audit."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal


@dataclass(frozen=True)
class Confirmation:
    """One confirmation request and, once decided, its decision.

    ``requester`` is the name of the token that submitted it (checked by the server);
    ``requester_label`` is what the submitter called itself, shown but never trusted.
    """

    id: str
    action: str
    description: str
    details: Any
    digest: str
    requester: str
    session_key: str | None
    status: str
    timeout_seconds: int
    created_at: float
    expires_at: float
    decided_at: float | None
    decided_by: str | None
    reason: str | None
    requester_label: str | None = None
    requester_token: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return the public JSON shape of this request (the requester's token id is left out).

        Shallow: ``details`` is this record's own value, not a copy (``asdict`` deep-copied it on
        every response); do not change it.
        """
        return {name: getattr(self, name) for name in _PUBLIC_FIELDS}


_PUBLIC_FIELDS = tuple(f.name for f in fields(Confirmation) if f.name != "requester_token")


@dataclass(frozen=True)
class SubmitOutcome:
    """What a submit did: ``pending``, ``auto_approved``, ``duplicate`` (idempotent retry) or ``rate_limited``."""

    kind: Literal["pending", "auto_approved", "duplicate", "rate_limited"]
    request: Confirmation | None
    retry_after: int = 0
    limit: str = ""  # which limit refused it: "action" or "token"


@dataclass(frozen=True)
class TokenInfo:
    """A stored token, without its secret."""

    id: str
    name: str
    role: str
    created_at: float
    revoked_at: float | None


@dataclass(frozen=True)
class WhitelistRule:
    """An auto-approval rule: an action (or glob), global or for one session."""

    id: int
    action: str
    session_key: str | None
    created_by: str
    created_at: float


@dataclass(frozen=True)
class AuditEvent:
    """One row of the append-only audit log."""

    seq: int
    at: float
    event: str
    request_id: str | None
    actor: str | None
    data: dict[str, Any]
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class AuditReport:
    """The result of checking the audit log: ``ok``, rows checked, the first bad row or request.

    ``head`` is ``"<seq>:<hash>"`` of the chain's last row: kept somewhere else, it lets a later
    ``verify`` prove that no row was cut from the end. ``requests`` is how many requests were
    checked against their audit events; ``bad_request`` names the first that disagrees.
    """

    ok: bool
    rows: int
    bad_seq: int | None = None
    problem: str | None = None
    head: str = ""
    requests: int = 0
    bad_request: str | None = None


@dataclass(frozen=True)
class OutboxItem:
    """One notification waiting to be sent (or retried) to one Apprise URL."""

    id: int
    request_id: str
    url: str
    event: str
    title: str
    body: str
    attempts: int

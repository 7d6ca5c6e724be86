"""Checking the audit log: the hash chain, the requests table against it, and an operator's anchor.

The chain alone proves that no row inside it was changed, removed or inserted. Three gaps remain,
each closed here:

- rows cut from the chain's end leave a shorter chain that still holds: ``expect_head``, the
  ``"<seq>:<hash>"`` printed by an earlier ``verify`` and kept elsewhere, must still be in it;
- the requests table can be edited beside the chain (approved flipped to denied, details changed):
  every request must agree with its own audit events and with its digest;
- a request's audit events can outlive its row: every request the chain names must exist.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kindling.confirm import policy
from kindling.confirm import tables as t
from kindling.confirm.records import AuditReport
from kindling.errors import ConfirmError

GENESIS_HASH = "0" * 64
DECISIONS = ("approved", "denied", "expired")


@dataclass
class _Trail:
    """What the chain says about one request."""

    created: str  # "submitted" or "auto_approved"
    action: str
    digest: str
    actor: str | None
    decision: str | None = None
    decided_by: str | None = None
    reason: str | None = None
    decisions: int = 0


def parse_anchor(anchor: str) -> tuple[int, str]:
    """Return ``(seq, hash)`` from ``"<seq>:<hash>"``. Raises ConfirmError for any other shape."""
    seq, sep, digest = anchor.strip().partition(":")
    if not sep or not seq.isascii() or not seq.isdigit() or len(digest) != 64 or len(seq) > 18:
        raise ConfirmError(f"{anchor!r} is not an audit head; expected <count>:<64 hex digits>.")
    return int(seq), digest.lower()


def verify(conn: Connection, expect_head: str | None = None) -> AuditReport:
    """Check the chain, the anchor and the requests table in one read; return the first problem.

    Raises ConfirmError when ``expect_head`` is malformed.
    """
    anchor = parse_anchor(expect_head) if expect_head else None
    prev = GENESIS_HASH
    count = 0
    trails: dict[str, _Trail] = {}
    anchor_seen = False
    rows = conn.execution_options(yield_per=1000).execute(sa.select(t.audit).order_by(t.audit.c.seq))
    for r in rows:
        count += 1
        if r.seq != count:
            return AuditReport(False, count, r.seq, f"row {count} is missing")
        if r.prev_hash != prev:
            return AuditReport(False, count, r.seq, "prev_hash does not match the row before")
        if policy.audit_hash(prev, r.seq, r.at, r.event, r.request_id, r.actor, r.data) != r.hash:
            return AuditReport(False, count, r.seq, "hash does not match the row's contents")
        prev = r.hash
        if anchor and r.seq == anchor[0]:
            if r.hash != anchor[1]:
                return AuditReport(False, count, r.seq, "the row differs from the expected head")
            anchor_seen = True
        problem = _follow(trails, r)
        if problem:
            return AuditReport(False, count, r.seq, problem, bad_request=r.request_id)
    head = f"{count}:{prev}"
    if anchor and not anchor_seen:
        return AuditReport(
            False,
            count,
            None,
            f"the chain ends at event {count} but the expected head is event {anchor[0]}: "
            "rows were cut from its end",
            head=head,
        )
    checked = 0
    for req in conn.execution_options(yield_per=1000).execute(sa.select(t.requests)):
        checked += 1
        problem = _compare(req, trails.pop(req.id, None))
        if problem:
            return AuditReport(False, count, None, problem, head=head, requests=checked, bad_request=req.id)
    if trails:
        missing = min(trails)
        return AuditReport(
            False,
            count,
            None,
            f"request {missing} is in the audit log but not in the requests table",
            head=head,
            requests=checked,
            bad_request=missing,
        )
    return AuditReport(True, count, head=head, requests=checked)


def _follow(trails: dict[str, _Trail], r: Any) -> str | None:
    if r.request_id is None or r.event.startswith("notification"):
        return None
    data = json.loads(r.data)
    trail = trails.get(r.request_id)
    if r.event in ("submitted", "auto_approved"):
        if trail is not None:
            return f"request {r.request_id} is created twice in the audit log"
        trails[r.request_id] = _Trail(r.event, data.get("action", ""), data.get("digest", ""), r.actor)
        return None
    if trail is None:
        return f"request {r.request_id} is decided in the audit log before it is submitted"
    if r.event in DECISIONS:
        trail.decisions += 1
        trail.decision = r.event
        trail.decided_by = r.actor
        trail.reason = data.get("reason")
    return None


def _compare(req: Any, trail: _Trail | None) -> str | None:
    rid = req.id
    if trail is None:
        return f"request {rid} has no audit events"
    if req.digest != trail.digest or req.action != trail.action:
        return f"request {rid}'s action or digest differs from its audit events"
    try:
        details = json.loads(req.details)
    except ValueError:
        return f"request {rid}'s details are not JSON"
    if policy.request_digest(req.action, req.description, details) != req.digest:
        return f"request {rid}'s description or details differ from its digest"
    if trail.created == "auto_approved":
        if req.status != "auto_approved" or trail.decisions:
            return f"request {rid} is {req.status} but the audit log auto-approved it"
        return None
    if trail.decisions > 1:
        return f"request {rid} is decided more than once in the audit log"
    if req.status == "pending":
        if trail.decision:
            return f"request {rid} is pending but the audit log says {trail.decision}"
        return None
    if req.status != trail.decision:
        return f"request {rid} is {req.status} but the audit log says {trail.decision or 'pending'}"
    if req.decided_by != trail.decided_by:
        return f"request {rid} was decided by {trail.decided_by} in the audit log, not {req.decided_by}"
    if req.status in ("approved", "denied") and (req.reason or None) != (trail.reason or None):
        return f"request {rid}'s reason differs from its audit event"
    return None

"""The agent-facing ``request_confirmation`` tool: ask a human before a risky action.

The handler reads the daemon's address and the agent's token from ``KINDLING_CONFIRM_URL``
(default http://127.0.0.1:6000) and ``KINDLING_CONFIRM_TOKEN``, blocks until a human decides,
and returns JSON the model reads: ``{"success": true, "approved": ..., "status": ...}``, or
``{"success": false, "approved": false, "error": ..., "message": "Do not perform ..."}`` when the
daemon cannot be asked or its answer is not a well-formed record of the request submitted (see
``kindling.confirm.client``). It never raises: whatever goes wrong, the answer is "not approved".
"""

from __future__ import annotations

import json
import os
from typing import Any

from kindling.errors import KindlingError

REQUEST_CONFIRMATION_SCHEMA: dict[str, Any] = {
    "name": "request_confirmation",
    "description": (
        "Ask a human to approve a risky action (deploying, deleting data, moving money, rotating keys) "
        "BEFORE doing it. Blocks until the human approves or denies; a timeout counts as denied. "
        "Only proceed when the result says approved is true."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "action": {"type": "string", "description": "Short machine name, e.g. deploy_production."},
            "description": {"type": "string", "description": "What exactly will happen, for the human."},
            "details": {
                "type": "object",
                "description": "Everything the human needs to judge: targets, diffs.",
            },
            "timeout_seconds": {"type": "integer", "description": "How long to wait (30-3600, default 300)."},
        },
        "required": ["action", "description"],
    },
}


def request_confirmation(args: dict[str, Any], *, url: str | None = None, token: str | None = None) -> str:
    """Handle a ``request_confirmation`` call; return the JSON result (``success`` false on failure).

    ``url`` and ``token`` default to ``KINDLING_CONFIRM_URL`` and ``KINDLING_CONFIRM_TOKEN``.
    """
    from kindling.confirm.client import DEFAULT_URL, ConfirmClient

    if not isinstance(args, dict):
        return _not_approved("arguments must be a JSON object.")
    action = args.get("action")
    description = args.get("description")
    if not isinstance(action, str) or not action.strip():
        return _not_approved("action is required (a short machine name).")
    if not isinstance(description, str) or not description.strip():
        return _not_approved("description is required.")
    timeout = args.get("timeout_seconds")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int)):
        return _not_approved("timeout_seconds must be a whole number.")
    url = url or os.environ.get("KINDLING_CONFIRM_URL") or DEFAULT_URL
    token = token or os.environ.get("KINDLING_CONFIRM_TOKEN", "")
    if not token:
        return _not_approved("KINDLING_CONFIRM_TOKEN is not set; cannot ask a human.", action)
    try:
        with ConfirmClient(url, token) as client:
            decision = client.request_confirmation(
                action.strip(),
                description,
                args.get("details"),
                session_key=args.get("session_key") if isinstance(args.get("session_key"), str) else None,
                timeout_seconds=timeout,
            )
    except Exception as exc:  # anything at all: the action is not approved
        error = str(exc) if isinstance(exc, KindlingError) else f"{type(exc).__name__}: {str(exc)[:200]}"
        return _not_approved(error, action)
    result = {
        "success": True,
        "approved": decision.approved,
        "status": decision.status,
        "request_id": decision.request_id,
        "decided_by": decision.decided_by,
        "reason": decision.reason,
    }
    if not decision.approved:
        result["message"] = f"Do not perform {action!r}: the request was {decision.status}."
    return json.dumps(result)


def _not_approved(error: str, action: str | None = None) -> str:
    result: dict[str, Any] = {"success": False, "approved": False, "error": error}
    if action:
        result["message"] = f"Do not perform {action.strip()!r}: it was not approved."
    return json.dumps(result)

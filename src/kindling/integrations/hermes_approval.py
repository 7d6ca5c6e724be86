"""Approvals for Hermes tool calls: ask the confirmation daemon before a dangerous command runs.

:class:`ApprovalGate` decides whether a call needs a human (a terminal command Hermes's own
``detect_dangerous_command`` or ``kindling.integrations.dangerous`` flags; any configured
high-risk tool), submits it to the daemon with the command, working
directory, session and platform, waits a bounded time, and answers Hermes's ``pre_tool_call`` protocol: None lets the
call run, ``{"action": "block", "message": ...}`` vetoes it. A deny carries the approver's reason.

It fails closed: only a well-formed answer about the request it submitted, with an approving
status, lets the call run. A timeout, or a daemon that cannot be asked (nothing answers, an error
status), blocks unless ``fail_closed`` is off; an answer that cannot be trusted (a redirect, a body
that is not a request record, another request's id, an unknown status) and any exception block
always. One deadline, the approval timeout plus ``DEADLINE_MARGIN`` seconds, bounds the whole
check, retries and every read included.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kindling.errors import ConfirmError
from kindling.integrations.dangerous import dangerous_command

__all__ = ["ApprovalGate", "Verdict", "detect_dangerous"]

logger = logging.getLogger("kindling.hermes")


def _hermes_detector() -> Callable[[str], tuple[Any, ...]] | None:
    # Only inside a Hermes process: a top-level package named "tools" may be anything elsewhere.
    import sys

    if "hermes_cli" not in sys.modules and "run_agent" not in sys.modules:
        return None
    try:
        from tools.approval import detect_dangerous_command  # type: ignore[import-not-found]
    except Exception:  # an older or changed Hermes: fall back to kindling's patterns
        return None
    return detect_dangerous_command


def detect_dangerous(command: str) -> str | None:
    """Return why ``command`` is dangerous, or None.

    Inside Hermes, Hermes's own ``detect_dangerous_command`` is asked first and its reason wins;
    a command it lets pass is still checked by kindling's detector, which catches forms Hermes's
    misses (``shutdown -h now``, ``terraform destroy``, ``killall``, ...). Outside Hermes only
    kindling's detector runs.
    """
    detector = _hermes_detector()
    if detector is not None:
        try:
            flagged, key, description = detector(command)[:3]
        except Exception as exc:
            logger.warning("kindling: Hermes's detect_dangerous_command failed (%s); using kindling's.", exc)
        else:
            if flagged:
                return str(description or key or "dangerous command")
    return dangerous_command(command)


@dataclass(frozen=True)
class Verdict:
    """The gate's answer for one call: allowed or not, and the message Hermes shows the model."""

    allowed: bool
    status: str  # not_gated, approved, auto_approved, denied, expired, timeout, unreachable, untrusted, error
    message: str = ""
    request_id: str | None = None

    def as_hook_result(self) -> dict[str, str] | None:
        """Return Hermes's ``pre_tool_call`` answer: None to run, a block directive otherwise."""
        return None if self.allowed else {"action": "block", "message": self.message}


_AGENT_LABELS = {"hermes": "Hermes", "claude-code": "Claude Code", "codex": "Codex"}


class ApprovalGate:
    """Sends dangerous calls to the confirmation daemon and waits, at most ``timeout`` seconds."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 300.0,
        fail_closed: bool = True,
        terminal_tools: tuple[str, ...] = ("terminal",),
        high_risk_tools: tuple[str, ...] = (),
        agent: str = "hermes",
    ) -> None:
        self.agent = agent
        self.url = url
        self.token = token
        self.timeout = timeout
        self.fail_closed = fail_closed
        self.terminal_tools = frozenset(terminal_tools)
        self.high_risk_tools = frozenset(high_risk_tools)

    def reason_to_ask(self, tool_name: str, args: dict[str, Any]) -> str | None:
        """Return why this call needs a human, or None when it may run without asking."""
        if tool_name in self.high_risk_tools:
            return f"{tool_name} is configured as high-risk"
        if tool_name in self.terminal_tools:
            command = args.get("command")
            if isinstance(command, str) and command.strip():
                return detect_dangerous(command)
        return None

    def check(
        self, tool_name: str, args: dict[str, Any], *, session_id: str = "", platform: str = ""
    ) -> Verdict:
        """Ask the daemon when the call needs a human; return the Verdict (never raises).

        Anything that goes wrong on the way, even a bug, blocks the call.
        """
        try:
            reason = self.reason_to_ask(tool_name, args)
            if reason is None:
                return Verdict(True, "not_gated")
            command = args.get("command") if isinstance(args.get("command"), str) else None
            cwd = args.get("workdir") if isinstance(args.get("workdir"), str) else None
            cwd = cwd or os.environ.get("TERMINAL_CWD") or os.getcwd()
            what = f"`{command}`" if command else f"{tool_name}({_short(args)})"
            details = {
                "tool": tool_name,
                "command": command,
                "arguments": None if command else args,
                "cwd": cwd,
                "session_id": session_id,
                "platform": platform or "unknown",
                "why": reason,
                # Every call asked about is dangerous or high-risk by configuration: the daemon marks
                # it on the approval page and never lets a whitelist rule approve it.
                "risk": "high",
            }
            label = _AGENT_LABELS.get(self.agent, self.agent)
            description = f"{label} wants to run {what} in {cwd} ({reason})."
        except Exception as exc:
            return _failed(tool_name, exc)
        return self._ask(tool_name, description, details, session_id)

    def _ask(self, tool_name: str, description: str, details: dict[str, Any], session_id: str) -> Verdict:
        """Submit the call and wait for the decision; return the Verdict (never raises).

        The whole of it, retries and every read included, ends by ``timeout`` plus
        ``DEADLINE_MARGIN`` seconds. Only an answer about the request submitted here, well formed,
        with an approving status, lets the call run.
        """
        try:
            from kindling.confirm.client import DEADLINE_MARGIN, ConfirmClient

            if not self.token:
                return self._unreachable("no agent token is set (confirm_token / KINDLING_CONFIRM_TOKEN)")
            until = time.monotonic() + self.timeout
            deadline = until + DEADLINE_MARGIN
            with ConfirmClient(self.url, self.token, timeout=min(10.0, self.timeout)) as client:
                record = client.submit(
                    f"{self.agent}.{tool_name}",
                    description,
                    details,
                    requester=f"{self.agent}:{details.get('platform') or 'unknown'}",
                    session_key=session_id or None,
                    timeout_seconds=max(1, int(self.timeout)),
                    deadline=deadline,
                )
                if record["status"] == "pending":
                    record = client.wait(record["id"], until - time.monotonic(), deadline=deadline)
        except ConfirmError as exc:
            if exc.status_code is not None and exc.status_code < 400:
                # An answer came, but not one that can be trusted (a redirect, not a record of
                # this request): blocked whatever fail_closed says.
                return Verdict(
                    False, "untrusted", f"BLOCKED by kindling: the approval answer cannot be trusted ({exc})"
                )
            return self._unreachable(str(exc).rstrip("."))
        except Exception as exc:
            return _failed(tool_name, exc)
        return self._verdict(tool_name, record)

    def _verdict(self, tool_name: str, record: dict[str, Any]) -> Verdict:
        status = str(record["status"])
        request_id = record.get("id")
        if status in ("approved", "auto_approved"):
            return Verdict(True, status, request_id=request_id)
        who = record.get("decided_by") or "the approver"
        why = f": {record['reason']}" if record.get("reason") else "."
        if status == "denied":
            message = f"BLOCKED by kindling: {who} denied this {tool_name} call{why} Do not retry it."
        elif status in ("pending", "expired"):
            # Still waiting at the deadline, or expired by the daemon's sweeper first: nobody decided.
            status = "timeout"
            message = (
                f"BLOCKED by kindling: nobody approved this {tool_name} call within {self.timeout:g}s. "
                "Do not retry it without asking the user."
            )
        else:
            message = f"BLOCKED by kindling: the approval request ended as {status}{why}"
        return Verdict(False, status, message, request_id)

    def _unreachable(self, problem: str) -> Verdict:
        if not self.fail_closed:
            logger.warning(
                "kindling: cannot ask for approval (%s); allowing, since fail_closed is off.", problem
            )
            return Verdict(True, "unreachable")
        return Verdict(
            False,
            "unreachable",
            f"BLOCKED by kindling: approval is required but could not be asked ({problem}).",
        )


def _failed(tool_name: str, exc: Exception) -> Verdict:
    logger.exception("kindling: the approval check of a %s call failed; blocking it.", tool_name)
    return Verdict(
        False,
        "error",
        f"BLOCKED by kindling: the approval check failed ({type(exc).__name__}: {str(exc)[:200]}).",
    )


def _short(args: dict[str, Any], limit: int = 200) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"

"""Make a conversation valid for a strict OpenAI-compatible endpoint before a review sends it.

A strict endpoint rejects a history in which an assistant's tool call has no result before the
next message, or a tool result answers no call. Snapshots taken mid-turn and stored sessions
both can have either, so a review repairs them instead of failing on every attempt: an orphan
result is dropped (and counted), and a call whose result never came is answered with a
placeholder saying so. A valid conversation comes back unchanged, message for message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MISSING_RESULT = '{"success": false, "error": "No result was recorded for this call."}'


@dataclass
class ConversionReport:
    """What making a conversation protocol-valid had to repair."""

    orphan_results: int = 0
    unanswered_calls: int = 0
    notes: list[str] = field(default_factory=list)


def repair_tool_protocol(
    messages: Iterable[Mapping[str, Any]], report: ConversionReport | None = None
) -> list[dict[str, Any]]:
    """Return ``messages`` (as dicts) with every tool call answered and no orphan result.

    Counts and notes what was repaired in ``report``.
    """
    counts = report if report is not None else ConversionReport()
    repaired: list[dict[str, Any]] = []
    pending: list[str] = []  # ids of calls waiting for their result, in order

    def close_pending() -> None:
        for call_id in pending:
            repaired.append({"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT})
            counts.unanswered_calls += 1
        pending.clear()

    for message in messages:
        entry = dict(message)
        if entry.get("role") == "tool":
            call_id = entry.get("tool_call_id")
            if call_id is not None and str(call_id) in pending:
                pending.remove(str(call_id))
                repaired.append(entry)
            else:
                counts.orphan_results += 1
            continue
        close_pending()
        if entry.get("role") == "assistant":
            for call in entry.get("tool_calls") or ():
                if isinstance(call, Mapping) and call.get("id") is not None:
                    pending.append(str(call["id"]))
        repaired.append(entry)
    close_pending()
    if counts.orphan_results:
        counts.notes.append(f"{counts.orphan_results} tool result(s) without a matching call were dropped")
    if counts.unanswered_calls:
        counts.notes.append(
            f"{counts.unanswered_calls} call(s) without a recorded result were answered as missing"
        )
    return repaired

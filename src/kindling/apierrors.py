"""What an OpenAI-compatible endpoint's error says: how long it asks us to wait, and its message in one line.

Shared by the agent loop and ``kindling eval``, the two places that call a model and retry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asks us to wait (``retry-after-ms`` first), or None to use our own schedule."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue  # an HTTP date: back off by our own schedule
    return None


def status_detail(exc: Any) -> str:
    """The message of an ``openai.APIStatusError``: the body's (``{"error": {"message"}}`` or ``{"message"}``)."""
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else body.get("message")
        if isinstance(message, str):
            return short(message)
    return short(re.sub(r"^Error code: \d+ - ", "", str(exc.message)))


def short(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

"""Token estimates for warm-up budgets.

Without a tokenizer the estimate is ``ceil(characters / 4)``, the usual rule of thumb for English
and code. When ``tiktoken`` is installed *and* its encoding loads without a network fetch, it is
used instead. ``KINDLING_TOKENIZER=chars`` forces the character estimate (for reproducible runs).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

__all__ = ["MESSAGE_OVERHEAD", "estimate_conversation_tokens", "estimate_message_tokens", "estimate_tokens"]

# Chat formats add a few tokens per message for the role and separators.
MESSAGE_OVERHEAD = 4


@functools.lru_cache(maxsize=1)
def _encoder() -> Callable[[str], int] | None:
    if os.environ.get("KINDLING_TOKENIZER", "").strip().lower() == "chars":
        return None
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base")
    except Exception:
        # Not installed, or the encoding file is not cached and there is no network: fall back.
        return None

    def count(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    return count


def estimate_tokens(text: str) -> int:
    """Return the estimated number of tokens in ``text`` (0 for the empty string)."""
    if not text:
        return 0
    encoder = _encoder()
    if encoder is not None:
        return encoder(text)
    return (len(text) + 3) // 4


def _tool_calls_text(tool_calls: Iterable[Mapping[str, Any]]) -> str:
    parts: list[str] = []
    for call in tool_calls:
        function = call.get("function") or {}
        parts.append(str(function.get("name") or ""))
        arguments = function.get("arguments")
        parts.append(arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode())
        parts.append(str(call.get("id") or ""))
    return " ".join(parts)


def estimate_message_tokens(message: Mapping[str, Any]) -> int:
    """Return the estimated tokens of one OpenAI-format message, overhead included."""
    content = message.get("content")
    if isinstance(content, list):
        # Content parts (text blocks): count their text.
        content = " ".join(str(p.get("text", "")) if isinstance(p, Mapping) else str(p) for p in content)
    total = MESSAGE_OVERHEAD + estimate_tokens(content or "")
    if message.get("tool_calls"):
        total += estimate_tokens(_tool_calls_text(message["tool_calls"]))
    if message.get("tool_call_id"):
        total += estimate_tokens(str(message["tool_call_id"]))
    return total


def estimate_conversation_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """Return the estimated tokens of a whole conversation (sum over its messages)."""
    return sum(estimate_message_tokens(m) for m in messages)

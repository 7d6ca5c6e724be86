"""Token estimates for warm-up budgets.

Without a tokenizer the estimate is ``ceil(characters / 4)``, the usual rule of thumb for English
and code. When ``tiktoken`` is installed *and* its ``cl100k_base`` encoding is already in
tiktoken's cache (so loading it needs no network), it is used instead; the choice is made once per
process. ``KINDLING_TOKENIZER=chars`` forces the character estimate (for reproducible runs).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "ENCODING",
    "MESSAGE_OVERHEAD",
    "estimate_conversation_tokens",
    "estimate_message_tokens",
    "estimate_tokens",
    "tiktoken_cache_file",
]

# Chat formats add a few tokens per message for the role and separators.
MESSAGE_OVERHEAD = 4


ENCODING = "cl100k_base"
# Where tiktoken downloads the encoding from; its cache names the file after this URL's SHA-1.
_ENCODING_URL = f"https://openaipublic.blob.core.windows.net/encodings/{ENCODING}.tiktoken"


def tiktoken_cache_file() -> Path | None:
    """Return tiktoken's cached copy of the encoding when it is on disk, else None.

    tiktoken looks in ``$TIKTOKEN_CACHE_DIR``, then ``$DATA_GYM_CACHE_DIR``, then
    ``<tmp>/data-gym-cache`` (an empty value turns caching off), under ``sha1(url)``.
    """
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:
        return None
    path = Path(cache_dir) / hashlib.sha1(_ENCODING_URL.encode()).hexdigest()
    return path if path.is_file() else None


@functools.lru_cache(maxsize=1)
def _encoder() -> Callable[[str], int] | None:
    if os.environ.get("KINDLING_TOKENIZER", "").strip().lower() == "chars":
        return None
    # Without a cached encoding, get_encoding would download it (with no timeout): a warm-up must
    # never wait on the network, so only an encoding already on disk is used.
    if importlib.util.find_spec("tiktoken") is None or tiktoken_cache_file() is None:
        return None
    try:
        import tiktoken

        encoding = tiktoken.get_encoding(ENCODING)
    except Exception:
        # A damaged cache file or an incompatible tiktoken: the character estimate still works.
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

"""Which conversation a request belongs to, found in O(1) from a hash of its canonical messages.

A conversation's request ``k+1`` repeats request ``k``'s messages, then the reply, then what is new
(tool results, the next user message). After each reply the proxy records the hash of the canonical
messages up to and including that reply; the next request's messages up to its last assistant
message hash to the same value, so one lookup finds the conversation (memory first, then the store,
which is how a second proxy sharing PostgreSQL recognises it).

The hash starts from the request's tenant (nothing for the default tenant), so one tenant's
conversation never matches another's, and the digest of a prefix that ends with a reply the proxy
relayed is what a client-sent assistant message is checked against (see ``Conversations``).

Canonical form keeps what the model saw and drops what clients re-serialize differently: role,
content (``""`` and ``null`` alike), each call's id, name and arguments (by value when they are JSON,
since clients re-serialize them), ``tool_call_id``, ``name``.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from kindling.sessions.convert import arguments_value

__all__ = [
    "Conversation",
    "ConversationCache",
    "PrefixHasher",
    "canonical_message",
    "last_assistant_index",
]


def canonical_message(message: Mapping[str, Any]) -> bytes:
    """Return the canonical bytes of one OpenAI-format message (a JSON array, no newlines)."""
    calls = message.get("tool_calls")
    rendered: list[Any] | None = None
    if calls:
        rendered = []
        for call in calls:
            if not isinstance(call, Mapping):
                rendered.append(call)
                continue
            function = call.get("function")
            function = function if isinstance(function, Mapping) else {}
            rendered.append(
                (call.get("id"), function.get("name"), arguments_value(function.get("arguments")))
            )
    # A fixed-position array: no key sorting, and "" / null / missing all become null.
    return orjson.dumps(
        (
            message.get("role"),
            message.get("content") or None,
            rendered,
            message.get("tool_call_id") or None,
            message.get("name") or None,
        ),
        option=orjson.OPT_SORT_KEYS,
        default=str,
    )


class PrefixHasher:
    """A running SHA-256 over canonical messages; ``digest`` names the prefix fed so far.

    ``tenant`` seeds it: the same messages of two tenants have different digests. The default
    tenant's (``""``) has no seed, so digests recorded before tenants existed still match.
    """

    __slots__ = ("_hash",)

    def __init__(self, tenant: str = "") -> None:
        self._hash = hashlib.sha256()
        if tenant:
            # A seed line cannot be a message's: canonical messages are JSON arrays ("[...").
            self._hash.update(b"tenant:" + tenant.encode("utf-8") + b"\n")

    def feed(self, message: Mapping[str, Any]) -> None:
        """Add one message to the prefix."""
        # orjson escapes newlines inside strings, so a newline cannot occur within one message.
        self._hash.update(canonical_message(message))
        self._hash.update(b"\n")

    def digest(self) -> str:
        """The hex digest of the prefix fed so far."""
        return self._hash.hexdigest()

    def copy(self) -> PrefixHasher:
        """An independent hasher at the same point."""
        twin = PrefixHasher.__new__(PrefixHasher)
        twin._hash = self._hash.copy()
        return twin


def last_assistant_index(messages: Sequence[Any]) -> int:
    """Index of the last assistant message, or -1 when there is none (a conversation's first request)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            return index
    return -1


@dataclass(slots=True)
class Conversation:
    """What the proxy knows of one conversation: its session, how many messages it has recorded,
    the warm-up block (serialized JSON array bytes) it repeats on every request, if any, and the
    digest of the messages it has recorded (None where unknown: a Responses API conversation the
    upstream keeps, or one recorded before digests were kept)."""

    session_id: str
    message_count: int
    warm_block: bytes | None = None
    warm_state: str = "none"
    digest: str | None = None
    label: str | None = None


class ConversationCache:
    """A bounded least-recently-used map from prefix hashes and session ids to conversations."""

    def __init__(self, capacity: int = 50_000) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, Conversation] = OrderedDict()

    def get(self, key: str) -> Conversation | None:
        """The conversation stored under ``key``, or None."""
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def peek(self, key: str) -> Conversation | None:
        """The conversation stored under ``key``, or None, leaving the order of use as it is."""
        return self._items.get(key)

    def put(self, key: str, conversation: Conversation) -> None:
        """Remember ``conversation`` under ``key``, forgetting the least recently used beyond capacity."""
        self._items[key] = conversation
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)

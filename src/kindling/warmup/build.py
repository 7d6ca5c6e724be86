"""Turn chosen examples into OpenAI-format messages that every chat API accepts.

Two styles:

- ``triples``: per example, a user request, an assistant tool call, and the tool result.
- ``closed``: the same plus a one-line assistant reply after each result, for chat templates that
  demand strict user/assistant alternation after a tool result.

An optional leading system message carries the template's addendum. Tool-call ids are unique,
at most 40 characters, and use only ``[A-Za-z0-9_-]`` (the strictest providers' rule). Results and
requests are truncated so each example fits its share of the budget, with a visible marker.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any, Literal

import orjson

from kindling.errors import ConversationError
from kindling.mining.model import Example, OutcomeStatus
from kindling.warmup.tokens import estimate_message_tokens, estimate_tokens

__all__ = [
    "STYLES",
    "Style",
    "build_conversation",
    "render_example",
    "tool_call_id",
    "truncate_to_tokens",
]

Style = Literal["triples", "closed"]
STYLES: tuple[str, ...] = ("triples", "closed")
MAX_ID_LENGTH = 40
_SMALLEST_SHARE = 48  # below this an example is mostly overhead and markers
_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,40}")
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def check_style(style: str) -> Style:
    """Return ``style`` when it is ``triples`` or ``closed``; raise ConversationError otherwise."""
    if style not in STYLES:
        raise ConversationError(f"Unknown warm-up style {style!r}; use triples or closed.")
    return style  # type: ignore[return-value]


def tool_call_id(salt: str, index: int) -> str:
    """Return a tool-call id that is unique per (salt, index), <= 40 chars, ``[A-Za-z0-9_-]`` only."""
    clean = _UNSAFE_ID_CHARS.sub("", salt)[:24] or "warm"
    return f"call_{clean}_{index}"[:MAX_ID_LENGTH]


def is_valid_tool_call_id(value: str) -> bool:
    """True when ``value`` is a tool-call id every provider accepts."""
    return bool(_ID_RE.fullmatch(value))


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """Return ``text`` cut to at most ``max_tokens`` (estimated), ending with a truncation marker."""
    if estimate_tokens(text) <= max_tokens:
        return text
    if max_tokens <= 0:
        return ""
    keep = max_tokens * 4
    while keep > 0:
        marker = f"\n…[truncated {len(text) - keep} chars]"
        cut = text[: max(0, keep - len(marker))] + marker
        if estimate_tokens(cut) <= max_tokens:
            return cut
        keep = int(keep * 0.8)
    return ""


def _arguments_json(example: Example) -> str:
    arguments: Any = dict(example.arguments)
    if not arguments and example.raw_arguments:
        # Arguments that were not a JSON object keep their text, wrapped so the call stays parseable.
        arguments = {"input": example.raw_arguments}
    try:
        return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    except TypeError:
        # orjson refuses integers beyond 64 bits and unusual types; the stdlib encoder does not.
        return json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _request_text(example: Example) -> str:
    context = example.context.strip()
    return context or f"Use {example.tool_name} for this step."


def _closing_line(example: Example) -> str:
    if example.outcome is OutcomeStatus.FAILED:
        return f"{example.tool_name} failed; the error is above."
    return f"{example.tool_name} worked; the result is above."


def _messages(
    example: Example, call_id: str, style: Style, request: str, result: str
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": request},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": example.tool_name, "arguments": _arguments_json(example)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]
    if style == "closed":
        messages.append({"role": "assistant", "content": _closing_line(example)})
    return messages


def render_example(
    example: Example, call_id: str, *, style: Style = "triples", max_tokens: int | None = None
) -> list[dict[str, Any]]:
    """Return the messages for one example: request, tool call, result (and a reply when closed).

    ``max_tokens`` is the example's share of the budget: the request is cut to a quarter of it
    and the result to what is left after everything else (both with a visible marker).
    """
    request = _request_text(example)
    result = example.result or "(no output)"
    if max_tokens is not None:
        request = truncate_to_tokens(request, max(max_tokens // 4, 8)) or f"Use {example.tool_name}."
        fixed = sum(estimate_message_tokens(m) for m in _messages(example, call_id, style, request, ""))
        result = truncate_to_tokens(result, max(max_tokens - fixed, 8)) or "(output truncated)"
    return _messages(example, call_id, style, request, result)


def _salt(examples: Sequence[Example], seed: str) -> str:
    digest = hashlib.blake2b(seed.encode("utf-8"), digest_size=4)
    for example in examples[:16]:
        digest.update(example.tool_name.encode("utf-8"))
    return "kw" + digest.hexdigest()


def system_message(addendum: str, budget: int | None) -> dict[str, Any] | None:
    """Return the leading system message for ``addendum`` (truncated to fit ``budget``), or None."""
    text = addendum.strip()
    if not text:
        return None
    if budget is not None:
        # A system addendum may take at most half the budget: the examples are the point.
        text = truncate_to_tokens(text, max(0, budget // 2 - 4))
        if not text:
            return None
    return {"role": "system", "content": text}


def build_conversation(
    examples: Sequence[Example],
    *,
    style: str = "triples",
    system_prompt: str | None = None,
    budget: int | None = None,
    example_tokens: int | None = None,
    seed: str = "",
) -> list[dict[str, Any]]:
    """Return the warm conversation for ``examples``, in order, as OpenAI-format messages.

    With ``budget``, examples whose messages no longer fit are left out, so the estimated total
    never exceeds it; ``example_tokens`` (each example's share, which its request and result are
    truncated to fit) defaults to an equal share of the budget per example.
    Raises ConversationError for an unknown style.
    """
    chosen_style = check_style(style)
    messages: list[dict[str, Any]] = []
    remaining = budget
    system = system_message(system_prompt or "", budget)
    if system is not None:
        messages.append(system)
        if remaining is not None:
            remaining -= estimate_message_tokens(system)
    if example_tokens is None and remaining is not None and examples:
        example_tokens = max(_SMALLEST_SHARE, remaining // len(examples))
    salt = _salt(examples, seed)
    for index, example in enumerate(examples):
        rendered = render_example(
            example, tool_call_id(salt, index), style=chosen_style, max_tokens=example_tokens
        )
        if remaining is not None:
            cost = sum(estimate_message_tokens(m) for m in rendered)
            if cost > remaining:
                continue
            remaining -= cost
        messages.extend(rendered)
    return messages

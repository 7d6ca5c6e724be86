"""Turn chosen examples into OpenAI-format messages that every chat API accepts, framed as the past.

The block is marked as past examples: its first user message says the examples come from earlier
sessions and are not this conversation, every request is labelled as a past one, and the block ends
with an assistant note that the real conversation starts now, so a model never takes an example's
request for the current user's words. Examples that share a request (calls of one past task) are
shown under it once: no request text repeats within a warm-up.

Two styles:

- ``triples``: per request, a user message, then each call and its tool result.
- ``closed``: the same plus a one-line assistant reply after each request's last result, for chat
  templates that demand an assistant turn after a tool result before the next user turn.

After the examples, an optional lessons block (a user message, framed as past experience like the
examples) lists failures of the shown tools in past sessions and what worked next
(``lesson_line``); the closing note follows it.

An optional leading system message carries the template's addendum. Tool-call ids are unique,
at most 40 characters, and use only ``[A-Za-z0-9_-]`` (the strictest providers' rule). Examples are
whole: a long result is shortened to the example's share of the budget but never below a readable
minimum (``READABLE_RESULT_TOKENS``), and a request never below ``REQUEST_TOKENS``; an example that
does not fit at that size is left out.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from kindling.errors import ConversationError
from kindling.mining.lessons import LESSONS_INTRO
from kindling.mining.model import Example, Lesson, LessonCall, OutcomeStatus
from kindling.mining.tasktype import request_text
from kindling.warmup.tokens import estimate_message_tokens, estimate_tokens

__all__ = [
    "FRAME_END",
    "FRAME_INTRO",
    "LESSONS_INTRO",
    "READABLE_RESULT_TOKENS",
    "REQUEST_TOKENS",
    "STYLES",
    "Shown",
    "Style",
    "build_conversation",
    "lesson_line",
    "lessons_message",
    "render_example",
    "tool_call_id",
    "truncate_to_tokens",
]

Style = Literal["triples", "closed"]
STYLES: tuple[str, ...] = ("triples", "closed")
MAX_ID_LENGTH = 40
# The smallest a shown result may be cut to (about 240 characters): shorter is a stub that teaches
# nothing, so an example that does not fit at this size is dropped instead.
READABLE_RESULT_TOKENS = 60
# Requests are shown whole up to this size (about 600 characters), then cut with a marker.
REQUEST_TOKENS = 150
FRAME_INTRO = (
    "[Past examples from earlier sessions, shown for reference. They are not this conversation, "
    "and their users are not the current user.]"
)
PAST_REQUEST = "Past request"
FRAME_END = "End of the past examples. The real conversation starts now."
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


@dataclass(frozen=True)
class Shown:
    """One example to show and the request it is shown under (the user message that led to its call).

    ``past_task`` is the session id of that past task when it is not the example's own: the same
    call, made by a past task whose example another session's shows.
    """

    example: Example
    request: str = ""
    past_task: str = ""

    @property
    def request_text(self) -> str:
        """The request as shown: the given one, else the example's own, else a plain instruction.

        The example's own is the user message before its call: in a Claude Code session a later turn
        carries the harness's ``<system-reminder>`` notes (the user's CLAUDE.md, open files), which
        are no one's request and never shown.
        """
        text = request_text(self.request or self.example.context)
        return text or f"Use {self.example.tool_name} for this step."


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


def _closing_line(example: Example) -> str:
    if example.outcome is OutcomeStatus.FAILED:
        return f"{example.tool_name} failed; the error is above."
    return f"{example.tool_name} worked; the result is above."


def shown_result(example: Example, max_tokens: int | None) -> str:
    """Return the result text as shown: whole, or cut to ``max_tokens`` but never below the minimum."""
    result = example.result or "(no output)"
    if max_tokens is None:
        return result
    return truncate_to_tokens(result, max(max_tokens, READABLE_RESULT_TOKENS)) or "(no output)"


def shown_request(text: str, number: int, *, first: bool) -> str:
    """Return the user message of a past request: labelled, numbered, cut only when very long."""
    body = truncate_to_tokens(text, REQUEST_TOKENS) or text[:8]
    label = f"{PAST_REQUEST} {number}: {body}"
    return f"{FRAME_INTRO}\n\n{label}" if first else label


def _call_messages(example: Example, call_id: str, result: str) -> list[dict[str, Any]]:
    return [
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


def render_example(
    example: Example, call_id: str, *, style: Style = "triples", max_tokens: int | None = None
) -> list[dict[str, Any]]:
    """Return the messages for one example alone: request, tool call, result (and a reply when closed).

    ``max_tokens`` caps the result (never below ``READABLE_RESULT_TOKENS``). Unframed: use
    ``build_conversation`` for a warm-up.
    """
    messages = [
        {"role": "user", "content": Shown(example).request_text},
        *_call_messages(example, call_id, shown_result(example, max_tokens)),
    ]
    if style == "closed":
        messages.append({"role": "assistant", "content": _closing_line(example)})
    return messages


def group_by_request(items: Sequence[Shown]) -> list[tuple[str, list[Example]]]:
    """Return the examples grouped under their request text, groups in order of first appearance."""
    groups: dict[str, list[Example]] = {}
    for item in items:
        groups.setdefault(item.request_text, []).append(item.example)
    return list(groups.items())


def example_cost(example: Example, result_tokens: int | None) -> int:
    """Return the estimated tokens of one example's call and result (what it adds to its request)."""
    call = _call_messages(example, tool_call_id("kw00000000", 99), shown_result(example, result_tokens))
    return sum(estimate_message_tokens(m) for m in call)


def request_cost(text: str, number: int, style: Style, *, first: bool) -> int:
    """Return the estimated tokens a request adds: its user message (and the closing reply when closed)."""
    cost = estimate_message_tokens({"role": "user", "content": shown_request(text, number, first=first)})
    if style == "closed":
        # The closing reply names a tool; a generous tool name keeps the estimate an upper bound.
        cost += estimate_message_tokens({"role": "assistant", "content": _closing_line(_LONG_NAME)})
    return cost


_LONG_NAME = Example(tool_name="x" * 64)


def frame_cost() -> int:
    """Return the estimated tokens of the closing note (the intro is counted with the first request)."""
    return estimate_message_tokens({"role": "assistant", "content": FRAME_END}) + 16


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


_LESSON_ARGUMENTS_CHARS = 60
_FAILED_ARGUMENTS_CHARS = 40  # the failed call's arguments are shown when this short


def _arguments_text(call: LessonCall) -> str:
    arguments: Any = dict(call.arguments) or ({"input": call.raw_arguments} if call.raw_arguments else {})
    try:
        text = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    except TypeError:
        text = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    return text


def lesson_line(lesson: Lesson) -> str:
    """Return one lesson as the warm-up shows it: the tool, the error, how often, what worked next.

    "- get_order_details failed with "order <id> not found" in 14 past sessions; what worked next:
    get_order_details {...}." The failed call's arguments are shown when short, the fix's cut to
    80 characters. A class with no fix says that nothing worked before the user spoke again.
    """
    sessions = f"{lesson.sessions} past session{'s' if lesson.sessions != 1 else ''}"
    pair = lesson.pairs[0] if lesson.pairs else None
    failed = lesson.tool_name
    if pair is not None:
        arguments = _arguments_text(pair.failed)
        if len(arguments) <= _FAILED_ARGUMENTS_CHARS:
            failed = f"{failed} {arguments}"
    head = f'- {failed} failed with "{lesson.error_class}" in {sessions}'
    if pair is None or pair.fix is None:
        return f"{head}; nothing else worked before the user spoke again."
    fix = _arguments_text(pair.fix)
    if len(fix) > _LESSON_ARGUMENTS_CHARS:
        fix = fix[: _LESSON_ARGUMENTS_CHARS - 1] + "…"
    return f"{head}; what worked next: {pair.fix.tool_name} {fix}."


def lessons_message(lines: Sequence[str]) -> dict[str, Any]:
    """Return the user message of the lessons block for ``lines`` (``lesson_line``)."""
    return {"role": "user", "content": "\n".join((LESSONS_INTRO, *lines))}


def render_block(
    items: Sequence[Shown],
    *,
    style: Style = "triples",
    result_tokens: int | None = None,
    seed: str = "",
    lessons: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Return the framed messages for ``items``: grouped by request, then the lessons block (when
    ``lessons`` has lines), closed by the end note. No examples, no block."""
    if not items:
        return []
    salt = _salt([item.example for item in items], seed)
    messages: list[dict[str, Any]] = []
    index = 0
    groups = group_by_request(items)
    for number, (request, examples) in enumerate(groups, start=1):
        messages.append({"role": "user", "content": shown_request(request, number, first=number == 1)})
        for example in examples:
            messages.extend(
                _call_messages(example, tool_call_id(salt, index), shown_result(example, result_tokens))
            )
            index += 1
        if style == "closed":
            messages.append({"role": "assistant", "content": _closing_line(examples[-1])})
    if lessons:
        messages.append(lessons_message(lessons))
    if messages[-1]["role"] == "assistant":
        messages[-1]["content"] = f"{messages[-1]['content']} {FRAME_END}"
    else:
        messages.append({"role": "assistant", "content": FRAME_END})
    return messages


def build_conversation(
    examples: Sequence[Example | Shown],
    *,
    style: str = "triples",
    system_prompt: str | None = None,
    budget: int | None = None,
    example_tokens: int | None = None,
    seed: str = "",
    lessons: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Return the warm conversation for ``examples``, in order, as framed OpenAI-format messages.

    Items are examples (shown under their own request) or ``Shown`` pairs. ``example_tokens`` caps
    each result (never below the readable minimum). ``lessons`` are lesson lines (``lesson_line``)
    shown after the examples. With ``budget``, lessons and then examples are dropped from the end
    until the estimated total fits, so it never exceeds the budget.
    Raises ConversationError for an unknown style.
    """
    chosen_style = check_style(style)
    items = [item if isinstance(item, Shown) else Shown(item) for item in examples]
    lines = list(lessons)
    system = system_message(system_prompt or "", budget)
    head = [system] if system is not None else []
    while True:
        messages = head + render_block(
            items, style=chosen_style, result_tokens=example_tokens, seed=seed, lessons=lines
        )
        if budget is None or not items or sum(estimate_message_tokens(m) for m in messages) <= budget:
            return messages
        if lines:
            lines.pop()
        else:
            items = items[:-1]

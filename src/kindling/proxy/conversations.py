"""Per request: which conversation it continues, what is new to record, and the warm-up to insert.

``Conversations.begin`` runs before the request goes upstream: it recognises the conversation (a
prefix hash, the ``X-Kindling-Session`` header, or for the Responses API the response or
conversation the upstream keeps), queues the new messages, and on a conversation's first request
chooses the warm-up once. ``Turn.upstream_body`` is the body to send: the client's
bytes unchanged when nothing is inserted, else the same JSON with the conversation's warm-up block
(cached bytes, identical on every request) after the leading system messages.
``Conversations.finish`` records the reply after the client has it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import re
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from kindling.errors import NotFoundError
from kindling.proxy import anthropic, responses
from kindling.proxy.identity import Conversation, ConversationCache, PrefixHasher, last_assistant_index
from kindling.proxy.recorder import MessageRow, PrefixRow, Recorder, SessionRow, Write

__all__ = ["CHAT", "MESSAGES", "RESPONSES", "Conversations", "Turn", "WarmChoice", "warm_disabled_by"]

log = logging.getLogger("kindling.proxy")

TEMPLATES_TTL = 5.0
SESSION_HEADER = "x-kindling-session"
#: The APIs the proxy records and warms: chat completions, Anthropic's Messages API and OpenAI's
#: Responses API.
CHAT = "chat"
MESSAGES = "messages"
RESPONSES = "responses"
WARM_HEADER = "x-kindling-warm"
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,79}")


@dataclass(slots=True)
class WarmChoice:
    """The warm-up chosen for a conversation: its serialized block (None when there is none)."""

    block: bytes | None
    state: str
    template: str | None = None


@dataclass(slots=True)
class Turn:
    """One request in flight: its conversation, its upstream body, and what finishing needs.

    ``stateful`` is true for a Responses request that sends only its new items (the upstream keeps
    the rest): its messages are not the conversation's prefix, so no prefix hash is kept after it.
    """

    conversation: Conversation
    upstream_body: bytes | None
    hasher: PrefixHasher
    message_count: int
    started: float
    model: str | None
    api: str = CHAT
    stateful: bool = False


def warm_disabled_by(headers: Mapping[str, str]) -> bool:
    """True when the request asks for no warm-up (``X-Kindling-Warm: off``)."""
    return headers.get(WARM_HEADER, "").strip().lower() in {"off", "0", "false", "no"}


def _new_session_id() -> str:
    return time.strftime("%Y%m%d_%H%M%S", time.gmtime()) + "_" + uuid.uuid4().hex[:12]


def tool_names(tools: Any) -> list[str]:
    """The function names declared in a chat-completions ``tools`` array."""
    names: list[str] = []
    if isinstance(tools, list):
        for tool in tools:
            function = tool.get("function") if isinstance(tool, Mapping) else None
            name = function.get("name") if isinstance(function, Mapping) else None
            if isinstance(name, str) and name:
                names.append(name)
    return names


class Conversations:
    """Recognition, recording and warm-up for every request of the proxy.

    ``warm`` is False for ``--no-warm``; ``template`` names a fixed template (None chooses the best
    fit for each conversation); ``templates`` is a template store target (None: the default store).
    """

    def __init__(
        self,
        recorder: Recorder,
        *,
        warm: bool = True,
        template: str | None = None,
        templates: str | None = None,
        budget: int | None = None,
        cache_size: int = 50_000,
    ) -> None:
        self.recorder = recorder
        self.warm = warm
        self.template = template
        self.templates_target = templates
        self.budget = budget
        self.cache = ConversationCache(cache_size)
        self._template_store: Any = None
        # Templates are re-read at most every TEMPLATES_TTL seconds, and the examples limited to a
        # request's tools kept per tool set, so a first request pays selection only, not file reads.
        self._limited: dict[frozenset[str], list[Any]] = {}
        self._limited_from: Any = None
        self._lock = threading.Lock()
        # What /kindling/status reports: conversations seen, requests that continued one, warm-ups.
        self.counts = {"conversations": 0, "continued": 0, "warmed": 0, "replies": 0}

    # -------------------------------------------------------------------------- before upstream

    async def begin(self, raw: bytes, headers: Mapping[str, str], api: str = CHAT) -> Turn | None:
        """Recognise and record the request; return its Turn (None when the body is not a chat).

        ``api`` is ``CHAT`` (a chat completion), ``MESSAGES`` (Anthropic's Messages API) or
        ``RESPONSES`` (OpenAI's Responses API); the latter two are recognised and recorded as their
        OpenAI-format messages (see ``proxy.anthropic`` and ``proxy.responses``).
        """
        data = orjson.loads(raw)
        if not isinstance(data, dict):
            return None
        if api == MESSAGES:
            messages = anthropic.canonical_messages(data)
        elif api == RESPONSES:
            kept = responses.state_key(data)
            if kept is not None:
                return await self._continue_kept(data, headers, *kept)
            messages = responses.canonical_messages(data)
        else:
            messages = data.get("messages")
        if not isinstance(messages, list):
            return None
        now = time.time()
        started = time.perf_counter()
        warm_off = warm_disabled_by(headers)
        hasher = PrefixHasher()
        conversation: Conversation | None = None
        explicit = _explicit_session(headers)
        last = last_assistant_index(messages)
        for message in messages[: last + 1]:
            hasher.feed(message if isinstance(message, Mapping) else {})
        if explicit:
            conversation = self.cache.get("s:" + explicit) or await self._lookup(explicit, by_session=True)
        elif last >= 0:
            conversation = self.cache.get(hasher.digest()) or await self._lookup(hasher.digest())
        for message in messages[last + 1 :]:
            hasher.feed(message if isinstance(message, Mapping) else {})

        write: Write | None = None
        if conversation is None:
            session_id = explicit or _new_session_id()
            choice = WarmChoice(None, "off")
            if last < 0 and self.warm and not warm_off:
                choice = await self._choose_warm(messages, data.get("tools"), api)
            conversation = Conversation(session_id, 0, choice.block, choice.state)
            self.counts["conversations"] += 1
            self.counts["warmed"] += choice.state == "on"
            session = SessionRow(
                session_id,
                now,
                now,
                choice.state,
                choice.block.decode("utf-8") if choice.block else None,
                choice.template,
            )
            write = Write(session_id, now, session=session)
        else:
            self.counts["continued"] += 1
        if explicit:
            self.cache.put("s:" + explicit, conversation)

        first = conversation.message_count
        if first < len(messages):
            write = write or Write(conversation.session_id, now)
            for seq in range(first, len(messages)):
                message = messages[seq]
                write.messages.append(
                    MessageRow(
                        conversation.session_id,
                        seq,
                        str(message.get("role")) if isinstance(message, Mapping) else "unknown",
                        message,
                        now,
                    )
                )
            conversation.message_count = len(messages)
        if write is not None:
            self.recorder.submit(write)

        body: bytes | None = None
        if conversation.warm_block and not warm_off:
            body = _with_block(data, messages, conversation.warm_block, api)
        model = data.get("model")
        return Turn(
            conversation,
            body,
            hasher,
            len(messages),
            started,
            model if isinstance(model, str) else None,
            api,
        )

    async def _continue_kept(
        self, data: dict[str, Any], headers: Mapping[str, str], key: str, after_response: bool
    ) -> Turn | None:
        """Record a Responses request that sends only its new items: the upstream keeps the rest
        (``previous_response_id``, or a ``conversation``), and ``key`` names it.

        After a response (``after_response``) the new messages go right after that response's reply,
        so a retried request records nothing twice; in a ``conversation`` they go at its end. A key
        the proxy never saw (a response it did not forward) starts a conversation of its own, with
        the request's instructions, never warmed: the upstream holds turns the proxy has not seen.
        Nothing is inserted: the upstream already holds the warm-up the first request carried, and
        the instructions a request repeats are recorded with the conversation's first only.
        """
        messages = responses.canonical_input(data)
        if messages is None:
            return None
        now = time.time()
        started = time.perf_counter()
        explicit = _explicit_session(headers)
        write: Write | None = None
        if explicit:
            found = self.cache.get("s:" + explicit) or await self._lookup(explicit, by_session=True)
        else:
            found = self.cache.get(key) or await (
                self._lookup(key) if after_response else self._lookup_end(key)
            )
        if found is None:
            head = responses.instructions_message(data)
            session_id = explicit or _new_session_id()
            # What the key names: where the items sent after it go (after the instructions).
            found = Conversation(session_id, len(head), None, "off")
            self.cache.put(key, found)
            messages = [*head, *messages]
            self.counts["conversations"] += 1
            session = SessionRow(session_id, now, now, "off")
            write = Write(session_id, now, session=session, prefixes=(PrefixRow(key, session_id, len(head)),))
            first = 0
        else:
            self.counts["continued"] += 1
            first = found.message_count
        if explicit:
            self.cache.put("s:" + explicit, found)
        session_id = found.session_id
        write = write or Write(session_id, now)
        for seq, message in enumerate(messages, start=first):
            write.messages.append(MessageRow(session_id, seq, str(message["role"]), message, now))
        self.recorder.submit(write)
        if after_response and not explicit:
            # A turn of its own: the response it started from still names the same place.
            conversation = Conversation(session_id, first + len(messages), found.warm_block, found.warm_state)
        else:
            conversation = found
            conversation.message_count = max(conversation.message_count, first + len(messages))
        model = data.get("model")
        return Turn(
            conversation,
            None,
            PrefixHasher(),
            first + len(messages),
            started,
            model if isinstance(model, str) else None,
            RESPONSES,
            stateful=True,
        )

    async def _lookup_end(self, key: str) -> Conversation | None:
        # A conversation's row holds its message count of when it was first seen; the conversation
        # has grown since (on another proxy, or before a restart), so the session says how far.
        found = await self._lookup(key)
        if found is None:
            return None
        at_end = await self._lookup(found.session_id, by_session=True)
        if at_end is not None:
            self.cache.put(key, at_end)
        return at_end or found

    async def _lookup(self, key: str, *, by_session: bool = False) -> Conversation | None:
        if not self.recorder.store_up:
            return None
        store = self.recorder.store
        try:
            found = await asyncio.to_thread(store.find_session if by_session else store.find_prefix, key)
        except Exception as exc:
            log.warning("conversation lookup failed, treating the request as new: %s", _one_line(exc))
            return None
        if found is not None:
            self.cache.put(("s:" + key) if by_session else key, found)
        return found

    # -------------------------------------------------------------------------- warm-up

    async def _choose_warm(self, messages: Sequence[Any], tools: Any, api: str) -> WarmChoice:
        # The tools' names are read here, on a conversation's first request only.
        if api == MESSAGES:
            names = anthropic.tool_names(tools)
        elif api == RESPONSES:
            names = responses.tool_names(tools)
        else:
            names = tool_names(tools)
        if not names:
            return WarmChoice(None, "none")  # no tools offered: nothing an example could show
        try:
            # On the event loop: about a millisecond of CPU, cheaper than handing the interpreter
            # back and forth with a worker thread while other requests wait for it.
            choice = self._warm_block(messages, names, api)
        except Exception as exc:
            log.warning("warm-up failed, forwarding the conversation unwarmed: %s", _one_line(exc))
            return WarmChoice(None, "error")
        # Not counted as a use of the template: the proxy store names the template of every warmed
        # session, and a count written per conversation would cost every request a share of it.
        return choice

    def _store(self) -> Any:
        from kindling.proxy.templates import CachedTemplates
        from kindling.templates.store import open_store

        with self._lock:
            if self._template_store is None:
                self._template_store = CachedTemplates(open_store(self.templates_target), TEMPLATES_TTL)
            return self._template_store

    def _limited_templates(self, names: list[str]) -> list[Any]:
        """The templates, each with only the examples of tools in ``names`` (kept while the list is)."""
        store = self._store()
        templates = [store.get(self.template)] if self.template else store.list()
        key = frozenset(names)
        with self._lock:
            if self._limited_from is not templates:
                self._limited, self._limited_from = {}, templates
            found = self._limited.get(key)
        if found is None:
            limited = [
                t.model_copy(update={"examples": [e for e in t.examples if e.tool_name in key]})
                for t in templates
            ]
            found = [t for t in limited if t.examples]
            with self._lock:
                self._limited[key] = found
        return found

    def _warm_block(self, messages: Sequence[Any], names: list[str], api: str = CHAT) -> WarmChoice:
        from kindling.warmup import choose_template, warm, warm_conversation
        from kindling.warmup.convert import anthropic_prefix, to_responses_items
        from kindling.warmup.warm import find_task

        task = find_task([m for m in messages if isinstance(m, Mapping)])
        options: dict[str, Any] = {}
        if self.budget is not None:
            options["budget"] = self.budget
        if _warm_limits_tools():
            # warm() limits the warm-up to the agent's tools itself.
            limited_warm: Any = warm
            try:
                result = limited_warm(
                    self.template, task, store=self._store(), record_use=False, tools=names, **options
                )
            except NotFoundError:
                if self.template:
                    raise  # a named template that is missing is an error worth logging
                return WarmChoice(None, "none")
        else:
            # Limit the examples to the agent's tools, then let warm-up choose among them.
            template = choose_template(self._limited_templates(names), task)
            if template is None:
                return WarmChoice(None, "none")
            result = warm_conversation(template, task, **options)
        if not result.messages or not set(result.tools) <= set(names):
            return WarmChoice(None, "none")
        if api == MESSAGES:
            # Turns before the request's own, ending with the assistant's (see anthropic_prefix).
            turns = anthropic_prefix(result.messages)
            if turns is None:
                return WarmChoice(None, "none")
            return WarmChoice(orjson.dumps(turns), "on", result.template.name)
        if api == RESPONSES:
            # Items before the request's first user item: messages, function calls and their outputs.
            return WarmChoice(orjson.dumps(to_responses_items(result.messages)), "on", result.template.name)
        return WarmChoice(orjson.dumps(result.messages), "on", result.template.name)

    # -------------------------------------------------------------------------- after the reply

    def finish(
        self,
        turn: Turn,
        reply: dict[str, Any],
        *,
        model: str | None,
        finish_reason: str | None,
        first_chunk_ms: float | None = None,
        response_id: str | None = None,
    ) -> None:
        """Record the reply of ``turn`` and remember the prefix that the next request will start with.

        ``response_id`` (a Responses API reply's id) is remembered too, for a next request that
        names it as its ``previous_response_id``.
        """
        now = time.time()
        duration_ms = (time.perf_counter() - turn.started) * 1000
        self.counts["replies"] += 1
        conversation = turn.conversation
        seq = turn.message_count
        prefixes: tuple[PrefixRow, ...] = ()
        if not turn.stateful:
            turn.hasher.feed(reply)
            digest = turn.hasher.digest()
            self.cache.put(digest, conversation)
            prefixes = (PrefixRow(digest, conversation.session_id, seq + 1),)
        if response_id:
            # The next turn may name this response: its items go right after this reply.
            key = responses.response_key(response_id)
            after = Conversation(
                conversation.session_id, seq + 1, conversation.warm_block, conversation.warm_state
            )
            self.cache.put(key, after)
            prefixes = (*prefixes, PrefixRow(key, conversation.session_id, seq + 1))
        conversation.message_count = max(conversation.message_count, seq + 1)
        row = MessageRow(
            conversation.session_id,
            seq,
            "assistant",
            reply,
            now,
            model or turn.model,
            round(duration_ms, 3),
            None if first_chunk_ms is None else round(first_chunk_ms, 3),
            finish_reason,
        )
        self.recorder.submit(
            Write(
                conversation.session_id,
                now,
                messages=[row],
                prefixes=prefixes,
                model=model or turn.model,
            )
        )


@functools.cache
def _warm_limits_tools() -> bool:
    # Whether kindling.warmup.warm takes the agent's tools itself (it is being taught to).
    from kindling.warmup import warm

    return "tools" in inspect.signature(warm).parameters


def _with_block(data: dict[str, Any], messages: list[Any], block: bytes, api: str = CHAT) -> bytes | None:
    """The request body with ``block`` spliced in: for a chat (a JSON array) after the leading
    system messages, for the Messages API (turns and a system addendum) before the first turn, for
    the Responses API (a JSON array of items) before the first user item.

    The block's bytes go in verbatim (an orjson Fragment), so every request of the conversation
    carries exactly the same bytes there and a provider's prefix cache keeps hitting. None (the
    client's bytes go as sent) when the block is not of the request's API.
    """
    from kindling.warmup.inject import leading_system_count

    opening = _first_byte(block)
    if api == MESSAGES:
        return anthropic.with_block(data, block) if opening == b"{" else None
    if api == RESPONSES:
        return responses.with_block(data, block) if opening == b"[" else None
    if opening != b"[":
        return None

    head = leading_system_count([m for m in messages if isinstance(m, Mapping)])
    inner = block.strip()[1:-1].strip()
    if not inner:
        return orjson.dumps(data)
    spliced = dict(data)
    spliced["messages"] = [*messages[:head], orjson.Fragment(inner), *messages[head:]]
    return orjson.dumps(spliced)


def _explicit_session(headers: Mapping[str, str]) -> str | None:
    """The session the ``X-Kindling-Session`` header names, or None (absent or malformed, logged)."""
    explicit = headers.get(SESSION_HEADER)
    if not explicit:
        return None
    explicit = explicit.strip()
    if not _SESSION_ID.fullmatch(explicit):
        log.warning("ignored a malformed %s header (letters, digits, . _ : - up to 80)", SESSION_HEADER)
        return None
    return explicit


def _first_byte(block: bytes) -> bytes:
    """The block's first byte that is not white space (without copying a block that starts with none)."""
    first = block[:1]
    return block.lstrip()[:1] if first.isspace() else first


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

"""Per request: which conversation it continues, what is new to record, and the warm-up to insert.

``Conversations.begin`` runs before the request goes upstream: it recognises the conversation (a
prefix hash, the ``X-Kindling-Session`` header, or for the Responses API the response or
conversation the upstream keeps), queues the new messages, and on a conversation's first request
chooses the warm-up once. ``Turn.upstream_body`` is the body to send: the client's
bytes unchanged when nothing is inserted, else the same JSON with the conversation's warm-up block
(cached bytes, identical on every request) after the leading system messages.
``Conversations.finish`` records the reply after the client has it.

Every request belongs to a tenant (see ``kindling.proxy.tenants``): its conversations, labels and
digests are its own, and its warm-up draws only on its templates and the shared ones.

What a client sends is recorded as sent, but only a reply the proxy relayed is the model's: an
assistant message a client sends is verified only when the digest of the conversation up to it
(with it) is one the proxy recorded after relaying that reply. A request whose history diverges
from its conversation's record (an edited or regenerated turn, a retry answered twice) starts a
branch, a new session that names the one it left, so nothing recorded is overwritten or dropped.
"""

from __future__ import annotations

import asyncio
import hashlib
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
from kindling.sessions.recorded import DEFAULT_TENANT

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
    tenant: str = DEFAULT_TENANT
    messages: list[Any] | None = None
    digest: str | None = None


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
        self._views: dict[str, Any] = {}
        # Templates are re-read at most every TEMPLATES_TTL seconds, and the examples limited to a
        # request's tools kept per tool set, so a first request pays selection only, not file reads.
        self._lock = threading.Lock()
        # What /kindling/status reports: conversations seen, requests that continued one, warm-ups.
        self.counts = {
            "conversations": 0,
            "continued": 0,
            "warmed": 0,
            "replies": 0,
            "branches": 0,
            "unverified_turns": 0,
        }
        # Per tenant: conversations started and warmed by this proxy (see ``tenant_counts``).
        self.by_tenant: dict[str, list[int]] = {}
        # Called with a tenant and the template it was warmed from (or None) each time one of its
        # conversations starts: the background builder counts them.
        self.on_conversation: Any = None

    # -------------------------------------------------------------------------- before upstream

    async def begin(
        self, raw: bytes, headers: Mapping[str, str], api: str = CHAT, tenant: str = DEFAULT_TENANT
    ) -> Turn | None:
        """Recognise and record the request of ``tenant``; return its Turn (None when the body is not a chat).

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
                key, after_response = kept
                return await self._continue_kept(data, headers, _scoped(key, tenant), after_response, tenant)
            messages = responses.canonical_messages(data)
        else:
            messages = data.get("messages")
        if not isinstance(messages, list):
            return None
        now = time.time()
        started = time.perf_counter()
        warm_off = warm_disabled_by(headers)
        hasher = PrefixHasher(_seed(tenant))
        conversation: Conversation | None = None
        explicit = _explicit_session(headers)
        last = last_assistant_index(messages)
        count = len(messages)
        fed = 0
        if explicit:
            conversation = self.cache.get(_label_key(tenant, explicit)) or await self._lookup_label(
                tenant, explicit
            )
        else:
            for message in messages[: last + 1]:
                hasher.feed(message if isinstance(message, Mapping) else {})
            fed = last + 1
            if last >= 0:
                conversation = self.cache.get(hasher.digest()) or await self._lookup(hasher.digest())
        # Where the request should agree with the record: the digest of its first `mark` messages.
        mark = conversation.message_count if conversation is not None else -1
        at_mark = hasher.digest() if fed == mark else None
        for index in range(fed, count):
            message = messages[index]
            hasher.feed(message if isinstance(message, Mapping) else {})
            if index + 1 == mark:
                at_mark = hasher.digest()
        digest = hasher.digest()

        left: Conversation | None = None
        if (
            conversation is not None
            and conversation.digest is not None
            and mark >= fed
            and (count < mark or at_mark != conversation.digest)
        ):
            # The history differs from what this conversation recorded: a branch of its own.
            left, conversation = conversation, None

        write: Write | None = None
        if conversation is None:
            if left is not None:
                choice = WarmChoice(left.warm_block, left.warm_state)
                self.counts["branches"] += 1
            else:
                choice = WarmChoice(None, "off")
                if last < 0 and self.warm and not warm_off:
                    choice = await self._choose_warm(messages, data.get("tools"), api, tenant)
                self.counts["conversations"] += 1
                self.counts["warmed"] += choice.state == "on"
                self._count_tenant(tenant, choice.template if choice.state == "on" else None)
            session_id = (
                _new_session_id()
                if left is not None or tenant != DEFAULT_TENANT
                else (explicit or _new_session_id())
            )
            conversation = Conversation(session_id, 0, choice.block, choice.state, None, explicit)
            session = SessionRow(
                session_id,
                now,
                now,
                choice.state,
                choice.block.decode("utf-8") if choice.block else None,
                choice.template,
                tenant=tenant,
                label=explicit,
                parent_id=left.session_id if left is not None else None,
            )
            write = Write(session_id, now, session=session)
        else:
            self.counts["continued"] += 1
        if explicit:
            self.cache.put(_label_key(tenant, explicit), conversation)

        first = conversation.message_count
        if first < count:
            write = write or Write(conversation.session_id, now)
            self._record(write, messages, first, tenant, now)
            conversation.message_count = count
            conversation.digest = digest
            write.digest = digest
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
            count,
            started,
            model if isinstance(model, str) else None,
            api,
            tenant=tenant,
            messages=messages,
            digest=digest,
        )

    def _record(self, write: Write, messages: list[Any], first: int, tenant: str, now: float) -> None:
        """Add ``messages[first:]`` to ``write``; a client's assistant message verified only when relayed."""
        digests: dict[int, str] = {}
        if any(_role(m) == "assistant" for m in messages[first:]):
            digests = _assistant_digests(messages, tenant)
        session_id = write.session_id
        for seq in range(first, len(messages)):
            message = messages[seq]
            role = _role(message)
            verified: bool | None = None
            found = digests.get(seq)
            if found is not None:
                # Relayed replies are known by the digest recorded after them (the cache holds the
                # recent ones; a reader checks the store's too).
                verified = self.cache.peek(found) is not None
                if not verified:
                    self.counts["unverified_turns"] += 1
            write.messages.append(
                MessageRow(session_id, seq, role, message, now, verified=verified, digest=found)
            )

    def _count_tenant(self, tenant: str, warmed_from: str | None) -> None:
        counts = self.by_tenant.setdefault(tenant, [0, 0])
        counts[0] += 1
        counts[1] += warmed_from is not None
        if self.on_conversation is not None:
            self.on_conversation(tenant, warmed_from)

    def templates_changed(self) -> None:
        """Read the templates again on the next warm-up (a template was just built)."""
        with self._lock:
            if self._template_store is not None:
                self._template_store.forget()

    def tenant_counts(self, tenant: str) -> dict[str, int]:
        """Conversations of ``tenant`` this proxy started, and how many of them it warmed."""
        started, warmed = self.by_tenant.get(tenant, (0, 0))
        return {"conversations": started, "warmed": warmed}

    async def _continue_kept(
        self, data: dict[str, Any], headers: Mapping[str, str], key: str, after_response: bool, tenant: str
    ) -> Turn | None:
        """Record a Responses request that sends only its new items: the upstream keeps the rest
        (``previous_response_id``, or a ``conversation``), and ``key`` names it for ``tenant``.

        After a response (``after_response``) the new messages go right after that response's reply,
        so a retried request records nothing twice; in a ``conversation`` they go at its end. A key
        the proxy never saw for this tenant (a response it did not forward) starts a conversation of
        its own, with the request's instructions, never warmed: the upstream holds turns the proxy
        has not seen. Nothing is inserted: the upstream already holds the warm-up the first request
        carried, and the instructions a request repeats are recorded with the conversation's first
        only. An assistant message among the new items is the client's, never verified.
        """
        messages = responses.canonical_input(data)
        if messages is None:
            return None
        now = time.time()
        started = time.perf_counter()
        explicit = _explicit_session(headers)
        write: Write | None = None
        if explicit:
            found = self.cache.get(_label_key(tenant, explicit)) or await self._lookup_label(tenant, explicit)
        else:
            found = self.cache.get(key) or await (
                self._lookup(key) if after_response else self._lookup_end(key)
            )
        if found is None:
            head = responses.instructions_message(data)
            session_id = _new_session_id() if tenant != DEFAULT_TENANT else (explicit or _new_session_id())
            # What the key names: where the items sent after it go (after the instructions).
            found = Conversation(session_id, len(head), None, "off", None, explicit)
            self.cache.put(key, found)
            messages = [*head, *messages]
            self.counts["conversations"] += 1
            self._count_tenant(tenant, None)
            session = SessionRow(session_id, now, now, "off", tenant=tenant, label=explicit)
            write = Write(session_id, now, session=session, prefixes=(PrefixRow(key, session_id, len(head)),))
            first = 0
        else:
            self.counts["continued"] += 1
            first = found.message_count
        if explicit:
            self.cache.put(_label_key(tenant, explicit), found)
        session_id = found.session_id
        write = write or Write(session_id, now)
        for seq, message in enumerate(messages, start=first):
            client_reply = message["role"] == "assistant"
            self.counts["unverified_turns"] += client_reply
            write.messages.append(
                MessageRow(
                    session_id,
                    seq,
                    str(message["role"]),
                    message,
                    now,
                    verified=False if client_reply else None,
                )
            )
        self.recorder.submit(write)
        if after_response and not explicit:
            # A turn of its own: the response it started from still names the same place.
            conversation = Conversation(session_id, first + len(messages), found.warm_block, found.warm_state)
        else:
            conversation = found
            conversation.message_count = max(conversation.message_count, first + len(messages))
        conversation.digest = None  # the upstream holds the history: nothing here to compare with
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
            tenant=tenant,
        )

    async def _lookup_end(self, key: str) -> Conversation | None:
        # A conversation's row holds its message count of when it was first seen; the conversation
        # has grown since (on another proxy, or before a restart), so the session says how far.
        found = await self._lookup(key)
        if found is None:
            return None
        at_end = await self._stored(self.recorder.store.find_session, found.session_id)
        if at_end is not None:
            self.cache.put(key, at_end)
        return at_end or found

    async def _lookup(self, key: str) -> Conversation | None:
        found = await self._stored(self.recorder.store.find_prefix, key)
        if found is not None:
            self.cache.put(key, found)
        return found

    async def _lookup_label(self, tenant: str, label: str) -> Conversation | None:
        found = await self._stored(self.recorder.store.find_label, tenant, label)
        if found is not None:
            self.cache.put(_label_key(tenant, label), found)
        return found

    async def _stored(self, find: Any, *args: str) -> Conversation | None:
        if not self.recorder.store_up:
            return None
        try:
            found: Conversation | None = await asyncio.to_thread(find, *args)
        except Exception as exc:
            log.warning("conversation lookup failed, treating the request as new: %s", _one_line(exc))
            return None
        return found

    # -------------------------------------------------------------------------- warm-up

    async def _choose_warm(
        self, messages: Sequence[Any], tools: Any, api: str, tenant: str = DEFAULT_TENANT
    ) -> WarmChoice:
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
            choice = self._warm_block(messages, names, api, store=self._store(tenant))
        except Exception as exc:
            log.warning("warm-up failed, forwarding the conversation unwarmed: %s", _one_line(exc))
            return WarmChoice(None, "error")
        # Not counted as a use of the template: the proxy store names the template of every warmed
        # session, and a count written per conversation would cost every request a share of it.
        return choice

    def _store(self, tenant: str = DEFAULT_TENANT) -> Any:
        """The templates ``tenant`` may warm from: its own and the shared ones (re-read every few seconds)."""
        from kindling.proxy.templates import CachedTemplates
        from kindling.templates.store import TenantTemplates, open_store

        with self._lock:
            if self._template_store is None:
                self._template_store = CachedTemplates(open_store(self.templates_target), TEMPLATES_TTL)
            view = self._views.get(tenant)
            if view is None:
                view = self._views[tenant] = TenantTemplates(self._template_store, tenant)
            return view

    def _warm_block(
        self, messages: Sequence[Any], names: list[str], api: str = CHAT, *, store: Any
    ) -> WarmChoice:
        from kindling.warmup import warm
        from kindling.warmup.convert import anthropic_prefix, to_responses_items
        from kindling.warmup.warm import find_task

        task = find_task([m for m in messages if isinstance(m, Mapping)])
        options: dict[str, Any] = {}
        if self.budget is not None:
            options["budget"] = self.budget
        try:
            # The one way in every door takes: warm() limits the warm-up to the agent's tools.
            result = warm(self.template, task, store=store, record_use=False, tools=names, **options)
        except NotFoundError:
            if self.template:
                raise  # a named template that is missing is an error worth logging
            return WarmChoice(None, "none")
        if not result.tools or not set(result.tools) <= set(names):
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
        """Record the reply of ``turn`` (relayed: verified) and remember the prefix that the next
        request will start with: that digest is also what verifies the reply when a client sends it.

        ``response_id`` (a Responses API reply's id) is remembered too, for a next request that
        names it as its ``previous_response_id``. When the conversation moved on while this request
        was answered (a retry answered twice), the reply goes to a branch holding this request's
        messages, so neither reply is lost.
        """
        now = time.time()
        duration_ms = (time.perf_counter() - turn.started) * 1000
        self.counts["replies"] += 1
        conversation = turn.conversation
        seq = turn.message_count
        prefixes: tuple[PrefixRow, ...] = ()
        writes: list[Write] = []
        digest: str | None = None
        if not turn.stateful:
            turn.hasher.feed(reply)
            digest = turn.hasher.digest()
            if conversation.message_count != seq:
                if conversation.message_count == seq + 1 and conversation.digest == digest:
                    return  # this very reply is recorded already (a retry answered alike)
                conversation, fork = self._fork(turn, now)
                writes.append(fork)
            self.cache.put(digest, conversation)
            prefixes = (PrefixRow(digest, conversation.session_id, seq + 1),)
            conversation.digest = digest
        if response_id:
            # The next turn may name this response: its items go right after this reply.
            key = _scoped(responses.response_key(response_id), turn.tenant)
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
            verified=True,
        )
        writes.append(
            Write(
                conversation.session_id,
                now,
                messages=[row],
                prefixes=prefixes,
                model=model or turn.model,
                digest=digest,
            )
        )
        for write in writes:
            self.recorder.submit(write)

    def _fork(self, turn: Turn, now: float) -> tuple[Conversation, Write]:
        """A branch of ``turn``'s conversation holding the request's messages, for its reply."""
        left = turn.conversation
        session_id = _new_session_id()
        branch = Conversation(
            session_id, turn.message_count, left.warm_block, left.warm_state, turn.digest, left.label
        )
        self.counts["branches"] += 1
        row = SessionRow(
            session_id,
            now,
            now,
            left.warm_state,
            left.warm_block.decode("utf-8") if left.warm_block else None,
            tenant=turn.tenant,
            label=left.label,
            parent_id=left.session_id,
        )
        write = Write(session_id, now, session=row, digest=turn.digest)
        self._record(write, list(turn.messages or ()), 0, turn.tenant, now)
        if left.label:
            self.cache.put(_label_key(turn.tenant, left.label), branch)
        return branch, write


def _seed(tenant: str) -> str:
    """What a tenant's digests start from: nothing for the default tenant (see ``PrefixHasher``)."""
    return "" if tenant == DEFAULT_TENANT else tenant


def _scoped(key: str, tenant: str) -> str:
    """``key`` (a response's or a conversation's) as ``tenant`` knows it: one tenant cannot name another's."""
    if tenant == DEFAULT_TENANT:
        return key
    return hashlib.sha256(f"tenant:{tenant}\n{key}".encode()).hexdigest()


def _label_key(tenant: str, label: str) -> str:
    return f"s:{tenant}\n{label}"


def _role(message: Any) -> str:
    return str(message.get("role")) if isinstance(message, Mapping) else "unknown"


def _assistant_digests(messages: Sequence[Any], tenant: str) -> dict[int, str]:
    """Position -> the digest of the messages up to and including it, for each assistant message."""
    hasher = PrefixHasher(_seed(tenant))
    found: dict[int, str] = {}
    for index, message in enumerate(messages):
        hasher.feed(message if isinstance(message, Mapping) else {})
        if _role(message) == "assistant":
            found[index] = hasher.digest()
    return found


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

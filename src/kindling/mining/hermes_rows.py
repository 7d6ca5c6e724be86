"""Mine a Hermes database in its reader's own loop: each row is read and mined at once.

``mine(iter_sessions(state_db))`` spends most of its time in Python per database row. Reading
sessions and then mining them walks every message twice and builds a tuple per message for the
second walk. The Hermes reader lets its consumer run its own assembly over the database rows
(``SessionStream.assembled``); ``assemble_and_mine`` is that assembly for mining: the reader's
``kindling.sessions.hermes.assemble_rows`` (the same checks, skips and report counts, row by row)
with the mining loop's pairing and outcome judging (``kindling.mining.passes.mine_rows``) done
where the reader would append the message. Each session then ends in ``MiningPass.end_session``
like in the other loop. ``tests/test_mining_rows.py`` checks both against the previous
implementation on the sample data, generated databases full of malformed and compacted rows, and
PostgreSQL.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import attrgetter
from typing import Any

import orjson

from kindling.mining.model import OutcomeStatus
from kindling.mining.passes import MiningPass, Result
from kindling.sessions.convert import (
    ARGUMENT_CACHE_ENTRIES,
    ARGUMENT_CACHE_MAX_CHARS,
    CONTENT_SENTINELS,
    UNTRUSTED_OPEN,
    compaction_remainder,
    decode_sentinel,
    drop_repeated_calls,
    normalize_role,
    parse_calls_at,
    unwrap_untrusted,
)
from kindling.sessions.hermes import LEAN_ROW, PARENT_END, session_from_row
from kindling.sessions.model import ROLES, ReadReport, ToolCall, new_tool_call
from kindling.sessions.skips import (
    COMPACTION_COPY,
    COMPACTION_SUMMARY,
    INVALID_UTF8,
    MESSAGE_WITHOUT_SESSION,
    ORPHAN_TOOL_RESULT,
    UNKNOWN_ROLE,
)

_OK = OutcomeStatus.OK
_FAILED = OutcomeStatus.FAILED
_NO_SESSION = object()
#: A call as the loop works with it: id, tool, arguments, raw arguments, requestor.
CallFields = tuple[str, str, Any, "str | None", str]
#: ``call_fields(call)`` is a ToolCall as the tuple the loop works with.
call_fields = attrgetter("id", "name", "arguments", "raw_arguments", "requestor")
Assembler = Callable[..., Iterator[bool]]


def assemble_and_mine(run: MiningPass) -> Assembler:
    """Return the assembly (``assemble_rows``'s signature) that mines each session into ``run``.

    Its iterator yields once per session: True when ``max_sessions`` is reached (stop reading).
    """

    def assemble(
        message_rows: Iterable[Sequence[Any]],
        session_rows: Iterable[Sequence[Any]],
        report: ReadReport,
        *,
        key: Callable[[Any], Any],
        parent_calls: Callable[[Any], dict[str, ToolCall]] | None = None,
    ) -> Iterator[bool]:
        return _assemble(run, message_rows, session_rows, report, key, parent_calls)

    return assemble


def _assemble(
    run: MiningPass,
    message_rows: Iterable[Sequence[Any]],
    session_rows: Iterable[Sequence[Any]],
    report: ReadReport,
    key: Callable[[Any], Any],
    parent_calls: Callable[[Any], dict[str, ToolCall]] | None,
) -> Iterator[bool]:
    # The reader part is assemble_rows line for line; what differs is marked "mining".
    sessions = iter(session_rows)
    pending = next(sessions, None)
    current: Any = _NO_SESSION
    current_row: Sequence[Any] | None = None
    earlier: dict[str, ToolCall] = {}
    copies: set[str] = set()
    roles = ROLES
    sentinels = CONTENT_SENTINELS
    loads = orjson.loads
    new_call = new_tool_call
    calls_seen = results_seen = 0
    arguments_cache: dict[str, dict[str, Any]] = {}
    cache_entries = ARGUMENT_CACHE_ENTRIES
    cache_max_chars = ARGUMENT_CACHE_MAX_CHARS
    # mining: the state of the session being read (see mine_rows), and the pass's own.
    classify = run.classify
    skipped = run.skipped
    record = run.record
    end_session = run.end_session
    count = 0
    # call id -> (tool, arguments, raw arguments, message index, request, tally) until answered, then None
    opened: dict[str, tuple[str, Any, str | None, int, str, list[int]] | None] = {}
    unanswered = 0
    # The reader's known call ids (assemble_rows's ``known``) are those opened, those of calls
    # the agent did not make (foreign), and those of calls on tool rows (never opened).
    foreign: set[str] = set()
    on_tool_rows: set[str] = set()
    tally: dict[str, list[int]] = {}
    results: list[Result] = []
    request = ""
    compacted = None
    # Lean rows, without compacted where the table has none (see SessionStream.assembled): every
    # row of a stream has the same shape, so the first one says which.
    rows = iter(message_rows)
    first = next(rows, None)
    with_compacted = first is not None and len(first) == LEAN_ROW
    for row in rows if first is None else itertools.chain((first,), rows):
        if with_compacted:
            session_key, order, role, content, call_id, raw_calls, compacted = row
        else:
            session_key, order, role, content, call_id, raw_calls = row
        if session_key != current:
            if current_row is not None:
                report.add_counted(count, calls_seen, results_seen)
                yield end_session(session_from_row(current_row), count, tally, unanswered, results)
            earlier = {}
            copies = set()
            calls_seen = results_seen = 0
            count = unanswered = 0
            opened = {}
            foreign = set()
            on_tool_rows = set()
            tally = {}
            results = []
            request = ""
            current = session_key
            current_row = None
            if session_key is None:
                current = _NO_SESSION
            else:
                target = key(session_key)
                while pending is not None and key(pending[0]) < target:
                    report.add_counted(0, 0, 0)
                    yield end_session(session_from_row(pending), 0, {}, 0, [])
                    pending = next(sessions, None)
                if pending is not None and pending[0] == session_key:
                    current_row = pending
                    pending = next(sessions, None)
                    if parent_calls is not None and current_row[PARENT_END] == "compression":
                        earlier = dict(parent_calls(current_row[6]))
        if current_row is None:
            report.skip(MESSAGE_WITHOUT_SESSION)
            continue
        if role not in roles:
            role = normalize_role(role)
            if role is None:
                report.skip(UNKNOWN_ROLE)
                continue
        if content is not None:
            if type(content) is str:
                if content < "\x02" and content.startswith(sentinels):
                    content = decode_sentinel(content)
            elif type(content) is bytes:
                try:
                    content = content.decode("utf-8")
                except UnicodeDecodeError:
                    report.skip(INVALID_UTF8)
                    continue
            else:
                content = str(content)
            # Hermes's own wrappers start with "<" (a tool result) or "[" (a compaction summary):
            # one comparison rules out most texts ("{" of a JSON result, lower-case words).
            if "<" <= content < "\\":
                if content < "=":
                    if role == "tool" and content.startswith(UNTRUSTED_OPEN):
                        content = unwrap_untrusted(content)
                elif content >= "[" and role != "tool":
                    remainder = compaction_remainder(content)
                    if remainder is not None:
                        if not remainder and not raw_calls:
                            report.skip(COMPACTION_SUMMARY)
                            continue
                        content = remainder or None
        if raw_calls:
            # mining: calls as (id, name, arguments, raw arguments, requestor) tuples. The shape
            # Hermes writes is read here without building a ToolCall; compacted rows, sessions
            # with copies to drop and every other shape go the reader's way (ToolCall objects).
            fast: list[CallFields] | None = None
            if type(raw_calls) is str:
                try:
                    items = loads(raw_calls)
                except orjson.JSONDecodeError:
                    items = None
                if type(items) is list:
                    built: list[CallFields] = []
                    for item in items:
                        if type(item) is not dict or "requestor" in item:
                            break
                        function = item.get("function")
                        if type(function) is not dict:
                            break
                        call_name = function.get("name")
                        text = function.get("arguments")
                        given_id = item.get("id")
                        if not (type(call_name) is str and call_name and type(given_id) is str and given_id):
                            break
                        if type(text) is not str:
                            break
                        arguments = arguments_cache.get(text)
                        if arguments is None:
                            if text[:1] != "{":
                                break
                            try:
                                arguments = loads(text)
                            except orjson.JSONDecodeError:
                                break
                            if type(arguments) is not dict:
                                break
                            if len(text) <= cache_max_chars:
                                if len(arguments_cache) >= cache_entries:
                                    arguments_cache.clear()
                                arguments_cache[text] = arguments
                        built.append((given_id, call_name, arguments, None, "assistant"))
                    else:
                        fast = built
            calls: Sequence[CallFields]
            if fast is not None and not earlier and not compacted:
                calls = fast
            else:
                if fast is not None:
                    objects = tuple(new_call(*fields) for fields in fast)
                else:
                    objects = parse_calls_at(
                        raw_calls, report, session_key, order, "assistant", arguments_cache
                    )
                if earlier:
                    objects = drop_repeated_calls(objects, earlier, copies, report)
                    if not objects and not content:
                        continue  # the whole message was a copy
                if compacted:
                    for tool_call in objects:
                        earlier[tool_call.id] = tool_call
                calls = [call_fields(tool_call) for tool_call in objects]
        else:
            calls = ()
        if role == "tool":
            if call_id is not None and type(call_id) is not str:
                call_id = str(call_id)
            if calls:
                for fields in calls:
                    on_tool_rows.add(fields[0])
            entry = opened.get(call_id)
            if call_id in copies or (
                entry is None
                and call_id not in opened
                and call_id not in foreign
                and call_id not in on_tool_rows
            ):
                if call_id in copies or call_id in earlier:
                    copies.discard(call_id)
                    report.skip(COMPACTION_COPY)
                    continue
                report.skip(ORPHAN_TOOL_RESULT)
                continue
            results_seen += 1
            if calls:
                calls_seen += len(calls)
            # mining: the result answers its open call (its id is one the reader knows).
            count += 1
            if entry is None:
                # Answered before, or a call the agent did not make.
                if call_id not in foreign:
                    skipped["duplicate_result" if call_id in opened else "result_without_call"] += 1
                continue
            name, arguments, raw_arguments, call_position, call_request, counts = entry
            opened[call_id] = None
            unanswered -= 1
            status = classify(name, content, None).status
            counts[1] += 1
            if status is not _OK:
                if status is _FAILED:
                    counts[2] += 1
                else:
                    counts[3] += 1
            if record:
                results.append((status, name, arguments, raw_arguments, content, call_request, call_position))
            continue
        # mining: a request, or the agent's calls opened until their results come.
        position = count
        count += 1
        if role == "user":
            if content:
                request = content
            if calls:
                calls_seen += len(calls)
                for fields in calls:
                    foreign.add(fields[0])
                    skipped["user_tool_call"] += 1
        elif calls:
            calls_seen += len(calls)
            for call_id, name, arguments, raw_arguments, requestor in calls:
                if requestor != "assistant":
                    foreign.add(call_id)
                    skipped["user_tool_call"] += 1
                    continue
                if opened.get(call_id) is not None:
                    skipped["duplicate_call_id"] += 1
                    continue
                found = tally.get(name)
                if found is None:
                    found = tally[name] = [0, 0, 0, 0]
                found[0] += 1
                opened[call_id] = (name, arguments, raw_arguments, position, request, found)
                unanswered += 1
    if current_row is not None:
        report.add_counted(count, calls_seen, results_seen)
        yield end_session(session_from_row(current_row), count, tally, unanswered, results)
    while pending is not None:
        report.add_counted(0, 0, 0)
        yield end_session(session_from_row(pending), 0, {}, 0, [])
        pending = next(sessions, None)

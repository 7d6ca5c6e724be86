"""The mining path as it was before the row-form fast path (issue 14), kept verbatim as the reference.

``reference_assemble_sessions`` is the Hermes reader's assembly loop (Message objects per row) and
``reference_mine_partial`` the mining loop over Message objects, copied unchanged from the commit
before the fast path. Tests compare today's mining against them on the sample data, generated
malformed databases and the development data: the results must be identical.
"""

# ruff: noqa
from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any

import orjson

from kindling.mining.config import MiningConfig, load_mining_config
from kindling.mining.outcome import OutcomeClassifier
from kindling.mining.patterns import (
    DEFAULT_CONTEXT_CHARS,
    DEFAULT_MIN_MESSAGES,
    DEFAULT_RESULT_CHARS,
    canonical_arguments,
)
from kindling.mining.passes import (
    PartialMining,
    _as_patterns,
    _filter_reason,
    _jsonable,
    _pair_without_id,
    _Pending,
    truncate,
    _KEY_CACHE_ENTRIES,
    _OK,
    _FAILED,
    _SORTED,
)
from kindling.mining.stats import COHORTS, NO_TOOLS, MiningStats, cohort_of
from kindling.mining.tasktype import TaskClassifier
from kindling.sessions.convert import (
    CONTENT_SENTINELS,
    UNTRUSTED_OPEN,
    compaction_remainder,
    decode_sentinel,
    drop_repeated_calls,
    normalize_role,
    parse_calls_at,
    unwrap_untrusted,
)
from kindling.sessions.files import epoch
from kindling.sessions.hermes import _METADATA_COLUMNS
from kindling.sessions.hermes import PARENT_END as _PARENT_END
from kindling.sessions.model import ROLES, Message, ReadReport, Session, ToolCall, _MessageInit, new_tool_call
from kindling.sessions.skips import COMPACTION_COPY, COMPACTION_SUMMARY


def reference_assemble_sessions(
    message_rows: Iterable[Sequence[Any]],
    session_rows: Iterable[Sequence[Any]],
    report: ReadReport,
    *,
    key: Callable[[Any], Any],
    parent_calls: Callable[[Any], dict[str, ToolCall]] | None = None,
) -> Iterator[Session]:
    """Merge message rows ordered by (session_id, id) with session rows ordered by id into Sessions.

    Message rows are ``(session_id, order, *MESSAGE_COLUMNS)``; session rows are
    ``(id, *SESSION_COLUMNS, parent's end_reason)``. Both must be sorted consistently with ``key``.
    Sessions with no live messages are yielded empty; messages whose session row is missing are
    counted as ``message_without_session`` and skipped. ``parent_calls(parent_id)`` returns the calls
    of a compression parent by id, so its child's copies of them are dropped (see the module
    docstring); without it they are kept.
    """
    sessions = iter(session_rows)
    pending = next(sessions, None)
    current: Any = _NO_SESSION
    current_row: Sequence[Any] | None = None
    messages: list[Message] = []
    known: set[str] = set()
    # Calls a later row of this session may repeat (from its compacted rows and its compression
    # parent), and the ids of repeated calls dropped, whose repeated results are dropped too.
    earlier: dict[str, ToolCall] = {}
    copies: set[str] = set()
    append = messages.append
    roles = ROLES
    sentinels = CONTENT_SENTINELS
    loads = orjson.loads
    new_call = new_tool_call
    # Messages are built inline (see kindling.sessions.model._MessageInit): this loop runs once per
    # row, and a call per message is a good part of its cost.
    new_object = object.__new__
    blank = _MessageInit
    message_class = Message
    # Counted here, while each session is built, so the report need not walk it again.
    calls_seen = results_seen = 0
    arguments_cache: dict[str, dict[str, Any]] = {}
    for (
        session_key,
        order,
        role,
        content,
        call_id,
        raw_calls,
        tool_name,
        stamp,
        reasoning,
        reasoning_content,
        compacted,
    ) in message_rows:
        if session_key != current:
            if current_row is not None:
                report.add_counted(len(messages), calls_seen, results_seen)
                yield _session(current_row, messages)
            messages = []
            append = messages.append
            known = set()
            earlier = {}
            copies = set()
            calls_seen = results_seen = 0
            current = session_key
            current_row = None
            if session_key is None:
                current = _NO_SESSION
            else:
                target = key(session_key)
                while pending is not None and key(pending[0]) < target:
                    report.add_counted(0, 0, 0)
                    yield _session(pending, [])
                    pending = next(sessions, None)
                if pending is not None and pending[0] == session_key:
                    current_row = pending
                    pending = next(sessions, None)
                    if parent_calls is not None and current_row[_PARENT_END] == "compression":
                        earlier = dict(parent_calls(current_row[6]))
        if current_row is None:
            report.skip("message_without_session")
            continue
        if role not in roles:
            role = normalize_role(role)
            if role is None:
                report.skip("unknown_role")
                continue
        if content is not None:
            if type(content) is str:
                # Both sentinels start below "\x02": one comparison rules out almost every row.
                if content < "\x02" and content.startswith(sentinels):
                    content = decode_sentinel(content)
            elif type(content) is bytes:
                # A BLOB where Hermes writes text: fine when it is UTF-8, skipped (counted) when not.
                try:
                    content = content.decode("utf-8")
                except UnicodeDecodeError:
                    report.skip("invalid_utf8")
                    continue
            else:
                content = str(content)
            # Hermes's own wrappers start with "<" (a tool result) or "[" (a compaction summary).
            if "<" <= content < "=":
                if role == "tool" and content.startswith(UNTRUSTED_OPEN):
                    content = unwrap_untrusted(content)
            elif "[" <= content < "\\" and role != "tool":
                remainder = compaction_remainder(content)
                if remainder is not None:
                    if not remainder and not raw_calls:
                        report.skip(COMPACTION_SUMMARY)
                        continue
                    content = remainder or None
        if raw_calls:
            calls = None
            if type(raw_calls) is str:
                # The shape Hermes writes, with argument texts already parsed once in this read:
                # built here. Anything else (and a text not seen yet) goes through parse_calls_at.
                try:
                    items = loads(raw_calls)
                except orjson.JSONDecodeError:
                    items = None
                if type(items) is list:
                    built = []
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
                        arguments = arguments_cache.get(text) if type(text) is str else None
                        if arguments is None:
                            break
                        built.append(new_call(given_id, call_name, arguments, None, "assistant"))
                    else:
                        calls = tuple(built)
            if calls is None:
                calls = parse_calls_at(raw_calls, report, session_key, order, "assistant", arguments_cache)
            if earlier:
                calls = drop_repeated_calls(calls, earlier, copies, report)
                if not calls and not content:
                    continue  # the whole message was a copy
            if compacted:
                for call in calls:
                    earlier[call.id] = call
            for call in calls:
                known.add(call.id)
        else:
            calls = ()
        if call_id is not None and type(call_id) is not str:
            call_id = str(call_id)
        if role == "tool":
            if call_id is None or call_id not in known or call_id in copies:
                if call_id in copies or call_id in earlier:
                    # The result of a copy (or of a call Hermes did not copy with it).
                    copies.discard(call_id)
                    report.skip(COMPACTION_COPY)
                    continue
                report.skip("orphan_tool_result")
                continue
            results_seen += 1
            if calls:
                calls_seen += len(calls)
        elif calls:
            calls_seen += len(calls)
        if stamp is not None and type(stamp) is not float:
            stamp = epoch(stamp)
        if reasoning is None or reasoning == "":
            reasoning = reasoning_content or None
        if reasoning is not None and type(reasoning) is not str:
            reasoning = _text_of(reasoning)
        built_message: Any = new_object(blank)
        built_message.role = role
        built_message.content = content
        built_message.tool_calls = calls
        built_message.tool_call_id = call_id
        built_message.name = tool_name
        built_message.error = None
        built_message.timestamp = stamp
        built_message.reasoning = reasoning
        built_message.__class__ = message_class
        append(built_message)
    if current_row is not None:
        report.add_counted(len(messages), calls_seen, results_seen)
        yield _session(current_row, messages)
    while pending is not None:
        report.add_counted(0, 0, 0)
        yield _session(pending, [])
        pending = next(sessions, None)


def _text_of(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


_NO_SESSION = object()


def _text_of(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


_NO_SESSION = object()


def _session(row: Sequence[Any], messages: list[Message]) -> Session:
    metadata = {
        name: value for name, value in zip(_METADATA_COLUMNS, row[7:], strict=False) if value is not None
    }
    return Session(
        str(row[0]),
        str(row[1]) if row[1] is not None else "unknown",
        tuple(messages),
        epoch(row[3]),
        epoch(row[4]),
        row[5],
        row[2],
        str(row[6]) if row[6] is not None else None,
        None,
        metadata,
    )


def reference_mine_partial(
    sessions: Iterable[Session],
    *,
    min_messages: int = DEFAULT_MIN_MESSAGES,
    max_sessions: int | None = None,
    source_filter: str | Collection[str] | None = None,
    skip_end_reasons: Collection[str] | None = None,
    skip_zero_reward: bool = True,
    skip_tools: Collection[str] | None = None,
    keep_examples: bool = True,
    result_chars: int = DEFAULT_RESULT_CHARS,
    context_chars: int = DEFAULT_CONTEXT_CHARS,
    config: MiningConfig | None = None,
) -> PartialMining:
    """Return one pass over ``sessions`` before ranking and capping (``mine`` minus ``finish``).

    Parallel mining runs this on each shard and merges the parts with ``merge_partials``. Limits
    are not checked here (``check_limits``). Raises ConfigError on a bad ``mining.json``.
    """
    config = config if config is not None else load_mining_config()
    classify = OutcomeClassifier(config.rules()).classify
    tasks = TaskClassifier(config.families(), config.keywords())
    sources = _as_patterns(source_filter)
    end_reasons = (
        frozenset(r.lower() for r in skip_end_reasons)
        if skip_end_reasons is not None
        else config.end_reasons()
    )
    trivial = frozenset(skip_tools) if skip_tools is not None else config.trivial()
    want_examples = keep_examples

    stats = MiningStats()
    filtered: Counter[str] = Counter()
    skipped = stats.skipped
    tally = stats.tally
    # Per cohort, tool -> [calls, results, failures, unknown]: one lookup by name per call.
    tallies: dict[str, dict[str, list[int]]] = {name: {} for name, _low, _high in COHORTS}
    # (tool, canonical arguments) -> [count, last_seen, sequence, result, context, session_id, source,
    # position, raw_arguments, rep_recency, none_rep]: plain lists, because this is touched for every
    # successful call. Items 2-8 describe the representative occurrence; rep_recency is its
    # session's start time; none_rep is items 2-8 of the group's last occurrence from a session
    # without a start time (None if none), which merge_partials needs to pick the representative a
    # single pass would have kept.
    kept: dict[tuple[str, bytes], list[Any]] = {}
    # id(arguments object) -> (the object, tool name, its key in ``kept``); bounded.
    keys: dict[int, tuple[Any, str, tuple[str, bytes]]] = {}
    mined = 0
    unanswered = 0
    dumps = orjson.dumps
    classify_calls = tasks.classify_calls

    # The filters are judged when examples are kept, and also in stats-only mode when
    # ``max_sessions`` needs to know which sessions count as mined.
    judge = want_examples or max_sessions is not None
    if max_sessions == 0:
        sessions = ()  # read nothing at all, not even one session
    for sequence, session in enumerate(sessions):
        messages = session.messages
        count = len(messages)
        cohort = cohort_of(count)
        stats.sessions += 1
        stats.messages += count
        stats.cohort_sessions[cohort] += 1
        stats.cohort_messages[cohort] += count
        if session.reward is not None:
            stats.count_reward(cohort, session.reward)

        eligible = False
        if judge:
            reason = _filter_reason(session, count, min_messages, sources, end_reasons, skip_zero_reward)
            if reason is not None:
                filtered[reason] += 1
            else:
                mined += 1
                eligible = want_examples
        recency = session.started_at

        # Every call of the session by id: its open entry until a result answers it, then None.
        calls: dict[str, _Pending | None] = {}
        opened = 0
        foreign: set[str] = set()
        names: list[str] = []
        cohort_tally = tallies[cohort]
        request = ""
        for position, message in enumerate(messages):
            role = message.role
            if role == "tool":
                call_id = message.tool_call_id
                entry = calls.get(call_id) if call_id is not None else _pair_without_id(calls, message.name)
                if entry is None:
                    if call_id in foreign:
                        continue
                    skipped["duplicate_result" if call_id in calls else "result_without_call"] += 1
                    continue
                call, call_position, call_request, counts = entry
                calls[call.id] = None
                opened -= 1
                content = message.content
                status = classify(call.name, content, message.error).status
                counts[1] += 1
                if status is not _OK:
                    if status is _FAILED:
                        counts[2] += 1
                    else:
                        counts[3] += 1
                    if eligible:
                        if call.name in trivial:
                            filtered["trivial_tool"] += 1
                        else:
                            filtered["outcome_failed" if status is _FAILED else "outcome_unknown"] += 1
                    continue
                if not eligible:
                    continue
                name = call.name
                if name in trivial:
                    filtered["trivial_tool"] += 1
                    continue
                args = call.arguments
                if type(args) is dict and args:
                    # Readers share one parsed object between calls with the same argument text, so
                    # the key is computed once per object. The entry holds the object, so its id
                    # cannot be reused by another while the entry lives.
                    cached = keys.get(id(args))
                    if cached is not None and cached[0] is args and cached[1] == name:
                        key = cached[2]
                    else:
                        canonical = dumps(args, option=_SORTED, default=_jsonable)
                        # orjson's bytes keep a ~4 KB buffer; a right-sized copy keeps memory small.
                        key = (name, bytes(memoryview(canonical)))
                        if len(keys) >= _KEY_CACHE_ENTRIES:
                            keys.clear()
                        keys[id(args)] = (args, name, key)
                else:
                    key = (name, bytes(memoryview(canonical_arguments(call))))
                slot = kept.get(key)
                if slot is None:
                    slot = kept[key] = [1, recency, 0, "", "", "", "", 0, None, None, None]
                else:
                    slot[0] += 1
                    if recency is not None:
                        if slot[1] is not None and recency < slot[1]:
                            continue
                        slot[1] = recency
                # The newest occurrence speaks for the group: its result and request are current.
                result_text = content or ""
                if len(result_text) > result_chars:
                    result_text = truncate(result_text, result_chars)
                if len(call_request) > context_chars:
                    call_request = truncate(call_request, context_chars)
                slot[2] = sequence
                slot[3] = result_text
                slot[4] = call_request
                slot[5] = session.id
                slot[6] = session.source
                slot[7] = call_position
                slot[8] = call.raw_arguments if not args else None
                slot[9] = recency
                if recency is None:
                    slot[10] = slot[2:9]
            elif role == "user":
                if message.content:
                    request = message.content
                for call in message.tool_calls:
                    foreign.add(call.id)
                    skipped["user_tool_call"] += 1
            elif message.tool_calls:
                for call in message.tool_calls:
                    call_id = call.id
                    if call.requestor != "assistant":
                        foreign.add(call_id)
                        skipped["user_tool_call"] += 1
                        continue
                    # An id still waiting for its result is a duplicate; an id already answered
                    # may be reused by a later turn (providers that number calls per turn, e.g.
                    # "call_0"), and that later call is paired with the next result bearing it.
                    if calls.get(call_id) is not None:
                        skipped["duplicate_call_id"] += 1
                        continue
                    name = call.name
                    found = cohort_tally.get(name)
                    if found is None:
                        found = cohort_tally[name] = [0, 0, 0, 0]
                    found[0] += 1
                    calls[call_id] = (call, position, request, found)
                    opened += 1
                    names.append(name)
        unanswered += opened
        stats.task_types[classify_calls(names).value if names else NO_TOOLS] += 1
        if max_sessions is not None and mined >= max_sessions:
            break

    stats.calls_unanswered = unanswered
    for cohort_name, by_tool in tallies.items():
        for tool, counts in by_tool.items():
            tally[(cohort_name, tool)] = counts
    return PartialMining(stats=stats, filtered=filtered, kept=kept, mined=mined)

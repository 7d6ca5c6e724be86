"""One mining pass: what it counts and keeps, and the work done once a session's messages were walked.

``mine_partial`` walks each session's messages in one of two loops: over messages in row form
(``mine_rows``, any reader), or inside the Hermes reader's own loop (``kindling.mining.hermes_rows``),
which reads and mines each database row at once. Both pair calls with results, judge outcomes and
hand each session to ``MiningPass.end_session`` with the same per-session summary, so the
filters, the per-(cohort, tool) tally and the kept examples are computed by one piece of code.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from kindling.mining.config import MiningConfig
from kindling.mining.model import OutcomeStatus
from kindling.mining.outcome import OutcomeClassifier
from kindling.mining.stats import COHORTS, NO_TOOLS, MiningStats, cohort_of
from kindling.mining.tasktype import TaskClassifier
from kindling.sessions.convert import ARGUMENT_CACHE_ENTRIES, ARGUMENT_CACHE_MAX_CHARS
from kindling.sessions.model import Session, SessionRows, ToolCall

_OK = OutcomeStatus.OK
_FAILED = OutcomeStatus.FAILED
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
# Groups looked up by arguments object (see MiningPass._keep): as many as the readers' argument
# cache holds, each for an object whose canonical form is at most _KEY_CACHE_MAX_BYTES long (the
# cache keeps its objects alive, so its memory stays bounded).
_KEY_CACHE_ENTRIES = ARGUMENT_CACHE_ENTRIES
_KEY_CACHE_MAX_BYTES = 2 * ARGUMENT_CACHE_MAX_CHARS
# An open call: the call, its message index, the request before it, and its session's tally for its tool.
_Pending = tuple[ToolCall, int, str, list[int]]
#: A paired result as the loops record it: outcome status, tool, arguments, raw arguments, result
#: text, the request before the call, and the call's message index.
Result = tuple[OutcomeStatus, str, Any, "str | None", "str | None", str, int]


def truncate(text: str, limit: int) -> str:
    """Return ``text`` cut to ``limit`` characters plus a visible marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n…[truncated {len(text) - limit} of {len(text)} chars]"


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def canonical_key(arguments: Any, raw_arguments: str | None) -> bytes:
    """Return the key of a call's arguments (see ``kindling.mining.patterns.canonical_arguments``)."""
    if raw_arguments is not None and not arguments:
        return b"raw:" + " ".join(raw_arguments.split()).encode("utf-8")
    args = arguments if isinstance(arguments, dict) else dict(arguments)
    return orjson.dumps(args, option=_SORTED, default=_jsonable)


@dataclass
class PartialMining:
    """What one pass of ``mine`` saw before ranking: the unit parallel mining merges.

    ``kept`` maps (tool, canonical arguments) to the group's slot (see ``MiningPass``) in order of
    first occurrence; ``stats`` has its per-(cohort, tool) tally but no totals yet.
    """

    stats: MiningStats
    filtered: Counter[str]
    kept: dict[tuple[str, bytes], list[Any]]
    mined: int


def _as_patterns(value: str | Collection[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(value)


class MiningPass:
    """The state of one pass of ``mine_partial`` and what it does at the end of each session.

    ``classify`` judges one result (``OutcomeClassifier.classify``); ``record`` is False when no
    session's calls can be kept (stats only, without ``max_sessions``), so the loops need not
    record results at all.
    """

    def __init__(
        self,
        config: MiningConfig,
        *,
        min_messages: int,
        max_sessions: int | None,
        source_filter: str | Collection[str] | None,
        skip_end_reasons: Collection[str] | None,
        skip_zero_reward: bool,
        skip_tools: Collection[str] | None,
        keep_examples: bool,
        result_chars: int,
        context_chars: int,
    ) -> None:
        self.classify = OutcomeClassifier(config.rules()).classify
        # Sessions are typed by their calls here: the task-text keywords (one large expression to
        # compile) are not needed.
        self._classify_calls = TaskClassifier(config.families()).classify_call_counts
        self._min_messages = min_messages
        self._max_sessions = max_sessions
        self._sources = _as_patterns(source_filter)
        self._end_reasons = (
            frozenset(r.lower() for r in skip_end_reasons)
            if skip_end_reasons is not None
            else config.end_reasons()
        )
        self._skip_zero_reward = skip_zero_reward
        self._trivial = frozenset(skip_tools) if skip_tools is not None else config.trivial()
        self._want_examples = keep_examples
        self._result_chars = result_chars
        self._context_chars = context_chars
        # The filters are judged when examples are kept, and also in stats-only mode when
        # ``max_sessions`` needs to know which sessions count as mined.
        self._judge = keep_examples or max_sessions is not None
        self.record = keep_examples
        self.stats = MiningStats()
        self.skipped = self.stats.skipped
        self.filtered: Counter[str] = Counter()
        # Per cohort, tool -> [calls, results, failures, unknown].
        self._tallies: dict[str, dict[str, list[int]]] = {name: {} for name, _low, _high in COHORTS}
        # (tool, canonical arguments) -> [count, last_seen, sequence, result, context, session_id,
        # source, position, raw_arguments, rep_recency, none_rep]: plain lists, because this is
        # touched for every successful call. Items 2-8 describe the representative occurrence;
        # rep_recency is its session's start time; none_rep is items 2-8 of the group's last
        # occurrence from a session without a start time (None if none), which merge_partials
        # needs to pick the representative a single pass would have kept.
        self.kept: dict[tuple[str, bytes], list[Any]] = {}
        # id(arguments object) -> (the object, tool name, its slot in ``kept``); bounded.
        self._slots: dict[int, tuple[Any, str, list[Any]]] = {}
        self.mined = 0
        self._unanswered = 0
        self._sequence = 0

    def end_session(
        self,
        session: Session,
        count: int,
        tally: dict[str, list[int]],
        opened: int,
        results: list[Result],
    ) -> bool:
        """Account one session whose ``count`` messages were walked; True when ``max_sessions`` is reached.

        ``tally`` maps each tool the session called, in order of its first call, to ``[calls,
        results, failures, unknown]``, ``opened`` how many calls
        got no result, ``results`` its paired results in order (empty when ``record`` is False).
        """
        stats = self.stats
        cohort = cohort_of(count)
        stats.sessions += 1
        stats.messages += count
        stats.cohort_sessions[cohort] += 1
        stats.cohort_messages[cohort] += count
        if session.reward is not None:
            stats.count_reward(cohort, session.reward)
        eligible = False
        if self._judge:
            reason = _filter_reason(
                session, count, self._min_messages, self._sources, self._end_reasons, self._skip_zero_reward
            )
            if reason is not None:
                self.filtered[reason] += 1
            else:
                self.mined += 1
                eligible = self._want_examples
        cohort_tally = self._tallies[cohort]
        for name, counts in tally.items():
            found = cohort_tally.get(name)
            if found is None:
                cohort_tally[name] = counts
            else:
                found[0] += counts[0]
                found[1] += counts[1]
                found[2] += counts[2]
                found[3] += counts[3]
        if eligible and results:
            self._keep(session, results)
        self._unanswered += opened
        stats.task_types[
            self._classify_calls({name: counts[0] for name, counts in tally.items()}).value
            if tally
            else NO_TOOLS
        ] += 1
        self._sequence += 1
        return self._max_sessions is not None and self.mined >= self._max_sessions

    def _keep(self, session: Session, results: list[Result]) -> None:
        filtered = self.filtered
        trivial = self._trivial
        kept = self.kept
        slots = self._slots
        dumps = orjson.dumps
        recency = session.started_at
        # Each kept occurrence's group, in order: the groups are counted (and new ones added, in
        # order of first occurrence) here, and described below by their newest occurrence only.
        occurrences: list[tuple[list[Any], Result]] = []
        occurred = occurrences.append
        for result in results:
            status, name, args, raw_arguments, _content, _request, _position = result
            if status is not _OK:
                if name in trivial:
                    filtered["trivial_tool"] += 1
                else:
                    filtered["outcome_failed" if status is _FAILED else "outcome_unknown"] += 1
                continue
            if name in trivial:
                filtered["trivial_tool"] += 1
                continue
            if type(args) is dict and args:
                # Readers share one parsed object between calls with the same argument text, so
                # its group is looked up once per object. The entry holds the object, so its id
                # cannot be reused by another while the entry lives.
                cached = slots.get(id(args))
                if cached is not None and cached[0] is args and cached[1] == name:
                    slot = cached[2]
                else:
                    canonical = dumps(args, option=_SORTED, default=_jsonable)
                    # orjson's bytes keep a ~4 KB buffer; a right-sized copy keeps memory small.
                    key = (name, bytes(memoryview(canonical)))
                    found = kept.get(key)
                    if found is None:
                        found = kept[key] = _new_slot(recency)
                    slot = found
                    if len(canonical) <= _KEY_CACHE_MAX_BYTES:
                        if len(slots) >= _KEY_CACHE_ENTRIES:
                            slots.clear()
                        slots[id(args)] = (args, name, slot)
            else:
                key = (name, bytes(memoryview(canonical_key(args, raw_arguments))))
                found = kept.get(key)
                if found is None:
                    found = kept[key] = _new_slot(recency)
                slot = found
            slot[0] += 1
            occurred((slot, result))
        if occurrences:
            self._describe(session, occurrences)

    def _describe(self, session: Session, occurrences: list[tuple[list[Any], Result]]) -> None:
        # The newest occurrence speaks for its group, so its result and request are current: within
        # a session that is the last one, so they are walked newest first and each group's slot is
        # written once (its sequence then says so: a slot's sequence is this session's only once
        # written here, and a new slot starts without one). From an older session than the one
        # that spoke last (recency), an occurrence does not speak.
        result_chars = self._result_chars
        context_chars = self._context_chars
        sequence = self._sequence
        recency = session.started_at
        session_id = session.id
        session_source = session.source
        for slot, result in reversed(occurrences):
            if slot[2] == sequence:
                continue
            if recency is not None:
                if slot[1] is not None and recency < slot[1]:
                    continue
                slot[1] = recency
            _status, _name, args, raw_arguments, content, call_request, call_position = result
            result_text = content or ""
            if len(result_text) > result_chars:
                result_text = truncate(result_text, result_chars)
            if len(call_request) > context_chars:
                call_request = truncate(call_request, context_chars)
            # One slice store instead of eight item stores.
            slot[2:10] = (
                sequence,
                result_text,
                call_request,
                session_id,
                session_source,
                call_position,
                raw_arguments if not args else None,
                recency,
            )
            if recency is None:
                slot[10] = slot[2:9]

    def partial(self) -> PartialMining:
        """Return what the pass saw (its tally laid out by cohort, then by tool in order of first call)."""
        stats = self.stats
        stats.calls_unanswered = self._unanswered
        tally = stats.tally
        for cohort_name, by_tool in self._tallies.items():
            for tool, counts in by_tool.items():
                tally[(cohort_name, tool)] = counts
        return PartialMining(stats=stats, filtered=self.filtered, kept=self.kept, mined=self.mined)


def _new_slot(recency: float | None) -> list[Any]:
    # A group's slot before its first occurrence is counted and described (see MiningPass): its
    # sequence is none a session has.
    return [0, recency, -1, "", "", "", "", 0, None, None, None]


def mine_rows(run: MiningPass, sessions: Iterable[SessionRows]) -> None:
    """Walk sessions in row form: pair each call with its result, judge it, and end each session in ``run``."""
    classify = run.classify
    skipped = run.skipped
    record = run.record
    for session, messages in sessions:
        # Every call of the session by id: its open entry until a result answers it, then None.
        calls: dict[str, _Pending | None] = {}
        opened = 0
        foreign: set[str] = set()
        tally: dict[str, list[int]] = {}
        results: list[Result] = []
        request = ""
        for position, (role, content, tool_calls, call_id, tool_name, error, _stamp, _reasoning) in enumerate(
            messages
        ):
            if role == "tool":
                entry = calls.get(call_id) if call_id is not None else _pair_without_id(calls, tool_name)
                if entry is None:
                    if call_id in foreign:
                        continue
                    skipped["duplicate_result" if call_id in calls else "result_without_call"] += 1
                    continue
                call, call_position, call_request, counts = entry
                calls[call.id] = None
                opened -= 1
                status = classify(call.name, content, error).status
                counts[1] += 1
                if status is not _OK:
                    if status is _FAILED:
                        counts[2] += 1
                    else:
                        counts[3] += 1
                if record:
                    results.append(
                        (
                            status,
                            call.name,
                            call.arguments,
                            call.raw_arguments,
                            content,
                            call_request,
                            call_position,
                        )
                    )
            elif role == "user":
                if content:
                    request = content
                for call in tool_calls:
                    foreign.add(call.id)
                    skipped["user_tool_call"] += 1
            elif tool_calls:
                for call in tool_calls:
                    call_id = call.id
                    if call.requestor != "assistant":
                        foreign.add(call_id)
                        # tau2-bench's simulated user, or a turn the proxy never relayed ("unverified").
                        skipped[
                            "unverified_tool_call" if call.requestor == "unverified" else "user_tool_call"
                        ] += 1
                        continue
                    # An id still waiting for its result is a duplicate; an id already answered
                    # may be reused by a later turn (providers that number calls per turn, e.g.
                    # "call_0"), and that later call is paired with the next result bearing it.
                    if calls.get(call_id) is not None:
                        skipped["duplicate_call_id"] += 1
                        continue
                    name = call.name
                    found = tally.get(name)
                    if found is None:
                        found = tally[name] = [0, 0, 0, 0]
                    found[0] += 1
                    calls[call_id] = (call, position, request, found)
                    opened += 1
        if run.end_session(session, len(messages), tally, opened, results):
            break


def _filter_reason(
    session: Session,
    count: int,
    min_messages: int,
    sources: tuple[str, ...] | None,
    end_reasons: frozenset[str],
    skip_zero_reward: bool,
) -> str | None:
    if count < min_messages:
        return "too_short"
    if sources is not None and not any(fnmatch.fnmatchcase(session.source or "", p) for p in sources):
        return "source_filtered"
    if session.end_reason and session.end_reason.lower() in end_reasons:
        return "errored_session"
    if skip_zero_reward and session.reward is not None and session.reward <= 0:
        return "zero_reward"
    return None


def _pair_without_id(calls: dict[str, _Pending | None], name: str | None) -> _Pending | None:
    # A result with no id answers the oldest open call of its tool (or the oldest open call).
    for entry in calls.values():
        if entry is not None and (name is None or entry[0].name == name):
            return entry
    return None
